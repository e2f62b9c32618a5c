"""The front door: ``import cultura`` is light, ``cultura.init``/``cultura.open`` give a Project whose handles are
the command line's groups — every command of those groups has its method (enumerated from the click tree, so a
new command without one fails here) — and a handle returns what the command prints."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

import cultura
from cultura.api import Project
from cultura.cli import cli
from cultura.errors import CulturaError
from tests.fakes.world import make_world
from tests.fakes.cli_tree import leaves

#: command path → the handle method that does it, where the words differ from ``group.command``
METHODS = {
    "build association": "benchmarks.build", "build descriptor": "benchmarks.build", "build list": "benchmarks.list",
    "build list-queries": "benchmarks.list_queries", "build queries": "benchmarks.queries",
    "build mention-queries": "benchmarks.mention_queries", "build set-query": "benchmarks.set_query",
    "build stats": "benchmarks.stats", "export": "benchmarks.export", "import 3xcm": "imports.threexcm",
    "evaluate cache size": "evaluate.cache_size", "evaluate cache clear": "evaluate.clear_cache",
    "view": "view.build", "status": "status", "config get": "get_config", "config set": "set_config",
}
#: the command groups the project's handles mirror, and the handle of each
HANDLES = {"concepts": "concepts", "images": "images", "annotate": "annotate", "build": "benchmarks",
           "export": "benchmarks", "import": "imports", "evaluate": "evaluate", "view": "view", "status": "",
           "config": ""}
#: methods with no command of their own (a command's option, or reading what the command line shows)
EXTRA = {"concepts.set_terms", "images.resolve_flags", "images.reopen_flags", "benchmarks.get", "evaluate.runs",
         "evaluate.samples", "evaluate.export_samples", "view.path"}


def _method(path: str) -> str:
    if path in METHODS:
        return METHODS[path]
    words = path.split()
    handle = HANDLES[words[0]]
    return ".".join([handle, *(w.replace("-", "_") for w in words[1:])])


def _resolve(p: Project, dotted: str):
    obj = p
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def test_import_cultura_loads_nothing_but_its_names():
    code = "import sys, cultura; print(sorted(m for m in sys.modules if m.startswith('cultura')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.replace("'", '"')) == ["cultura", "cultura.lazy"]


def test_every_command_of_the_mirrored_groups_has_its_method(project):
    p = cultura.open(project.root)
    paths = [" ".join(c) for c, _ in leaves() if c[0] in HANDLES]
    assert len(paths) > 60  # the whole tree, not a hand list
    missing = [f"cultura {c} -> p.{_method(c)}" for c in paths if not callable(_resolve_or_none(p, _method(c)))]
    assert not missing, "commands without a handle method:\n" + "\n".join(missing)
    # and every public method of a handle (and of its sub-handles: annotate.server, …) does a command's work,
    # or is one of the few listed extras
    wanted = {_method(c) for c in paths}
    extra = []
    for handle in sorted({h for h in HANDLES.values() if h}):
        extra += [m for m in _methods(getattr(p, handle), handle) if m not in wanted | EXTRA]
    assert not extra, f"handle methods that no command does: {extra}"
    p.close()


def _methods(obj, dotted: str):
    for name in dir(obj):
        if name.startswith("_") or name == "project":
            continue
        attr = getattr(obj, name)
        if hasattr(attr, "project") and type(attr).__module__.startswith("cultura.api"):
            yield from _methods(attr, f"{dotted}.{name}")
        elif callable(attr) or isinstance(getattr(type(obj), name, None), property):
            yield f"{dotted}.{name}"


def _resolve_or_none(p, dotted):
    try:
        return _resolve(p, dotted)
    except AttributeError:
        return None


def test_init_and_open(tmp_path, monkeypatch):
    p = cultura.init(tmp_path / "bench", countries="US,JP")
    assert isinstance(p, Project) and [c.code for c in p.countries] == ["US", "JP"]
    p.close()
    with pytest.raises(CulturaError, match="already exists"):
        cultura.init(tmp_path / "bench", countries=["US"])
    with pytest.raises(CulturaError, match=r"has no cultura.toml.*cultura.init\("):
        cultura.open(tmp_path / "elsewhere")
    monkeypatch.chdir(tmp_path / "bench")
    with cultura.open() as q:  # found from the working folder, as the command line finds it
        assert q.root == (tmp_path / "bench").resolve()


def test_a_handle_returns_what_the_command_prints(project):
    make_world(project, concepts=("bus", "rice"), per_cell=2)
    p = cultura.open(project.root)

    def cli_json(*args):
        res = CliRunner().invoke(cli, ["--project", str(project.root), *args, "--json"])
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)

    assert p.images.list(frame=False) == cli_json("images", "list")
    assert p.concepts.list(frame=False) == cli_json("concepts", "list")
    frame = p.images.list(country="JP")
    assert list(frame["sha256"]) == [r["sha256"] for r in cli_json("images", "list", "--country", "JP")]
    assert p.status() == cli_json("status")
    p.close()


def test_config_through_the_project(project):
    p = cultura.open(project.root)
    p.set_config("download.workers", 8)
    assert p.get_config("download.workers") == 8 and p.config.download.workers == 8
    assert "workers = 8" in (project.root / "cultura.toml").read_text()
    with pytest.raises(CulturaError, match="workers"):
        p.set_config("download.wokers", 8)
    p.close()


def test_progress_reaches_a_callable(project, tmp_path):
    from PIL import Image

    folder = tmp_path / "photos" / "JP" / "bus"
    folder.mkdir(parents=True)
    for i in range(3):
        Image.new("RGB", (64 + i, 64), (40 * i, 90, 200)).save(folder / f"{i}.jpg")
    p = cultura.open(project.root)
    p.concepts.add("bus")
    events = []
    p.images.search(f"folder:{tmp_path / 'photos'}", progress=events.append)
    p.images.download(progress=events.append)
    downloads = [e for e in events if e.stage == "download"]
    assert downloads[-1].finished and downloads[-1].done == downloads[-1].total == 3
    assert downloads[-1].info == {"ok": 3}
    p.close()
