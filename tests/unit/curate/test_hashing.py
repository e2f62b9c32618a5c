"""The hash thumbnails computed in numpy (curate/hashing.py) equal Pillow's resizes bit for bit, and the
hashes equal the previous (Pillow-resize, np.median) implementation on real photographs."""
from __future__ import annotations

import io
import math

import numpy as np
import pytest
import scipy.fftpack
from cultura.curate import hashing, invariance, lanczos
from PIL import Image

LANCZOS = Image.Resampling.LANCZOS


def pil_resize(gray, size, box=None):
    return np.asarray(gray.resize(size, LANCZOS, box=box, reducing_gap=hashing.REDUCING_GAP))


def reference_hashes(data: bytes) -> tuple[str, str, str, str]:
    """(phash, dhash, centre phash, variants: mirror, 10 % centre, flip) as the code before the numpy resize
    computed them: Pillow resizes of the drafted grey decode's content box and its centre crops, scipy DCTs
    and np.median."""
    with Image.open(io.BytesIO(data)) as im:
        hashing.prepare_decode(im)
        gray = im.convert("L")
    content = invariance.content_box(np.asarray(gray))
    box, box10 = invariance.crop_box(content, 0.05), invariance.crop_box(content, 0.10)

    def phash(t):
        dct = scipy.fftpack.dct(scipy.fftpack.dct(t.astype(np.float64), axis=0), axis=1)
        low = dct[:8, :8].reshape(64)
        return "".join("1" if b else "0" for b in low > np.median(low))

    d = pil_resize(gray, (9, 8), content)
    full = pil_resize(gray, (32, 32), content)
    bits = [phash(full), "".join("1" if b else "0" for b in (d[:, 1:] > d[:, :-1]).ravel()),
            phash(pil_resize(gray, (32, 32), box)), phash(full[:, ::-1]), phash(pil_resize(gray, (32, 32), box10)),
            phash(full[::-1, :])]
    h = [f"{int(b, 2):016x}" for b in bits]
    return h[0], h[1], h[2], h[3] + h[4] + h[5]


def encode(im, fmt="JPEG", **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def test_numpy_lanczos_equals_pillow_over_sizes_and_boxes():
    rng = np.random.default_rng(0)
    checked = 0
    for trial in range(400):
        w, h = int(rng.integers(1, 420)), int(rng.integers(1, 420))
        if trial % 2:
            a = rng.integers(0, 256, (h, w), dtype=np.uint8)  # noise: every overshoot and clip is exercised
        else:
            a = np.asarray(hashing.synthetic_image(trial, (max(w, 2), max(h, 2))).convert("L").resize((w, h)))
        g = Image.fromarray(a, "L")
        boxes = [None]
        if w > 2 and h > 2:
            x0, y0 = rng.uniform(0, w / 3), rng.uniform(0, h / 3)
            boxes.append((x0, y0, rng.uniform(x0 + 1, w), rng.uniform(y0 + 1, h)))  # fractional
        for size in [(32, 32), (9, 8), (int(rng.integers(1, 60)), int(rng.integers(1, 60)))]:
            for box in boxes:
                assert np.array_equal(lanczos._lanczos(g, size, box), pil_resize(g, size, box)), (w, h, size, box)
                checked += 1
        p, d = hashing.thumbnails(g)
        content = invariance.content_box(a)
        assert np.array_equal(p[0], pil_resize(g, (32, 32), content)) and np.array_equal(d, pil_resize(g, (9, 8), content))
        for k, share in enumerate(invariance.CENTRE_CROPS, 1):
            assert np.array_equal(p[k], pil_resize(g, (32, 32), invariance.crop_box(content, share))), (w, h)
    assert checked > 1000


def test_coefficients_use_the_same_sine_as_pillow():
    """Pillow computes its Lanczos taps with the C library's sin; the cached matrices use numpy's. Both are
    checked against math.sin (the C library's) on the geometries hashed in practice."""
    for in_size, in0, in1, out in [(160, 0, 160, 32), (160, 8, 152, 32), (200, 0, 200, 32), (75, 0.25, 74.5, 32),
                                   (32, 0, 32, 9), (94, 5, 89, 32), (191, 0, 191, 32)]:
        m = lanczos._lanczos_matrix(in_size, in0, in1, out)
        scale = float(np.float32(np.float32(in1) - np.float32(in0))) / out
        fs = max(scale, 1.0)
        support = 3.0 * fs
        for xx in range(out):
            center = float(np.float32(in0)) + (xx + 0.5) * scale
            xmin = max(int(center - support + 0.5), 0)
            xmax = min(int(center + support + 0.5), in_size) - xmin
            ws = []
            for x in range(xmax):
                t = (x + xmin - center + 0.5) * (1.0 / fs)
                sinc = lambda v: 1.0 if v == 0.0 else math.sin(v * math.pi) / (v * math.pi)
                ws.append(sinc(t) * sinc(t / 3) if -3.0 <= t < 3.0 else 0.0)
            total = 0.0
            for v in ws:
                total += v
            ks = [int((-0.5 if v / total < 0 else 0.5) + v / total * (1 << 22)) for v in ws]
            assert m[xx, xmin:xmin + xmax].tolist() == ks and m[xx].sum() == sum(ks)


def test_hashes_equal_the_pillow_resize_implementation_on_real_photos():
    skdata = pytest.importorskip("skimage.data")
    from sklearn.datasets import load_sample_images

    photos = [Image.fromarray(getattr(skdata, n)()) for n in ["astronaut", "chelsea", "coffee", "rocket", "camera",
                                                              "coins", "hubble_deep_field", "immunohistochemistry"]]
    photos += [Image.fromarray(a) for a in load_sample_images().images]
    blobs = []
    rng = np.random.default_rng(0)
    for k, im in enumerate(photos):
        im = im.convert("RGB") if k % 3 else im.convert("L")
        w, h = im.size
        for size in [(w, h), (640, 480), (1600, 1200), (int(rng.integers(40, 900)), int(rng.integers(40, 900)))]:
            blobs.append(encode(im.resize(size, LANCZOS), quality=int(rng.choice([75, 90]))))
        blobs.append(encode(im, "PNG"))  # no draft: full-size grey, the reducing step applies
    res = hashing.hash_images(blobs)
    assert not res.errors
    got = list(zip(hashing.to_hex(res.phash), hashing.to_hex(res.dhash), hashing.to_hex(res.phash_centre),
                   hashing.variants_to_hex(res.phash_variants)))
    assert got == [reference_hashes(b) for b in blobs]
    from cultura.curate.download import (
        sniff_image,  # the downloader's single-image path gives the same
    )

    for data, want in zip(blobs[::3], got[::3]):
        info = sniff_image(data, max_pixels=10**9, min_side=1)
        assert (info.phash, info.dhash, info.phash_centre, info.phash_variants) == want


def test_matrix_products_stay_below_the_blas_threading_threshold():
    a = np.arange(191 * 120, dtype=np.float64).reshape(120, 191) % 251
    k = np.ascontiguousarray(lanczos._lanczos_matrix(191, 0, 191, 32).T)
    assert np.array_equal(lanczos._matmul(a, k), a @ k)
