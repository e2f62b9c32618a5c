"""Thumbnails for the view: small JPEGs made once, cached by the image's content hash.

A thumbnail lives at ``thumbs/<sha256[:2]>/<sha256>.jpg`` under the view folder. The image's sha256 is its
content hash, so a thumbnail that exists is current: a rerun makes only the thumbnails of images it has not
seen (``overwrite`` remakes them all). A thumbnail shows the picture a browser shows (:mod:`cultura.pixels`:
EXIF orientation, 16-bit grey, transparency over white; TIFF and AVIF too). Large JPEGs are decoded at a
reduced scale (``Image.draft``, the DCT scaling of libjpeg) before the resize, which is most of the speed;
the work runs on a thread pool (Pillow
releases the GIL while decoding and resampling). An image that cannot be read gets no thumbnail and is
reported (the page shows a placeholder), never an exception.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from PIL import Image

from .. import pixels
from ..files import write_atomic
from ..progress import Progress, task

#: The longest side of a thumbnail, in pixels.
SIZE = 192
QUALITY = 82
PLACEHOLDER = "missing.svg"
#: Names how thumbnails are drawn; a view whose thumbnails were drawn otherwise remakes them all once.
VERSION = f"{pixels.VERSION}/{SIZE}/{QUALITY}"
_VERSION_FILE = "thumbs/.version"


def thumb_rel(sha: str) -> str:
    """The thumbnail's path relative to the view folder."""
    return f"thumbs/{sha[:2]}/{sha}.jpg"


def make_thumbnail(src: Path, dest: Path, size: int = SIZE) -> None:
    """Write a JPEG thumbnail of ``src`` (longest side ``size``) to ``dest`` through a temp file."""
    # a JPEG is decoded at 1/2, 1/4 or 1/8 scale: still ≥ size on each side
    im = pixels.open_displayed(src, "RGB", draft=(size, size))
    im.thumbnail((size, size), Image.Resampling.BICUBIC, reducing_gap=2.0)
    # build_view sweeps the folder once; a sweep per thumbnail would list its folder thousands of times
    write_atomic(dest, writer=lambda tmp: im.save(tmp, "JPEG", quality=QUALITY, optimize=False), sweep=False)


def ensure_thumbnails(root: Path, items: list[tuple[str, Path]], *, overwrite: bool = False,
                      workers: int | None = None, progress: Progress = None) -> dict:
    """Make the missing thumbnails of ``items`` (sha256, source file) under ``root``.

    Returns ``{"made": n, "cached": n, "failed": {sha256: reason}}``. Thumbnails drawn by another
    :data:`VERSION` (before 16-bit images were scaled instead of clipped white, say) are all remade."""
    marker = root / _VERSION_FILE
    try:
        current = marker.read_text(encoding="utf-8") == VERSION
    except OSError:  # no marker: thumbnails of an older cultura, or none yet
        current = False
    overwrite = overwrite or not current
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
        except (*pixels.UNREADABLE, Image.DecompressionBombError) as e:
            return sha, f"unreadable image ({type(e).__name__})"

    workers = workers or min(8, (os.cpu_count() or 2))
    if todo:
        with ThreadPoolExecutor(max_workers=workers) as pool, \
                task("view: thumbnails", len(todo), progress=progress) as bar:
            for sha, err in pool.map(one, todo):
                if err:
                    failed[sha] = err
                bar.advance()
    if not current:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(VERSION, encoding="utf-8")
    return {"made": len(todo) - len(failed), "cached": cached, "failed": failed}
