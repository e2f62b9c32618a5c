"""Export: deterministic, atomic, refusing a folder that is not empty, bad benchmarks in one sentence. (Loading
the formats with datasets: tests/integration/benchmark/test_export_loads_in_datasets.py.)"""
from __future__ import annotations

import hashlib
import json

import pytest
from click.testing import CliRunner

from cultura.cli import cli
from cultura.benchmark.build import build_benchmark
from cultura.benchmark.export import ExportError, export_benchmark
from tests.fakes.world import decide, make_world, mention_queries


def _digest(folder):
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def built(project):
    w = make_world(project, per_cell=2)
    s = w["images"][("bus", "JP")][0]
    decide(project, "relevance", s, value=4.5, country="JP")
    project.db["image_tags"].insert({"sha256": s, "tag": "bus", "score": 0.8, "source": "clip:x",
                                     "created_at": "2025"})
    mention_queries(project)
    # one rating among many links: the unrated ones are kept on purpose (the card says so)
    build_benchmark(project, "association", allow_unreviewed=True, per_pair=2, allow_unrated=True)
    build_benchmark(project, "descriptor", allow_unreviewed=True, allow_unrated=True)
    return project


def test_export_is_deterministic(built, tmp_path):
    export_benchmark(built, tmp_path / "a", benchmarks=["association@1"])
    export_benchmark(built, tmp_path / "b", benchmarks=["association@1"])
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    # a rebuild with the same seed gives identical data files (only the version differs)
    b2 = build_benchmark(built, "association", allow_unreviewed=True, per_pair=2, version=2, allow_unrated=True)
    export_benchmark(built, tmp_path / "c", benchmarks=[f"association@{b2['version']}"])
    da, dc = _digest(tmp_path / "a"), _digest(tmp_path / "c")
    for f in ("items.parquet", "candidates.parquet", "queries.parquet", "images.parquet"):
        assert da[f] == dc[f]


def test_refuses_non_empty_dir(built, tmp_path):
    d = tmp_path / "full"
    d.mkdir()
    (d / "keep.txt").write_text("x")
    with pytest.raises(ExportError, match="not an empty folder"):
        export_benchmark(built, d)
    assert sorted(p.name for p in d.iterdir()) == ["keep.txt"]
    assert not list(tmp_path.glob(".full.tmp-*"))
    (tmp_path / "empty").mkdir()
    export_benchmark(built, tmp_path / "empty", fmt="jsonl")
    assert (tmp_path / "empty" / "items.jsonl").is_file()


def test_failure_leaves_nothing(built, tmp_path):
    sha = built.db.execute("SELECT sha256 FROM benchmark_candidates LIMIT 1").fetchone()[0]
    (built.root / built.db["images"].get(sha)["path"]).unlink()
    with pytest.raises(ExportError, match="missing"):
        export_benchmark(built, tmp_path / "x")
    assert not (tmp_path / "x").exists() and not list(tmp_path.glob(".x.tmp-*"))


def test_bad_benchmark_and_cli(built, tmp_path):
    with pytest.raises(Exception, match="Unknown benchmark 'assoc'"):
        export_benchmark(built, tmp_path / "n", benchmarks=["assoc"])
    with pytest.raises(Exception, match="no version 9"):
        export_benchmark(built, tmp_path / "n", benchmarks=["association@9"])
    r = CliRunner().invoke(cli, ["--project", str(built.root), "export", str(tmp_path / "cli"),
                                 "--benchmark", "descriptor", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["benchmarks"] == ["descriptor@1"]
    r = CliRunner().invoke(cli, ["--project", str(built.root), "export", str(tmp_path / "cli")])
    assert r.exit_code == 1 and "not an empty folder" in r.output
