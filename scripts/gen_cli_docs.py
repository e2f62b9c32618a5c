"""Regenerate docs/cli.md from the click command tree (tests/unit/test_docs.py fails when it is out of date).

    .venv/bin/python scripts/gen_cli_docs.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent


def walk(cmd: click.Command, path: list[str]):
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.commands):
            yield from walk(cmd.commands[name], path + [name])


def render() -> str:
    from cultura.cli import cli

    lines = ["# CLI reference", "",
             "Generated from the command tree by `scripts/gen_cli_docs.py`; `tests/unit/test_docs.py` keeps it true.",
             ""]
    for path, cmd in walk(cli, ["cultura"]):
        ctx = click.Context(cmd, info_name=" ".join(path), help_option_names=["-h", "--help"])
        lines += [f"{'#' * min(2 + len(path) - 1, 4)} `{' '.join(path)}`", "", "```text",
                  cmd.get_help(ctx).replace(" \n", "\n").rstrip(), "```", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    out = ROOT / "docs" / "cli.md"
    text = render()
    if "--check" in sys.argv:
        sys.exit(0 if out.exists() and out.read_text() == text else 1)
    out.write_text(text)
    print(f"wrote {out}")
