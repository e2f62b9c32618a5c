"""Exact Hamming-distance pair search over 64-bit hashes (the perceptual hashes of
:mod:`cultura.curate.hashing`, which re-exports this module's public functions).

:func:`hamming_pairs` finds every pair at Hamming distance ``<= threshold`` exactly. Small inputs go to one
brute-force faiss ``IndexBinaryFlat.range_search``. Large inputs use multi-index hashing with the generalised
pigeonhole principle (Qin & Xiao, "GPH", ICDE 2018): split the 64 bits into ``m`` bands with per-band radii
``t_i`` summing to ``threshold - m + 1``; two codes within ``threshold`` are within ``t_i`` on at least one
band ``i``. Bands are sized by the bits' entropy (a pHash's DC-sign bit is constant and splits nothing).
For each band the codes are sorted by its key, each code meets the codes whose key is within ``t_i`` bits
of its own (a dense bucket table, numpy only: no Python loop per bucket), and every candidate is verified
on all 64 bits with numpy's ``bitwise_count``, so the result is exact. Where numba is installed
(``cultura[fast]``) a large search walks the buckets and verifies the candidates in a compiled loop
(:mod:`cultura.curate.hash_kernels`, :func:`compiled_walk`), several times faster, the same pairs. The
split is chosen by a cost model of the walk used (:func:`plan_parts`), brute force when it is cheaper.

>>> import numpy as np
>>> h = np.array([0, 1, 3, 2**63], dtype=np.uint64)
>>> hamming_pairs(h, 1).tolist()
[[0, 1], [0, 3], [1, 2]]
>>> hamming_pairs(h, 2).tolist()
[[0, 1], [0, 2], [0, 3], [1, 2], [1, 3]]
"""
from __future__ import annotations

import contextlib
import importlib.util
import itertools
import math
import os
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..lazy import lazy

#: Inputs with at most this many codes are searched with brute force (faiss) without planning: the
#: multi-index search never pays off that small (see :func:`plan_parts`).
BRUTE_FORCE_MAX = 2_000

#: Searches over at least this many codes use the compiled walk (:mod:`cultura.curate.hash_kernels`) where
#: numba is installed: below it, loading the compiled code (numba's import and its disk cache, ~0.5 s, or the
#: first compilation on a machine, a few seconds) costs more than it saves. Once loaded, every multi-index
#: search of the process uses it.
COMPILED_MIN_CODES = 20_000
#: ``CULTURA_COMPILED_SEARCH=0`` keeps the numpy walk (a comparison, or a machine where numba misbehaves).
COMPILED_ENV = "CULTURA_COMPILED_SEARCH"
_numba_installed: bool | None = None

sparse = lazy("scipy.sparse")  # imported on first use (start-up)
# imports numba (heavy, optional): only a large search where it is installed loads it
hash_kernels = lazy("cultura.curate.hash_kernels")
csgraph = lazy("scipy.sparse.csgraph")  # imported on first use (start-up)


def _check(hashes, threshold) -> tuple[np.ndarray, int]:
    h = np.asarray(hashes)
    if h.ndim != 1:
        raise ValueError(f"hashes must be a 1-D array of 64-bit hashes, got shape {h.shape}.")
    if h.dtype != np.uint64:
        if not np.issubdtype(h.dtype, np.integer) and h.size:
            raise ValueError(f"hashes must be unsigned 64-bit integers, got dtype {h.dtype}.")
        h = h.astype(np.int64).view(np.uint64) if h.dtype != np.int64 else h.view(np.uint64)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, np.integer)) or not 0 <= threshold <= 64:
        raise ValueError(f"threshold must be an integer between 0 and 64, got {threshold!r}.")
    return np.ascontiguousarray(h), int(threshold)


def _codes(h: np.ndarray) -> np.ndarray:
    """uint64 -> (n, 8) uint8 codes for faiss (byte order does not change Hamming distances)."""
    return np.ascontiguousarray(h).view(np.uint8).reshape(-1, 8)


@contextlib.contextmanager
def _omp_threads(n: int | None):
    """faiss's OpenMP threads for this thread set to ``n`` (None: unchanged) for the block, then restored."""
    if n is None:
        yield
        return
    import faiss  # deferred: heavy optional dependency, loaded on first use

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(n)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def _range(db_codes: np.ndarray, q_codes: np.ndarray, threshold: int, *, threads: int | None = None):
    """faiss brute force: (query index, db index, distance) of every pair within ``threshold`` bits
    (``threads``: faiss's OpenMP threads for this call; None: faiss's default)."""
    import faiss  # deferred: heavy optional dependency, loaded on first use

    index = faiss.IndexBinaryFlat(64)
    index.add(db_codes)
    with _omp_threads(threads):
        lims, dist, ids = index.range_search(q_codes, threshold + 1)  # faiss keeps distance < radius
    q = np.repeat(np.arange(len(q_codes), dtype=np.int64), np.diff(lims).astype(np.int64))
    return q, ids.astype(np.int64), dist.astype(np.int64)


def _ball(bits: int, radius: int) -> np.ndarray:
    """All masks of ``bits`` bits with at most ``radius`` bits set."""
    masks = [0]
    for r in range(1, radius + 1):
        for combo in itertools.combinations(range(bits), r):
            masks.append(sum(1 << b for b in combo))
    return np.array(masks, dtype=np.int64)


def _ball_size(bits: int, radius: int) -> int:
    return sum(math.comb(bits, r) for r in range(0, max(radius, -1) + 1))


def _bit_entropy(h: np.ndarray) -> np.ndarray:
    """Each of the 64 bits' entropy in ``h`` (measured on a sample of at most ~4,096 codes)."""
    sample = h[:: max(1, len(h) // 4096)]
    freq = ((sample[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)).mean(axis=0)
    p = np.clip(freq, 1e-6, 1 - 1e-6)
    return -(p * np.log2(p) + (1 - p) * np.log2(1 - p))


def _band_widths(ent: np.ndarray, m: int) -> list[int]:
    """Widths of ``m`` contiguous bands over the 64 bits with about equal entropy each (``ent``:
    :func:`_bit_entropy`): a bit that is (nearly) constant in these hashes, such as a pHash's DC-sign bit,
    splits codes into no buckets, so the band that holds it gets more bits."""
    cum = np.concatenate([[0.0], np.cumsum(ent)])
    cuts = [0]
    for k in range(1, m):
        c = int(np.searchsorted(cum, cum[-1] * k / m))
        cuts.append(min(max(c, cuts[-1] + 1), 64 - (m - k)))  # every band at least one bit wide
    cuts.append(64)
    return [b - a for a, b in zip(cuts, cuts[1:])]


#: Cost model (seconds per unit, measured on the loaded 2-core CI machine): faiss brute force per pair of codes;
#: the multi-index search per code and band (sort), per code and neighbour key looked up, per candidate verified.
COMPARE_COST, SORT_COST, KEY_COST, CANDIDATE_COST = 1.0e-9, 80e-9, 20e-9, 12e-9
#: The same costs of the multi-index search with the compiled walk (:func:`compiled_walk`): a neighbour key
#: looked up (the start of a short loop) now costs more than a candidate verified, so more, narrower bands win
#: (one concept of the 1M benchmark, 25,000 codes at threshold 10: six bands 36 ms against five 50 ms).
COMPILED_SORT_COST, COMPILED_KEY_COST, COMPILED_CANDIDATE_COST = 20e-9, 6e-9, 1.5e-9
#: Bands are at most this wide: a dense bucket table of ``2**bits`` entries, keys sorted by numpy's radix sort.
MAX_BAND_BITS = 16


def plan_parts(n: int, threshold: int, h: np.ndarray | None = None, *,
               compiled: bool | None = None) -> list[tuple[int, int, int]] | None:
    """Multi-index split ``[(shift, bits, t), ...]`` for ``n`` codes, or None when brute force is cheaper.

    Generalised pigeonhole: ``m`` bands with radii ``t_i`` summing to ``threshold - m + 1`` (two codes within
    ``threshold`` are within ``t_i`` on some band ``i``). A band costs a sort, a look-up per code and
    neighbour key (``ball(bits, t)`` keys) and a verification per candidate (about
    ``n**2 / 2 * ball / 2**bits`` pairs fall within its radius); the cheapest ``m`` wins. With ``h`` the
    bands are sized by its bits' entropy (:func:`_band_widths`), else equal. ``compiled``: the costs of the
    compiled walk (default: whether a search over ``n`` codes uses it, :func:`compiled_walk`).
    """
    if compiled is None:
        compiled = compiled_walk(n)
    sort_cost, key_cost, candidate_cost = ((COMPILED_SORT_COST, COMPILED_KEY_COST, COMPILED_CANDIDATE_COST)
                                           if compiled else (SORT_COST, KEY_COST, CANDIDATE_COST))
    best, best_cost = None, n * n / 2 * COMPARE_COST
    least = -(-64 // MAX_BAND_BITS)
    ent = _bit_entropy(h) if h is not None and len(h) else None
    # more bands than threshold + 1: radius -1 (never searched) for the rest, still exact (sum of t_i + 1
    # above the threshold), so a small threshold searches one or a few 16-bit bands
    for m in range(least, max(min(threshold + 2, 65), least + 1)):
        total_t = threshold - m + 1
        equal = [64 // m + (i < 64 % m) for i in range(m)]
        widths = _band_widths(ent, m) if ent is not None else equal
        if max(widths) > MAX_BAND_BITS:  # entropy-sized bands too wide for the bucket table: equal ones
            widths = equal
        # the larger radii go to the wider bands (about the same number of candidates per band)
        ts = [0] * m
        for r, i in enumerate(sorted(range(m), key=lambda i: -widths[i])):
            ts[i] = total_t // m + (r < total_t % m)
        cost, shift, parts = 0.0, 0, []
        for b, t in zip(widths, ts):
            if t >= 0:
                ball = _ball_size(b, t)
                cost += sort_cost * n + key_cost * n * (ball - 1) + candidate_cost * n * n / 2 * ball / 2 ** b
            parts.append((shift, b, t))
            shift += b
        if cost < best_cost:
            best, best_cost = parts, cost
    return best


def compiled_walk(n_codes: int) -> bool:
    """Whether a multi-index search over ``n_codes`` codes verifies its candidates with the compiled walk:
    numba installed, not turned off (:data:`COMPILED_ENV`), and the search large enough or the compiled code
    already loaded in this process (:data:`COMPILED_MIN_CODES`). Both walks give the same pairs."""
    global _numba_installed
    if os.environ.get(COMPILED_ENV, "1") == "0":
        return False
    if _numba_installed is None:
        _numba_installed = importlib.util.find_spec("numba") is not None
    if not _numba_installed:
        return False
    if "cultura.curate.hash_kernels" in sys.modules:
        return True
    if n_codes < COMPILED_MIN_CODES:
        return False
    try:  # numba installed but unusable (too new a numpy for it, no writable cache folder): the numpy walk
        importlib.import_module("cultura.curate.hash_kernels")
    except (ImportError, RuntimeError, OSError) as e:
        _numba_installed = False
        warnings.warn(f"The compiled hash search is off ({type(e).__name__}: {e}); dedup uses the numpy walk, "
                      f"the same pairs, slower. Set NUMBA_CACHE_DIR to a writable folder or upgrade numba to "
                      f"fix it, or {COMPILED_ENV}=0 to silence this.", RuntimeWarning, stacklevel=2)
        return False
    return True


def _band_pairs(h: np.ndarray, threshold: int, shift: int, bits: int, t: int):
    """Pairs within ``threshold`` among those whose band ``(shift, bits)`` is within ``t`` bits, vectorised.

    Codes are sorted by band key (a dense bucket table gives each key's run). Each code meets the codes after
    it in its own bucket, and the codes of every bucket whose key is within ``t`` bits above its own (each
    pair of buckets once): a list of (code, run start, run length). Sorted by length, the runs are walked
    one column at a time: column ``o`` compares every code whose run is longer than ``o`` with its run's
    ``o``-th code (a prefix of the list; no per-candidate index arrays), and every candidate is verified
    on all 64 bits."""
    key = ((h >> np.uint64(shift)) & np.uint64((1 << bits) - 1)).astype(np.int64)
    # keys of up to 16 bits sort as uint16: numpy's stable sort is then a radix sort
    order = np.argsort(key.astype(np.uint16) if bits <= 16 else key, kind="stable")
    skey, sh = key[order], h[order]
    if bits <= MAX_BAND_BITS:  # a dense bucket table: a key's count and run start by indexing
        counts = np.bincount(key, minlength=1 << bits).astype(np.int32)
        begins = np.cumsum(counts, dtype=np.int32) - counts

        def run(keys):
            c = counts[keys]
            return c, begins[keys]
    else:  # wider bands (any split is exact): the present keys, looked up by binary search
        present, starts, counts = np.unique(skey, return_index=True, return_counts=True)

        def run(keys):
            at = np.minimum(np.searchsorted(present, keys), len(present) - 1)
            return np.where(present[at] == keys, counts[at], 0).astype(np.int32), starts[at].astype(np.int32)
    if bits <= MAX_BAND_BITS and compiled_walk(len(h)):
        a, b, d = hash_kernels.band_walk(sh, skey, begins, counts, _ball(bits, t)[1:], threshold)
        i, j = order[a], order[b]
        return [np.minimum(i, j)], [np.maximum(i, j)], [d]
    c, b = run(skey)
    own = b + c - np.arange(1, len(h) + 1, dtype=np.int32)  # own bucket: the codes after each code
    q = np.flatnonzero(own > 0).astype(np.int32)
    qs, firsts, lengths = [q], [q + 1], [own[q]]
    for f in _ball(bits, t)[1:].tolist():
        nk = skey ^ f
        c, b = run(nk)
        q = np.flatnonzero((c > 0) & (nk > skey)).astype(np.int32)
        qs.append(q)
        firsts.append(b[q])
        lengths.append(c[q])
    q, first, length = np.concatenate(qs), np.concatenate(firsts), np.concatenate(lengths)
    longest = int(length.max()) if len(length) else 0
    by = np.argsort((longest - length).astype(np.uint16) if longest < 1 << 16 else -length, kind="stable")
    q, first, length = q[by], first[by], length[by]
    # active[o]: how many runs are longer than o (the list is sorted by length, longest first)
    active = np.searchsorted(-length, -np.arange(longest), side="left")
    hq = sh[q]
    out_q, out_j, out_d = [], [], []
    for o, k in enumerate(active.tolist()):
        j = first[:k] + o
        d = np.bitwise_count(hq[:k] ^ sh[j])
        hit = np.flatnonzero(d <= threshold)
        if len(hit):
            out_q.append(q[hit])
            out_j.append(j[hit])
            out_d.append(d[hit])
    if not out_q:
        return [], [], []
    i, j = order[np.concatenate(out_q)], order[np.concatenate(out_j)]
    return [np.minimum(i, j)], [np.maximum(i, j)], [np.concatenate(out_d).astype(np.int64)]


def _brute_pairs(h: np.ndarray, threshold: int, workers: int | None = None):
    """All pairs by faiss brute force over the upper triangle, query blocks spread over a thread pool (one
    OpenMP thread each; the pool hands the next block to whichever thread is free)."""
    codes = _codes(h)
    workers = workers or os.cpu_count() or 1
    step = max(256, -(-len(h) // max(8, 4 * workers)))  # >= 8 blocks: the triangle's diagonal blocks are small

    def run(start):
        # the upper triangle only: a query block against itself and the codes after it (half the work)
        qi, di, dist = _range(codes[start:], codes[start:start + step], threshold, threads=1)
        keep = qi < di
        return qi[keep] + start, di[keep] + start, dist[keep]

    if workers == 1:  # this thread only (a caller that runs searches in parallel itself): no pool
        res = [run(start) for start in range(0, len(h), step)]
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            res = list(pool.map(run, range(0, len(h), step)))
    return [r[0] for r in res], [r[1] for r in res], [r[2] for r in res]


def _gph_pairs(h: np.ndarray, threshold: int, parts: list[tuple[int, int, int]], workers: int | None = None):
    """Every pair within ``threshold`` by the multi-index search over ``parts`` (a pair may come from several
    parts). ``workers > 1``: the parts are searched by a pool of threads (numpy releases the GIL)."""
    todo = [p for p in parts if p[2] >= 0]
    workers = min(workers or os.cpu_count() or 1, len(todo))
    if workers > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            res = list(pool.map(lambda p: _band_pairs(h, threshold, *p), todo))
    else:
        res = [_band_pairs(h, threshold, *p) for p in todo]
    return ([x for r in res for x in r[0]], [x for r in res for x in r[1]], [x for r in res for x in r[2]])


def hamming_pairs(hashes: np.ndarray, threshold: int, *, return_distances: bool = False,
                  workers: int | None = None):
    """Every pair ``(i, j)``, ``i < j``, of 64-bit hashes at Hamming distance ``<= threshold`` (exact).

    Returns an ``(M, 2)`` int64 array sorted by ``(i, j)``; with ``return_distances=True`` also the ``(M,)``
    distances. ``workers``: threads (default: all CPUs). Raises ``ValueError`` for a non 1-D or non-integer
    ``hashes`` or a ``threshold`` outside 0..64.

    >>> import numpy as np
    >>> hamming_pairs(np.array([0b1011, 0b0011, 0b0100], dtype=np.uint64), 1, return_distances=True)
    (array([[0, 1]]), array([1]))
    """
    h, threshold = _check(hashes, threshold)
    n = len(h)
    empty = np.zeros((0, 2), dtype=np.int64)
    if n < 2:
        return (empty, np.zeros(0, dtype=np.int64)) if return_distances else empty
    parts = plan_parts(n, threshold, h) if n > BRUTE_FORCE_MAX else None
    if parts is None:
        fi, fj, fd = _brute_pairs(h, threshold, workers)
    else:
        fi, fj, fd = _gph_pairs(h, threshold, parts, workers)
    i = np.concatenate(fi) if fi else np.zeros(0, np.int64)
    j = np.concatenate(fj) if fj else np.zeros(0, np.int64)
    d = np.concatenate(fd) if fd else np.zeros(0, np.int64)
    # np.unique sorts by (i, j) and drops a pair found by several parts
    key, first = np.unique(i * n + j, return_index=True)
    pairs = np.stack([key // n, key % n], axis=1).astype(np.int64)
    return (pairs, d[first].astype(np.int64)) if return_distances else pairs


def pair_views(views: np.ndarray, threshold: int, *, workers: int | None = None) -> np.ndarray:
    """Pairs ``(i, j)``, ``i < j``, of images some view of which is within ``threshold`` bits of some view of
    the other; ``views`` is ``(n, k)`` uint64, one row per image (full, centre, mirror ... pHashes, see
    :meth:`HashResult.views`), a view of 0 where the image lacks it (all-zero views never match).
    Exact; sorted; each pair once.

    One :func:`hamming_pairs` over the ``k * n`` codes (brute force or the pigeonhole search, as its size
    says), pairs mapped back to their images: a copy cropped by ~5 % or ~10 % per side matches its
    original's centre views, a mirrored copy its mirror view, a slightly rotated one (corners filled) its
    centre views.
    """
    v = np.asarray(views)
    if v.ndim == 1:
        v = v[:, None]
    if v.ndim != 2:
        raise ValueError(f"views must be an (n, k) array of 64-bit hashes, got shape {v.shape}.")
    n, k = v.shape
    flat, threshold = _check(v.reshape(-1), threshold)
    if n < 2:
        return np.zeros((0, 2), dtype=np.int64)
    present = np.flatnonzero(flat != 0) if k > 1 else np.arange(len(flat))
    owner = present // k
    p = hamming_pairs(flat[present], threshold, workers=workers)
    a, b = owner[p[:, 0]], owner[p[:, 1]]
    keep = a != b
    if not keep.any():
        return np.zeros((0, 2), dtype=np.int64)
    key = np.unique(np.minimum(a, b)[keep] * n + np.maximum(a, b)[keep])
    return np.stack([key // n, key % n], axis=1).astype(np.int64)


def view_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise smallest Hamming distance between any view of ``a[i]`` and any view of ``b[i]`` (both
    ``(m, k)`` uint64, as :func:`pair_views` compares them; missing (0) views ignored)."""
    a, b = np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64)
    d = np.bitwise_count(a[:, :, None] ^ b[:, None, :]).astype(np.int64)
    d[np.broadcast_to((a == 0)[:, :, None] | (b == 0)[:, None, :], d.shape)] = 65
    d = d.reshape(len(a), -1).min(axis=1) if d.size else np.zeros(len(a), dtype=np.int64)
    return np.minimum(d, 64)


def hamming_pairs_with_centre(full: np.ndarray, centre: np.ndarray, threshold: int, *,
                              workers: int | None = None) -> np.ndarray:
    """:func:`pair_views` of two views per image, the full and the centre pHash."""
    h, threshold = _check(full, threshold)
    c, _ = _check(centre, threshold)
    return pair_views(np.stack([h, c], axis=1), threshold, workers=workers)


def hamming_to(hashes: np.ndarray, ref: int) -> np.ndarray:
    """Hamming distances of every hash to one reference hash."""
    x = np.asarray(hashes, dtype=np.uint64) ^ np.uint64(ref)
    return np.bitwise_count(x).astype(np.int64)


def connected_clusters(n: int, pairs: np.ndarray) -> list[np.ndarray]:
    """Connected components (size >= 2) of the graph on ``n`` nodes with edges ``pairs``; each sorted.

    >>> [c.tolist() for c in connected_clusters(5, np.array([[0, 3], [3, 4]]))]
    [[0, 3, 4]]
    """

    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if n == 0 or len(pairs) == 0:
        return []
    nodes, local = np.unique(pairs, return_inverse=True)  # only nodes with an edge: no singleton work
    local = local.reshape(-1, 2)
    m = len(nodes)
    graph = sparse.coo_matrix((np.ones(len(local), dtype=np.int8), (local[:, 0], local[:, 1])), shape=(m, m))
    _, labels = csgraph.connected_components(graph, directed=False)
    order = np.argsort(labels, kind="stable")  # nodes ascending within each component
    bounds = np.flatnonzero(np.diff(labels[order])) + 1
    starts = np.concatenate([[0], bounds]).tolist()
    ends = np.concatenate([bounds, [m]]).tolist()
    groups = [nodes[order[a:b]] for a, b in zip(starts, ends) if b - a > 1]
    groups.sort(key=lambda g: int(g[0]))
    return groups


def hamming_to_each(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise Hamming distances of two equal-length uint64 arrays."""
    return np.bitwise_count(np.asarray(a, dtype=np.uint64) ^ np.asarray(b, dtype=np.uint64)).astype(np.int64)
