"""The multi-index hash search finds exactly the pairs brute force finds, on hashes with the statistics of
real photographs: pHash views of crops of real photographs (biased bits: the DC-sign bit is constant;
correlated views), bootstrapped with a few bits changed each, so that many codes have near neighbours
around the threshold, plus exact duplicates. Each test runs with both walks that verify a band's candidates:
numpy's, and the compiled one (``cultura[fast]``, numba) a large search uses where it is installed."""
from __future__ import annotations

import numpy as np
import pytest

from cultura.curate import hash_search, hashing


@pytest.fixture(params=["numpy", "compiled"])
def walk(request, monkeypatch):
    """Which walk verifies the candidates: the compiled one for every size, or numpy's."""
    if request.param == "compiled":
        pytest.importorskip("numba")
        monkeypatch.setattr(hash_search, "COMPILED_MIN_CODES", 0)
        monkeypatch.setenv(hash_search.COMPILED_ENV, "1")
        assert hash_search.compiled_walk(1)
    else:
        monkeypatch.setenv(hash_search.COMPILED_ENV, "0")
        assert not hash_search.compiled_walk(10**9)
    return request.param


@pytest.fixture(scope="module")
def real_views() -> np.ndarray:
    """``(3000, 5)`` pHash views: 40 crops of real photographs, each drawn 75 times with 0-12 of its bits
    changed (one change for all five views of a drawn image, as a re-encoded copy changes them together)."""
    pytest.importorskip("skimage.data")
    from tests.fakes import real_photos

    rng = np.random.default_rng(3)
    crops = real_photos.random_crops(list(real_photos.photos().values()), 40, rng)
    base = hashing.hash_images(crops, workers=1).views()
    assert not base.size or np.all(base[:, 0] >> np.uint64(63) == base[0, 0] >> np.uint64(63))  # a constant bit
    draw = rng.integers(0, len(base), 3000)
    flips = np.zeros(3000, dtype=np.uint64)
    for _ in range(12):
        on = rng.random(3000) < 0.45
        flips[on] ^= np.uint64(1) << rng.integers(0, 64, int(on.sum())).astype(np.uint64)
    views = base[draw] ^ flips[:, None]
    views[2900:] = views[2800:2900]  # exact duplicates
    return views


def brute(h: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray]:
    d = np.bitwise_count(h[:, None] ^ h[None, :])
    i, j = np.nonzero(np.triu(d <= t, 1))
    return np.stack([i, j], axis=1).astype(np.int64), d[i, j].astype(np.int64)


@pytest.mark.parametrize("threshold", [0, 2, 4, 8, 10, 12])
def test_every_split_of_the_planner_finds_the_brute_force_pairs(real_views, threshold, walk):
    h = real_views[1800:].reshape(-1)             # 6,000 codes, the exact duplicates among them
    want, want_d = brute(h, threshold)
    assert len(want) > (1000 if threshold >= 4 else 400)   # near neighbours abound: not vacuous
    splits = {tuple(hash_search.plan_parts(n, threshold, h, compiled=c) or ())   # either walk's cost model
              for n in (10_000, 50_000, 1_000_000) for c in (False, True)}
    splits.add(tuple(hash_search.plan_parts(1_000_000, threshold) or ()))   # equal bands
    splits.discard(())
    assert splits   # small thresholds: bands of radius -1 are skipped (still exact)
    for parts in splits:
        fi, fj, fd = hash_search._gph_pairs(h, threshold, list(parts), workers=1)
        key = np.concatenate(fi) * len(h) + np.concatenate(fj)
        got, first = np.unique(key, return_index=True)
        assert got.tolist() == (want[:, 0] * len(h) + want[:, 1]).tolist(), parts
        assert np.concatenate(fd)[first].tolist() == want_d.tolist(), parts


def test_the_search_dedup_runs_per_concept_equals_brute_force(real_views, walk):
    """25 000 codes (5 000 images, five views each: one concept of the 1M benchmark): the planner picks the
    multi-index search, and its image pairs are the brute-force ones."""
    views = np.concatenate([real_views, real_views[:2000] ^ np.uint64(1 << 7)])
    flat = views.reshape(-1)
    assert hash_search.plan_parts(len(flat), 10, flat) is not None
    got = hashing.pair_views(views, 10, workers=1)
    fi, fj, _ = hash_search._brute_pairs(flat, 10, 1)
    a, b = np.concatenate(fi) // 5, np.concatenate(fj) // 5
    keep = a != b
    want = np.unique(np.minimum(a, b)[keep] * len(views) + np.maximum(a, b)[keep])
    assert (got[:, 0] * len(views) + got[:, 1]).tolist() == want.tolist()
    assert len(want) > 10_000


def test_a_band_with_more_pairs_than_codes_loses_none(walk):
    """1,500 copies of one code and 1,500 one bit away: 4.5 million pairs from 3,000 codes, more than the
    compiled walk's first guess of room (it counts, then walks again with room for all)."""
    h = np.concatenate([np.full(1500, 0x0F0F_F0F0_1234_5678, dtype=np.uint64),
                        np.full(1500, 0x0F0F_F0F0_1234_5679, dtype=np.uint64)])
    fi, fj, fd = hash_search._gph_pairs(h, 2, [(0, 16, 0), (16, 16, 0), (32, 16, 0), (48, 16, -1)], workers=1)
    key, first = np.unique(np.concatenate(fi) * len(h) + np.concatenate(fj), return_index=True)
    assert len(key) == 3000 * 2999 // 2
    d = np.concatenate(fd)[first]
    assert int(d.sum()) == 1500 * 1500 and set(d.tolist()) == {0, 1}


def test_the_compiled_walk_is_used_only_where_it_pays_and_is_allowed(monkeypatch):
    """Installed and allowed: a search of at least ``COMPILED_MIN_CODES`` codes loads and uses it, a smaller
    one only once it is loaded in the process; ``CULTURA_COMPILED_SEARCH=0`` or no numba: never."""
    import sys

    name = "cultura.curate.hash_kernels"
    monkeypatch.setattr(hash_search, "_numba_installed", True)
    monkeypatch.delenv(hash_search.COMPILED_ENV, raising=False)
    monkeypatch.delitem(sys.modules, name, raising=False)
    loads = []

    def load(module):
        loads.append(module)
        monkeypatch.setitem(sys.modules, module, object())
    monkeypatch.setattr(hash_search.importlib, "import_module", load)
    big, small = hash_search.COMPILED_MIN_CODES, hash_search.COMPILED_MIN_CODES - 1
    assert not hash_search.compiled_walk(small) and not loads
    assert hash_search.compiled_walk(big) and loads == [name]
    assert hash_search.compiled_walk(small) and loads == [name]
    monkeypatch.setenv(hash_search.COMPILED_ENV, "0")
    assert not hash_search.compiled_walk(big)
    monkeypatch.delenv(hash_search.COMPILED_ENV)
    monkeypatch.setattr(hash_search, "_numba_installed", False)
    assert not hash_search.compiled_walk(big)


def test_an_installed_numba_that_cannot_load_leaves_the_numpy_walk_and_says_how_to_fix_it(monkeypatch):
    """numba present but unusable (it refuses a newer numpy, or finds no writable cache folder): the search
    warns once, naming the fixes, and uses the numpy walk, the same pairs."""
    import sys

    monkeypatch.setattr(hash_search, "_numba_installed", True)
    monkeypatch.delenv(hash_search.COMPILED_ENV, raising=False)
    monkeypatch.delitem(sys.modules, "cultura.curate.hash_kernels", raising=False)
    monkeypatch.setitem(sys.modules, "numba", None)  # importing it raises ImportError
    h = np.random.default_rng(5).integers(0, 2**64, size=hash_search.COMPILED_MIN_CODES, dtype=np.uint64)
    h[1::2] = h[::2] ^ np.uint64(0b101)
    with pytest.warns(RuntimeWarning, match="NUMBA_CACHE_DIR.*CULTURA_COMPILED_SEARCH=0"):
        got = hash_search.hamming_pairs(h, 4, workers=1)
    assert "cultura.curate.hash_kernels" not in sys.modules and not hash_search.compiled_walk(10**9)
    assert len(got) >= len(h) // 2 and bool((np.bitwise_count(h[got[:, 0]] ^ h[got[:, 1]]) <= 4).all())
