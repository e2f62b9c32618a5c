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
    (``HASH_VERSION`` names the definition and goes into each dedup run's parameters). The grey levels are
    those of the picture a browser shows (:mod:`cultura.pixels`: EXIF orientation applied, 16-bit scaled to
    8, transparency over white), so a copy that looks the same hashes the same. Decoding runs in a
    thread pool (Pillow releases the GIL while decoding and resizing); the DCT is done for the whole batch.

Search
    The exact Hamming pair search lives in :mod:`cultura.curate.hash_search` (re-exported here).
"""
from __future__ import annotations

import io
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from .. import pixels
from ..errors import CulturaError
from ..lazy import lazy
from . import confirm, invariance, lanczos
from .hash_search import (  # noqa: F401 - re-exported: the search API is reached through this module too
    BRUTE_FORCE_MAX,
    connected_clusters,
    hamming_pairs,
    hamming_pairs_with_centre,
    hamming_to,
    hamming_to_each,
    pair_views,
    plan_parts,
    view_distances,
)

fftpack = lazy("scipy.fftpack")  # imported on first use (start-up)

#: JPEGs are decoded at a reduced scale that keeps at least this many pixels a side.
DRAFT_SIZE = 64
#: Names the hash definition; stored in dedup run parameters so a change of definition is a new run.
HASH_VERSION = f"imagehash-4.3/draft{DRAFT_SIZE}/gap3/{invariance.VERSION}/{pixels.VERSION}"
#: Pillow's ``reducing_gap`` for the resizes (:mod:`cultura.curate.lanczos`).
REDUCING_GAP = lanczos.REDUCING_GAP
#: The centre pHash is the pHash of the content box with this share of each side's length cut off: a copy
#: cropped by up to about this much per side has a full pHash close to its original's centre pHash.
CENTRE_CROP = invariance.CENTRE_CROPS[0]
#: The pHash views stored beside the full one in ``images.phash_variants`` (16 hex each, in this order).
VARIANTS = ("mirror", "centre10", "flip")


class HashingError(ValueError):
    """An image could not be decoded for hashing (the message names the file and the reason)."""


# ---------------------------------------------------------------------------------------------- hashes
@dataclass
class HashResult:
    """Output of :func:`hash_images`: one row per input; failed inputs have hash 0 and an entry in errors.

    ``phash_centre``: the pHash of the content box's centre (:data:`CENTRE_CROP` cut off each side);
    ``phash_variants``: ``(n, len(VARIANTS))`` uint64, the mirror, 10 % centre and flip pHashes
    (:mod:`cultura.curate.invariance`); ``sizes``: ``(n, 2)`` int64, the displayed width and height (EXIF
    orientation applied; 0 for failed inputs); ``fine``: ``(n, 3, 2)`` uint64, the fine hashes a candidate
    pair is confirmed with (:mod:`cultura.curate.confirm`); all from the same decode."""

    phash: np.ndarray
    dhash: np.ndarray
    errors: dict[int, str] = field(default_factory=dict)
    phash_centre: np.ndarray | None = None
    phash_variants: np.ndarray | None = None
    sizes: np.ndarray | None = None
    fine: np.ndarray | None = None

    @classmethod
    def zeros(cls, n: int) -> "HashResult":
        """``n`` rows of zero hashes and sizes, no errors: what a batch is filled into."""
        return cls(np.zeros(n, np.uint64), np.zeros(n, np.uint64), {}, np.zeros(n, np.uint64),
                   np.zeros((n, len(VARIANTS)), np.uint64), np.zeros((n, 2), np.int64),
                   np.zeros((n, len(confirm.FINE_VIEWS), 2), np.uint64))

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


def _load_small(item: Any) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """Decode one image (path, bytes or PIL image) to its thumbnails (:func:`thumbnails`) and its displayed
    size."""

    if isinstance(item, Image.Image):
        grey = pixels.displayed(item, "L")
        return (*thumbnails(grey), grey.size)
    src = item if isinstance(item, (str, Path)) else _as_file(item)
    with Image.open(src) as im:
        stored = im.size  # before the draft shrinks it
        prepare_decode(im)
        grey = pixels.displayed(im, "L")  # loads the (drafted) image
        return (*thumbnails(grey), pixels.displayed_size(stored, pixels.orientation(im)))


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

    a = np.asarray(gray)
    box = invariance.content_box(a)
    p = lanczos.lanczos_boxes(gray, (32, 32), invariance.views(box), pixels=a)
    d = np.asarray(gray.resize((9, 8), Image.Resampling.LANCZOS, box=box, reducing_gap=lanczos.REDUCING_GAP))
    return p, d


def phash_views(thumbs: np.ndarray) -> np.ndarray:
    """``(n, 5)`` uint64 pHashes of ``(n, 3, 32, 32)`` thumbnails from :func:`thumbnails`: full, 5 % centre,
    mirror, 10 % centre, flip (upside down; the column order of :meth:`HashResult.views`)."""
    thumbs = np.asarray(thumbs)
    if not len(thumbs):
        return np.zeros((0, 2 + len(VARIANTS)), dtype=np.uint64)
    stack = np.stack([thumbs[:, 0], thumbs[:, 1], invariance.mirror(thumbs[:, 0]), thumbs[:, 2],
                      invariance.flip(thumbs[:, 0])], axis=1)
    return phash_from_thumbs(stack.reshape(-1, 32, 32)).reshape(-1, 2 + len(VARIANTS))


def all_hashes_of_decoded(im) -> tuple[str, str, str, str, str]:
    """``(phash, dhash, phash_centre, phash_variants, phash_fine)`` as hex strings of an image decoded after
    :func:`prepare_decode`, all from one set of thumbnails (the thumbnails are most of the hashing's cost:
    the downloader's validating decode computes them once)."""
    p, d = thumbnails(pixels.displayed(im, "L"))
    v = phash_views(p[None])[0]
    return (to_hex(v[:1])[0], to_hex(dhash_from_thumbs(d[None]))[0], to_hex(v[1:2])[0],
            variants_to_hex(v[None, 2:])[0], confirm.to_hex(confirm.fine_from_thumbs(p[None]))[0])


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
    except OSError as e:
        if e.errno is not None:  # the file system's (a missing file, a permission, an I/O error), not the image's
            raise CulturaError(f"Cannot read {e.filename or item} ({e.strerror or e}): fix the file or the disk, "
                               "then rerun.") from e
        return None, f"{type(e).__name__}: {e}"  # Pillow's verdicts on the bytes carry no errno
    except Exception as e:  # noqa: BLE001 - any decode failure is reported per input, with its reason
        return None, f"{type(e).__name__}: {e}"


def hash_images(items: Iterable[Any], *, workers: int | None = None, chunk: int = 256,
                progress=None) -> HashResult:
    """pHash and dHash of images given as paths, bytes or PIL images, decoding in a thread pool.

    Inputs that do not decode do not stop the batch: their hashes are 0 and ``errors[index]`` holds the reason.
    A file that cannot be read (missing, no permission, an I/O error) raises :class:`~cultura.errors.CulturaError`
    instead: that says nothing about the image.
    ``progress`` is an optional callable called with the number of inputs done after each chunk.
    """
    items = list(items)
    n = len(items)
    workers = workers or min(8, os.cpu_count() or 1)
    res = HashResult.zeros(n)
    ph, dh, pc, pv, sizes, fine = res.phash, res.dhash, res.phash_centre, res.phash_variants, res.sizes, res.fine
    errors = res.errors
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
                thumbs = np.stack([results[i][0][0] for i in good])
                views = phash_views(thumbs)
                fine[idx] = confirm.fine_from_thumbs(thumbs)
                ph[idx], pc[idx], pv[idx] = views[:, 0], views[:, 1], views[:, 2:]
                dh[idx] = dhash_from_thumbs(np.stack([results[i][0][1] for i in good]))
                sizes[idx] = [results[i][0][2] for i in good]
            if progress is not None:
                progress(len(part))
    return res


def compute_hashes(paths_or_images: Iterable[Any], *,
                   workers: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(phash, dhash)`` as uint64 arrays, one entry per input (paths, bytes or PIL images).

    Raises :class:`HashingError` naming the first input that cannot be decoded (use :func:`hash_images` to
    get per-input errors instead), and :class:`~cultura.errors.CulturaError` for a file that cannot be read.

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
