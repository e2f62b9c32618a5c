"""Images a web scrape holds beside real copies: look-alikes (different photographs that resemble each other)
and copies made the harder ways people re-post (flips, large crops, rotations, perspective, a screenshot
frame, a collage), for the dedup tests and perf/bench_dedup_quality.py. No download: scikit-image's
photographs (real_photos.py) and its LFW subset.

- :func:`faces`: the 100 face photographs of ``skimage.data.lfw_subset`` (25x25 grey, different photos,
  enlarged to 100x100): small faces are the classic look-alikes of a scrape;
- :func:`tiles`: each of a few texture photographs cut into 4x4 tiles that share no pixel;
- :func:`crops`: ``n`` crops of the photographs at random places and sizes (a scrape's thumbnails of
  similar scenes), with their windows, so a pair is known to share no pixel;
- :func:`harder_copies`: :data:`HARDER` copies of one photograph.
"""
from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageDraw, ImageFont, ImageOps

HARDER = ["flip_v", "rotate_180", "crop_25", "rotate_10", "perspective", "frame", "collage_2x2"]
TEXTURES = ["brick", "gravel", "grass"]


def encode(im: Image.Image, quality: int = 90) -> bytes:
    buf = io.BytesIO()
    im.convert("RGB").save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def faces(n: int = 100) -> dict[str, bytes]:
    """``{"face00": JPEG}``: different people's faces (LFW), enlarged as a page shows a thumbnail."""
    import skimage.data as skdata

    out = {}
    for i, a in enumerate(skdata.lfw_subset()[:n]):
        im = Image.fromarray((a * 255).round().astype(np.uint8)).resize((100, 100), Image.Resampling.BICUBIC)
        out[f"face{i:02d}"] = encode(im)
    return out


def tiles(names=TEXTURES, grid: int = 4) -> dict[str, bytes]:
    """``{"brick_t0_1": JPEG}``: ``grid x grid`` tiles of each texture photograph, sharing no pixel."""
    import skimage.data as skdata

    out = {}
    for name in names:
        im = Image.fromarray(getattr(skdata, name)()).convert("RGB")
        w, h = im.size
        for ty in range(grid):
            for tx in range(grid):
                box = (tx * w // grid, ty * h // grid, (tx + 1) * w // grid, (ty + 1) * h // grid)
                out[f"{name}_t{tx}_{ty}"] = encode(im.crop(box))
    return out


def crops(photos: dict[str, Image.Image], n: int, seed: int = 0) -> tuple[dict[str, bytes], dict[str, tuple]]:
    """``n`` crops (``{"crop00001": JPEG}``) at random places, sizes (a fifth to half a side) and aspect
    ratios of random photographs, resized to a thumbnail's size (96-256 px wide) and saved at JPEG
    quality 60-95; and each one's window ``(photo, left, top, right, bottom)``."""
    rng = np.random.default_rng(seed)
    names = sorted(photos)
    out, window = {}, {}
    for k in range(n):
        name = names[int(rng.integers(len(names)))]
        im = photos[name]
        w, h = im.size
        cw = int(w * rng.uniform(0.2, 0.5))
        ch = int(min(h * 0.9, max(16, cw * rng.uniform(0.6, 1.4))))
        left, top = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        box = (left, top, left + cw, top + ch)
        width = int(rng.integers(96, 257))
        thumb = im.crop(box).resize((width, max(8, round(width * ch / cw))), Image.Resampling.LANCZOS)
        key = f"crop{k:05d}"
        out[key] = encode(thumb, int(rng.integers(60, 96)))
        window[key] = (name, *box)
    return out, window


def share_pixels(a: tuple, b: tuple) -> bool:
    """Whether two crop windows of :func:`crops` overlap (same photograph, intersecting boxes)."""
    return a[0] == b[0] and a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]


def _frame(im: Image.Image) -> Image.Image:
    """The photograph inside a screenshot: a fixed 800x640 window with a title bar, a side panel of text
    and a grey status line (not uniform, so trimming borders cannot remove it); the photograph is fitted
    into the 600x450 pane."""
    canvas = Image.new("RGB", (800, 640), (236, 236, 240))
    d = ImageDraw.Draw(canvas)
    d.rectangle([0, 0, 800, 48], fill=(40, 44, 52))
    font = ImageFont.load_default(size=20)
    d.text((16, 12), "Photos - shared album", fill=(230, 230, 230), font=font)
    for k, c in enumerate([(255, 95, 86), (255, 189, 46), (39, 201, 63)]):
        d.ellipse([720 + 24 * k, 16, 736 + 24 * k, 32], fill=c)
    for k in range(12):
        d.text((12, 70 + 40 * k), f"album {k + 1}", fill=(60, 60, 60), font=font)
    d.rectangle([0, 600, 800, 640], fill=(200, 200, 205))
    d.text((16, 608), "12 items  |  shared with 3 people", fill=(30, 30, 30), font=font)
    fitted = ImageOps.contain(im, (600, 450), Image.Resampling.LANCZOS)
    canvas.paste(fitted, (180 + (600 - fitted.width) // 2, 80 + (450 - fitted.height) // 2))
    return canvas


def _perspective(im: Image.Image, share: float = 0.06) -> Image.Image:
    """A mild perspective: the top edge narrowed by ``share`` of the width on each side."""
    w, h = im.size
    dx = share * w
    # Image.transform PERSPECTIVE maps output to input: solve for the 8 coefficients from 4 corners
    src = [(0, 0), (w, 0), (w, h), (0, h)]
    dst = [(dx, 0), (w - dx, 0), (w, h), (0, h)]
    rows, rhs = [], []
    for (x, y), (u, v) in zip(dst, src):
        rows += [[x, y, 1, 0, 0, 0, -u * x, -u * y], [0, 0, 0, x, y, 1, -v * x, -v * y]]
        rhs += [u, v]
    coeffs = np.linalg.solve(np.array(rows, dtype=float), np.array(rhs, dtype=float))
    return im.transform((w, h), Image.Transform.PERSPECTIVE, tuple(coeffs), Image.Resampling.BICUBIC)


def harder_copies(im: Image.Image, seed: int) -> dict[str, bytes]:
    """``{transform: JPEG}`` for each of :data:`HARDER` (q=90): upside down, turned 180 degrees, 25 % of the
    width and of the height cut off (split at random between the two sides), rotated 10 degrees (corners
    black), a mild perspective, inside a screenshot frame (:func:`_frame`), and one quarter of a 2x2
    collage whose other quarters are unrelated pictures."""
    from cultura.curate.hashing import synthetic_image

    rng = np.random.default_rng(20_000 + seed)
    w, h = im.size
    cx, cy = round(w * 0.25), round(h * 0.25)
    left, top = int(rng.integers(0, cx + 1)), int(rng.integers(0, cy + 1))
    collage = Image.new("RGB", (2 * w, 2 * h))
    collage.paste(im, (0, 0))
    for k, (x, y) in enumerate([(w, 0), (0, h), (w, h)]):
        collage.paste(synthetic_image(900_000 + 3 * seed + k, (w, h)), (x, y))
    return {"flip_v": encode(ImageOps.flip(im)), "rotate_180": encode(im.rotate(180)),
            "crop_25": encode(im.crop((left, top, w - (cx - left), h - (cy - top)))),
            "rotate_10": encode(im.rotate(10, resample=Image.Resampling.BICUBIC)),
            "perspective": encode(_perspective(im)), "frame": encode(_frame(im)),
            "collage_2x2": encode(collage.resize((w, h), Image.Resampling.LANCZOS))}
