"""Content-addressed image storage: ``blobs/ab/<sha256>.<ext>`` under the project.

A blob is written to ``blobs/.tmp`` first and moved into place with :func:`os.replace` (atomic on one file
system), so a reader never sees half a file. The database row that names a blob is written *after* the
file is in place; :func:`sweep_files` (run before each download, given the paths the ``images`` rows name)
removes ``.tmp`` leftovers and blob files no row names, which is what a kill between the two steps leaves
behind. Together this gives: no row without a file, no file without a row.

This module is the file store, core: it reads no table. The registry of blobs — the ``images`` rows, and what
happens to a row whose file went missing — is curation's (:mod:`cultura.curate.blobs`).

One protocol for every blob writer (the downloader and every importer): a writer holds a *shared* lock on
``blobs/.writers.lock`` from before its first blob until its rows are committed (:func:`blob_writer`;
:func:`store_blob` takes it for the rest of the process when called outside one), and the sweep removes
anything only while it holds the *exclusive* lock, i.e. while no other process is between writing a blob
and committing its row. When another writer is active the sweep skips (and says so); leftovers are removed
by a later sweep. The kernel drops the locks of a killed process, so a crash never blocks a later sweep.

>>> import tempfile, types, pathlib
>>> proj = types.SimpleNamespace(root=pathlib.Path(tempfile.mkdtemp()))
>>> sha, rel = store_blob(proj, b"fake-bytes", "jpeg")
>>> rel == f"blobs/{sha[:2]}/{sha}.jpg"
True
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no cross-process protocol
    fcntl = None

if TYPE_CHECKING:
    from ..project import Project

__all__ = ["EXTENSIONS", "blob_relpath", "blob_files", "store_blob", "sweep_files", "blob_writer", "release_blob_lease",
           "WRITERS_LOCK"]

WRITERS_LOCK = ".writers.lock"

# blobs folder -> [open lock file, depth of blob_writer scopes (-1: held for the rest of the process)]
_WRITERS: dict[str, list] = {}
# blobs folder as given -> its resolved path (the lease's key)
_RESOLVED: dict = {}

#: Pillow format (lower case) -> file extension of the stored blob.
EXTENSIONS = {"jpeg": "jpg", "mpo": "jpg", "png": "png", "gif": "gif", "webp": "webp", "bmp": "bmp",
              "tiff": "tif", "avif": "avif"}

_BLOB_NAME = re.compile(r"^[0-9a-f]{64}\.[a-z0-9]+$")
SHARD = re.compile(r"^[0-9a-f]{2}$")


def _root(project: Project) -> Path:
    return Path(project.root)


def blob_relpath(sha256: str, fmt: str) -> str:
    """``blobs/ab/<sha256>.<ext>`` for a Pillow format name (``'jpeg'``, ``'PNG'``…)."""
    ext = EXTENSIONS.get(fmt.lower(), fmt.lower())
    return f"blobs/{sha256[:2]}/{sha256}.{ext}"


def blob_files(root, shas) -> dict[str, str]:
    """sha256 → ``blobs/ab/<sha256>.<ext>`` of the stored blobs among ``shas`` (those with no file are left
    out): the store is addressed by content, so a blob is found from its hash alone, one folder listing per
    shard (names starting with a dot are not blobs)."""
    root = Path(root)
    wanted: dict[str, set[str]] = {}
    for sha in shas:
        wanted.setdefault(sha[:2], set()).add(sha)
    out: dict[str, str] = {}
    for shard, group in wanted.items():
        try:
            names = os.listdir(root / "blobs" / shard)
        except OSError:  # no such folder: none of them is stored
            continue
        for name in names:
            sha, _, ext = name.partition(".")
            if sha in group and ext and name[0] != ".":
                out[sha] = f"blobs/{shard}/{name}"
    return out


def store_blob(project: Project, data: bytes, fmt: str, *, sha256: str | None = None) -> tuple[str, str]:
    """Write ``data`` under the project's blobs folder, named by its SHA-256; return ``(sha256, relpath)``.

    Idempotent: when the blob already exists nothing is written. Safe against kill -9 at any point (the
    bytes go to ``blobs/.tmp`` and are renamed into place). Pass ``sha256`` when it is already known.
    """
    sha = sha256 or hashlib.sha256(data).hexdigest()
    rel = blob_relpath(sha, fmt)
    root = os.fspath(project.root)
    blobs = os.path.join(root, "blobs")
    _hold_writer_lease(blobs, forever=True)
    # plain os calls, and folders made only when a write finds them missing: the downloader stores thousands of
    # blobs a second, and the pathlib objects and mkdir calls per blob were most of this function's cost
    final = os.path.join(root, rel)
    try:
        if os.stat(final).st_size == len(data):
            return sha, rel
    except FileNotFoundError:
        pass
    tmp = os.path.join(blobs, ".tmp", f"{sha}.{uuid.uuid4().hex}.part")
    try:
        try:
            f = open(tmp, "wb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            os.makedirs(os.path.dirname(tmp), exist_ok=True)
            f = open(tmp, "wb")  # noqa: SIM115
        with f:
            f.write(data)
        try:
            os.replace(tmp, final)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(final), exist_ok=True)
            os.replace(tmp, final)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.filename is None:  # write() errors name no file: say which (full disk)
            e.filename = tmp
        raise
    return sha, rel


def _lease_key(blobs) -> str:
    name = os.fspath(blobs)
    key = _RESOLVED.get(name)
    if key is None:  # resolved once per absolute folder name (a symlink names the same lease as its target)
        key = str(Path(name).resolve())
        if os.path.isabs(name):
            _RESOLVED[name] = key
    return key


def _hold_writer_lease(blobs: Path, *, forever: bool = False) -> None:
    """Take the shared writers lock of ``blobs`` (once per process); ``forever``: keep it for the process."""
    if fcntl is None:
        return
    key = _lease_key(blobs)
    held = _WRITERS.get(key)
    if held is not None:  # already held (by a blob_writer scope or for the process)
        return
    Path(blobs).mkdir(parents=True, exist_ok=True)
    f = open(Path(blobs) / WRITERS_LOCK, "a+")  # noqa: SIM115 - held while this process writes blobs
    fcntl.flock(f.fileno(), fcntl.LOCK_SH)  # waits only while a sweep holds it exclusively (short)
    _WRITERS[key] = [f, -1 if forever else 0]


@contextlib.contextmanager
def blob_writer(project: Project):
    """Scope in which this process writes blobs *and commits their rows*: no sweep removes anything meanwhile.
    Nested scopes are fine; the lease is released when the outermost one ends (unless :func:`store_blob` was
    called outside any scope, which keeps it for the process)."""
    blobs = _root(project) / "blobs"
    key = _lease_key(blobs)
    _hold_writer_lease(blobs)
    held = _WRITERS.get(key)
    if held is not None and held[1] >= 0:
        held[1] += 1
    try:
        yield
    finally:
        held = _WRITERS.get(key)
        if held is not None and held[1] > 0:
            held[1] -= 1
            if held[1] == 0:
                _WRITERS.pop(key)
                held[0].close()  # gives the lease back (see release_blob_lease for why not LOCK_UN)


def release_blob_lease(root) -> None:
    """Give back the lease :func:`store_blob` took outside any :func:`blob_writer` scope (a long-lived process
    that has committed its rows: ``Project.close()`` calls it). A scope in progress keeps its lease."""
    key = _lease_key(Path(root) / "blobs")
    held = _WRITERS.get(key)
    if held is not None and held[1] < 0:
        _WRITERS.pop(key)
        # closing, not LOCK_UN: a process forked while the lease was held (a download process) shares the lock
        # and keeps it until it closes its own copy; LOCK_UN would give it back for both while it still writes
        held[0].close()


@contextlib.contextmanager
def _exclusive(blobs: Path):
    """Yield True while holding the writers lock exclusively (no other process is writing blobs), else False.
    A lease this process holds itself is converted and given back as it was."""
    if fcntl is None:
        yield True
        return
    blobs.mkdir(parents=True, exist_ok=True)
    held = _WRITERS.get(_lease_key(blobs))
    if held is not None:
        fd = held[0].fileno()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            ok = True
        except BlockingIOError:
            ok = False
        try:
            yield ok
        finally:
            fcntl.flock(fd, fcntl.LOCK_SH)
        return
    with open(blobs / WRITERS_LOCK, "a+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def sweep_files(project: Project, known_paths: set[str]) -> dict:
    """Remove ``blobs/.tmp`` leftovers and blob files whose path is not in ``known_paths`` (the paths the
    ``images`` rows name: :func:`cultura.curate.blobs.sweep_blobs` passes them).

    Only files named like blobs (``blobs/<2 hex>/<64 hex>.<ext>``) are considered, and only while no other
    process is writing blobs (see :func:`blob_writer`); otherwise nothing is removed and ``skipped`` says why.
    Returns ``{"tmp_removed": n, "orphans_removed": n}`` (plus ``"skipped"`` when it skipped).
    """
    root = _root(project)
    blobs = root / "blobs"
    removed_tmp = removed_orphans = 0
    with _exclusive(blobs) as ok:
        if not ok:
            return {"tmp_removed": 0, "orphans_removed": 0,
                    "skipped": "another cultura process is writing images to this project; its leftovers, if "
                               "any, are removed by a later download"}
        tmp_dir = blobs / ".tmp"
        if tmp_dir.is_dir():
            for p in tmp_dir.iterdir():
                if p.is_file() or p.is_symlink():
                    p.unlink(missing_ok=True)
                    removed_tmp += 1
        if blobs.is_dir():
            for shard in blobs.iterdir():
                if not (shard.is_dir() and SHARD.match(shard.name)):
                    continue
                for p in shard.iterdir():
                    if not _BLOB_NAME.match(p.name):
                        continue
                    if f"blobs/{shard.name}/{p.name}" not in known_paths:
                        p.unlink(missing_ok=True)
                        removed_orphans += 1
    return {"tmp_removed": removed_tmp, "orphans_removed": removed_orphans}
