"""Exact Hamming-distance pair search over 64-bit hashes (the perceptual hashes of
:mod:`cultura.curate.hashing`, which re-exports this module's public functions).

:func:`hamming_pairs` finds every pair at Hamming distance ``<= threshold`` exactly. Small inputs go to one
brute-force faiss ``IndexBinaryFlat.range_search``. Large inputs use the generalised pigeonhole principle
(Qin & Xiao, "GPH", ICDE 2018): split the 64 bits into ``m`` parts with per-part thresholds ``t_i``
summing to ``threshold - m + 1``; two codes within ``threshold`` agree within ``t_i`` on at least one
part ``i``. For each part the codes are bucketed by that part's bits, and each bucket is searched with
faiss brute force against the buckets whose key is within ``t_i`` bits of its own; the candidates are
verified on all 64 bits by faiss, so the result is exact. The split is chosen by a cost model.

>>> import numpy as np
>>> h = np.array([0, 1, 3, 2**63], dtype=np.uint64)
>>> hamming_pairs(h, 1).tolist()
[[0, 1], [0, 3], [1, 2]]
>>> hamming_pairs(h, 2).tolist()
[[0, 1], [0, 2], [0, 3], [1, 2], [1, 3]]
"""
from __future__ import annotations

import contextlib
import itertools
import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..lazy import lazy

sparse = lazy("scipy.sparse")  # imported on first use (start-up)
csgraph = lazy("scipy.sparse.csgraph")  # imported on first use (start-up)

#: Inputs with at most this many codes are searched with brute force (faiss), above by the pigeonhole search.
BRUTE_FORCE_MAX = 20_000


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


def plan_parts(n: int, threshold: int) -> list[tuple[int, int, int]] | None:
    """GPH split ``[(shift, bits, t), ...]`` for ``n`` codes, or None when brute force is cheaper.

    Cost model (seconds, measured roughly on one core): 0.7 ns per code comparison, 40 us per faiss call,
    30 ns per neighbour key tried.
    """
    cmp_cost, call_cost, flip_cost = 0.7e-9, 40e-6, 30e-9
    best, best_cost = None, n * n * cmp_cost
    for m in range(2, min(threshold + 1, 16) + 1):
        total_t = threshold - m + 1
        widths = [64 // m + (1 if i < 64 % m else 0) for i in range(m)]
        ts = [total_t // m + (1 if i < total_t % m else 0) for i in range(m)]
        cost, shift, parts = 0.0, 0, []
        for b, t in zip(widths, ts):
            buckets = min(2 ** b, n)
            ball = _ball_size(b, t)
            cost += buckets * (call_cost + flip_cost * ball) + cmp_cost * n * n * ball / 2 ** b / 2
            parts.append((shift, b, t))
            shift += b
        if cost < best_cost:
            best, best_cost = parts, cost
    return best


def _gph_part(h: np.ndarray, codes: np.ndarray, threshold: int, shift: int, bits: int, t: int,
              pool: ThreadPoolExecutor, workers: int):
    """Candidate pairs of one GPH part: each bucket against itself and the buckets within ``t`` bits above it."""
    key = ((h >> np.uint64(shift)) & np.uint64((1 << bits) - 1)).astype(np.int64)
    order = np.argsort(key, kind="stable")
    skey = key[order]
    present = np.unique(skey)
    starts = np.searchsorted(skey, present, side="left")
    ends = np.searchsorted(skey, present, side="right")
    where = dict(zip(present.tolist(), zip(starts.tolist(), ends.tolist())))
    flips = _ball(bits, t)[1:]

    def run(keys):
        import faiss  # deferred: heavy optional dependency, loaded on first use

        faiss.omp_set_num_threads(1)  # this worker thread only; parallelism comes from the pool
        out_i, out_j, out_d = [], [], []
        for u in keys:
            s, e = where[u]
            q_idx = order[s:e]
            nb = [where[v] for v in (u ^ flips).tolist() if v > u and v in where] if len(flips) else []
            db_idx = np.concatenate([q_idx] + [order[a:b] for a, b in nb]) if nb else q_idx
            if len(db_idx) < 2:
                continue
            qi, di, dist = _range(codes[db_idx], codes[q_idx], threshold)
            gi, gj = q_idx[qi], db_idx[di]
            keep = (gi < gj) | (di >= len(q_idx))  # own bucket: each pair once; neighbours: all
            gi, gj = gi[keep], gj[keep]
            out_i.append(np.minimum(gi, gj))
            out_j.append(np.maximum(gi, gj))
            out_d.append(dist[keep])
        return out_i, out_j, out_d

    keys = present.tolist()
    step = max(1, len(keys) // (8 * workers))
    return list(pool.map(run, [keys[k:k + step] for k in range(0, len(keys), step)]))


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
    codes = _codes(h)
    found_i, found_j, found_d = [], [], []
    workers = workers or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for shift, bits, t in parts:
            if t < 0:
                continue
            for fi, fj, fd in _gph_part(h, codes, threshold, shift, bits, t, pool, workers):
                found_i += fi
                found_j += fj
                found_d += fd
    return found_i, found_j, found_d


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
    parts = plan_parts(n, threshold) if n > BRUTE_FORCE_MAX else None
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
