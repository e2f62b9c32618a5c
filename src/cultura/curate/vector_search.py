"""Pairs of L2-normalised vectors with cosine similarity ``>= threshold``: exact, or approximate (IVF).

The embedding dedup method (:mod:`cultura.curate.dedup`) needs every pair of images whose embeddings are
closer than a threshold: a self-join of one ``(n, d)`` float32 matrix. Two searches, both reading the
matrix in place (no copy, no index holding the vectors):

- :func:`cosine_pairs` — exact: blocked matrix products over the upper triangle (``n**2 / 2`` products).
  Quadratic: ~100 s of CPU at 100k × 512-d, hours at 1M.
- :func:`ivf_cosine_pairs` — approximate (an inverted file): faiss k-means (spherical) cuts the space into
  ``nlist`` cells trained on a sample; every row lives in its nearest cell and probes its ``nprobe``
  nearest cells. Each cell's rows are multiplied, in exact float32, with the rows probing it, so a pair is
  found when one row's cell is among the other's probes. Work ``~ n**2 * nprobe / nlist`` plus
  ``n * nlist`` for the assignment. Every pair returned is a product computed exactly on the float32
  matrix, so **precision is exact (no pair below the threshold is ever returned); only recall is
  approximate**: a pair split across cells that neither probes is missed. The index is only row numbers
  (``nprobe`` int32 per row), not codes of the vectors: memory stays at the matrix plus a fixed block.

:func:`similar_pairs` picks one (``index="auto"``: exact up to :data:`EXACT_MAX_ROWS` rows, IVF above) and
:func:`index_params` describes that choice for the record (``dedup_runs.params``). Recall of the IVF search
against the exact one is measured in ``perf/bench_embed_dedup.py`` (see docs/scaling.md).

>>> v = np.array([[1, 0], [0.99, 0.141], [0, 1]], dtype=np.float32)
>>> similar_pairs(v, 0.9).tolist()
[[0, 1]]
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ConfigError

INDEXES = ("auto", "exact", "ivf")
#: ``index="auto"``: the exact search up to this many rows (~100 s of CPU at 100k × 512-d), IVF above.
EXACT_MAX_ROWS = 100_000
#: Cells each row probes (its own included). Measured recall at threshold 0.9–0.95 on concept-clustered
#: data: see docs/scaling.md.
DEFAULT_NPROBE = 8
#: k-means training rows per cell (a sample of the rows, at most all of them), and iterations.
TRAIN_PER_LIST = 32
KMEANS_ITER = 10
#: Version of the IVF procedure recorded in params (bump when a change can change the pairs it finds).
IVF_VERSION = 1
SEED = 1234
BLOCK, DB_BLOCK = 1024, 16384       # similarities computed at once: 1,024 × 16,384 float32 = 64 MB
ASSIGN_CHUNK = 65536                # rows assigned to cells per faiss call


def _check(vectors, threshold: float, rows):
    x = np.asarray(vectors)
    if x.ndim != 2:
        raise ValueError(f"vectors must be a 2-D array, got shape {x.shape}.")
    if not -1.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be a cosine similarity in [-1, 1], got {threshold!r}.")
    if x.dtype != np.float32:
        x = x.astype(np.float32)
    if rows is not None:
        rows = np.asarray(rows, dtype=np.int64).ravel()
    return x, rows


def _take(x: np.ndarray, rows: np.ndarray | None, lo: int, hi: int) -> np.ndarray:
    """Rows ``lo:hi`` of the searched set: a view of ``x`` when searching all of it, else a small gather."""
    return x[lo:hi] if rows is None else x[rows[lo:hi]]


def _sorted_unique(pairs: list[np.ndarray], n: int) -> np.ndarray:
    if not pairs:
        return np.zeros((0, 2), dtype=np.int64)
    p = np.concatenate(pairs).astype(np.int64)
    key = np.unique(np.minimum(p[:, 0], p[:, 1]) * n + np.maximum(p[:, 0], p[:, 1]))
    return np.stack([key // n, key % n], axis=1)


def cosine_pairs(vectors: np.ndarray, threshold: float, *, rows=None, block: int = BLOCK,
                 db_block: int = DB_BLOCK) -> np.ndarray:
    """Pairs ``(i, j)``, ``i < j``, of L2-normalised rows with cosine similarity ``>= threshold`` (exact).

    Blocked matrix products over the upper triangle only (``block`` queries against ``db_block`` rows at a
    time: at most 64 MB of similarities at once), reading ``vectors`` in place: no copy of the matrix and no
    index (a faiss flat index would hold a second copy). ``rows``: search only these rows of ``vectors``
    (gathered block by block, never as a whole); the pairs are then positions into ``rows``.

    >>> v = np.array([[1, 0], [0.99, 0.141], [0, 1]], dtype=np.float32)
    >>> cosine_pairs(v, 0.9).tolist()
    [[0, 1]]
    """
    x, rows = _check(vectors, threshold, rows)
    n = len(x) if rows is None else len(rows)
    if n < 2:
        return np.zeros((0, 2), dtype=np.int64)
    t = float(threshold) - 1e-6
    out = []
    for s in range(0, n, block):
        q = _take(x, rows, s, s + block)
        for d in range(s, n, db_block):
            qi, dj = np.nonzero(q @ _take(x, rows, d, d + db_block).T >= t)
            gi, gj = qi + s, dj + d
            keep = gi < gj
            if keep.any():
                out.append(np.stack([gi[keep], gj[keep]], axis=1).astype(np.int64))
    if not out:
        return np.zeros((0, 2), dtype=np.int64)
    pairs = np.concatenate(out)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


def auto_nlist(n: int) -> int:
    """Cells for ``n`` rows: the power of two nearest ``2 * sqrt(n)`` (2,048 at 1M, 512 at 100k), which
    balances the assignment (``n * nlist``) against the join (``n**2 * nprobe / nlist``); at most
    ``n / 8`` so that every cell is trained on a few rows."""
    if n < 16:
        return 1
    return int(max(1, min(2 ** round(math.log2(2 * math.sqrt(n))), n // 8)))


def ivf_cosine_pairs(vectors: np.ndarray, threshold: float, *, rows=None, nlist: int | None = None,
                     nprobe: int = DEFAULT_NPROBE, seed: int = SEED) -> np.ndarray:
    """Pairs ``(i, j)``, ``i < j``, with cosine ``>= threshold`` found through an inverted file (approximate
    recall, exact precision; see the module docstring). Sorted, each once; positions into ``rows`` when given.

    ``nlist``: cells (``None``: :func:`auto_nlist`, and never more than ``n / 8``); ``nprobe``: cells each row
    probes (at most ``nlist``; ``nprobe == nlist`` is an exact search done the slow way). Deterministic for
    a given ``seed`` and input.
    """
    import faiss  # deferred: heavy optional dependency, loaded on first use

    x, rows = _check(vectors, threshold, rows)
    n, d = (len(x) if rows is None else len(rows)), x.shape[1]
    if n < 2:
        return np.zeros((0, 2), dtype=np.int64)
    nlist = max(1, min(int(nlist or auto_nlist(n)), max(1, n // 8)))
    nprobe = max(1, min(int(nprobe), nlist))
    # cells: spherical k-means on a sample (sorted, so gathering it reads the matrix in order)
    rng = np.random.default_rng(seed)
    m = min(n, nlist * TRAIN_PER_LIST)
    sample = np.sort(rng.choice(n, m, replace=False)) if m < n else np.arange(n)
    train = np.ascontiguousarray(x[sample] if rows is None else x[rows[sample]])
    km = faiss.Kmeans(d, nlist, niter=KMEANS_ITER, spherical=True, seed=seed, verbose=False,
                      min_points_per_centroid=1, max_points_per_centroid=TRAIN_PER_LIST)
    km.train(train)
    del train
    cells = faiss.IndexFlatIP(d)
    cells.add(km.centroids)
    probes = np.empty((n, nprobe), dtype=np.int32)
    for s in range(0, n, ASSIGN_CHUNK):
        _, probes[s:s + ASSIGN_CHUNK] = cells.search(np.ascontiguousarray(_take(x, rows, s, s + ASSIGN_CHUNK)),
                                                     nprobe)
    # inverted lists: the rows living in each cell (nearest centroid) and the rows probing it
    home = probes[:, 0].astype(np.int64)
    members = np.argsort(home, kind="stable")
    m_bounds = np.searchsorted(home[members], np.arange(nlist + 1))
    flat = probes.ravel()
    del probes
    order = np.argsort(flat, kind="stable")
    q_bounds = np.searchsorted(flat[order], np.arange(nlist + 1))
    del flat
    probers = (order // nprobe).astype(np.int64)   # row of each probe, grouped by cell
    del order
    t = float(threshold) - 1e-6
    out = []
    for c in range(nlist):
        db = members[m_bounds[c]:m_bounds[c + 1]]
        if not len(db):
            continue
        qs = probers[q_bounds[c]:q_bounds[c + 1]]
        for a in range(0, len(db), DB_BLOCK):
            dbb = db[a:a + DB_BLOCK]
            xd = x[dbb] if rows is None else x[rows[dbb]]
            for s in range(0, len(qs), BLOCK):
                qb = qs[s:s + BLOCK]
                qi, dj = np.nonzero((x[qb] if rows is None else x[rows[qb]]) @ xd.T >= t)
                gi, gj = qb[qi], dbb[dj]
                keep = gi != gj
                if keep.any():
                    out.append(np.stack([gi[keep], gj[keep]], axis=1))
    return _sorted_unique(out, n)


def choose(n: int, index: str = "auto", exact_max_rows: int = EXACT_MAX_ROWS) -> str:
    """``"exact"`` or ``"ivf"`` for a search over ``n`` rows."""
    if index == "auto":
        return "exact" if n <= exact_max_rows else "ivf"
    return index


def similar_pairs(vectors: np.ndarray, threshold: float, *, rows=None, index: str = "auto",
                  nlist: int | None = None, nprobe: int = DEFAULT_NPROBE,
                  exact_max_rows: int = EXACT_MAX_ROWS) -> np.ndarray:
    """Pairs ``(i, j)``, ``i < j``, with cosine ``>= threshold``, by the search :func:`choose` picks:
    :func:`cosine_pairs` (exact) or :func:`ivf_cosine_pairs` (approximate recall, exact precision)."""
    validate_index_options(index, nlist, nprobe)
    n = len(vectors) if rows is None else len(rows)
    if choose(n, index, exact_max_rows) == "exact":
        return cosine_pairs(vectors, threshold, rows=rows)
    return ivf_cosine_pairs(vectors, threshold, rows=rows, nlist=nlist, nprobe=nprobe)


def validate_index_options(index, nlist, nprobe) -> None:
    """ConfigError naming the ``[dedup]`` key for a bad ``embedding_index`` / ``embedding_nlist`` /
    ``embedding_nprobe``."""
    if index not in INDEXES:
        raise ConfigError(f"embedding_index must be one of {', '.join(map(repr, INDEXES))}, got {index!r}; set "
                          "dedup.embedding_index in cultura.toml.", param="embedding_index")
    for name, v, none_ok in (("embedding_nlist", nlist, True), ("embedding_nprobe", nprobe, False)):
        if v is None and none_ok:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ConfigError(f"{name} must be a whole number >= 1{' (or unset: automatic)' if none_ok else ''}, "
                              f"got {v!r}; set dedup.{name} in cultura.toml.", param=name)
    if nlist is not None and nprobe > nlist:
        raise ConfigError(f"embedding_nprobe ({nprobe}) cannot exceed embedding_nlist ({nlist}): a row probes "
                          "at most every cell; lower dedup.embedding_nprobe or raise dedup.embedding_nlist.",
                          param="embedding_nprobe")


def index_params(index: str = "auto", nlist: int | None = None, nprobe: int = DEFAULT_NPROBE,
                 exact_max_rows: int = EXACT_MAX_ROWS) -> dict:
    """How pairs are searched, for the record (``dedup_runs.params["index"]``): enough to repeat it.

    ``{"kind": "exact"}``; ``{"kind": "ivf", "nlist": N or "auto", "nprobe": P, ...}``; for ``auto`` the rule
    (exact up to ``exact_max_rows`` rows per search, IVF with these parameters above)."""
    validate_index_options(index, nlist, nprobe)
    if index == "exact":
        return {"kind": "exact"}
    ivf = {"nlist": int(nlist) if nlist else "auto", "nprobe": int(nprobe), "train_per_list": TRAIN_PER_LIST,
           "kmeans_iter": KMEANS_ITER, "seed": SEED, "version": IVF_VERSION}
    if index == "ivf":
        return {"kind": "ivf", **ivf}
    return {"kind": "auto", "exact_max_rows": int(exact_max_rows), "ivf": ivf}


__all__ = ["INDEXES", "EXACT_MAX_ROWS", "DEFAULT_NPROBE", "cosine_pairs", "ivf_cosine_pairs", "similar_pairs",
           "choose", "auto_nlist", "index_params", "validate_index_options"]
