"""Docs are tested: every command has help text, docs/cli.md is the current command tree, and every file the
docs cite is there."""
import re

import click

from cultura.cli import cli
from tests import REPO

ROOT = REPO


def _walk(cmd, path):
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            yield from _walk(sub, path + [name])


def test_every_command_and_option_has_help():
    missing = []
    for path, cmd in _walk(cli, ["cultura"]):
        if not (cmd.help or "").strip():
            missing.append(" ".join(path))
        for p in cmd.params:
            if isinstance(p, click.Option) and not (p.help or "").strip() and p.name not in ("help", "version"):
                missing.append(f"{' '.join(path)} {p.opts[0]}")
    assert not missing, f"commands/options without help text: {missing}"


def test_cli_reference_is_current():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_cli_docs", ROOT / "scripts" / "gen_cli_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    current = (ROOT / "docs" / "cli.md").read_text()
    assert current == mod.render(), "docs/cli.md is stale: run '.venv/bin/python scripts/gen_cli_docs.py'"


def test_readme_commands_exist():
    """The README's two set-up commands are real Makefile targets, and CI runs exactly the README's test
    command."""
    import re

    readme = (ROOT / "README.md").read_text()
    blocks = "\n".join(re.findall(r"```bash\n(.*?)```", readme, flags=re.S))
    commands = [line.split("#")[0].strip() for line in blocks.splitlines()]
    assert "make demo" in commands and "make test" in commands
    targets = set(re.findall(r"^([A-Za-z][\w-]*):", (ROOT / "Makefile").read_text(), flags=re.M))
    assert {"demo", "test", "setup"} <= targets
    ci_lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()
                if ln.strip() and not ln.startswith("#")]
    assert ci_lines[-1] == "make test"


def test_every_file_the_docs_and_the_code_cite_exists():
    """A path cited in the README, the docs, the package or the performance scripts (``tests/…py``, ``src/…``,
    ``perf/…``, ``docs/…md``; ``path::test_name`` too) is there: moving a file moves its mentions."""
    cite = re.compile(r"(?<![\w/.])((?:tests|perf|docs|scripts|src)/[\w./-]+\.(?:py|md|toml|j2))(?:::(\w+))?")
    sources = [ROOT / "README.md", ROOT / "Makefile", *sorted((ROOT / "docs").glob("*.md")),
               *sorted((ROOT / "src").rglob("*.py")), *sorted((ROOT / "perf").glob("*.py"))]
    missing = []
    for src in sources:
        for m in cite.finditer(src.read_text(encoding="utf-8")):
            path, test = ROOT / m.group(1), m.group(2)
            if not path.is_file() or (test and f"def {test}(" not in path.read_text(encoding="utf-8")):
                missing.append(f"{src.relative_to(ROOT)}: {m.group(0)}")
    assert not missing, "cited but not there:\n" + "\n".join(missing)
