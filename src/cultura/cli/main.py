"""The ``cultura`` command line. Thin: each command parses options, calls one library function, prints the
result (a rich table, or JSON with ``--json``) and turns library errors into one sentence that names the fix.

The root group lives here; every command group has its module in this package (one style: module-level click
commands listed in ``COMMANDS``), above the library it calls. The root group names, for each top-level command,
the module that defines it and its one-line help (:data:`COMMAND_MODULES`): a command's module is imported only
when that command runs, so ``cultura --help``, ``cultura status`` and each TAB of shell completion start
without the code (and the libraries) of the other areas. ``tests/integration/test_startup.py`` keeps every one-liner equal
to its command's own help and checks what each command imports.
"""
from __future__ import annotations

import importlib
import os
import sqlite3
from collections.abc import Iterator, MutableMapping

import click
from click.shell_completion import CompletionItem

from ..errors import CulturaError, missing_extra, storage_error, storage_failure
from ..lazy import lazy
from ..progress import reporting
from .console import Ctx, cli_error, invoked_command, json_usage_error

bars_module = lazy("cultura.cli.progress")  # rich: only for a command that runs (a help page is printed before)

#: Top-level command → (module defining it in ``COMMANDS``, its one-line help as ``cultura --help`` shows it).
COMMAND_MODULES: dict[str, tuple[str, str]] = {
    "init": ("cultura.cli.project", "Create a project: DIRECTORY/cultura.toml and DIRECTORY/cultura.db."),
    "status": ("cultura.cli.project",
               "Counts per stage, per country and per concept, and failures by reason."),
    "config": ("cultura.cli.project",
               "Read or change cultura.toml from the command line, validated exactly like the file."),
    "concepts": ("cultura.cli.concepts", "Concepts: generate, load presets, curate, de-duplicate, translate."),
    "images": ("cultura.cli.images", "Images: search, ingest, download, de-duplicate, tag."),
    "annotate": ("cultura.cli.annotate",
                 "Human annotation in Label Studio: filter images, review duplicates, rate cultural relevance, "
                 "label entities and translations; agreement and adjudication on top of Label Studio Community."),
    "build": ("cultura.cli.build",
              "Assemble versioned benchmarks (association, descriptor) and their query texts."),
    "export": ("cultura.cli.export",
               "Export benchmarks to DIRECTORY (new or empty) as a Hugging Face dataset: ready-to-evaluate configs "
               "(datasets.load_dataset(DIRECTORY) loads the default one, split test), the normalised tables, images, "
               "a validated README.md dataset card and croissant.json."),
    "import": ("cultura.cli.imports",
               "Bring existing datasets (GlobalRG, Crossmodal-3600 captions, CAIRe ratings) into the project."),
    "evaluate": ("cultura.cli.evaluate",
                 "Evaluate embedding models on the project's benchmarks (seed 000 suites) and report the results."),
    "social": ("cultura.cli.social",
               "Portrait sets and prompt inventories of the social-bias audit (run it with 'evaluate run --suite "
               "social')."),
    "entities": ("cultura.cli.entities",
                 "Culture-specific entities per language and type (local vs Western) for the LLM suite."),
    "contexts": ("cultura.cli.contexts",
                 "Masked contexts ([MASK]) for the LLM suite: grounded, neutral and extractive-QA."),
    "kb": ("cultura.cli.kb",
           "The knowledge base used to link images to entities (seed 004)."),
    "attribution": ("cultura.cli.attribution",
                    "Cultural attribution of the project's images (CAIRe): judge scores and their evaluation."),
    "culture": ("cultura.cli.culture",
                "Culture labels beside the countries (a religion, an ethnic group, a state...; seed 004)."),
    "view": ("cultura.cli.view",
             "Write a browsable static site of the project to reports/view/: the pool by country × concept with each "
             "image's status, duplicate sets side by side, culture-conflict flags, every benchmark's trials (roles "
             "hidden until shown) and annotator disagreements."),
    "caire": ("cultura.cli.caire",
              "Import seed 004's (CAIRe) specific and universal test sets from local files."),
}


def command_path(root: click.Group, args: list[str]) -> str:
    """The subcommand words of ``args`` (``images tag`` of ``images tag --method clip``)."""
    words, cmd = [], root
    for a in args:
        if not (isinstance(cmd, click.Group) and a in cmd.commands):
            break
        words.append(a)
        cmd = cmd.commands[a]
    return " ".join(words)


def command_name(root: click.Group, args: list[str]) -> str:
    """``cultura images tag``: the command a person typed, as messages and the progress line name it."""
    return f"cultura {command_path(root, args)}".strip()


class LazyCommands(MutableMapping):
    """The root group's commands: a command's module is imported on first access to that command."""

    def __init__(self, modules: dict[str, tuple[str, str]]):
        self._modules = modules
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded and name in self._modules:
            for command in importlib.import_module(self._modules[name][0]).COMMANDS:
                self._loaded.setdefault(command.name, command)
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._modules, *self._loaded]))

    def __len__(self) -> int:
        return len(set(self._modules) | set(self._loaded))

    def short_help(self, name: str) -> str:
        """The one-line help of ``name`` without importing its module (when it is one of ours)."""
        if name in self._loaded or name not in self._modules:
            return self[name].get_short_help_str(limit=10_000)
        return self._modules[name][1]


class CulturaGroup(click.Group):
    """The root group: lazily imported commands, and library errors reported cleanly (as JSON under
    ``--json``) for every subcommand."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(COMMAND_MODULES)

    def format_commands(self, ctx, formatter) -> None:
        rows = []
        limit = formatter.width - 6 - max(len(n) for n in self.list_commands(ctx))
        for name in self.list_commands(ctx):
            # click's own shortening (first sentence, cut at a word) of the one-liner
            rows.append((name, click.Command(name, help=self.commands.short_help(name)).get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def shell_complete(self, ctx, incomplete):
        if ctx.args or getattr(ctx, "_protected_args", None) or incomplete.startswith("-"):
            return super().shell_complete(ctx, incomplete)
        return [CompletionItem(name, help=self.commands.short_help(name))
                for name in self.list_commands(ctx) if name.startswith(incomplete)]

    def invoke(self, ctx):
        args = [*getattr(ctx, "_protected_args", []), *ctx.args]
        bars = bars_module.BarReporter()
        try:
            # the library's long stages report here (a bar on a terminal's stderr), and the command has a line
            # of its own that says it is still at work whenever nothing else is shown
            with reporting(bars), bars.command(command_name(self, args)):
                return super().invoke(ctx)
        except CulturaError as e:
            raise cli_error(e, args, invoked_command(self, args)) from None
        except click.ClickException as e:
            raise json_usage_error(e, args) from None
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except ImportError as e:  # an optional library of an extra that is not installed
            command = invoked_command(self, args)
            error = missing_extra(e, f"'{command_name(self, args)}'")
            if error is None:
                raise
            raise cli_error(error, args, command) from None
        except Exception as e:
            failure = storage_failure(e)
            if failure is not None:  # a full disk, a quota, ulimit -f, an I/O error: one sentence, exit 1
                what, path = failure
                raise cli_error(storage_error(command_name(self, args), what,
                                              path or _storage_path(ctx)), args, invoked_command(self, args)) from None
            if not isinstance(e, sqlite3.OperationalError) or ("locked" not in str(e) and "busy" not in str(e)):
                raise
            raise cli_error(CulturaError(
                "The project database stayed locked by another cultura process for longer than the busy timeout "
                "(30 s); wait for that process to finish, then rerun."), args, invoked_command(self, args)) from None
        finally:
            bars.close()


def _storage_path(ctx) -> str:
    """Where a storage failure without a file name happened: SQLite's errors name no file, so the project's
    database (else the project folder, else the working folder)."""
    obj = ctx.obj
    project = getattr(obj, "_project", None)
    if project is not None:
        return str(project.db_path)
    if getattr(obj, "project_dir", None):
        return str(obj.project_dir)
    return os.getcwd()


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


def main(argv=None):
    """Console-script entry point."""
    return cli.main(args=argv, prog_name="cultura")


if __name__ == "__main__":  # pragma: no cover
    main()
