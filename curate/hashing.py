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
import functools
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

#: Names the hash definition; stored in dedup run parameters so a change of definition is a new run.
HASH_VERSION = "imagehash-4.3/draft64/gap3"
#: JPEGs are decoded at a reduced scale that keeps at least this many pixels a side.
DRAFT_SIZE = 64
#: Pillow's ``reducing_gap`` for the resizes (box-reduce first while the scale factor exceeds it).
REDUCING_GAP = 3.0
#: Inputs with at most this many codes are searched with one brute-force faiss call.
BRUTE_FORCE_MAX = 20_000
#: The centre pHash is the pHash of the image with this share of each side's length cut off: a copy cropped
#: by up to about this much per side has a full pHash close to its original's centre pHash.
CENTRE_CROP = 0.05


class HashingError(ValueError):
    """An image could not be decoded for hashing (the message names the file and the reason)."""


# ---------------------------------------------------------------------------------------------- hashes
@dataclass
class HashResult:
    """Output of :func:`hash_images`: one row per input; failed inputs have hash 0 and an entry in errors.

    ``phash_centre``: the pHash of the centre region (:data:`CENTRE_CROP` cut off each side), from the same
    decode."""

    phash: np.ndarray
    dhash: np.ndarray
    errors: dict[int, str] = field(default_factory=dict)
    phash_centre: np.ndarray | None = None

    @property
    def ok(self) -> np.ndarray:
        """Boolean mask of the inputs that were hashed."""
        mask = np.ones(len(self.phash), dtype=bool)
        mask[list(self.errors)] = False
        return mask


def _load_small(item: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode one image (path, bytes or PIL image) to the 32x32 and 9x8 grey thumbnails the hashes need,
    and the 32x32 thumbnail of its centre region (for the centre pHash)."""

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


def thumbnails(gray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pHash, dHash and centre-pHash thumbnails of a decoded grey (mode ``L``) image.

    They are Pillow's ``gray.resize(size, LANCZOS, box=..., reducing_gap=REDUCING_GAP)``; the two 32x32 ones
    are computed by :func:`_lanczos_pair` (equal bit for bit, about 3x cheaper), the 9x8 one by Pillow."""

    w, h = gray.size
    dx, dy = int(round(w * CENTRE_CROP)), int(round(h * CENTRE_CROP))
    box = (dx, dy, w - dx, h - dy) if w - 2 * dx > 0 and h - 2 * dy > 0 else (0, 0, w, h)
    p, c = _lanczos_pair(gray, (32, 32), box)
    d = np.asarray(gray.resize((9, 8), Image.Resampling.LANCZOS, reducing_gap=REDUCING_GAP))
    return p, d, c


# ------------------------------------------------------------------ Pillow's 8-bit Lanczos resize, in numpy
# Pillow (libImaging/Resample.c) resizes an 8-bit image in two separable passes with 22-bit fixed-point
# integer coefficients, each pass rounding and clipping to uint8; it computes the coefficients (two sines
# per tap) on every call and runs a scalar loop. Here the coefficients are computed the same way once per
# geometry (cached) and each pass is a float64 matrix product with them: every product and partial sum is
# an integer below 2**53, so the arithmetic is exact and the result is Pillow's bit for bit (tested against
# ``Image.resize`` over thousands of sizes and boxes, tests/curate/test_hashing.py). Products are split into
# row blocks below OpenBLAS's threading threshold: a multi-threaded BLAS call on matrices this small costs
# 20x more CPU than it saves on a busy machine.
_PRECISION_BITS = 22
_LANCZOS_SUPPORT = 3.0
_BLAS_BLOCK = 1 << 18   # rows x columns x inner size of one product (OpenBLAS threads above 2 * 4 * 65536)


@functools.lru_cache(maxsize=512)
def _lanczos_matrix(in_size: int, in0: float, in1: float, out_size: int) -> np.ndarray:
    """``(out_size, in_size)`` float64 matrix of Pillow's integer Lanczos coefficients (``precompute_coeffs``
    then ``normalize_coeffs_8bpc``) for the input span ``[in0, in1)``, which Pillow holds as C floats."""
    in0, in1 = np.float32(in0), np.float32(in1)
    scale = float(np.float32(in1 - in0)) / out_size
    filterscale = max(scale, 1.0)
    support = _LANCZOS_SUPPORT * filterscale
    ksize = math.ceil(support) * 2 + 1
    center = float(in0) + (np.arange(out_size) + 0.5) * scale
    xmin = np.maximum(np.trunc(center - support + 0.5).astype(np.int64), 0)
    count = np.minimum(np.trunc(center + support + 0.5).astype(np.int64), in_size) - xmin
    taps = np.arange(ksize)
    valid = taps[None, :] < count[:, None]
    x = ((taps[None, :] + xmin[:, None]) - center[:, None] + 0.5) * (1.0 / filterscale)
    with np.errstate(divide="ignore", invalid="ignore"):
        px, px3 = x * math.pi, (x / 3) * math.pi
        lanczos = np.where(x == 0.0, 1.0, np.sin(px) / px) * np.where(x == 0.0, 1.0, np.sin(px3) / px3)
    w = np.where(valid & (x >= -3.0) & (x < 3.0), lanczos, 0.0)
    ww = np.cumsum(w, axis=1)[:, -1:]  # summed left to right, as the C loop does
    w = w / np.where(ww == 0.0, 1.0, ww)
    k = np.trunc(w * (1 << _PRECISION_BITS) + np.where(w < 0, -0.5, 0.5))
    out = np.zeros((out_size, in_size))
    cols = taps[None, :] + xmin[:, None]
    out[np.nonzero(valid)[0], cols[valid]] = k[valid]
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=512)
def _horizontal(in_size: int, spans: tuple[tuple[float, float], ...], out_size: int) -> np.ndarray:
    """The matrices of :func:`_lanczos_matrix` for each ``(in0, in1)`` of ``spans``, stacked and transposed:
    ``(in_size, len(spans) * out_size)``, the right operand of a horizontal pass."""
    out = np.ascontiguousarray(np.concatenate([_lanczos_matrix(in_size, a, b, out_size) for a, b in spans]).T)
    out.flags.writeable = False
    return out


def _fixed_point(acc: np.ndarray) -> np.ndarray:
    """Pillow's ``clip8`` of a pass's integer sums (round half up at 22 bits, clip to 0..255), in place."""
    acc += 1 << (_PRECISION_BITS - 1)
    acc *= 1.0 / (1 << _PRECISION_BITS)
    np.floor(acc, out=acc)
    return np.clip(acc, 0, 255, out=acc)


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in row blocks small enough for single-threaded BLAS."""
    rows = max(1, _BLAS_BLOCK // max(1, b.shape[0] * b.shape[1]))
    if len(a) <= rows:
        return a @ b
    out = np.empty((len(a), b.shape[1]))
    for s in range(0, len(a), rows):
        np.matmul(a[s:s + rows], b, out=out[s:s + rows])
    return out


@functools.lru_cache(maxsize=4096)
def _plan(size: tuple[int, int], box: tuple, shape: tuple[int, int]):
    """Pillow's pass plan for one resize: ``(box as C floats, need_horizontal, need_vertical,
    horizontal_first)`` (``ImagingResampleInner``)."""
    in_h, in_w = shape
    xsize, ysize = size
    box = tuple(float(np.float32(v)) for v in box)
    need_h = xsize != in_w or box[0] != 0 or box[2] != xsize
    need_v = ysize != in_h or box[1] != 0 or box[3] != ysize
    return box, need_h, need_v, not (in_h - ysize > 0 and in_h - ysize > (in_w - xsize) * 2)


def _resample(a: np.ndarray, size: tuple[int, int], box: tuple) -> np.ndarray:
    """``Image.im.resize(size, LANCZOS, box)`` (no reducing step) of a 2-D uint8 array, as uint8."""
    in_h, in_w = a.shape
    box, need_h, need_v, horizontal_first = _plan(size, box, a.shape)
    x = a.astype(np.float64)
    for axis in ((1, 0) if horizontal_first else (0, 1)):
        if axis == 1 and need_h:
            x = _fixed_point(_matmul(x, _horizontal(in_w, ((box[0], box[2]),), size[0])))
        elif axis == 0 and need_v:
            x = _fixed_point(_matmul(_lanczos_matrix(in_h, box[1], box[3], size[1]), x))
    return x.astype(np.uint8)


def _reduce_step(gray, size: tuple[int, int], box: tuple):
    """``Image.resize``'s ``reducing_gap`` step: ``(image, box)`` to resample (Pillow's own ``reduce`` on
    ``_get_safe_box``), or ``(gray, box)`` unchanged when the scale factor is below the gap."""
    w, h = gray.size
    fx = int((box[2] - box[0]) / size[0] / REDUCING_GAP) or 1
    fy = int((box[3] - box[1]) / size[1] / REDUCING_GAP) or 1
    if fx == 1 and fy == 1:
        return gray, box
    sx, sy = (box[2] - box[0]) / size[0], (box[3] - box[1]) / size[1]
    support_x, support_y = (_LANCZOS_SUPPORT - 0.5) * sx, (_LANCZOS_SUPPORT - 0.5) * sy
    rbox = (max(0, int(box[0] - support_x)), max(0, int(box[1] - support_y)),
            min(w, math.ceil(box[2] + support_x)), min(h, math.ceil(box[3] + support_y)))
    return gray.reduce((fx, fy), box=rbox), ((box[0] - rbox[0]) / fx, (box[1] - rbox[1]) / fy,
                                             (box[2] - rbox[0]) / fx, (box[3] - rbox[1]) / fy)


def _lanczos(gray, size: tuple[int, int], box=None) -> np.ndarray:
    """``np.asarray(gray.resize(size, LANCZOS, box=box, reducing_gap=REDUCING_GAP))`` of a mode ``L`` image,
    bit for bit."""
    box = (0, 0, *gray.size) if box is None else tuple(box)
    if gray.size == tuple(size) and box == (0, 0, *gray.size):
        return np.asarray(gray)
    src, box = _reduce_step(gray, size, box)
    return _resample(np.asarray(src), size, box)


def _lanczos_pair(gray, size: tuple[int, int], box: tuple) -> tuple[np.ndarray, np.ndarray]:
    """``(_lanczos(gray, size), _lanczos(gray, size, box))``. When neither needs a reducing step and both run
    the same two passes, horizontal first (the usual case for the drafts hashed here), the two resizes are
    two matrix products in all: one for both horizontal passes, one batched for both vertical ones."""
    full = (0, 0, *gray.size)
    shape = gray.size[::-1]
    fplan, cplan = _plan(size, full, shape), _plan(size, tuple(box), shape)
    if (fplan[1:] != (True, True, True) or cplan[1:] != (True, True, True)
            or _reduce_step(gray, size, full)[0] is not gray or _reduce_step(gray, size, box)[0] is not gray):
        return _lanczos(gray, size), _lanczos(gray, size, box)
    (in_h, in_w), (fb, cb) = shape, (fplan[0], cplan[0])
    a = np.asarray(gray, dtype=np.float64)
    tmp = _fixed_point(_matmul(a, _horizontal(in_w, ((fb[0], fb[2]), (cb[0], cb[2])), size[0])))
    both = _fixed_point(np.matmul(_vertical(in_h, ((fb[1], fb[3]), (cb[1], cb[3])), size[1]),
                                  tmp.reshape(in_h, 2, size[0]).transpose(1, 0, 2))).astype(np.uint8)
    return both[0], both[1]


@functools.lru_cache(maxsize=512)
def _vertical(in_size: int, spans: tuple[tuple[float, float], ...], out_size: int) -> np.ndarray:
    """The matrices of :func:`_lanczos_matrix` for each ``(in0, in1)`` of ``spans``, stacked:
    ``(len(spans), out_size, in_size)``, the left operands of a batched vertical pass."""
    out = np.stack([_lanczos_matrix(in_size, a, b, out_size) for a, b in spans])
    out.flags.writeable = False
    return out


def hashes_of_decoded(im) -> tuple[str, str, str]:
    """``(phash, dhash, phash_centre)`` as 16-hex strings of an image decoded after :func:`prepare_decode`
    (equal to what :func:`hash_images` gives for the same bytes)."""
    p, d, c = thumbnails(im if im.mode == "L" else im.convert("L"))
    ph, pc = to_hex(phash_from_thumbs(np.stack([p, c])))
    return ph, to_hex(dhash_from_thumbs(d[None]))[0], pc


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
                ph[idx] = phash_from_thumbs(np.stack([results[i][0][0] for i in good]))
                dh[idx] = dhash_from_thumbs(np.stack([results[i][0][1] for i in good]))
                pc[idx] = phash_from_thumbs(np.stack([results[i][0][2] for i in good]))
            if progress is not None:
                progress(len(part))
    return HashResult(ph, dh, errors, pc)


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


def hamming_pairs_with_centre(full: np.ndarray, centre: np.ndarray, threshold: int, *,
                              workers: int | None = None) -> np.ndarray:
    """Pairs ``(i, j)``, ``i < j``, whose full hashes are within ``threshold`` bits, or the full hash of one
    within ``threshold`` bits of the centre hash of the other (a copy cropped by about :data:`CENTRE_CROP` per
    side looks like its original's centre). Exact; sorted.

    Up to :data:`BRUTE_FORCE_MAX` codes: full x full (one triangle) plus centre x full by faiss brute force
    (1.5x the work of full hashes alone); above, one :func:`hamming_pairs` over full and centre codes
    together (the generalised pigeonhole search), pairs mapped back to their images.
    """
    h, threshold = _check(full, threshold)
    c, _ = _check(centre, threshold)
    n = len(h)
    if n < 2:
        return np.zeros((0, 2), dtype=np.int64)
    if n <= BRUTE_FORCE_MAX:
        same = hamming_pairs(h, threshold, workers=workers)
        qi, di, _ = _range(_codes(h), _codes(c), threshold, threads=workers)
        cross = np.stack([np.minimum(qi, di), np.maximum(qi, di)], axis=1)[qi != di]
        both = np.concatenate([same, cross])
    else:
        owner = np.concatenate([np.arange(n), np.arange(n)])
        p = hamming_pairs(np.concatenate([h, c]), threshold, workers=workers)
        a, b = owner[p[:, 0]], owner[p[:, 1]]
        both = np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1)[a != b]
    if not len(both):
        return np.zeros((0, 2), dtype=np.int64)
    key = np.unique(both[:, 0] * n + both[:, 1])
    return np.stack([key // n, key % n], axis=1).astype(np.int64)


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
