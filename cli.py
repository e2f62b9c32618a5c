"""The ``cultura`` command line. Thin: each command parses options, calls one library function, prints the
result (a rich table, or JSON with ``--json``) and turns library errors into one sentence that names the fix.
"""
from __future__ import annotations

import importlib
import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from .errors import CulturaError

console = Console(stderr=True)
out = Console()


class Ctx:
    """Click context object: the project is opened only when a command needs it."""

    def __init__(self, project_dir: str | None):
        self.project_dir = project_dir
        self._project = None

    @property
    def project(self):
        if self._project is None:
            from .project import Project, find_project
            from .errors import ProjectNotFound
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
    """Add ``--json``: print machine-readable output instead of tables."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(f)


def emit_json(data) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def table(title: str | None, rows: list[dict], columns: list[str] | None = None) -> None:
    """Print ``rows`` as a rich table (columns default to the keys of the first row)."""
    if not rows:
        out.print(f"[dim]{title + ': ' if title else ''}nothing to show[/dim]")
        return
    columns = columns or list(rows[0].keys())
    t = Table(title=title, show_lines=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*["" if r.get(c) is None else str(r.get(c)) for c in columns])
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


class CulturaGroup(click.Group):
    """A group that reports library errors cleanly for every subcommand."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except CulturaError as e:
            raise click.ClickException(str(e)) from None


@click.group(cls=CulturaGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--project", "project_dir", type=click.Path(file_okay=False), envvar="CULTURA_PROJECT",
              help="Project folder (default: nearest folder up from here that holds cultura.toml; "
                   "env CULTURA_PROJECT).")
@click.version_option(package_name="cultura")
@click.pass_context
def cli(ctx, project_dir):
    """cultura: build a cultural-bias benchmark (concepts, images, annotation, assembly) and evaluate
    models on it. Start with 'cultura init DIR --preset 3xcm'."""
    ctx.obj = Ctx(project_dir)


# Command groups live beside the library code of their area; each module adds its commands to ``cli``.
COMMAND_MODULES = [
    "cultura.curate.commands",
    "cultura.annotate.commands",
    "cultura.curate.build_commands",
    "cultura.evaluate.commands",
    "cultura.evaluate.social_commands",
    "cultura.evaluate.llm_commands",
]


def _load_commands():
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:
                continue
            raise
        mod.register(cli)


_load_commands()


def main(argv=None):
    """Console-script entry point."""
    return cli.main(args=argv, prog_name="cultura")


if __name__ == "__main__":  # pragma: no cover
    main()
