"""Output helpers shared by every command: the click context object, ``--json``, tables and errors.

Tables take their columns from the union of the rows' keys (in first-seen order), so a key that only some
rows carry (a note, a reason) is never dropped; cell text is printed literally (``[evaluate.llm]`` is not
rich markup). With ``--json`` an error is printed as a JSON object on stderr (stdout stays the command's data,
empty on failure) with a non-zero exit status.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..bounds import Bound, OutOfRange
from ..errors import CulturaError, ProjectNotFound
from ..lazy import lazy
from ..redact import scrub, strip_urls

# imported on first use: a help page, a JSON answer or an error loads neither rich nor the project (its config,
# pydantic, the database layer)
rich_console = lazy("rich.console")
rich_markup = lazy("rich.markup")
rich_table = lazy("rich.table")
projects = lazy("cultura.project")
curation_status = lazy("cultura.curate.status")
bars_module = lazy("cultura.cli.progress")  # rich's live display: only for a command that runs

if TYPE_CHECKING:
    from rich.console import Console

    from ..project import Project

#: The executors ``--executor`` offers (executor.EXECUTORS, checked equal by a unit test): written here so that a
#: help page does not import the executor module and numpy with it.
EXECUTORS = ("local", "ray")

_consoles: dict[str, Console] = {}


def _console(name: str) -> Console:
    """The rich console ``out`` (stdout) or ``console`` (stderr), made on first use: a help page, a JSON
    answer or an error imports no rich."""
    if name not in _consoles:
        _consoles[name] = rich_console.Console(stderr=name == "console")
    return _consoles[name]


def __getattr__(name: str):
    # ``from .console import out`` in a command module: the console is made when that module is imported
    if name in ("out", "console"):
        return _console(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
                self._project = projects.Project(self.project_dir)
            else:
                self._project = projects.find_project()
        return self._project


pass_ctx = click.make_pass_decorator(Ctx)


class AliasedOption(click.Option):
    """An option whose old names still work for one release but are not shown: ``--model`` with
    ``hidden_aliases=("--encoder",)`` accepts ``--encoder X`` and documents only ``--model``."""

    def __init__(self, *param_decls, hidden_aliases: tuple[str, ...] = (), **kwargs):
        super().__init__(*param_decls, **kwargs)
        self.hidden_aliases = tuple(hidden_aliases)

    def get_help_record(self, ctx):
        opts, secondary = self.opts, self.secondary_opts
        self.opts = [o for o in opts if o not in self.hidden_aliases]
        self.secondary_opts = [o for o in secondary if o not in self.hidden_aliases]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts, self.secondary_opts = opts, secondary


def option(*param_decls, old: tuple[str, ...] | str = (), **kwargs):
    """``click.option`` whose ``old`` names are hidden aliases (the one vocabulary: ``--model``, ``--top-k``,
    ``--overwrite``, ``--retry-failed``, ``--dry-run``, ``--json``)."""
    old = (old,) if isinstance(old, str) else tuple(old)
    names = [d for d in param_decls if d.startswith("-")]
    dest = [d for d in param_decls if not d.startswith("-")]
    return click.option(*names, *old, *dest, cls=AliasedOption, hidden_aliases=old, **kwargs)


def model_option(help: str, **kwargs):
    """``--model SPEC``: the one name for a model spec on every command (old names as hidden aliases)."""
    return option("--model", "model", help=help, **kwargs)


class _Bounded:
    """A number parameter checked by its :class:`~cultura.bounds.Bound` (the library's own declaration):
    out of range, nan, infinity or not a number at all is one sentence naming the range (exit 2)."""

    bound: Bound

    def convert(self, value, param, ctx):
        try:
            return self.bound.check(value, param.name if param is not None else "value")
        except OutOfRange:
            text = str(value) if len(str(value)) <= 40 else f"{str(value)[:20]}… ({len(str(value))} characters)"
            self.fail(f"{text} is not {self.bound.describe()}.", param, ctx)

    def _describe_range(self) -> str:
        return self.bound.short()


class BoundedInt(_Bounded, click.IntRange):
    name = "integer"

    def __init__(self, bound: Bound):
        super().__init__(bound.low, bound.high, min_open=bound.open_low)
        self.bound = bound


class BoundedFloat(_Bounded, click.FloatRange):
    name = "float"

    def __init__(self, bound: Bound):
        super().__init__(bound.low, bound.high, min_open=bound.open_low)
        self.bound = bound


def bounded(bound: Bound) -> click.ParamType:
    """The click type of a number option (or argument) that takes what ``bound`` allows: the one way a
    command declares a number, so the command line and the library refuse the same values."""
    return BoundedInt(bound) if bound.kind is int else BoundedFloat(bound)


def overwrite_option(f):
    """Add ``--overwrite``: replace the output file(s) the command writes where they exist (without it, an
    existing file is refused with one sentence and nothing is written)."""
    return click.option("--overwrite", is_flag=True,
                        help="Replace the output file if it exists (default: refuse to touch it).")(f)


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


def end_command_line() -> None:
    """End the command's own progress line before it serves until Ctrl-C or asks a question (see
    :meth:`cultura.cli.progress.BarReporter.command`)."""
    bars_module.end_command_line()


def serve_until_interrupted(httpd) -> None:
    """Serve ``httpd`` (a ``socketserver`` server) until Ctrl-C, then close it: the end of every ``--serve``."""
    end_command_line()  # serving is not work in progress: no "still at work" line for as long as it serves
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()


def emit_json(data) -> None:
    # no user:password@ of any URL is ever printed (push's image base, a server's address, a source page)
    click.echo(json.dumps(strip_urls(data), indent=2, ensure_ascii=False, default=str))


def columns_of(rows: list[dict]) -> list[str]:
    """The union of the rows' keys, in first-seen order."""
    return list(dict.fromkeys(k for r in rows for k in r))


#: A cell longer than this (an error, a reason) is printed below the table as a numbered note, at full width,
#: instead of being folded into a narrow column.
LONG_CELL = 60


def table(title: str | None, rows: list[dict], columns: list[str] | None = None) -> None:
    """Print ``rows`` as a rich table (columns default to the union of the rows' keys); cells longer than
    :data:`LONG_CELL` characters become numbered notes under the table."""
    escape, out = rich_markup.escape, _console("out")
    if not rows:
        out.print(f"[dim]{escape(title) + ': ' if title else ''}nothing to show[/dim]")
        return
    columns = columns or columns_of(rows)
    t = rich_table.Table(title=escape(title) if title else None, show_lines=False)
    for c in columns:
        t.add_column(escape(str(c)), overflow="fold")
    notes: list[str] = []
    for r in rows:
        cells = []
        for c in columns:
            text = "" if r.get(c) is None else strip_urls(str(r.get(c)))
            if len(text) > LONG_CELL:
                notes.append(f"[{len(notes) + 1}] {c}: {text}")
                text = f"see [{len(notes)}]"
            cells.append(escape(text))
        t.add_row(*cells)
    out.print(t)
    for note in notes:
        out.print(note, markup=False, highlight=False, soft_wrap=True)


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
    """A library error turned into one sentence; under ``--json`` printed as ``{"error": …, "type": …}`` on
    stderr."""

    def __init__(self, message: str, *, as_json: bool = False, kind: str = "CulturaError", exit_code: int = 1):
        super().__init__(message)
        self.as_json = as_json
        self.kind = kind
        self.exit_code = exit_code

    def show(self, file=None) -> None:
        if self.as_json:
            click.echo(json.dumps({"error": self.format_message(), "type": self.kind}, ensure_ascii=False), err=True)
        else:
            super().show(file)


def json_usage_error(e: click.ClickException, args: list[str]) -> click.ClickException:
    """Under ``--json``, click's own errors (a missing argument, a bad option value) as a JSON object too."""
    if "--json" not in args or isinstance(e, JsonAwareError):
        return e
    message = e.format_message()
    if isinstance(e, click.UsageError) and e.ctx is not None:
        message = f"{message} (see '{e.ctx.command_path} --help')"
    return JsonAwareError(scrub(message), as_json=True, kind=type(e).__name__, exit_code=e.exit_code)


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


def csv_list(value: str | None) -> list[str] | None:
    """A comma-separated option (``--concepts a,b``) as a list; None when not given."""
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def stage_hint(ctx: Ctx, stage: str, as_json: bool, when: bool = True) -> bool:
    """Print what to do first (JSON: ``{"nothing_to_do": …}``) when ``stage`` has nothing to work on."""
    hint = curation_status.nothing_to_do(ctx.project, stage) if when else None
    if hint:
        if as_json:
            emit_json({"stage": stage, "nothing_to_do": hint})
        else:
            _console("out").print(f"[yellow]{rich_markup.escape(hint)}[/yellow]")
    return bool(hint)


__all__ = ["Ctx", "pass_ctx", "bounded", "overwrite_option", "json_option", "executor_option", "option", "model_option",
           "AliasedOption",
           "emit_json", "serve_until_interrupted", "table", "listing", "summary", "columns_of", "out",
           "console", "cli_error", "CulturaError", "stage_hint", "csv_list"]
