"""What ships: the wheel and the sdist built from the working tree, the wheel installed without extras into a fresh
virtualenv, and that install curating real photographs.

The wheel is the tree under ``src/cultura`` (every module, data file and template, ``py.typed``), nothing else:
no test, performance script or build script. The fresh virtualenv gets exactly the distributions the core
requires (``[project.dependencies]`` of pyproject.toml and what they require in turn, read from the installed
packages' metadata — offline, no index), linked from this venv, then the wheel installed by pip. Through that
venv's ``cultura`` command, on real photographs (scikit-image and scikit-learn's samples, with planted copies):
init → search (``folder:`` and a served ``urls:`` list) → download → dedup → status; and a command that needs the
``models`` extra says which ``pip install`` to run.
"""
from __future__ import annotations

import importlib.metadata as md
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests import REPO

PKG = REPO / "src" / "cultura"
NOT_IN_CORE = ("torch", "open_clip", "transformers", "sentence_transformers", "matplotlib", "umap", "ray")


def core_closure() -> dict[str, md.Distribution]:
    """The installed distributions the core needs: its requirements, transitively, extras as asked."""
    core = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]["dependencies"]
    dists: dict[str, md.Distribution] = {}
    extras_of: dict[str, set[str]] = {}
    todo = [Requirement(r) for r in core]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        new = set(req.extras) - extras_of.get(name, set())
        if name in dists and not new:
            continue
        extras_of.setdefault(name, set()).update(req.extras)
        dist = dists.setdefault(name, md.distribution(req.name))
        for sub in map(Requirement, dist.requires or []):
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in ("", *extras_of[name])):
                todo.append(sub)
    return dists


def _working_tree() -> list[str]:
    """The files of the working tree as a fresh clone (plus uncommitted ones) would have them."""
    out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         capture_output=True, check=True).stdout
    return [f for f in out.decode().split("\0") if f and (REPO / f).is_file()]


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    """The wheel and the sdist, built (PEP 517, no isolation: offline) from a copy of the working tree."""
    root = tmp_path_factory.mktemp("build")
    tree = root / "tree"
    for f in _working_tree():
        (tree / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, tree / f)
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--sdist", "--outdir",
                    str(root / "dist"), str(tree)], check=True, capture_output=True, timeout=600)
    return {"wheel": next((root / "dist").glob("*.whl")), "sdist": next((root / "dist").glob("*.tar.gz")),
            "tree": tree}


def _shipped_source() -> set[str]:
    """Every file of the package in the working tree, as a path inside the wheel (``cultura/...``)."""
    return {f[len("src/"):] for f in _working_tree() if f.startswith("src/cultura/") and "__pycache__" not in f}


def test_the_wheel_is_the_package_tree(dists):
    names = set(zipfile.ZipFile(dists["wheel"]).namelist())
    package = {n for n in names if not n.startswith("cultura-")}
    assert package == _shipped_source()  # every module, data file and template; nothing else
    assert "cultura/py.typed" in package
    assert {n.split("/")[0] for n in names} == {"cultura", f"cultura-{md.version('cultura')}.dist-info"}


def test_the_sdist_builds_the_same_wheel_and_ships_no_tests(dists, tmp_path):
    with tarfile.open(dists["sdist"]) as tar:
        members = [m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name]
        tar.extractall(tmp_path, filter="data")
    assert not [m for m in members if m.startswith(("tests/", "perf/", "scripts/"))]
    assert {m[len("src/"):] for m in members if m.startswith("src/cultura/")} >= _shipped_source()
    unpacked = next(p for p in tmp_path.iterdir() if p.is_dir())
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(tmp_path / "dist"),
                    str(unpacked)], check=True, capture_output=True, timeout=600)
    again = zipfile.ZipFile(next((tmp_path / "dist").glob("*.whl"))).namelist()
    assert sorted(again) == sorted(zipfile.ZipFile(dists["wheel"]).namelist())


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory, dists):
    """A fresh virtualenv with the core's dependencies (linked from this venv) and the wheel, installed by pip."""
    root = tmp_path_factory.mktemp("core-venv")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root / "venv")
    python = root / "venv" / "bin" / "python"
    site = Path(subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                        text=True).strip())
    for dist in core_closure().values():
        base = Path(dist.locate_file(""))
        for f in dist.files or []:
            if f.parts[0] == ".." or f.suffix == ".pyc":  # scripts outside site-packages; bytecode is remade
                continue
            dest = site / f
            dest.parent.mkdir(parents=True, exist_ok=True)
            if not dest.exists():
                dest.symlink_to(base / f)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    "--quiet", str(dists["wheel"])], check=True, capture_output=True, timeout=600)
    return python


def test_the_installed_wheel_is_what_runs(core_venv):
    code = ("import cultura, cultura.cli, importlib.util as u; print(cultura.__file__); "
            "print(u.find_spec('cultura.tests') is None and u.find_spec('tests') is None)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where, no_tests = subprocess.check_output([str(core_venv), "-c", code], text=True, cwd="/", env=env).split()
    assert "site-packages" in where and not where.startswith(str(REPO))
    assert no_tests == "True"
    assert (core_venv.parent / "cultura").exists()  # the console script


def _cultura(python, *args, cwd=None, check=True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CULTURA_PROJECT")}
    proc = subprocess.run([str(python.parent / "cultura"), *args], cwd=cwd or python.parent, env=env,
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    if check:
        assert proc.returncode == 0, f"cultura {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def _photos() -> dict[str, bytes]:
    """Real photographs (JPEG) with two planted copies: one resized, one re-encoded at low quality."""
    from PIL import Image
    from skimage import data
    from sklearn.datasets import load_sample_images

    arrays = {"astronaut": data.astronaut(), "coffee": data.coffee(), "chelsea": data.chelsea(),
              "rocket": data.rocket(), **{f"sample{i}": a for i, a in enumerate(load_sample_images().images)}}
    out = {}
    for name, a in arrays.items():
        buf = io.BytesIO()
        Image.fromarray(a).convert("RGB").save(buf, "JPEG", quality=90)
        out[name] = buf.getvalue()
    im = Image.open(io.BytesIO(out["coffee"]))
    buf = io.BytesIO()
    im.resize((im.width // 2, im.height // 2)).save(buf, "JPEG", quality=85)
    out["coffee-resized"] = buf.getvalue()
    buf = io.BytesIO()
    Image.open(io.BytesIO(out["chelsea"])).save(buf, "JPEG", quality=30)
    out["chelsea-q30"] = buf.getvalue()
    return out


def test_core_venv_has_no_extra(core_venv):
    code = "import importlib.util as u, json; print(json.dumps({m: u.find_spec(m) is not None for m in %r}))"
    found = json.loads(subprocess.check_output([str(core_venv), "-c", code % (NOT_IN_CORE,)], text=True))
    assert found == {m: False for m in NOT_IN_CORE}
    assert "cultura" in subprocess.check_output([str(core_venv), "-c", "import cultura.cli; print(cultura.__name__)"],
                                                text=True)


def test_core_install_curates_real_photos(core_venv, tmp_path):
    from tests.fakes.drawn_world import serve

    photos = _photos()
    www = tmp_path / "www"
    www.mkdir()
    folder = tmp_path / "folder"
    for name in ("astronaut", "rocket", "sample0"):
        (folder / "JP" / "street").mkdir(parents=True, exist_ok=True)
        (folder / "JP" / "street" / f"{name}.jpg").write_bytes(photos[name])
    for name in ("coffee", "coffee-resized", "chelsea", "chelsea-q30", "sample1"):
        (www / f"{name}.jpg").write_bytes(photos[name])
    proj = tmp_path / "proj"
    _cultura(core_venv, "init", str(proj), "--countries", "US,JP")
    _cultura(core_venv, "concepts", "add", "street", "cat", "coffee", cwd=proj)
    with serve(www) as host_port:
        from cultura.project import Project

        project = Project(proj)  # the local server is on loopback: allow exactly its host:port
        project.config.download.allow_hosts = [host_port]
        project.save_config()
        project.close()
        rows = [{"url": f"http://{host_port}/{n}.jpg", "concept": c, "country": "US"}
                for n, c in (("coffee", "coffee"), ("coffee-resized", "coffee"), ("chelsea", "cat"),
                             ("chelsea-q30", "cat"), ("sample1", "street"))]
        rows.append({"url": f"http://{host_port}/missing.jpg", "concept": "cat", "country": "US"})
        urls = tmp_path / "urls.jsonl"
        urls.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
        _cultura(core_venv, "images", "search", "--provider", f"urls:{urls}", cwd=proj)
        _cultura(core_venv, "images", "search", "--provider", f"folder:{folder}", cwd=proj)
        download = json.loads(_cultura(core_venv, "images", "download", "--json", cwd=proj).stdout)
    assert download["by_status"] == {"downloaded": 8, "failed": 1}, download
    dedup = _cultura(core_venv, "images", "dedup", "--json", cwd=proj)
    assert dedup.returncode == 0
    clusters = json.loads(_cultura(core_venv, "images", "clusters", "--json", cwd=proj).stdout)
    status = json.loads(_cultura(core_venv, "status", "--json", cwd=proj).stdout)
    assert status["stages"]["images"] == {"ok": 8}
    assert status["failures"]["downloads"] == {"http_404": 1}
    # the two planted copies are found by each hash, each with its original, and nothing else is clustered
    assert sorted((c["method"], int(c["size"])) for c in clusters) == [("dhash", 2)] * 2 + [("phash", 2)] * 2, clusters


def test_a_command_needing_an_extra_names_it(core_venv, tmp_path):
    proj = tmp_path / "proj"
    _cultura(core_venv, "init", str(proj), "--countries", "US,JP")
    proc = _cultura(core_venv, "images", "tag", "--method", "clip", "--model", "openclip:cultura-tiny",
                    cwd=proj, check=False)
    assert proc.returncode != 0
    assert "pip install 'cultura[models]'" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
