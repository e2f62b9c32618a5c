"""Perceptual hashes (pHash, dHash) and exact Hamming-distance pair search.

Hashes
    The definitions are imagehash 4.3's ``phash`` and ``dhash`` (grey levels; pHash: 32x32 Lanczos resize,
    2-D DCT-II, the 8x8 lowest frequencies compared to their median; dHash: 9x8 resize, each pixel compared
    to its right neighbour), with the same bit order, so :func:`to_hex` gives the string ``str(imagehash.phash
    (im))`` gives. Only the decode is cheaper: a JPEG is decoded in the DCT domain at 1/2, 1/4 or 1/8 scale
    and in grey (``Image.draft``), keeping at least ``DRAFT_SIZE`` pixels a side, and the Lanczos resize
    first box-reduces by an integer factor (``reducing_gap=REDUCING_GAP``). On an image small enough that
    neither applies the values equal imagehash's bit for bit (tested); on large images they differ from
    imagehash's by a bit or two, and always the same way, since every stored hash comes from this module
    (``HASH_VERSION`` names the definition and goes into each dedup run's parameters). Decoding runs in a
    thread pool (Pillow releases the GIL while decoding and resizing); the DCT is done for the whole batch.

Search
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
import io
import itertools
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFilter
from ..lazy import lazy

fftpack = lazy("scipy.fftpack")  # imported on first use (start-up)
sparse = lazy("scipy.sparse")  # imported on first use (start-up)
csgraph = lazy("scipy.sparse.csgraph")  # imported on first use (start-up)

from . import invariance, lanczos

#: JPEGs are decoded at a reduced scale that keeps at least this many pixels a side.
DRAFT_SIZE = 64
#: Names the hash definition; stored in dedup run parameters so a change of definition is a new run.
HASH_VERSION = f"imagehash-4.3/draft{DRAFT_SIZE}/gap3/{invariance.VERSION}"
#: Pillow's ``reducing_gap`` for the resizes (:mod:`cultura.curate.lanczos`).
REDUCING_GAP = lanczos.REDUCING_GAP
#: Inputs with at most this many codes are searched with brute force (faiss), above by the pigeonhole search.
BRUTE_FORCE_MAX = 20_000
#: The centre pHash is the pHash of the content box with this share of each side's length cut off: a copy
#: cropped by up to about this much per side has a full pHash close to its original's centre pHash.
CENTRE_CROP = invariance.CENTRE_CROPS[0]
#: The pHash views stored beside the full one in ``images.phash_variants`` (16 hex each, in this order).
VARIANTS = ("mirror", "centre10")


class HashingError(ValueError):
    """An image could not be decoded for hashing (the message names the file and the reason)."""


# ---------------------------------------------------------------------------------------------- hashes
@dataclass
class HashResult:
    """Output of :func:`hash_images`: one row per input; failed inputs have hash 0 and an entry in errors.

    ``phash_centre``: the pHash of the content box's centre (:data:`CENTRE_CROP` cut off each side);
    ``phash_variants``: ``(n, len(VARIANTS))`` uint64, the mirror pHash and the 10 % centre pHash
    (:mod:`cultura.curate.invariance`); all from the same decode."""

    phash: np.ndarray
    dhash: np.ndarray
    errors: dict[int, str] = field(default_factory=dict)
    phash_centre: np.ndarray | None = None
    phash_variants: np.ndarray | None = None

    @property
    def ok(self) -> np.ndarray:
        """Boolean mask of the inputs that were hashed."""
        mask = np.ones(len(self.phash), dtype=bool)
        mask[list(self.errors)] = False
        return mask

    def views(self) -> np.ndarray:
        """``(n, 2 + len(VARIANTS))`` uint64: full, centre and variant pHashes (see :func:`pair_views`)."""
        n = len(self.phash)
        pc = self.phash_centre if self.phash_centre is not None else np.zeros(n, np.uint64)
        pv = self.phash_variants if self.phash_variants is not None else np.zeros((n, len(VARIANTS)), np.uint64)
        return np.column_stack([self.phash, pc, pv]).astype(np.uint64)


def _load_small(item: Any) -> tuple[np.ndarray, np.ndarray]:
    """Decode one image (path, bytes or PIL image) to its thumbnails (:func:`thumbnails`)."""

    if isinstance(item, Image.Image):
        return thumbnails(item.convert("L"))
    src = item if isinstance(item, (str, Path)) else _as_file(item)
    with Image.open(src) as im:
        prepare_decode(im)
        return thumbnails(im.convert("L"))  # convert loads the (drafted) image


def prepare_decode(im) -> None:
    """Ask an opened, not yet loaded image for the reduced decode the hashes are defined on (a JPEG is
    decoded in grey at 1/2-1/8 scale keeping :data:`DRAFT_SIZE` pixels a side; other formats in full). The
    downloader calls this before its validating decode, so the hashes come from that one decode."""
    if im.format == "JPEG":
        im.draft("L", (DRAFT_SIZE, DRAFT_SIZE))


def thumbnails(gray) -> tuple[np.ndarray, np.ndarray]:
    """``(phash_thumbs, dhash_thumb)`` of a decoded grey (mode ``L``) image: ``(3, 32, 32)`` uint8 — the
    content box (:func:`invariance.content_box`: uniform borders trimmed) and its two centre crops — and the
    ``(8, 9)`` dHash thumbnail of the content box.

    They are Pillow's ``gray.resize(size, LANCZOS, box=..., reducing_gap=REDUCING_GAP)``; the 32x32 ones
    are computed by :func:`lanczos.lanczos_boxes` (equal bit for bit, about 3x cheaper), the 9x8 one by
    Pillow. On an image without a uniform border the content box is the whole image (imagehash's hashes)."""

    box = invariance.content_box(np.asarray(gray))
    p = np.stack(lanczos.lanczos_boxes(gray, (32, 32), invariance.views(box)))
    d = np.asarray(gray.resize((9, 8), Image.Resampling.LANCZOS, box=box, reducing_gap=lanczos.REDUCING_GAP))
    return p, d


def phash_views(thumbs: np.ndarray) -> np.ndarray:
    """``(n, 4)`` uint64 pHashes of ``(n, 3, 32, 32)`` thumbnails from :func:`thumbnails`: full, 5 % centre,
    mirror, 10 % centre (the column order of :meth:`HashResult.views`)."""
    thumbs = np.asarray(thumbs)
    if not len(thumbs):
        return np.zeros((0, 4), dtype=np.uint64)
    stack = np.stack([thumbs[:, 0], thumbs[:, 1], invariance.mirror(thumbs[:, 0]), thumbs[:, 2]], axis=1)
    return phash_from_thumbs(stack.reshape(-1, 32, 32)).reshape(-1, 4)


def hashes_of_decoded(im) -> tuple[str, str, str, str]:
    """``(phash, dhash, phash_centre, phash_variants)`` as hex strings of an image decoded after
    :func:`prepare_decode` (equal to what :func:`hash_images` gives for the same bytes)."""
    p, d = thumbnails(im if im.mode == "L" else im.convert("L"))
    v = phash_views(p[None])[0]
    return (to_hex(v[:1])[0], to_hex(dhash_from_thumbs(d[None]))[0], to_hex(v[1:2])[0],
            variants_to_hex(v[None, 2:])[0])


def _as_file(data):

    if isinstance(data, (bytes, bytearray, memoryview)):
        return io.BytesIO(bytes(data))
    return data  # a file-like object


def _pack(bits: np.ndarray) -> np.ndarray:
    """(n, 64) booleans, most significant bit first (imagehash's order) -> uint64 array."""
    packed = np.packbits(bits.reshape(len(bits), 64), axis=1)
    return packed.view(">u8").reshape(-1).astype(np.uint64)


def phash_from_thumbs(thumbs: np.ndarray) -> np.ndarray:
    """pHash bits of a batch of 32x32 grey thumbnails ``(n, 32, 32)`` -> uint64 (imagehash's phash)."""

    if len(thumbs) == 0:
        return np.zeros(0, dtype=np.uint64)
    dct = fftpack.dct(fftpack.dct(thumbs.astype(np.float64), axis=1), axis=2)
    low = dct[:, :8, :8].reshape(len(thumbs), 64)
    mid = np.sort(low, axis=1)[:, 31:33]
    med = (mid[:, :1] + mid[:, 1:]) / 2  # np.median of 64 values (its value exactly), without its overhead
    return _pack(low > med)


def dhash_from_thumbs(thumbs: np.ndarray) -> np.ndarray:
    """dHash bits of a batch of 9-wide, 8-high grey thumbnails ``(n, 8, 9)`` -> uint64 (imagehash's dhash)."""
    if len(thumbs) == 0:
        return np.zeros(0, dtype=np.uint64)
    return _pack(thumbs[:, :, 1:] > thumbs[:, :, :-1])


def _worker(item):
    try:
        return _load_small(item), None
    except Exception as e:  # noqa: BLE001 - any decode failure is reported per input, with its reason
        return None, f"{type(e).__name__}: {e}"


def hash_images(items: Iterable[Any], *, workers: int | None = None, chunk: int = 256,
                progress=None) -> HashResult:
    """pHash and dHash of images given as paths, bytes or PIL images, decoding in a thread pool.

    Unreadable inputs do not stop the batch: their hashes are 0 and ``errors[index]`` holds the reason.
    ``progress`` is an optional callable called with the number of inputs done after each chunk.
    """
    items = list(items)
    n = len(items)
    workers = workers or min(8, os.cpu_count() or 1)
    ph = np.zeros(n, dtype=np.uint64)
    dh = np.zeros(n, dtype=np.uint64)
    pc = np.zeros(n, dtype=np.uint64)
    pv = np.zeros((n, len(VARIANTS)), dtype=np.uint64)
    errors: dict[int, str] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for start in range(0, n, chunk):
            part = items[start:start + chunk]
            results = list(pool.map(_worker, part)) if workers > 1 else [_worker(x) for x in part]
            good = [i for i, (r, _) in enumerate(results) if r is not None]
            for i, (_, err) in enumerate(results):
                if err is not None:
                    errors[start + i] = err
            if good:
                idx = np.asarray(good) + start
                views = phash_views(np.stack([results[i][0][0] for i in good]))
                ph[idx], pc[idx], pv[idx] = views[:, 0], views[:, 1], views[:, 2:]
                dh[idx] = dhash_from_thumbs(np.stack([results[i][0][1] for i in good]))
            if progress is not None:
                progress(len(part))
    return HashResult(ph, dh, errors, pc, pv)


def compute_hashes(paths_or_images: Iterable[Any], *,
                   workers: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(phash, dhash)`` as uint64 arrays, one entry per input (paths, bytes or PIL images).

    Raises :class:`HashingError` naming the first input that cannot be decoded; use :func:`hash_images` to
    get per-input errors instead.

    >>> from PIL import Image
    >>> p, d = compute_hashes([Image.new("L", (40, 30), 128)])
    >>> to_hex(p), to_hex(d)
    (['8000000000000000'], ['0000000000000000'])
    """
    items = list(paths_or_images)
    res = hash_images(items, workers=workers)
    if res.errors:
        i = min(res.errors)
        name = items[i] if isinstance(items[i], (str, Path)) else f"input #{i}"
        raise HashingError(f"Cannot hash {name}: {res.errors[i]}. Fix or exclude that image and rerun.")
    return res.phash, res.dhash


def to_hex(hashes: np.ndarray) -> list[str]:
    """uint64 hashes -> 16-character lower-case hex strings (imagehash's ``str(hash)``)."""
    return [f"{int(h):016x}" for h in np.asarray(hashes, dtype=np.uint64)]


def from_hex(values: Sequence[str]) -> np.ndarray:
    """16-character hex strings -> uint64 array."""
    return np.array([int(v, 16) for v in values], dtype=np.uint64)


def variants_to_hex(variants: np.ndarray) -> list[str]:
    """``(n, len(VARIANTS))`` uint64 -> the ``images.phash_variants`` strings (16 hex per variant, in order)."""
    return ["".join(f"{int(h):016x}" for h in row) for row in np.asarray(variants, dtype=np.uint64)]


def variants_from_hex(values: Sequence[str | None]) -> np.ndarray:
    """``images.phash_variants`` strings (None or '' for missing: zeros) -> ``(n, len(VARIANTS))`` uint64."""
    width = 16 * len(VARIANTS)
    filled = "".join(v if v and len(v) == width else "0" * width for v in values)
    return np.frombuffer(bytes.fromhex(filled), dtype=">u8").astype(np.uint64).reshape(-1, len(VARIANTS))


# ---------------------------------------------------------------------------------------------- search
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


# ---------------------------------------------------------------------------------------------- calibration
def synthetic_image(seed: int, size: tuple[int, int] = (640, 480)):
    """A random-content RGB image (gradient background, 8-20 random shapes, light noise), fixed by ``seed``.

    Used by the threshold calibration, the tests and the benchmarks; different seeds give unrelated images.
    """

    rng = np.random.default_rng(seed)
    w, h = size
    c0, c1 = rng.integers(0, 256, 3), rng.integers(0, 256, 3)
    t = np.linspace(0, 1, w)[None, :, None] if rng.random() < 0.5 else np.linspace(0, 1, h)[:, None, None]
    bg = (c0 * (1 - t) + c1 * t) * np.ones((h, w, 1))
    im = Image.fromarray(bg.astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(im)
    for _ in range(int(rng.integers(8, 21))):
        colour = tuple(int(v) for v in rng.integers(0, 256, 3))
        x0, x1 = sorted(rng.integers(-w // 4, w + w // 4, 2).tolist())
        y0, y1 = sorted(rng.integers(-h // 4, h + h // 4, 2).tolist())
        kind = int(rng.integers(0, 4))
        if kind == 0:
            draw.ellipse([x0, y0, x1 + 1, y1 + 1], fill=colour)
        elif kind == 1:
            draw.rectangle([x0, y0, x1 + 1, y1 + 1], fill=colour)
        elif kind == 2:
            pts = [(int(x), int(y)) for x, y in zip(rng.integers(0, w, 4), rng.integers(0, h, 4))]
            draw.polygon(pts, fill=colour)
        else:
            draw.line([x0, y0, x1, y1], fill=colour, width=int(rng.integers(2, max(3, w // 20))))
    im = im.filter(ImageFilter.GaussianBlur(1))
    noise = rng.normal(0, 6, (h, w, 3))
    return Image.fromarray(np.clip(np.asarray(im, dtype=np.float64) + noise, 0, 255).astype(np.uint8), "RGB")


def _jpeg(im, quality: int) -> bytes:

    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def duplicate_variants(im, seed: int) -> dict[str, bytes]:
    """Near-duplicate copies of ``im`` as encoded bytes: ``original`` (JPEG q=90), ``resized`` (50%, q=90),
    ``upscaled`` (150%), ``reencoded`` (JPEG q=60), ``cropped`` (1-5% of each side's length removed, split
    at random between the two sides) and ``combined`` (cropped, resized to 75% and q=60)."""

    rng = np.random.default_rng(10_000 + seed)
    w, h = im.size
    lanczos = Image.Resampling.LANCZOS

    def crop(img):
        fx, fy = rng.uniform(0.01, 0.05, 2)
        dx, dy = int(round(w * fx)), int(round(h * fy))
        left, top = int(rng.integers(0, dx + 1)), int(rng.integers(0, dy + 1))
        return img.crop((left, top, w - (dx - left), h - (dy - top)))

    cropped = crop(im)
    return {
        "original": _jpeg(im, 90),
        "resized": _jpeg(im.resize((w // 2, h // 2), lanczos), 90),
        "upscaled": _jpeg(im.resize((w * 3 // 2, h * 3 // 2), lanczos), 90),
        "reencoded": _jpeg(im, 60),
        "cropped": _jpeg(cropped, 90),
        "combined": _jpeg(cropped.resize((cropped.width * 3 // 4, cropped.height * 3 // 4), lanczos), 60),
    }


def calibrate(n_images: int = 200, *, seed: int = 0, max_fpr: float = 1e-3, min_recall: float = 0.99) -> dict:
    """Hamming distances of true duplicate pairs vs distinct pairs on synthetic images, and thresholds.

    For each of ``n_images`` random images (sizes 640x480, 480x640, 800x600, 512x512) the distance from the
    original to each variant of :func:`duplicate_variants` is a *duplicate* distance; the distance between
    the originals of two different images is a *distinct* distance. The suggested threshold per hash is the
    smallest one that reaches ``min_recall`` on the single-edit variants (resized, upscaled, reencoded,
    cropped), provided the false-positive rate on distinct pairs stays ``<= max_fpr``; otherwise the largest
    threshold within ``max_fpr``. Returns quantiles, recall/FPR per threshold and the suggestions.
    """
    sizes = [(640, 480), (480, 640), (800, 600), (512, 512)]
    kinds = ["resized", "upscaled", "reencoded", "cropped", "combined"]
    blobs = {k: [] for k in ["original", *kinds]}
    for i in range(n_images):
        for k, data in duplicate_variants(synthetic_image(seed * 1_000_003 + i, sizes[i % len(sizes)]), i).items():
            blobs[k].append(data)
    hashes = {k: compute_hashes(v) for k, v in blobs.items()}
    iu = np.triu_indices(n_images, 1)
    report: dict[str, Any] = {"n_images": n_images, "n_distinct_pairs": int(len(iu[0])), "hash": HASH_VERSION}
    for h_i, name in enumerate(["phash", "dhash"]):
        orig = hashes["original"][h_i]
        dup = {k: hamming_to_each(orig, hashes[k][h_i]) for k in kinds}
        distinct = np.bitwise_count(orig[:, None] ^ orig[None, :])[iu].astype(np.int64)
        single = np.concatenate([dup[k] for k in kinds if k != "combined"])
        table = []
        for t in range(0, 33):
            row = {"threshold": t, "fpr": float((distinct <= t).mean()),
                   "recall_single_edit": float((single <= t).mean())}
            row.update({f"recall_{k}": float((dup[k] <= t).mean()) for k in kinds})
            table.append(row)
        ok = [r for r in table if r["fpr"] <= max_fpr]
        reach = [r for r in ok if r["recall_single_edit"] >= min_recall]
        chosen = (reach[0] if reach else ok[-1] if ok else table[0])["threshold"]
        q = [0, 0.01, 0.05, 0.5, 0.95, 0.99, 1]
        report[name] = {
            "suggested_threshold": int(chosen),
            "duplicate_quantiles": {k: np.quantile(v, q).round(1).tolist() for k, v in dup.items()},
            "distinct_quantiles": np.quantile(distinct, q).round(1).tolist(),
            "quantile_levels": q, "table": table,
        }
    return report


def hamming_to_each(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise Hamming distances of two equal-length uint64 arrays."""
    return np.bitwise_count(np.asarray(a, dtype=np.uint64) ^ np.asarray(b, dtype=np.uint64)).astype(np.int64)
