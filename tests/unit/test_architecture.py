"""The house stays as drawn in docs/architecture.md: the library under src/cultura/, the command line above it
(cultura.cli, the only package that imports click or rich), imports one way between the areas, no import cycle,
no import inside a function unless it defers a heavy optional dependency (said in a comment), and every table
read and written with SQL only by its owning area. A small AST check over the package's own files (no import
is executed)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests import REPO

PKG = REPO / "src" / "cultura"
#: Optional or heavy dependencies a function may import on first use (with a comment saying so).
HEAVY = ("torch", "transformers", "open_clip", "umap", "matplotlib", "faiss", "sentence_transformers",
         "tokenizers", "huggingface_hub", "ray", "label_studio_sdk", "playwright", "datasets", "img2dataset",
         "openai", "ddgs", "imagededup", "pandas", "pyarrow", "statsmodels", "mlcroissant", "geopandas",
         "cartopy", "plotly", "skimage", "cv2", "sklearn", "scipy", "krippendorff", "safetensors", "crowdkit",
         "torchvision", "PIL.ImageFont")
CORE = ("cultura.db", "cultura.config", "cultura.errors", "cultura.countries", "cultura.templates", "cultura.redact",
        "cultura.cultures", "cultura.lazy", "cultura.names", "cultura.progress",
        "cultura.data", "cultura.executor", "cultura.pixels", "cultura.view.links", "cultura.bounds",
        "cultura.files")
SHARED_EVALUATE = ("cultura.evaluate.common", "cultura.evaluate.data", "cultura.evaluate.stats",
                   "cultura.evaluate.stats_extra", "cultura.evaluate.reportkit", "cultura.evaluate.metrics",
                   "cultura.evaluate.suites.registry", "cultura.evaluate.schema")
#: The layers, bottom up: a module may import its own layer and those below it, never one above. The areas of
#: one floor (evaluate and view) do not import each other.
LAYERS = {
    "core": 0, "project": 1, "models": 2, "curate": 3, "annotate": 4, "benchmark": 5, "evaluate": 6, "view": 6,
    "api": 7, "cli": 8,
}
#: The libraries of the terminal: only the command line draws.
TERMINAL = ("click", "rich")


def _modname(path: Path) -> str:
    parts = list(path.relative_to(PKG).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["cultura", *parts])


def _modules() -> dict[str, tuple[Path, ast.Module]]:
    return {_modname(p): (p, ast.parse(p.read_text(encoding="utf-8"))) for p in PKG.rglob("*.py")}


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
    package) and ``"cultura.cli.images"`` (the CLI's command modules) are edges of the graph too."""
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


def _layer(mod: str) -> str:
    """The layer of a module: core, project, models, an area (curate, annotate, benchmark, evaluate, view), the
    front door (api: ``cultura`` itself and ``cultura.api``) or the command line (cli)."""
    if mod.startswith(CORE):
        return "core"
    if mod in ("cultura", "cultura.api"):
        return "api"
    if mod == "cultura.__main__":
        return "cli"
    parts = mod.split(".")
    return parts[1] if parts[1] in LAYERS else "core"


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


def test_every_module_has_a_layer():
    assert not [m for m in MODULES if _layer(m) not in LAYERS]


def test_imports_run_down_the_layers():
    """core ← project ← models ← curate ← annotate ← benchmark ← evaluate, view ← api ← cli: nothing imports a
    layer above its own, and evaluate and view do not import each other. The schema modules are the one
    exception, by design: the project (the composition root) lists every area's migration set."""
    def rule(m, t):
        lm, lt = _layer(m), _layer(t)
        if m == "cultura.project" and t.endswith(".schema"):
            return False
        return LAYERS[lt] > LAYERS[lm] or (LAYERS[lt] == LAYERS[lm] and lt != lm)
    assert not _violations(rule)


def test_view_is_imported_only_by_the_front_door_and_the_cli():
    """Other areas link into the view through ``cultura.view.links`` (core: it imports nothing)."""
    assert not _violations(lambda m, t: t.startswith("cultura.view") and t != "cultura.view.links" and
                           _layer(m) not in ("view", "api", "cli"))


def _terminal_imports():
    for mod, (path, tree) in MODULES.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for n in names:
                if n.split(".")[0] in TERMINAL:
                    yield mod, f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}"


def test_only_the_cli_imports_click_or_rich():
    """The library returns data and reports progress through a callback (:mod:`cultura.progress`); drawing on a
    terminal is the command line's job."""
    bad = [where for mod, where in _terminal_imports() if _layer(mod) != "cli"]
    assert not bad, "click/rich outside cultura.cli:\n" + "\n".join(bad)


def test_the_terminal_check_sees_the_cli_itself():
    """The check above can fail: the command line does import click and rich."""
    assert {m for m, _ in _terminal_imports()} >= {"cultura.cli.main", "cultura.cli.console"}


def test_project_is_the_composition_root_of_schemas():
    """The project imports core modules and each area's schema module, nothing else."""
    assert not _violations(lambda m, t: m == "cultura.project" and not (t.startswith(CORE) or t.endswith(".schema")
                                                                          or t in ("cultura.models", "cultura.evaluate",
                                                                                   "cultura.evaluate.suites")))


def test_suite_folders_import_only_evaluates_shared_modules():
    """A suite folder imports its own folder, evaluate's shared modules, the areas below evaluate (whose
    functions own the tables a suite reads: the images, the decisions, the benchmarks) and core — not the
    runner, the report engine, another suite folder, the view or the CLI."""
    def rule(m, t):
        parts = m.split(".")
        if len(parts) < 4 or parts[1:3] != ["evaluate", "suites"] or parts[3] == "registry":
            return False
        own = ".".join(parts[:4])
        below = tuple(f"cultura.{a}" for a, n in LAYERS.items() if n < LAYERS["evaluate"] and a != "core")
        allowed = (own, *SHARED_EVALUATE, *below, *CORE, "cultura.evaluate.suites")
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
            bad.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    assert not bad, "imports inside functions (hoist them, or defer a heavy dependency with a comment):\n" + \
        "\n".join(bad)


@pytest.mark.parametrize("path", ["cultura.evaluate.metrics", "cultura.evaluate.models", "cultura.annotate.agreement"])
def test_public_import_paths_keep_working(path):
    assert path in MODULES


def _project_parameters():
    for mod, (path, tree) in MODULES.items():
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = fn.args
                for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                    if arg.arg == "project":
                        yield f"{path.relative_to(REPO)}:{fn.lineno} {fn.name}", arg.annotation


def test_every_project_parameter_is_typed_as_a_project():
    """An editor (and the type checker run on the public API) knows what ``project`` is in every signature."""
    params = list(_project_parameters())
    assert len(params) > 200  # the library's functions take the project first
    bad = [where for where, ann in params if ann is None or ast.unparse(ann) not in ("Project", "Project | None")]
    assert not bad, "untyped project parameters:\n" + "\n".join(bad)


# ------------------------------------------------------------------------------------------ table owners
#: The tables of the core schema (``db/schema.py``) by owning area: the first migration set made them for every
#: area before the areas had schemas of their own. Core tables (``core``) are infrastructure any area may use.
CORE_SCHEMA_OWNERS = {
    "core": "meta countries runs change_counters",
    "models": "llm_calls embeddings",
    "curate": "concepts concept_examples terms queries searches candidates search_results images image_links "
              "dedup_runs dup_clusters dup_members dedup_state image_flags image_tags image_tag_status "
              "ingest_rejects blob_checks blob_recheck benchmark_queries candidate_url_sources",
    "annotate": "decisions",
    "benchmark": "benchmarks benchmark_items benchmark_candidates",
}
#: Tables an area's migration set created for another owner (a migration cannot move between sets once
#: applied): the import log and the culture labels are infrastructure of every area (``cultura.cultures`` is
#: core); the captions, the LLM-bias entities and contexts are curated data (written by curation's importers,
#: reviewed by annotation, which sits below the suites).
REHOMED = {"import_rows": "core", "culture_labels": "core", "captions": "curate", "entities": "curate",
           "contexts": "curate"}
_CREATE = re.compile(r"\bCREATE\s+(?:TABLE|VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?\[?(\w+)")
_SQL_TABLE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE(?:\s+IF\s+(?:NOT\s+)?EXISTS)?|VIEW(?:\s+IF\s+NOT\s+"
                        r"EXISTS)?)\s+\[?(\w+)\]?")


def _area(mod: str) -> str:
    """The area owning a module's tables: ``core``, ``project``, an area, or a suite folder
    (``evaluate.suites.<name>``, part of evaluate)."""
    layer = _layer(mod)
    parts = mod.split(".")
    if layer == "evaluate" and len(parts) > 3 and parts[2] == "suites" and parts[3] != "registry":
        return ".".join(parts[1:4])
    return layer


def table_owners() -> dict[str, str]:
    """Table → owning area: the area whose ``schema.py`` creates it, the map above for the core schema."""
    owners: dict[str, str] = {}
    for mod, (path, _) in MODULES.items():
        if path.name == "schema.py" and _area(mod) != "core":
            for t in _CREATE.findall(path.read_text(encoding="utf-8")):
                owners.setdefault(t, _area(mod))
    core_schema = set(_CREATE.findall((PKG / "db" / "schema.py").read_text(encoding="utf-8")))
    mapped = {t: area for area, names in CORE_SCHEMA_OWNERS.items() for t in names.split()}
    assert core_schema <= set(mapped), f"core schema tables without an owner: {sorted(core_schema - set(mapped))}"
    return {**owners, **mapped, **REHOMED}


def _docstrings(tree: ast.Module) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body:
            first = n.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _is_db(node: ast.AST) -> bool:
    """``db``, ``conn``, ``x.db``: what names a database (sqlite-utils) in the library."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name in ("db", "conn", "database")


def table_references(source: str, tree: ast.Module, tables) -> list[tuple[int, str]]:
    """``(line, table)`` for every table a module names in SQL (FROM, JOIN, INTO, UPDATE, CREATE/ALTER TABLE,
    in any string but a docstring; f-strings by their literal parts) or as ``db["t"]`` / ``db.table("t")``."""
    skip = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        if text is not None:
            for t in {m.group(1) for m in _SQL_TABLE.finditer(text)} & set(tables):
                segment = ast.get_source_segment(source, node) or ""   # the line of the name, not the string's
                at = re.search(rf"\b{t}\b", segment)
                out.append((node.lineno + (segment[:at.start()].count("\n") if at else 0), t))
            continue
        key = None
        if isinstance(node, ast.Subscript) and _is_db(node.value):
            key = node.slice
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "table"
              and _is_db(node.func.value) and node.args):
            key = node.args[0]
        if isinstance(key, ast.Constant) and key.value in tables:
            out.append((node.lineno, key.value))
    return sorted(set(out))


def _foreign_references(modules=None) -> list[str]:
    """``file:line table (owner)`` for every table a library module names outside its owning area."""
    owners = table_owners()
    bad = []
    for mod, (path, tree) in sorted((modules or MODULES).items()):
        area = _area(mod)
        if area in ("api", "cli") or path.name == "schema.py":
            continue
        where = path.relative_to(REPO) if path.is_relative_to(REPO) else path.name
        for line, t in table_references(path.read_text(encoding="utf-8"), tree, owners):
            owner = owners[t]
            if owner in ("core", area) or area.startswith(owner + "."):
                continue
            bad.append(f"{where}:{line} {t} ({owner})")
    return bad


def test_a_table_is_read_and_written_by_its_owner_only():
    """Every table has one owning area (the area whose schema creates it; the core schema's by the map above).
    Only the owner's modules name it in SQL; another area calls the owner's functions, so the import rules see
    every dependency between areas. Core tables are infrastructure any area may use; a suite folder is part of
    evaluate (it may read evaluate's own tables); the schema modules (the migration history) and the two doors
    (api, cli: they call the library) are not scanned."""
    bad = _foreign_references()
    assert not bad, "tables used outside their owning area (call the owner's functions):\n" + "\n".join(bad)


def test_the_table_scan_sees_references(tmp_path):
    """The scan above can fail: it finds the owners' own SQL, and a foreign reference planted in a module."""
    owners = table_owners()
    assert owners["decisions"] == "annotate" and owners["kb_entities"] == "evaluate.suites.attribution"
    found = {t for mod, (path, tree) in MODULES.items() if _area(mod) == "curate"
             for _, t in table_references(path.read_text(encoding="utf-8"), tree, owners)}
    assert {"images", "candidates", "dup_clusters", "image_flags", "concepts"} <= found
    planted = tmp_path / "planted.py"
    planted.write_text('"""Not SQL: rows FROM decisions in a docstring."""\n'
                       'def f(db, x):\n'
                       '    x["decisions"]\n'
                       '    db.execute("SELECT label FROM decisions WHERE kind = ?", ["filter"])\n'
                       '    db["benchmarks"].insert({})\n'
                       '    return db.execute(f"""SELECT 1\n    FROM eval_runs WHERE id = {x}""")\n')
    tree = ast.parse(planted.read_text())
    assert table_references(planted.read_text(), tree, owners) == [(4, "decisions"), (5, "benchmarks"),
                                                                    (7, "eval_runs")]
    as_curation = {"cultura.curate.planted": (planted, tree)}
    assert _foreign_references(as_curation) == ["planted.py:4 decisions (annotate)",
                                                "planted.py:5 benchmarks (benchmark)",
                                                "planted.py:7 eval_runs (evaluate)"]
    as_annotation = {"cultura.annotate.planted": (planted, tree)}
    assert _foreign_references(as_annotation) == ["planted.py:5 benchmarks (benchmark)",
                                                  "planted.py:7 eval_runs (evaluate)"]
