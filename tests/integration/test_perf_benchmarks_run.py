"""Every benchmark of perf/ that compares cultura with a peer or a goal runs end to end at a tiny size, so none can
rot (a renamed function, a changed summary key or table, a peer's option): each prints what it claims to measure.
Nothing here is timed: the exit status and the lines each prints are checked, never the numbers."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests import REPO

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]), "HF_HUB_OFFLINE": "1",
       "TRANSFORMERS_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}


def _bench(name: str, *args: str, tmp_path) -> str:
    proc = subprocess.run([sys.executable, str(REPO / "perf" / name), *args], env=ENV, capture_output=True,
                          text=True, timeout=900, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-3000:]  # 1: a goal not met, not a crash
    return proc.stdout


def test_startup_benchmark_runs_with_its_peer_in_another_venv(tmp_path):
    out = _bench("bench_startup.py", "--rounds", "1", "--cultura", f"{sys.executable} -m cultura",
                 "--peers-python", str(tmp_path / "no-venv" / "bin" / "python"), tmp_path=tmp_path)
    assert "measuring cultura alone" in out
    assert "cultura --help" in out and "cultura status" in out and "load average" in out


def test_download_benchmark_runs_and_counts_every_process(tmp_path):
    pytest.importorskip("skimage")
    out = _bench("bench_download.py", "--n", "12", "--workers", "4", "--rounds", "1", "--latency", "0.05,0.2",
                 "--decode-processes", "1", "--peers-python", str(tmp_path / "no-venv" / "bin" / "python"),
                 "--no-check", tmp_path=tmp_path)
    assert "cultura and the control client only" in out
    # each peer setting's cultura counterpart at each latency: --check decode, and --check header with the
    # CPU dedup then spends decoding and hashing what it stored
    assert "-- latency-bound" in out and out.count("bench_download [photos") == 4
    assert out.count("--check decode") == 2 and out.count("--check header") == 2
    assert "when dedup decodes and hashes them" in out
    assert "CPU/image" in out and "(every process)" in out and "load average" in out


def test_cached_evaluation_benchmark_runs(tmp_path):
    pytest.importorskip("open_clip")
    out = _bench("bench_cached_evaluation.py", "--rounds", "1", "--concepts", "2", tmp_path=tmp_path)
    assert "first run (fills the cache)" in out and "imported: torch" in out
    assert "cached run, median of 1" in out and "imported: none" in out


def test_dedup_quality_benchmark_scores_every_set(tmp_path):
    pytest.importorskip("skimage.data")
    out = _bench("bench_dedup_quality.py", "--photos", "2", "--faces", "4", "--realistic", "30", tmp_path=tmp_path)
    for name in ("== transforms", "== harder", "== lookalikes", "== realistic", "done when:", "load average"):
        assert name in out, out
    assert "[met] look-alikes: precision >= 0.99" in out, out
    assert "not measured" in out           # no peer python given: the peer checks say so instead of passing


def test_dedup_1m_benchmark_runs_on_real_photo_hash_statistics(tmp_path):
    pytest.importorskip("skimage.data")
    out = _bench("bench_dedup_1m.py", "--images", "3000", "--concepts", "20", "--skip-wide", "--dir",
                 str(tmp_path / "p"), tmp_path=tmp_path)
    for name in ("confirm_pairs", "hash_search", "end to end", "CPU time", "load average", "cluster sizes",
                 "largest", "no-op rerun", "real crops, different photographs", "real crops, same photograph",
                 "this project", "uniform random bits", "the aligned look on real pictures"):
        assert name in out, out


@pytest.mark.labelstudio
def test_simulate_and_pull_benchmark_runs_on_servers_of_their_own(tmp_path):
    out = _bench("bench_annotate_simulate_pull.py", "3", tmp_path=tmp_path)
    for key in ('"simulate_per_request"', '"simulate_bulk"', '"pull_nochange_incremental"', '"simulate_speedup"',
                '"nochange_pull_speedup"', '"wall_s"', '"cpu_s"'):
        assert key in out, out


def test_adaptive_overlap_benchmark_prints_every_arm_with_its_spread_and_the_goals(tmp_path):
    pytest.importorskip("crowdkit")
    out = _bench("bench_adaptive_overlap.py", "--items", "96", "--seeds", "2", "--waves", "2", tmp_path=tmp_path)
    for line in ("fixed 3 ", "adaptive ", "adaptive first=2 ", "accuracy_dawid_skene", "share_of_fixed", " ± ",
                 "done when:", "of fixed 3 on every seed", "fixed 3 Dawid-Skene"):
        assert line in out, out
