"""Hints that name a command name a real one: every ``'cultura …'`` in the package's messages and docs resolves
through the CLI ("cultura annotate import" and "cultura download" were once hinted and did not exist)."""
from __future__ import annotations

import re

import click
import pytest

from cultura.cli import cli
from tests import REPO

ROOT = REPO
#: phrases that start with "cultura " but are prose, not commands
PROSE = {"campaign project", "hamming"}
HINT = re.compile(r"""['"`]cultura ((?:[a-z][a-z0-9-]*)(?: [a-z][a-z0-9-]*)*)""")


def resolve(words: list[str]) -> str | None:
    """None when ``cultura WORDS…`` is a command (extra lowercase words after a leaf are its arguments),
    else the first word that is not a subcommand."""
    cmd: click.Command = cli
    for w in words:
        if not isinstance(cmd, click.Group):
            return None
        sub = cmd.commands.get(w)
        if sub is None:
            return w
        cmd = sub
    return None


def hints():
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in {"tests", "build", "demo-project"} or rel.parts[0].startswith("."):
            continue
        for m in HINT.finditer(path.read_text(encoding="utf-8")):
            yield str(rel), m.group(1)


def test_every_command_hint_names_a_real_command():
    bad = sorted({(f, h) for f, h in hints() if h not in PROSE and resolve(h.split()) is not None})
    assert not bad, "hints naming no command: " + "; ".join(f"{f}: 'cultura {h}'" for f, h in bad)


@pytest.mark.parametrize("words,ok", [("images download", True), ("download", False),
                                      ("annotate import", False), ("annotate annotators add", True)])
def test_resolver_itself(words, ok):
    assert (resolve(words.split()) is None) is ok
