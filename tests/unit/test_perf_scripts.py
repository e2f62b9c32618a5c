"""The peer-comparison benchmarks compute what they claim: the plain faiss baseline and cultura's
search give identical pairs, the real-statistics hashes keep the real pHashes' bit biases, the quality
benchmark groups by connected components. Nothing here is timed."""
from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from cultura.curate import hashing
from tests import REPO

BENCH = REPO / "perf"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(BENCH))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(BENCH))
    return mod


def test_plain_faiss_baseline_finds_the_pairs_cultura_finds():
    b = load("bench_hash_search")
    for n in (300, 25_000):                       # brute force, then the pigeonhole search
        h = b.planted_hashes(n, 10, seed=n)
        ours = hashing.hamming_pairs(h, 10)
        assert b.as_set(b.faiss_pairs(h, 10)) == b.as_set(ours) and len(ours) >= n // 200


def test_real_like_hashes_keep_the_bit_frequencies_of_real_phashes():
    pytest.importorskip("skimage.data")
    b = load("bench_hash_search")
    sample = b.real_phash_sample()
    freq = np.unpackbits(sample.astype(">u8").view(np.uint8).reshape(-1, 8), axis=1).mean(axis=0)
    h = b.real_like_hashes(20_000, 10, sample=sample)
    got = np.unpackbits(h.astype(">u8").view(np.uint8).reshape(-1, 8), axis=1).mean(axis=0)
    assert np.abs(got - freq).max() < 0.03
    assert freq.max() > 0.9 or freq.min() < 0.1         # real pHash bits are biased (uniform: all ~0.5)
    assert len(np.unique(h)) > 0.95 * len(h)
    ours = hashing.hamming_pairs(h, 10)
    assert b.as_set(b.faiss_pairs(h, 10)) == b.as_set(ours)


def test_quality_benchmark_groups_by_connected_components_and_scores_pairs():
    q = load("bench_dedup_quality")
    groups = q.components([("a", "b"), ("b", "c"), ("x", "y")], ["a", "b", "c", "d", "x", "y"])
    assert sorted(map(sorted, groups)) == [["a", "b", "c"], ["x", "y"]]
    from tests.fakes import real_photos

    owner = {"a": "p", "b": "p", "c": "q", "x": "r", "y": "r"}
    kind = {"a": "original", "b": "mirror", "c": "original", "x": "original", "y": "mirror"}
    s = real_photos.pair_scores(owner, kind, [{"a", "b", "c"}])
    assert s["recall"] == 0.5 and s["precision"] == pytest.approx(1 / 3) and s["per_transform"]["mirror"] == 0.5
