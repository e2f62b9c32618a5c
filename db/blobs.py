"""Content-addressed image storage: ``blobs/ab/<sha256>.<ext>`` under the project.

A blob is written to ``blobs/.tmp`` first and moved into place with :func:`os.replace` (atomic on one file
system), so a reader never sees half a file. The database row that names a blob is written *after* the
file is in place; :func:`sweep_blobs` (run before each download) removes ``.tmp`` leftovers and blob files
that no ``images`` row names, which is what a kill between the two steps leaves behind. Together this gives:
no row without a file, no file without a row.

>>> import tempfile, types, pathlib
>>> proj = types.SimpleNamespace(root=pathlib.Path(tempfile.mkdtemp()))
>>> sha, rel = store_blob(proj, b"fake-bytes", "jpeg")
>>> rel == f"blobs/{sha[:2]}/{sha}.jpg"
True
"""
from __future__ import annotations

import hashlib
import os
import re
import uuid
from pathlib import Path

__all__ = ["EXTENSIONS", "blob_relpath", "store_blob", "sweep_blobs"]

#: Pillow format (lower case) -> file extension of the stored blob.
EXTENSIONS = {"jpeg": "jpg", "mpo": "jpg", "png": "png", "gif": "gif", "webp": "webp", "bmp": "bmp",
              "tiff": "tif", "avif": "avif"}

_BLOB_NAME = re.compile(r"^[0-9a-f]{64}\.[a-z0-9]+$")
_SHARD = re.compile(r"^[0-9a-f]{2}$")


def _root(project) -> Path:
    return Path(project.root)


def blob_relpath(sha256: str, fmt: str) -> str:
    """``blobs/ab/<sha256>.<ext>`` for a Pillow format name (``'jpeg'``, ``'PNG'``…)."""
    ext = EXTENSIONS.get(fmt.lower(), fmt.lower())
    return f"blobs/{sha256[:2]}/{sha256}.{ext}"


def store_blob(project, data: bytes, fmt: str, *, sha256: str | None = None) -> tuple[str, str]:
    """Write ``data`` under the project's blobs folder, named by its SHA-256; return ``(sha256, relpath)``.

    Idempotent: when the blob already exists nothing is written. Safe against kill -9 at any point (the
    bytes go to ``blobs/.tmp`` and are renamed into place). Pass ``sha256`` when it is already known.
    """
    sha = sha256 or hashlib.sha256(data).hexdigest()
    rel = blob_relpath(sha, fmt)
    root = _root(project)
    final = root / rel
    if final.exists() and final.stat().st_size == len(data):
        return sha, rel
    tmp_dir = root / "blobs" / ".tmp"
    tmp_dir.mkdir(parents=True, exist_ok=True)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_dir / f"{sha}.{uuid.uuid4().hex}.part"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return sha, rel


def sweep_blobs(project, known_paths: set[str] | None = None) -> dict:
    """Remove ``blobs/.tmp`` leftovers and blob files that no ``images`` row names.

    Only files named like blobs (``blobs/<2 hex>/<64 hex>.<ext>``) are considered. Run it only while no
    other process is storing blobs (the downloader holds a lock). ``known_paths`` defaults to the ``path``
    column of ``images``. Returns ``{"tmp_removed": n, "orphans_removed": n}``.
    """
    root = _root(project)
    blobs = root / "blobs"
    removed_tmp = removed_orphans = 0
    tmp_dir = blobs / ".tmp"
    if tmp_dir.is_dir():
        for p in tmp_dir.iterdir():
            if p.is_file() or p.is_symlink():
                p.unlink(missing_ok=True)
                removed_tmp += 1
    if known_paths is None:
        known_paths = {r[0] for r in project.db.execute("SELECT path FROM images").fetchall()}
    if blobs.is_dir():
        for shard in blobs.iterdir():
            if not (shard.is_dir() and _SHARD.match(shard.name)):
                continue
            for p in shard.iterdir():
                if not _BLOB_NAME.match(p.name):
                    continue
                if f"blobs/{shard.name}/{p.name}" not in known_paths:
                    p.unlink(missing_ok=True)
                    removed_orphans += 1
    return {"tmp_removed": removed_tmp, "orphans_removed": removed_orphans}
