"""docs/python-api.md runs: its Python blocks, in order, as one script (a notebook's cells), against a real Label
Studio started by the page itself; then the project it leaves is what the page says it built."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from cultura.annotate.server import adopt_seed, find_executable, seed_cache
from tests import REPO
from tests.fakes.labelstudio import SEED

DOC = REPO / "docs" / "python-api.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text("utf-8"), flags=re.S)


def test_the_page_has_the_days_blocks():
    text = "\n".join(blocks())
    for call in ("cultura.init(", "p.images.download(", "p.annotate.push(", "p.benchmarks.build(",
                 "p.benchmarks.export(", "p.evaluate.run(", "p.evaluate.report(", "cultura.open("):
        assert call in text, call


@pytest.mark.labelstudio
def test_every_block_of_the_python_api_page_runs(labelstudio, tmp_path, monkeypatch):
    # the page's Label Studio starts from cultura's cache of a migrated database (as on a machine where one
    # project already started one): seconds instead of a minute of migrations
    cache = tmp_path / "cache"
    monkeypatch.setenv("CULTURA_CACHE_DIR", str(cache))
    seeded = seed_cache(find_executable())
    if seeded is not None and (SEED / "label_studio.sqlite3").exists():
        seeded.mkdir(parents=True)
        adopt_seed(SEED, seeded)
    script = tmp_path / "day.py"
    script.write_text("\n\n".join(blocks()), "utf-8")
    # datasets keeps what it loaded by content: an earlier run's cache of an identical export would hand back
    # image paths of that run's (deleted) folder
    env = {**os.environ, "CULTURA_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(tmp_path / "hf-datasets")}
    env.pop("CULTURA_PROJECT", None)
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run([sys.executable, str(script)], cwd=work, env=env, capture_output=True, text=True,
                          timeout=1200, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    assert "{'downloaded': 27}" in proc.stdout

    check = ("import cultura, json; p = cultura.open('mybench'); "
             "print(json.dumps({'benchmarks': sorted(f\"{b['name']}@{b['version']}\" for b in "
             "p.benchmarks.list(frame=False)), 'suites': sorted({r['suite'] for r in p.evaluate.results("
             "frame=False)}), 'decisions': p.status()['stages']['decisions'], "
             "'server': p.annotate.server.status()['running']}))")
    state = json.loads(subprocess.run([sys.executable, "-c", check], cwd=work, env=env, capture_output=True,
                                      text=True, check=True).stdout)
    assert state["benchmarks"] == ["association@1", "descriptor@1"]
    assert state["suites"] == ["association", "descriptor", "prevalence"]
    assert set(state["decisions"]) >= {"filter", "dedup", "relevance"}
    assert state["server"] is False  # the page stopped what it started
    assert (work / "mybench" / "reports" / "evaluation.html").is_file()
    assert (work / "mybench" / "reports" / "view" / "index.html").is_file()
    assert (work / "export" / "README.md").is_file()
