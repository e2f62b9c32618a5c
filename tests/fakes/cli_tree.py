"""The command line's leaves, for tests that check every command (help, --json, ranges, doors): one walk of the
click tree, so a command added later is seen by every such test."""
from __future__ import annotations

from collections.abc import Iterator

import click


def leaves(cmd: click.Command | None = None, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """``(path of names, command)`` for every command of ``cmd`` (default: ``cultura``) that is not a group, in
    name order; the root group imports each command's module on first access."""
    if cmd is None:
        from cultura.cli import cli
        cmd = cli
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.commands):
            yield from leaves(cmd.commands[name], (*path, name))
    else:
        yield path, cmd
