"""Every ``cultura …`` command line in README.md and docs/*.md leads somewhere.

Command lines are taken from fenced code blocks (lines starting ``cultura``, ``$ cultura`` or
``.venv/bin/cultura``, with ``\\`` continuations and ``&&`` chains) and from inline code spans that start with
``cultura``. Each is walked through click's command tree: every subcommand must exist, ``--help`` of that
command path must succeed, and every ``--option`` must be an option of the command it is given to (hidden
aliases count: a renamed option kept as a hidden alias still resolves). Placeholders (``…``, ``...``, ``[``
``]`` around optional parts, ``a|b`` alternatives) are understood. So a renamed or removed command fails here.
"""
from __future__ import annotations

import re
import shlex

import click
import pytest
from click.testing import CliRunner

from cultura.cli import cli
from tests import REPO

ROOT = REPO
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = {"…", "...", "|"}


def _lines(text: str) -> list[str]:
    """The ``cultura`` command lines of a Markdown text (code blocks and inline code)."""
    out = []
    for block in re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            for part in re.split(r"&&|;", line.split(" # ")[0].split("\t#")[0]):
                part = part.strip()
                part = re.sub(r"^(\$ |\.venv/bin/|PYTHONPATH=\S+ )+", "", part)
                # a benchmark's printed table names the tool in its first column: a row of numbers, not a command
                if part.startswith("cultura ") and not re.match(r"cultura\s+(-|[\d.]+)(\s|$)", part):
                    out.append(part)
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    out += [m for m in re.findall(r"`(cultura [^`]+)`", prose)]
    return out


def _tokens(line: str) -> list[str]:
    try:
        toks = shlex.split(line)
    except ValueError:  # an unbalanced quote in prose: fall back to whitespace
        toks = line.split()
    out = []
    for t in toks[1:]:
        t = t.strip("[]")
        if t and t not in SKIP:
            out.append(t)
    return out


def _options(cmd: click.Command) -> dict[str, click.Parameter]:
    opts = {"--help": None, "-h": None}
    for p in cmd.params:  # hidden options included: old names kept as hidden aliases still resolve
        for name in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ())):
            opts[name] = p
    return opts


def walk(tokens: list[str], cmd: click.Command = cli, path: tuple[str, ...] = ()) -> tuple[list, list[str]]:
    """The command paths reached (one per ``a|b`` alternative) and the problems found."""
    problems: list[str] = []
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t.startswith("-") and not re.fullmatch(r"-\d[\d.]*", t):
            name = t.split("=", 1)[0]
            opts = _options(cmd)
            if name not in opts:
                problems.append(f"'{name}' is not an option of 'cultura {' '.join(path)}'")
            p = opts.get(name)
            takes_value = isinstance(p, click.Option) and not p.is_flag and not p.count and "=" not in t
            i += 2 if takes_value else 1
            continue
        if isinstance(cmd, click.Group):
            alts = [a for a in t.split("|") if a]
            missing = [a for a in alts if a not in cmd.commands]
            if missing:
                problems.append(f"'cultura {' '.join((*path, missing[0]))}': no such command (commands of "
                                f"'cultura {' '.join(path)}': {', '.join(sorted(cmd.commands))})")
                return [path], problems
            if len(alts) > 1:
                paths = []
                for a in alts:
                    ps, pr = walk(tokens[i + 1:], cmd.commands[a], (*path, a))
                    paths += ps
                    problems += pr
                return paths, problems
            cmd, path = cmd.commands[t], (*path, t)
        i += 1
    return [path], problems


def _all_lines() -> list[tuple[str, str]]:
    return [(doc.name, line) for doc in DOCS for line in _lines(doc.read_text(encoding="utf-8"))]


def test_the_docs_have_command_lines():
    lines = _all_lines()
    assert len(lines) > 100 and any(d == "README.md" for d, _ in lines)


def test_every_documented_command_line_resolves():
    problems, paths = [], set()
    for doc, line in _all_lines():
        ps, pr = walk(_tokens(line))
        paths.update(ps)
        problems += [f"{doc}: `{line}`: {p}" for p in pr]
    assert not problems, "docs that lead nowhere:\n" + "\n".join(problems)
    runner = CliRunner()
    for path in sorted(paths):
        res = runner.invoke(cli, [*path, "--help"])
        assert res.exit_code == 0, f"cultura {' '.join(path)} --help failed:\n{res.output}"


@pytest.mark.parametrize("line, problem", [
    ("cultura import folder", "no such command"),
    ("cultura images dedup --embeder x", "'--embeder' is not an option"),
    ("cultura images tag --top-k 1 --overwrite", None),
    ("cultura attribution run|loglik|linking", None),
    ("cultura attribution loglik --encoder E --scorer hf:MODEL [--alpha 1 --tau -30]", None),
    ("cultura --project DIR images list --pool out", None),
])
def test_the_checker_fails_on_a_renamed_command(line, problem):
    _, problems = walk(_tokens(line))
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problem in problems[0]


def test_hidden_aliases_resolve():
    @click.group()
    def root():
        """Root."""

    @root.command()
    @click.option("--model", "--encoder", "model", help="The model.")
    @click.option("--old", hidden=True, help="A hidden alias.")
    def run(model, old):
        """Run."""

    assert walk(["run", "--encoder", "x", "--old", "y"], root)[1] == []
    assert walk(["run", "--nope"], root)[1]
