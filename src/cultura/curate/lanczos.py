"""Pillow's 8-bit Lanczos resize in numpy, bit for bit, for the hash thumbnails (:mod:`cultura.curate.hashing`).

Pillow (libImaging/Resample.c) resizes an 8-bit image in two separable passes with 22-bit fixed-point
integer coefficients, each pass rounding and clipping to uint8; it computes the coefficients (two sines per
tap) on every call and runs a scalar loop. Here the coefficients are computed the same way once per geometry
(cached) and each pass is a float64 matrix product with them: every product and partial sum is an integer
below 2**53, so the arithmetic is exact and the result is Pillow's bit for bit (tested against
``Image.resize`` over thousands of sizes and boxes, tests/unit/curate/test_hashing.py). :func:`lanczos_boxes`
resizes several boxes of one image (the content box, its centre crops) in two matrix products in all.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..lazy import lazy

threadpoolctl = lazy("threadpoolctl")  # only a decode process needs it (installed with scikit-learn)

#: Pillow's ``reducing_gap`` for the resizes (box-reduce first while the scale factor exceeds it).
REDUCING_GAP = 3.0

_PRECISION_BITS = 22
_LANCZOS_SUPPORT = 3.0
_BLAS_BLOCK = 1 << 18   # rows x columns x inner size of one product (OpenBLAS threads above 2 * 4 * 65536)
_ONE_THREAD = False     # set by one_blas_thread(): every product is one call, whatever its size


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


def one_blas_thread() -> None:
    """Run BLAS on one thread in this process (a decode process: there is one per CPU already), so that a
    product is one call instead of row blocks (a third cheaper on the thumbnails; the result is the same:
    every partial sum is an exact integer)."""
    global _ONE_THREAD
    threadpoolctl.threadpool_limits(1, user_api="blas")
    _ONE_THREAD = True


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b``, in row blocks small enough for single-threaded BLAS unless :func:`one_blas_thread` was
    called (a multi-threaded product of these sizes costs many times the CPU of a single-threaded one)."""
    rows = max(1, _BLAS_BLOCK // max(1, b.shape[0] * b.shape[1]))
    if _ONE_THREAD or len(a) <= rows:
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


def _lanczos(gray, size: tuple[int, int], box=None, *, reduced=None) -> np.ndarray:
    """``np.asarray(gray.resize(size, LANCZOS, box=box, reducing_gap=REDUCING_GAP))`` of a mode ``L`` image,
    bit for bit. ``reduced``: :func:`_reduce_step`'s answer for this resize when the caller has it already."""
    box = (0, 0, *gray.size) if box is None else tuple(box)
    if gray.size == tuple(size) and box == (0, 0, *gray.size):
        return np.asarray(gray)
    src, box = reduced if reduced is not None else _reduce_step(gray, size, box)
    return _resample(np.asarray(src), size, box)


def lanczos_boxes(gray, size: tuple[int, int], boxes, *, pixels: np.ndarray | None = None) -> np.ndarray:
    """``np.stack([_lanczos(gray, size, box) for box in boxes])``. When none needs a reducing step and all run
    the same two passes, horizontal first (the usual case for the drafts hashed here), the resizes are two
    matrix products in all: one for every horizontal pass, one batched for every vertical one. ``pixels``:
    ``np.asarray(gray)`` when the caller has it (the copy out of Pillow is made once per image)."""
    boxes = [tuple(b) for b in boxes]
    shape = gray.size[::-1]
    plans = [_plan(size, b, shape) for b in boxes]
    reduced = [_reduce_step(gray, size, b) for b in boxes]  # Pillow's reduce, done once per box
    if any(p[1:] != (True, True, True) for p in plans) or any(r[0] is not gray for r in reduced):
        return np.stack([_lanczos(gray, size, b, reduced=r) for b, r in zip(boxes, reduced)])
    in_h, in_w = shape
    k = len(boxes)
    a = (np.asarray(gray) if pixels is None else pixels).astype(np.float64)
    tmp = _fixed_point(_matmul(a, _horizontal(in_w, tuple((p[0][0], p[0][2]) for p in plans), size[0])))
    return _fixed_point(np.matmul(_vertical(in_h, tuple((p[0][1], p[0][3]) for p in plans), size[1]),
                                  tmp.reshape(in_h, k, size[0]).transpose(1, 0, 2))).astype(np.uint8)


@functools.lru_cache(maxsize=512)
def _vertical(in_size: int, spans: tuple[tuple[float, float], ...], out_size: int) -> np.ndarray:
    """The matrices of :func:`_lanczos_matrix` for each ``(in0, in1)`` of ``spans``, stacked:
    ``(len(spans), out_size, in_size)``, the left operands of a batched vertical pass."""
    out = np.stack([_lanczos_matrix(in_size, a, b, out_size) for a, b in spans])
    out.flags.writeable = False
    return out
