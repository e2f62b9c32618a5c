"""The ``cultura`` command line. Thin: each command parses options, calls one library function, prints the
result (a rich table, or JSON with ``--json``) and turns library errors into one sentence that names the fix.

The root group lives here; each area's commands live beside its library code (``<area>/commands.py``, one
style: module-level click commands listed in ``COMMANDS``) and are imported directly below.
"""
from __future__ import annotations

import sqlite3

import click

from .annotate import commands as annotate_commands
from .console import Ctx, cli_error, invoked_command
from .curate import caire_commands
from .curate import commands as curate_commands
from .curate.build import commands as build_commands
from .errors import CulturaError
from .evaluate import commands as evaluate_commands
from .evaluate.suites.attribution import commands as attribution_commands
from .evaluate.suites.llm_bias import commands as llm_bias_commands
from .evaluate.suites.social import commands as social_commands
from .view import commands as view_commands


class CulturaGroup(click.Group):
    """A group that reports library errors cleanly (as JSON under ``--json``) for every subcommand."""

    def invoke(self, ctx):
        args = [*getattr(ctx, "_protected_args", []), *ctx.args]
        try:
            return super().invoke(ctx)
        except CulturaError as e:
            raise cli_error(e, args, invoked_command(self, args)) from None
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) and "busy" not in str(e):
                raise
            raise cli_error(CulturaError(
                "The project database stayed locked by another cultura process for longer than the busy timeout "
                "(30 s); wait for that process to finish, then rerun."), args, invoked_command(self, args)) from None


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


for _module in (curate_commands, annotate_commands, build_commands, evaluate_commands, social_commands,
                llm_bias_commands, attribution_commands, caire_commands, view_commands):
    for _command in _module.COMMANDS:
        cli.add_command(_command)


def main(argv=None):
    """Console-script entry point."""
    return cli.main(args=argv, prog_name="cultura")


if __name__ == "__main__":  # pragma: no cover
    main()
