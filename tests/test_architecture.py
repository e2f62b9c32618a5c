"""The house stays as drawn in docs/architecture.md: imports go one way, no import cycle, no import inside a
function unless it defers a heavy optional dependency (said in a comment). A small AST check over the
package's own files (no import is executed)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: top-level folders that hold no package module (besides every dot-folder: .git, .venv, .venv-ls and the
#: peers' .venv-fastdup and .venv-img2dataset that ``make peers`` creates)
SKIP = {"tests", "benchmarks", "scripts", "docs", "demo-project"}
#: Optional or heavy dependencies a function may import on first use (with a comment saying so).
HEAVY = ("torch", "transformers", "open_clip", "umap", "matplotlib", "faiss", "sentence_transformers",
         "tokenizers", "huggingface_hub", "ray", "label_studio_sdk", "playwright", "datasets", "img2dataset",
         "openai", "ddgs", "imagededup", "pandas", "pyarrow", "statsmodels", "mlcroissant", "geopandas",
         "cartopy", "plotly", "skimage", "cv2", "sklearn", "scipy", "krippendorff", "safetensors", "crowdkit",
         "torchvision", "PIL.ImageFont")
CORE = ("cultura.db", "cultura.config", "cultura.errors", "cultura.countries", "cultura.templates", "cultura.redact",
        "cultura.cultures", "cultura.lazy", "cultura.names",
        "cultura.data", "cultura.executor", "cultura.view.links")
SHARED_EVALUATE = ("cultura.evaluate.common", "cultura.evaluate.data", "cultura.evaluate.stats",
                   "cultura.evaluate.stats_extra", "cultura.evaluate.reportkit", "cultura.evaluate.metrics",
                   "cultura.evaluate.suites.registry", "cultura.evaluate.schema")


def _modname(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["cultura", *parts])


def _modules() -> dict[str, tuple[Path, ast.Module]]:
    out = {}
    for p in ROOT.rglob("*.py"):
        top = p.relative_to(ROOT).parts[0]
        if top in SKIP or top.startswith("."):
            continue
        out[_modname(p)] = (p, ast.parse(p.read_text(encoding="utf-8")))
    return out


MODULES = _modules()


def _target(mod: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _resolve(name: str) -> str | None:
    """The cultura module ``name`` refers to (a module, or the module defining an imported attribute)."""
    while name.startswith("cultura"):
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _top_level_imports(tree: ast.Module):
    """Imports executed when the module is imported (not under ``if TYPE_CHECKING:``, not in functions)."""
    def visit(body):
        for n in body:
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                yield n
            elif isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
                continue
            elif isinstance(n, (ast.If, ast.Try, ast.With)):
                for field in ("body", "orelse", "finalbody"):
                    yield from visit(getattr(n, field, []))
                for h in getattr(n, "handlers", []):
                    yield from visit(h.body)
    yield from visit(tree.body)


def _edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for mod, (path, tree) in MODULES.items():
        for node in _top_level_imports(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = _target(mod, path, node)
                subs = [f"{base}.{a.name}" for a in node.names]
                # ``from pkg import submodule`` depends on the submodule; ``from pkg import name`` on pkg
                targets = [t if t in MODULES else base for t in subs]
            for t in targets:
                r = _resolve(t)
                if r and r != mod:
                    graph[mod].add(r)
        for t in _lazy_targets(mod, path, tree):
            r = _resolve(t)
            if r and r != mod:
                graph[mod].add(r)
    return graph


def _lazy_targets(mod: str, path: Path, tree: ast.Module):
    """Modules named as strings for a lazy import: ``".kb:import_kb"`` (``lazy_attributes``, relative to the
    package) and ``"cultura.curate.commands"`` (the CLI's command modules) are edges of the graph too."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        v = node.value
        if v.startswith(".") and ":" in v and " " not in v:
            rel, _, _ = v.partition(":")
            level = len(rel) - len(rel.lstrip("."))
            yield _target(mod, path, ast.ImportFrom(module=rel.lstrip(".") or None, names=[], level=level))
        elif v.startswith("cultura.") and v in MODULES:
            yield v


GRAPH = _edges()


def _area(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_import_cycle():
    index, low, stack, on, cycles = {}, {}, [], set(), []
    counter = [0]

    def strong(v):  # Tarjan, iterative enough for this size
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            # a package importing its own submodules is not a cycle unless a submodule imports it back
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            strong(v)
    assert not cycles, f"import cycles: {cycles}"


def _violations(rule) -> list[str]:
    return sorted(f"{m} -> {t}" for m, ts in GRAPH.items() for t in ts if rule(m, t))


def test_core_imports_no_area():
    """db, config, errors, countries, templates import nothing above them."""
    assert not _violations(lambda m, t: m.startswith(CORE) and not t.startswith(CORE))


def test_models_import_only_core():
    assert not _violations(lambda m, t: m.startswith("cultura.models") and not t.startswith(("cultura.models", *CORE)))


def test_curate_imports_neither_annotate_nor_evaluate():
    assert not _violations(lambda m, t: m.startswith("cultura.curate") and
                           t.startswith(("cultura.annotate", "cultura.evaluate", "cultura.cli", "cultura.demo")))


def test_annotate_imports_nothing_from_evaluate():
    assert not _violations(lambda m, t: m.startswith("cultura.annotate") and t.startswith("cultura.evaluate"))


def test_view_reads_tables_and_imports_neither_annotate_nor_evaluate():
    """The view reads curation, annotation and build tables; only the CLI imports it (other areas link into it
    through ``cultura.view.links``, which imports nothing)."""
    assert not _violations(lambda m, t: m.startswith("cultura.view") and
                           t.startswith(("cultura.annotate", "cultura.evaluate", "cultura.cli", "cultura.demo")))
    assert not _violations(lambda m, t: t.startswith("cultura.view") and t != "cultura.view.links" and
                           not m.startswith(("cultura.view", "cultura.cli")))


def test_only_commands_and_the_cli_use_the_console():
    """Library code returns data; the CLI layer (cli, console, demo, <area>/commands.py) prints it."""
    def rule(m, t):
        cli_layer = m in ("cultura.cli", "cultura.console", "cultura.demo", "cultura.__main__") or m.endswith("commands")
        return not cli_layer and t in ("cultura.cli", "cultura.console", "cultura.demo")
    assert not _violations(rule)


def test_project_is_the_composition_root_of_schemas():
    """The project imports core modules and each area's schema module, nothing else."""
    assert not _violations(lambda m, t: m == "cultura.project" and not (t.startswith(CORE) or t.endswith(".schema")
                                                                          or t in ("cultura.models", "cultura.evaluate",
                                                                                   "cultura.evaluate.suites")))


def test_suite_folders_import_only_evaluates_shared_modules():
    """A suite folder imports its own folder, evaluate's shared modules, models and core — not the runner,
    the report engine, another suite folder, annotate or the CLI. The social folder's portrait import reuses
    curate's image import (one blob-writer protocol)."""
    def rule(m, t):
        parts = m.split(".")
        if len(parts) < 4 or parts[1:3] != ["evaluate", "suites"] or parts[3] == "registry":
            return False
        if parts[-1] == "commands":  # the folder's CLI commands belong to the CLI layer
            return not t.startswith((".".join(parts[:4]), "cultura.console", *SHARED_EVALUATE, "cultura.models",
                                     *CORE, "cultura.evaluate.runner", "cultura.evaluate.report"))
        own = ".".join(parts[:4])
        allowed = (own, *SHARED_EVALUATE, "cultura.models", *CORE, "cultura.evaluate.suites")
        if m == own:  # a folder's __init__ lists its suites
            allowed = (*allowed,)
        if own == "cultura.evaluate.suites.social" and t == "cultura.curate.importers":
            return False
        if t in ("cultura.evaluate", "cultura.evaluate.suites"):
            return t == "cultura.evaluate.suites" and m != own
        return not t.startswith(allowed)
    assert not _violations(rule)


def _function_imports():
    for mod, (path, tree) in MODULES.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    yield mod, path, lines, node


def test_imports_inside_functions_only_defer_heavy_dependencies():
    bad = []
    for mod, path, lines, node in _function_imports():
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        heavy = node.__class__ is ast.Import or node.level == 0
        heavy = heavy and all(n == h or n.startswith(h + ".") for n in names for h in HEAVY if n == h or n.startswith(h + "."))
        heavy = heavy and all(any(n == h or n.startswith(h + ".") for h in HEAVY) for n in names)
        said = "#" in lines[node.lineno - 1] or lines[node.lineno - 2].strip().startswith("#")
        if not (heavy and said):
            bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not bad, "imports inside functions (hoist them, or defer a heavy dependency with a comment):\n" + \
        "\n".join(bad)


@pytest.mark.parametrize("path", ["cultura.evaluate.metrics", "cultura.evaluate.models", "cultura.annotate.agreement"])
def test_public_import_paths_keep_working(path):
    assert path in MODULES
