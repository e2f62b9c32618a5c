"""Real photographs with planted copies, the way people re-post them, for the dedup quality test
and the calibration benchmark (perf/bench_dedup_quality.py).

20 photographs that ship with scikit-image and scikit-learn (no download): 13 scikit-image photographs, the
stereo motorcycle's left view, scikit-learn's china and flower, and two non-overlapping crops each of the
two largest (hubble_deep_field, retina), which count as distinct photographs. Each gets nine copies:
JPEG q=30, resized to 50 %, 5 % and 10 % cut off each side, rotated 3 degrees (corners filled black),
mirrored, greyscale, a watermark text, and a white border of 10 % of each side's length.

Also copies whose bytes store the pixels otherwise while a browser shows the original (cultura/pixels.py):
:func:`turned` (stored turned, with the EXIF orientation that shows it upright) and :func:`grey16` (16-bit
grey).
"""
from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageDraw, ImageFont, ImageOps

SKIMAGE = ["astronaut", "chelsea", "coffee", "rocket", "camera", "coins", "moon", "immunohistochemistry", "clock",
           "cell", "brick", "gravel", "grass"]
TRANSFORMS = ["jpeg_q30", "resize_50", "crop_5", "crop_10", "rotate_3", "mirror", "grayscale", "watermark",
              "border_10"]
#: The inverse of each EXIF orientation (the transform that stores an upright picture under that tag).
STORED_AS = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
             5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_90, 7: Image.Transpose.TRANSVERSE,
             8: Image.Transpose.ROTATE_270}


def photos() -> dict[str, Image.Image]:
    """The 20 photographs, RGB, by name."""
    import skimage.data as skdata
    from sklearn.datasets import load_sample_images

    out = {n: Image.fromarray(getattr(skdata, n)()).convert("RGB") for n in SKIMAGE}
    for n, a in zip(["china", "flower"], load_sample_images().images):
        out[n] = Image.fromarray(a).convert("RGB")
    out["motorcycle"] = Image.fromarray(skdata.stereo_motorcycle()[0]).convert("RGB")
    hubble = Image.fromarray(skdata.hubble_deep_field()).convert("RGB")           # 1000 x 872
    out["hubble_left"], out["hubble_right"] = hubble.crop((0, 0, 500, 872)), hubble.crop((500, 0, 1000, 872))
    retina = Image.fromarray(skdata.retina()).convert("RGB")                      # 1411 x 1411
    out["retina_left"], out["retina_right"] = retina.crop((120, 300, 700, 1100)), retina.crop((711, 300, 1291, 1100))
    return out


def random_crops(pictures: list[Image.Image], n: int, rng: np.random.Generator, low: float = 0.5) -> list[Image.Image]:
    """``n`` crops of ``pictures`` taken in turn, each side a random share in ``[low, 1)`` of the picture's, at a
    random place: different pictures with a real photograph's statistics, many of them overlapping."""
    out = []
    for k in range(n):
        im = pictures[k % len(pictures)]
        w, h = im.size
        cw, ch = int(w * rng.uniform(low, 1)), int(h * rng.uniform(low, 1))
        x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        out.append(im.crop((x, y, x + cw, y + ch)))
    return out


def encode(im: Image.Image, quality: int = 90) -> bytes:
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def turned(im: Image.Image, orientation: int, fmt: str = "JPEG", **kw) -> bytes:
    """``im`` stored so that a browser shows it upright under EXIF ``orientation`` (``kw``: Pillow's save
    options, ``quality=`` say)."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    buf = io.BytesIO()
    im.transpose(STORED_AS[orientation]).save(buf, fmt, exif=exif.tobytes(), **kw)
    return buf.getvalue()


def grey16(im: Image.Image) -> bytes:
    """The grey picture of ``im`` as a 16-bit PNG (level v stored as 257 v)."""
    buf = io.BytesIO()
    Image.fromarray(np.asarray(im.convert("L"), dtype=np.uint16) * 257).save(buf, "PNG")
    return buf.getvalue()


def copies(im: Image.Image) -> dict[str, bytes]:
    """``{"original": JPEG q=90, <each of TRANSFORMS>: JPEG bytes}`` (q=90 but for jpeg_q30)."""
    w, h = im.size

    def crop(share):
        dx, dy = round(w * share), round(h * share)
        return im.crop((dx, dy, w - dx, h - dy))

    marked = im.copy()
    font = ImageFont.load_default(size=max(12, h // 12))
    ImageDraw.Draw(marked).text((w * 0.05, h * 0.8), "(c) cultura 2026", fill=(255, 255, 255), font=font,
                                stroke_width=2, stroke_fill=(0, 0, 0))
    bx, by = round(w * 0.1), round(h * 0.1)
    return {"original": encode(im), "jpeg_q30": encode(im, 30),
            "resize_50": encode(im.resize((w // 2, h // 2), Image.Resampling.LANCZOS)),
            "crop_5": encode(crop(0.05)), "crop_10": encode(crop(0.10)),
            "rotate_3": encode(im.rotate(3, resample=Image.Resampling.BICUBIC)),
            "mirror": encode(ImageOps.mirror(im)), "grayscale": encode(im.convert("L")),
            "watermark": encode(marked),
            "border_10": encode(ImageOps.expand(im, border=(bx, by, bx, by), fill="white"))}


def planted() -> dict[tuple[str, str], bytes]:
    """``{(photo, "original" or transform): JPEG bytes}`` for all 20 photographs (200 images)."""
    return {(name, kind): data for name, im in photos().items() for kind, data in copies(im).items()}


def pair_scores(owner: dict[str, str], kind: dict[str, str], groups) -> dict:
    """Quality of a grouping of the planted images: ``owner``/``kind`` map an image key to its photograph and
    its kind (``original`` or a transform); ``groups`` is an iterable of sets of keys (clusters; pairs are
    groups of two). Returns pair recall (true pairs put together) and precision over all pairs, and per
    transform the share of photographs whose copy is with its original."""
    together = set()
    for g in groups:
        g = sorted(g)
        together |= {(a, b) for i, a in enumerate(g) for b in g[i + 1:]}
    keys = sorted(owner)
    true = {(a, b) for i, a in enumerate(keys) for b in keys[i + 1:] if owner[a] == owner[b]}
    hit = together & true
    original = {owner[k]: k for k in keys if kind[k] == "original"}
    per = {}
    for t in TRANSFORMS:
        copies_t = [k for k in keys if kind[k] == t]
        per[t] = sum(tuple(sorted((original[owner[k]], k))) in together for k in copies_t) / max(len(copies_t), 1)
    return {"recall": len(hit) / max(len(true), 1), "precision": len(hit) / len(together) if together else 1.0,
            "false_pairs": len(together - true), "true_pairs": len(true), "per_transform": per}
