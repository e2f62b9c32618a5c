"""What the perceptual hashes are made invariant to, with no model: borders, crops and mirrors.

People re-post a photograph padded (screenshot padding, letterboxing, a white frame), cropped, slightly
rotated or mirrored. A 64-bit pHash of the whole frame moves by 15-35 bits under each of these, far beyond
the match threshold, so :mod:`cultura.curate.hashing` hashes *views* of each image chosen here:

- **content box** (:func:`content_box`): uniform or near-uniform borders are trimmed before any hash is
  taken, on each side separately (a row or column is border while at most :data:`TRIM_FRACTION` of its
  pixels differ by more than :data:`TRIM_TOLERANCE` grey levels from the colour of the outermost line). So a
  padded copy hashes like its original, and two different photographs that share a white frame are
  compared on their content: a shared border alone never makes two photos match. Trimming stops at the
  first non-uniform line and never removes more than :data:`TRIM_MAX` of a side's length in all (a picture
  that is mostly flat is hashed whole);
- **centre crops** (:data:`CENTRE_CROPS`): the pHash of the content box with 5 % and 10 % of each side's
  length cut off. A copy cropped by about that much per side has a full pHash close to one of its
  original's centre hashes; a slightly rotated copy (its corners filled) has centre hashes close to its
  original's;
- **mirror** (:func:`mirror`): the pHash of the horizontally mirrored thumbnail, so a mirrored copy's full
  pHash is close to its original's mirror pHash;
- **flip** (:func:`flip`): the pHash of the thumbnail turned upside down, so a copy flipped upside down has
  a full pHash close to its original's flip pHash, and a copy turned 180 degrees a mirror pHash close to it.

Every view comes from the one decode the other hashes use (no second decode) and costs one more
32x32 resize (the centre crops, done in the same two matrix products) or nothing (the mirror and the flip:
the thumbnail read backwards). :func:`views` lists them in the order :mod:`cultura.curate.hashing` stores them.

>>> import numpy as np
>>> a = np.full((40, 60), 255, dtype=np.uint8); a[8:32, 10:50] = np.arange(40, dtype=np.uint8)
>>> content_box(a)  # the white frame and one more line each side (TRIM_MARGIN)
(11, 9, 49, 31)
"""
from __future__ import annotations

import numpy as np

#: A border line's pixels may differ from the outermost line's colour by this many grey levels (JPEG noise).
TRIM_TOLERANCE = 6
#: ... except for at most this share of the line's pixels (a speck of dust, JPEG ringing).
TRIM_FRACTION = 0.01
#: A trimmed side loses one more line and this share of its length (the edge between border and content).
TRIM_MARGIN = 0.01
#: At most this share of a side's length is trimmed in all (both ends together: twice this).
TRIM_MAX = 0.4
#: The centre pHashes cut these shares of each side's length off the content box.
CENTRE_CROPS = (0.05, 0.10)
#: Names the views' definition (goes into :data:`cultura.curate.hashing.HASH_VERSION`).
VERSION = (f"trim{TRIM_TOLERANCE}-{TRIM_FRACTION}-{TRIM_MARGIN}-{TRIM_MAX}"
           f"/centre{'+'.join(map(str, CENTRE_CROPS))}/mirror/flip")


def _border(lines: np.ndarray) -> int:
    """How many of ``lines`` (from the edge inwards, ``(n, length)`` int16) are border: the leading lines
    whose pixels, but :data:`TRIM_FRACTION` of them, are within :data:`TRIM_TOLERANCE` of the first line's
    median."""
    if not len(lines):
        return 0
    first = np.sort(lines[0])  # its median, as np.median gives it, at a fraction of the cost (every image)
    k = len(first)
    ref = int(first[k // 2]) if k % 2 else int((int(first[k // 2 - 1]) + int(first[k // 2])) / 2)
    if np.count_nonzero(np.abs(lines[0] - ref) > TRIM_TOLERANCE) / k > TRIM_FRACTION:
        return 0  # the usual case, a photograph without a border: one line looked at
    lines = lines[:int(2 * TRIM_MAX * len(lines)) + 2]  # content_box refuses more anyway
    off = (np.abs(lines - ref) > TRIM_TOLERANCE).mean(axis=1) > TRIM_FRACTION
    return int(np.argmax(off)) if off.any() else len(lines)


def content_box(gray: np.ndarray) -> tuple[int, int, int, int]:
    """``(left, top, right, bottom)`` of a 2-D grey array with its uniform borders trimmed (one pass per
    side; the whole image when trimming would leave less than ``1 - 2 * TRIM_MAX`` of a side or fewer
    than 8 pixels)."""
    a = np.asarray(gray, dtype=np.int16)
    h, w = a.shape
    top, bottom, left, right = _border(a), _border(a[::-1]), _border(a.T), _border(a.T[::-1])
    # a trimmed side loses TRIM_MARGIN more of the length: the blurred or JPEG-ringing edge between border and
    # content, which would otherwise be a bright (or dark) line every padded copy shares
    my, mx = 1 + int(TRIM_MARGIN * h), 1 + int(TRIM_MARGIN * w)
    top, bottom = top + my * (top > 0), bottom + my * (bottom > 0)
    left, right = left + mx * (left > 0), right + mx * (right > 0)
    if (top + bottom > 2 * TRIM_MAX * h or left + right > 2 * TRIM_MAX * w
            or h - top - bottom < 8 or w - left - right < 8):
        return 0, 0, w, h
    return left, top, w - right, h - bottom


def crop_box(box: tuple[int, int, int, int], share: float) -> tuple[int, int, int, int]:
    """``box`` with ``share`` of its width and height cut off each side (``box`` itself when that would leave
    nothing)."""
    left, top, right, bottom = box
    dx, dy = int(round((right - left) * share)), int(round((bottom - top) * share))
    if right - left - 2 * dx <= 0 or bottom - top - 2 * dy <= 0:
        return box
    return left + dx, top + dy, right - dx, bottom - dy


def views(box: tuple[int, int, int, int]) -> list[tuple[int, int, int, int]]:
    """The boxes whose 32x32 thumbnails are pHashed: the content box, then each of :data:`CENTRE_CROPS`."""
    return [box, *(crop_box(box, s) for s in CENTRE_CROPS)]


def flip(thumbs: np.ndarray) -> np.ndarray:
    """Thumbnails ``(..., h, w)`` turned upside down (the flip pHash is the pHash of these)."""
    return np.ascontiguousarray(np.asarray(thumbs)[..., ::-1, :])


def mirror(thumbs: np.ndarray) -> np.ndarray:
    """Thumbnails ``(..., h, w)`` mirrored left to right (the mirror pHash is the pHash of these)."""
    return np.ascontiguousarray(np.asarray(thumbs)[..., ::-1])
