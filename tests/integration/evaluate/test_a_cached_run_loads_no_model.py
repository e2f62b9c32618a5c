"""An evaluation loads a model only to compute a vector: the model's identity comes from its files, so a run whose
vectors are all cached imports no torch, transformers or open_clip — nor scipy, scikit-learn, pandas or
statsmodels, whose statistics it computes in numpy (a start-up of seconds otherwise), through the Python API and
through ``cultura evaluate run`` alike — and gives the results the run that computed them gave. The identity
named from the files is the one the loaded model reports (the embedding cache's keys of the tiny random-init
models stay what they were)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests import REPO
from tests.fakes.benchmark_world import make_benchmarks
from tests.fakes.imported import cli_script, heavy_imported

RUN = """
import json, sys
from cultura.evaluate.runner import run_evaluation
from cultura.project import Project
from tests.fakes.imported import HEAVY

project = Project(sys.argv[1])
[rec] = run_evaluation(project, sys.argv[2], "association", options={"n_resamples": 50})
rows = [list(r) for r in project.db.conn.execute(
    'SELECT metric, value, ci_low, ci_high, n, "group", details FROM eval_results WHERE run_id = ? ORDER BY id',
    [rec.run_id])]
model_info = project.db.conn.execute("SELECT model, model_info FROM eval_runs WHERE id = ?", [rec.run_id]).fetchone()
heavy = sorted(m for m in HEAVY if m in sys.modules)
print(json.dumps({"status": rec.status, "rows": rows, "model": list(model_info), "heavy": heavy}))
"""


def _run(project, spec: str, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", RUN, str(project.root), spec], env=env,
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def env(tmp_path, monkeypatch):
    import os

    monkeypatch.setenv("CULTURA_CACHE_DIR", str(tmp_path / "user-cache"))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}


def test_a_cached_association_run_imports_no_model_library_and_gives_the_same_results(project, env):
    make_benchmarks(project, n_concepts=4, descriptor=False)
    project.close()
    first = _run(project, "openclip:cultura-tiny", env)
    assert first["status"] == "done" and first["rows"]
    assert "torch" in first["heavy"]  # the vectors were computed: the model was loaded
    again = _run(project, "openclip:cultura-tiny", env)
    assert again["status"] == "done"
    assert again["heavy"] == []
    assert again["rows"] == first["rows"]
    cli = subprocess.run([sys.executable, "-c", cli_script(), "--project", str(project.root),
                          "evaluate", "run", "--model", "openclip:cultura-tiny", "--suite", "association",
                          "--option", "n_resamples=50"], env=env, capture_output=True, text=True, timeout=600,
                         cwd=REPO)
    assert cli.returncode == 0, cli.stderr[-3000:]
    assert heavy_imported(cli.stderr) == []
    assert again["model"][0] == first["model"][0] == "openclip:cultura-tiny/random_init@seed0"
    assert json.loads(again["model"][1]) == json.loads(first["model"][1])


def test_a_model_named_from_its_files_has_the_identity_the_loaded_model_reports(tmp_path, monkeypatch):
    pytest.importorskip("open_clip")
    from cultura.models.embedders import get_embedder
    from cultura.models.embedders.deferred import DeferredEmbedder
    from cultura.models.embedders.openclip import config_identity, model_configs_dir

    monkeypatch.setenv("CULTURA_CACHE_DIR", str(tmp_path))
    config = tmp_path / "my-tiny.json"
    config.write_bytes((model_configs_dir() / "cultura-tiny.json").read_bytes())
    for spec, options in [("cultura-tiny", {}), ("cultura-tiny", {"seed": 3}), (str(config), {})]:
        loaded = get_embedder(f"openclip:{spec}", **options)
        assert config_identity(spec, **options) == loaded.identity
        eager = get_embedder(f"openclip:{spec}#text=@agnostic", **options)  # loaded once: its facts are kept
        lazy = get_embedder(f"openclip:{spec}#text=@agnostic", deferred=True, **options)
        assert isinstance(lazy, DeferredEmbedder) and not lazy.loaded
        assert lazy.identity == eager.identity and lazy.info == eager.info
        texts = ["a temple", "a market"]
        assert (lazy.embed_texts(texts) == eager.embed_texts(texts)).all() and lazy.loaded
    assert config_identity("ViT-B-32/openai") is None  # a hub tag: only open_clip finds its weights
    never_loaded = get_embedder("openclip:cultura-tiny", deferred=True, seed=7)
    assert not isinstance(never_loaded, DeferredEmbedder)  # no facts kept yet: built now
