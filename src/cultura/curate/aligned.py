"""The third look a candidate pair gets before it joins a cluster: its detail, aligned frame on frame.

Why: the fine hashes (:mod:`cultura.curate.confirm`) compare the 12x12 lowest frequencies of a 32x32 view
thumbnail. Two different crops of one smooth region (a sky, a dark surround, a wall) share those: their
coarse gradient is the same, and the signs of their DCT coefficients agree as a copy's do. So do two
crops that overlap by a half: on 16,000 crops of 20 photographs the star around one representative then
held crops on both sides of it that share no pixel. What a crop of the same region does *not* share with
another crop is its detail where the two frames are put on one another: the edges, texture and grain
between about 2 and 8 pixels on a 64x64 view.

The check (weight-free, run on the candidate pairs only, so its cost grows with the pairs, not the images):

- each image of a pair is decoded once more, reduced (a JPEG at 1/2-1/8 scale, grey), its content box
  found as for the hashes (:func:`cultura.curate.invariance.content_box`) and its three hashed views (full,
  5 % and 10 % centre crops) resized to :data:`SIZE` x :data:`SIZE`; each view is band-passed (a
  difference of Gaussians, :data:`BAND`): what is left is the detail, with the light and the gradient of a
  region taken out;
- the alignment comes from the fine hashes: the views and the flip under which the pair's fine hashes agree
  best map one frame onto the other (a copy cropped by 10 % per side: its full view on the original's 10 %
  centre view; a mirrored copy: under the mirror);
- the view is cut in :data:`GRID` x :data:`GRID` blocks, and each block may shift by up to :data:`SHIFT`
  pixels either way on its own (a copy rotated by a few degrees, a padded copy whose content box is off by
  a line). A block *has detail* when its band-passed grey is above :data:`FLOOR` in both images (JPEG
  grain on a smooth region is not detail); it *matches* when the two correlate at least :data:`MATCH`;
- the pair is kept when at least :data:`SHARE` of the blocks with detail match, and :data:`MIN_BLOCKS` of
  them. A flipped alignment asks more (the second value of each): a subject that is its own mirror image
  (a clock face, a flower) matches a crop from its other side under the mirror.

A copy keeps its detail block by block (re-encoded at quality 30, halved, greyed, mirrored, framed,
rotated 3 degrees, watermarked); two crops of a smooth region have detail in few blocks, and two crops that
overlap by part of a frame have their detail shifted against itself. What this gives a reviewer: on 16,000
crops of 20 photographs, the star around a representative no longer holds crops on either side of it that
share no pixel (docs/dedup_calibration.md has the numbers). Periodic textures (a brick wall) are the limit
of any pixel check: two crops a period apart are the same picture.

Images whose blob cannot be read give no detail: their pairs are dropped like the pairs of an image with no
fine hash (the image stays, in no cluster; the hashing step has flagged an unreadable blob already).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable

import numpy as np
from PIL import Image

from .. import pixels
from ..lazy import lazy
from . import confirm, invariance

ndimage = lazy("scipy.ndimage")  # imported on first use (start-up)

#: Side of the view thumbnails compared (pixels).
SIZE = 64
#: The band-pass: a Gaussian of this sigma (pixels of the SIZE view) minus one of the larger sigma.
BAND = (0.8, 4.0)
#: Largest shift tried either way around the hashes' alignment, in pixels of the SIZE view.
SHIFT = 3
#: The view is compared in GRID x GRID blocks (a block may shift on its own: a copy rotated by a few degrees
#: is aligned block by block).
GRID = 4
#: A block has detail when the root mean square of its band-passed grey is above this (grey levels; JPEG
#: grain on a smooth region stays below).
FLOOR = 2.0
#: A block with detail in both matches when its band-passed views correlate at least this much: (plain,
#: flipped alignment). A flip asks more: a subject that is symmetric (a clock face, a flower) matches its
#: own mirror image, so two crops from either side of it align under the mirror.
MATCH = (0.7, 0.8)
#: ... and a pair is kept when at least this share of the blocks with detail in both match (plain, flipped)
SHARE = (0.7, 0.9)
#: ... and at least this many blocks match (a pair whose views are smooth but for a line or two is not kept).
MIN_BLOCKS = 4
#: Names the check (goes into each hash dedup run's parameters: a change is a new run).
VERSION = (f"aligned{SIZE}-dog{BAND[0]}-{BAND[1]}-shift{SHIFT}-grid{GRID}-floor{FLOOR}"
           f"-match{MATCH[0]}/{MATCH[1]}-share{SHARE[0]}/{SHARE[1]}-min{MIN_BLOCKS}")

_FLIPS = (lambda x: x, lambda x: x[..., ::-1], lambda x: x[..., ::-1, :], lambda x: x[..., ::-1, ::-1])


def view_thumbs(src) -> np.ndarray:
    """``(3, SIZE, SIZE)`` uint8 grey thumbnails of an image's hashed views (full content box, 5 % and 10 %
    centre crops) from a reduced decode of ``src`` (a path or bytes). Raises what Pillow raises on an
    unreadable image."""
    grey = pixels.open_displayed(src, "L", draft=(2 * SIZE, 2 * SIZE))
    box = invariance.content_box(np.asarray(grey))
    return np.stack([np.asarray(grey.resize((SIZE, SIZE), Image.Resampling.BILINEAR, box=b), dtype=np.uint8)
                     for b in invariance.views(box)])


def load_thumbs(sources: Iterable, *, workers: int | None = None) -> list[np.ndarray | None]:
    """:func:`view_thumbs` of each source in order (None where it cannot be read), decoded in threads
    (Pillow releases the GIL while it decodes)."""

    def one(src):
        if src is None:  # no blob on record
            return None
        try:
            return view_thumbs(src)
        except (*pixels.UNREADABLE, Image.DecompressionBombError):  # no detail: its pairs are dropped (see above)
            return None

    sources = list(sources)
    workers = workers or min(8, os.cpu_count() or 1)
    if workers <= 1 or len(sources) < 16:
        return [one(s) for s in sources]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, sources, chunksize=32))


def band(thumbs: np.ndarray) -> np.ndarray:
    """The detail of ``(..., SIZE, SIZE)`` thumbnails: a difference of Gaussians (:data:`BAND`), float32."""
    t = np.asarray(thumbs, dtype=np.float32)
    lead = [0] * (t.ndim - 2)
    lo, hi = BAND
    return ndimage.gaussian_filter(t, lead + [lo, lo]) - ndimage.gaussian_filter(t, lead + [hi, hi])


def _alignments(fa: np.ndarray, fb: np.ndarray):
    """``(pair, view of a, view of b, flip)`` of the view combinations under which each pair's fine hashes
    agree best (every one of a tie)."""
    d = confirm.combination_distances(fa, fb)
    p, c = np.nonzero(d == d.min(axis=1, keepdims=True))
    v = len(confirm.FINE_VIEWS)
    i, j, f = np.unravel_index(c, (v, v, len(confirm.FLIP_MASKS)))
    return p, i, j, f


def aligned_matches(da: np.ndarray, db: np.ndarray, fa: np.ndarray, fb: np.ndarray) -> np.ndarray:
    """Element-wise whether the aligned detail of two images agrees: ``da``, ``db`` ``(m, 3, SIZE, SIZE)``
    band-passed views (:func:`band`), ``fa``, ``fb`` their ``(m, 3, 2)`` fine hashes (the alignment: the
    view combinations and flip under which they agree best). Under some such alignment, the blocks with
    detail in both views (:data:`GRID`, :data:`FLOOR`) correlate at least :data:`MATCH` at their best shift
    up to :data:`SHIFT` pixels, in at least :data:`SHARE` of those blocks and :data:`MIN_BLOCKS` of them."""
    m = len(da)
    out = np.zeros(m, dtype=bool)
    if not m:
        return out
    p, i, j, f = _alignments(np.asarray(fa, np.uint64), np.asarray(fb, np.uint64))
    r, g = SHIFT, GRID
    s = (SIZE - 2 * r) // g
    w = s * g
    a = np.ascontiguousarray(da[p, i][:, r:r + w, r:r + w]).reshape(len(p), g, s, g, s)
    b = np.array(db[p, j])
    for k in range(1, len(_FLIPS)):
        sel = f == k
        if sel.any():
            b[sel] = _FLIPS[k](b[sel])
    # per block and shift: the sum of products and b's energy (from its integral image); band-passed views
    # have means near zero, so plain sums serve as the correlation's
    n = len(p)
    ea = (a * a).sum(axis=(2, 4))
    sq = np.zeros((n, SIZE + 1, SIZE + 1), dtype=np.float64)
    sq[:, 1:, 1:] = (b.astype(np.float64) ** 2).cumsum(axis=1).cumsum(axis=2)
    corner = np.arange(g) * s
    best = np.full((n, g, g), -1.0, dtype=np.float32)
    eb_best = np.zeros((n, g, g), dtype=np.float32)
    for dy in range(2 * r + 1):
        y0, y1 = (dy + corner)[:, None], (dy + corner + s)[:, None]
        for dx in range(2 * r + 1):
            x0, x1 = (dx + corner)[None, :], (dx + corner + s)[None, :]
            eb = (sq[:, y1, x1] - sq[:, y0, x1] - sq[:, y1, x0] + sq[:, y0, x0]).astype(np.float32)
            c = (a * b[:, dy:dy + w, dx:dx + w].reshape(n, g, s, g, s)).sum(axis=(2, 4))
            v = c / np.sqrt(ea * np.maximum(eb, 0) + 1e-6)
            up = v > best
            best[up], eb_best[up] = v[up], eb[up]
    floor = FLOOR ** 2 * s * s
    detail = (ea > floor) & (eb_best > floor)
    flipped = f > 0
    matched = (detail & (best >= np.where(flipped, MATCH[1], MATCH[0])[:, None, None])).reshape(len(p), -1).sum(1)
    ok = (matched >= MIN_BLOCKS) & (matched >= np.where(flipped, SHARE[1], SHARE[0])
                                    * detail.reshape(len(p), -1).sum(1))
    np.logical_or.at(out, p, ok)
    return out


def verify_pairs(pairs: np.ndarray, fine: np.ndarray, thumbs_of: Callable[[np.ndarray], list],
                 *, step: int = 4096) -> np.ndarray:
    """The ``pairs`` (``(m, 2)`` indexes into ``fine``) whose aligned detail agrees (:func:`aligned_matches`),
    in their order. ``thumbs_of(indexes)``: :func:`view_thumbs` of those images (None: unreadable). Images
    are decoded once per block of ``step`` pairs (the pairs sorted by image, so a block needs few)."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    keep = np.zeros(len(pairs), dtype=bool)
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    cache: dict[int, np.ndarray | None] = {}
    for s in range(0, len(order), step):
        sel = order[s:s + step]
        p = pairs[sel]
        need = [int(x) for x in np.unique(p) if int(x) not in cache]
        if len(cache) > 4 * step:  # bounded memory at 1M: keep what the next block is likely to need
            wanted = set(p.ravel().tolist())
            cache = {k: v for k, v in cache.items() if k in wanted}
        cache.update(zip(need, (None if t is None else band(t) for t in thumbs_of(np.array(need, dtype=np.int64)))))
        ok = np.array([cache[a] is not None and cache[b] is not None for a, b in p.tolist()], dtype=bool)
        if not ok.any():
            continue
        q = p[ok]
        da = np.stack([cache[a] for a in q[:, 0].tolist()])
        db = np.stack([cache[b] for b in q[:, 1].tolist()])
        keep[sel[np.flatnonzero(ok)[aligned_matches(da, db, fine[q[:, 0]], fine[q[:, 1]])]]] = True
    return pairs[keep]
