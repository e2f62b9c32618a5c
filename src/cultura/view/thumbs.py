"""Thumbnails for the view: small JPEGs made once, cached by the image's content hash.

A thumbnail lives at ``thumbs/<sha256[:2]>/<sha256>.jpg`` under the view folder. The image's sha256 is its
content hash, so a thumbnail that exists is current: a rerun makes only the thumbnails of images it has not
seen (``overwrite`` remakes them all). Large JPEGs are decoded at a reduced scale (``Image.draft``, the DCT
scaling of libjpeg) before the resize, which is most of the speed; the work runs on a thread pool (Pillow
releases the GIL while decoding and resampling). An image that cannot be read gets no thumbnail and is
reported (the page shows a placeholder), never an exception.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from PIL import Image, ImageOps

from ..files import write_atomic

#: The longest side of a thumbnail, in pixels.
SIZE = 192
QUALITY = 82
PLACEHOLDER = "missing.svg"


def thumb_rel(sha: str) -> str:
    """The thumbnail's path relative to the view folder."""
    return f"thumbs/{sha[:2]}/{sha}.jpg"


def make_thumbnail(src: Path, dest: Path, size: int = SIZE) -> None:
    """Write a JPEG thumbnail of ``src`` (longest side ``size``) to ``dest`` through a temp file."""
    with Image.open(src) as im:
        if im.format == "JPEG":
            im.draft("RGB", (size, size))  # decode at 1/2, 1/4 or 1/8 scale: still ≥ size on each side
        im = ImageOps.exif_transpose(im)
        if im.mode not in ("RGB", "L"):
            im = im.convert("RGBA")
            bg = Image.new("RGB", im.size, (255, 255, 255))
            bg.paste(im, mask=im.getchannel("A"))
            im = bg
        im.thumbnail((size, size), Image.Resampling.BICUBIC, reducing_gap=2.0)
        # build_view sweeps the folder once; a sweep per thumbnail would list its folder thousands of times
        write_atomic(dest, writer=lambda tmp: im.save(tmp, "JPEG", quality=QUALITY, optimize=False), sweep=False)


def ensure_thumbnails(root: Path, items: list[tuple[str, Path]], *, overwrite: bool = False,
                      workers: int | None = None) -> dict:
    """Make the missing thumbnails of ``items`` (sha256, source file) under ``root``.

    Returns ``{"made": n, "cached": n, "failed": {sha256: reason}}``."""
    todo, cached = [], 0
    for sha, src in items:
        dest = root / thumb_rel(sha)
        if not overwrite and dest.exists():
            cached += 1
        else:
            todo.append((sha, src, dest))
    failed: dict[str, str] = {}

    def one(job):
        sha, src, dest = job
        try:
            make_thumbnail(src, dest)
            return sha, None
        except FileNotFoundError:
            return sha, "blob file missing"
        except (OSError, ValueError, Image.DecompressionBombError) as e:
            return sha, f"unreadable image ({type(e).__name__})"

    workers = workers or min(8, (os.cpu_count() or 2))
    if todo:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for sha, err in pool.map(one, todo):
                if err:
                    failed[sha] = err
    return {"made": len(todo) - len(failed), "cached": cached, "failed": failed}
