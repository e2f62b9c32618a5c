"""Output helpers shared by every command: the click context object, ``--json``, tables and errors.

Tables take their columns from the union of the rows' keys (in first-seen order), so a key that only some
rows carry (a note, a reason) is never dropped; cell text is printed literally (``[evaluate.llm]`` is not
rich markup). With ``--json`` an error is printed as a JSON object on stdout as well as the exit status.
"""
from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .errors import CulturaError, ProjectNotFound
from .executor import EXECUTORS
from .redact import scrub, strip_urls
from .project import Project, find_project

console = Console(stderr=True)
out = Console()


class Ctx:
    """Click context object: the project is opened only when a command needs it."""

    def __init__(self, project_dir: str | None):
        self.project_dir = project_dir
        self._project = None

    @property
    def project(self) -> Project:
        if self._project is None:
            if self.project_dir:
                if not (Path(self.project_dir) / "cultura.toml").exists():
                    raise ProjectNotFound(f"--project {self.project_dir} has no cultura.toml. Run "
                                          f"'cultura init {self.project_dir}' first.")
                self._project = Project(self.project_dir)
            else:
                self._project = find_project()
        return self._project


pass_ctx = click.make_pass_decorator(Ctx)


def json_option(f):
    """Add ``--json``: print machine-readable output instead of tables (errors too)."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(f)


def executor_option(section: str):
    """Add ``--executor [local|ray]``: where the stage's hashing, embedding or LM scoring runs (default: the
    ``executor`` key of ``section`` in cultura.toml)."""
    return click.option(
        "--executor", type=click.Choice(EXECUTORS), default=None,
        help=f"Where model work (cache misses only) runs: local (this process) or ray (Ray Data actors; "
             f"RAY_ADDRESS for a cluster, [ray] in cultura.toml for the actors). Default: {section}.executor.")


def emit_json(data) -> None:
    # no user:password@ of any URL is ever printed (push's image base, a server's address, a source page)
    click.echo(json.dumps(strip_urls(data), indent=2, ensure_ascii=False, default=str))


def columns_of(rows: list[dict]) -> list[str]:
    """The union of the rows' keys, in first-seen order."""
    return list(dict.fromkeys(k for r in rows for k in r))


def table(title: str | None, rows: list[dict], columns: list[str] | None = None) -> None:
    """Print ``rows`` as a rich table (columns default to the union of the rows' keys)."""
    if not rows:
        out.print(f"[dim]{escape(title) + ': ' if title else ''}nothing to show[/dim]")
        return
    columns = columns or columns_of(rows)
    t = Table(title=escape(title) if title else None, show_lines=False)
    for c in columns:
        t.add_column(escape(str(c)), overflow="fold")
    for r in rows:
        t.add_row(*["" if r.get(c) is None else escape(strip_urls(str(r.get(c)))) for c in columns])
    out.print(t)


def listing(title: str, rows: list[dict], as_json: bool, columns: list[str] | None = None, *,
            shown: list[dict] | None = None) -> None:
    """Print ``rows`` as JSON (``--json``) or as a table; ``shown``: the rows as the table displays them
    (default: ``rows``)."""
    if as_json:
        emit_json(rows)
    else:
        table(title, rows if shown is None else shown, columns)


def summary(title: str, data: dict, as_json: bool = False) -> None:
    if as_json:
        emit_json(data)
        return
    table(title, [{"what": k, "value": v} for k, v in data.items()])


class JsonAwareError(click.ClickException):
    """A library error turned into one sentence; under ``--json`` printed as ``{"error": …}`` on stdout."""

    def __init__(self, message: str, *, as_json: bool = False, kind: str = "CulturaError"):
        super().__init__(message)
        self.as_json = as_json
        self.kind = kind

    def show(self, file=None) -> None:
        if self.as_json:
            click.echo(json.dumps({"error": self.format_message(), "type": self.kind}, ensure_ascii=False))
        else:
            super().show(file)


def cli_flag(command: click.Command | None, param: str | None) -> str | None:
    """The command-line option of ``command`` that sets the library argument ``param`` (e.g. ``--workers``)."""
    if command is None or not param:
        return None
    for p in command.params:
        if p.name == param and isinstance(p, click.Option):
            return max(p.opts, key=len)
        if p.name == param and isinstance(p, click.Argument):
            return p.human_readable_name
    return None


def invoked_command(root: click.Group, args: list[str]) -> click.Command | None:
    """The (sub)command that ``args`` invoke under ``root``."""
    cmd: click.Command = root
    for a in args:
        if isinstance(cmd, click.Group) and a in cmd.commands:
            cmd = cmd.commands[a]
    return cmd


def cli_error(e: CulturaError, args: list[str], command: click.Command | None = None) -> click.ClickException:
    """The click exception for a library error raised by ``command`` called with ``args``: the option that
    sets the library argument at fault is named (``--workers: …``), and under ``--json`` the error is a JSON
    object on stdout."""
    msg = scrub(str(e))  # never print a known secret (a server's echo of a key, a password in a URL)
    flag = cli_flag(command, getattr(e, "param", None))
    if flag:
        msg = f"{flag}: {msg}"
    return JsonAwareError(msg, as_json="--json" in args, kind=type(e).__name__)


__all__ = ["Ctx", "pass_ctx", "json_option", "executor_option",
           "emit_json", "table", "listing", "summary", "columns_of", "out",
           "console", "cli_error", "CulturaError"]
