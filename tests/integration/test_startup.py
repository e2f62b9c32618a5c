"""Start-up weight: a command imports only what it uses. ``cultura --help``, ``cultura status`` and every command
that runs no model import none of the heavy libraries (checked with ``python -X importtime``, which lists every
module a process imported), and the root group's one-line helps (written in ``cli.py`` so that ``--help``
imports no command module) stay equal to the commands' own."""
from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys

import click
import pytest

from cultura.cli.main import COMMAND_MODULES, cli

#: Libraries no command may import unless it runs a model, a figure, a Ray job or Label Studio's SDK.
HEAVY = ("torch", "transformers", "open_clip", "sentence_transformers", "sklearn", "scipy", "pandas", "faiss",
         "matplotlib", "umap", "ray", "label_studio_sdk", "statsmodels", "krippendorff", "pyarrow", "datasets",
         "huggingface_hub", "openai", "crowdkit")

#: Commands that run no model: each group's --help and the listings a user types all day.
LIGHT_COMMANDS = [
    ["--help"], ["status"], ["status", "--json"],
    *[[name, "--help"] for name in COMMAND_MODULES],
    ["concepts", "list"], ["concepts", "terms"], ["images", "list"], ["images", "failures"],
    ["images", "clusters"], ["images", "flags"], ["images", "dedup", "--help"], ["images", "download", "--help"],
    ["annotate", "campaigns", "list"], ["annotate", "annotators", "list"], ["annotate", "push", "--help"],
    ["build", "list"], ["build", "list-queries"], ["evaluate", "suites"],
    ["evaluate", "results"], ["evaluate", "run", "--help"], ["evaluate", "report", "--help"],
    ["culture", "list"], ["entities", "counts"], ["contexts", "counts"], ["kb", "--help"],
]


def _imported(args: list[str], cwd, env: dict | None = None) -> tuple[set[str], subprocess.CompletedProcess]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}
    env.pop("CULTURA_PROJECT", None)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "cultura", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    modules = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \| *([\w.]+)$", proc.stderr, flags=re.M))
    return modules, proc


@pytest.fixture(scope="module")
def light_project(tmp_path_factory):
    from cultura.project import init_project

    root = tmp_path_factory.mktemp("startup") / "proj"
    init_project(root, countries=["US", "JP"]).close()
    return root


@pytest.mark.parametrize("args", LIGHT_COMMANDS, ids=" ".join)
def test_light_commands_import_no_heavy_library(args, light_project):
    modules, proc = _imported(args, light_project)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert "cultura.cli" in modules  # the importtime listing was read
    heavy = sorted({m.split(".")[0] for m in modules} & set(HEAVY))
    assert not heavy, f"'cultura {' '.join(args)}' imports {heavy}: defer them to the code that uses them"


def test_help_imports_no_command_module(light_project):
    """``cultura --help`` prints the one-liners of cli.COMMAND_MODULES, importing none of the area modules."""
    modules, proc = _imported(["--help"], light_project)
    assert proc.returncode == 0
    assert "Commands:" in proc.stdout and "status" in proc.stdout
    assert not {module for module, _ in COMMAND_MODULES.values()} & modules


def test_root_one_liners_equal_the_commands_own_help():
    for name, (module, one_liner) in COMMAND_MODULES.items():
        command = {c.name: c for c in importlib.import_module(module).COMMANDS}[name]
        assert command.get_short_help_str(limit=10_000) == one_liner, f"cli.COMMAND_MODULES[{name!r}] is stale"


def test_every_area_command_is_listed():
    """A command added to an area's COMMANDS is reachable: its module and name are in cli.COMMAND_MODULES."""
    for module in {m for m, _ in COMMAND_MODULES.values()}:
        for command in importlib.import_module(module).COMMANDS:
            assert COMMAND_MODULES.get(command.name, ("",))[0] == module, \
                f"{module} defines '{command.name}': add it to cli.COMMAND_MODULES"


def test_root_help_and_completion_match_a_plain_group():
    """The lazy root group shows the same commands and one-liners as click's own listing would."""
    from click.testing import CliRunner

    plain = click.Group("cultura", commands={name: cli.commands[name] for name in cli.list_commands(None)})
    ours = CliRunner().invoke(cli, ["--help"], terminal_width=100).output
    theirs = CliRunner().invoke(plain, ["--help"], terminal_width=100).output
    assert ours.split("Commands:")[1] == theirs.split("Commands:")[1]
    completions = cli.shell_complete(click.Context(cli), "im")
    assert [(c.value, c.help) for c in completions] == [("images", COMMAND_MODULES["images"][1]),
                                                         ("import", COMMAND_MODULES["import"][1])]


def test_help_imports_neither_the_project_nor_rich_nor_numpy(light_project):
    """A help page prints click's text: the project (its config, pydantic, the database layer), rich and numpy
    are loaded only by a command that runs."""
    modules, proc = _imported(["--help"], light_project)
    assert proc.returncode == 0 and "Commands:" in proc.stdout
    loaded = {m.split(".")[0] for m in modules} | modules
    assert not loaded & {"cultura.project", "cultura.config", "pydantic", "rich", "numpy", "sqlite_utils"}


def test_status_prints_its_table_through_rich(light_project):
    """The console is made on first use: a command that prints a table still gets it (and its text)."""
    modules, proc = _imported(["status"], light_project)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "rich.table" in modules and proc.stdout.strip()


#: What ``cultura status`` prints needs the database, the country registry and rich: never the validator's
#: pydantic, numpy (sqlite-utils' optional column types), Jinja, Pillow or an HTTP client.
NOT_FOR_STATUS = {"pydantic", "numpy", "jinja2", "PIL", "httpx", "cultura.config", "cultura.config_edit"}


def test_status_imports_only_what_it_prints(tmp_path):
    from cultura.project import init_project

    root = tmp_path / "proj"
    init_project(root, countries=["US", "JP"]).close()
    run = lambda: _imported(["status"], root, env={"CULTURA_CACHE_DIR": str(tmp_path / "cache")})
    first_modules, first = run()  # a file the validator has not seen: checked with pydantic, then remembered
    assert first.returncode == 0, first.stderr[-2000:]
    assert "pydantic" in first_modules
    modules, again = run()
    assert again.returncode == 0 and "Japan" in again.stdout, again.stderr[-2000:]
    assert "rich.table" in modules and "sqlite_utils" in modules  # the listing was read
    assert not ({m.split(".")[0] for m in modules} | modules) & NOT_FOR_STATUS

    # the memo is of these exact bytes: an edited file is checked again, and a bad value stops status too
    path = root / "cultura.toml"
    path.write_text(re.sub(r"(?m)^temperature = .*$", "temperature = 9", path.read_text()))
    _, bad = run()
    assert bad.returncode == 1 and "llm.temperature" in bad.stdout + bad.stderr and "Traceback" not in bad.stderr
