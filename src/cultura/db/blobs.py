"""Content-addressed image storage: ``blobs/ab/<sha256>.<ext>`` under the project.

A blob is written to ``blobs/.tmp`` first and moved into place with :func:`os.replace` (atomic on one file
system), so a reader never sees half a file. The database row that names a blob is written *after* the
file is in place; :func:`sweep_blobs` (run before each download) removes ``.tmp`` leftovers and blob files
that no ``images`` row names, which is what a kill between the two steps leaves behind. Together this gives:
no row without a file, no file without a row.

One protocol for every blob writer (the downloader and every importer): a writer holds a *shared* lock on
``blobs/.writers.lock`` from before its first blob until its rows are committed (:func:`blob_writer`;
:func:`store_blob` takes it for the rest of the process when called outside one), and the sweep removes
anything only while it holds the *exclusive* lock, i.e. while no other process is between writing a blob
and committing its row. When another writer is active the sweep skips (and says so); leftovers are removed
by a later sweep. The kernel drops the locks of a killed process, so a crash never blocks a later sweep.

A row whose file has gone missing anyway (deleted by hand, a disk restored from backup) is not fatal:
:func:`check_blobs` marks it ``missing`` and sends its candidates back to ``pending`` (a download fetches
them again) and its import rows back to not-done (a rerun of the import stores it again).

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
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no cross-process protocol
    fcntl = None

from . import chunks, gc_paused, now
from .atomic import transaction

if TYPE_CHECKING:
    from ..project import Project

__all__ = ["EXTENSIONS", "blob_relpath", "store_blob", "sweep_blobs", "blob_writer", "check_blobs",
           "release_blob_lease", "WRITERS_LOCK"]

WRITERS_LOCK = ".writers.lock"

# blobs folder -> [open lock file, depth of blob_writer scopes (-1: held for the rest of the process)]
_WRITERS: dict[str, list] = {}

#: Pillow format (lower case) -> file extension of the stored blob.
EXTENSIONS = {"jpeg": "jpg", "mpo": "jpg", "png": "png", "gif": "gif", "webp": "webp", "bmp": "bmp",
              "tiff": "tif", "avif": "avif"}

_BLOB_NAME = re.compile(r"^[0-9a-f]{64}\.[a-z0-9]+$")
_SHARD = re.compile(r"^[0-9a-f]{2}$")


def _root(project: Project) -> Path:
    return Path(project.root)


def blob_relpath(sha256: str, fmt: str) -> str:
    """``blobs/ab/<sha256>.<ext>`` for a Pillow format name (``'jpeg'``, ``'PNG'``…)."""
    ext = EXTENSIONS.get(fmt.lower(), fmt.lower())
    return f"blobs/{sha256[:2]}/{sha256}.{ext}"


def store_blob(project: Project, data: bytes, fmt: str, *, sha256: str | None = None) -> tuple[str, str]:
    """Write ``data`` under the project's blobs folder, named by its SHA-256; return ``(sha256, relpath)``.

    Idempotent: when the blob already exists nothing is written. Safe against kill -9 at any point (the
    bytes go to ``blobs/.tmp`` and are renamed into place). Pass ``sha256`` when it is already known.
    """
    sha = sha256 or hashlib.sha256(data).hexdigest()
    rel = blob_relpath(sha, fmt)
    root = _root(project)
    _hold_writer_lease(root / "blobs", forever=True)
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
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.filename is None:  # write() errors name no file: say which (full disk)
            e.filename = str(tmp)
        raise
    return sha, rel


def _lease_key(blobs: Path) -> str:
    return str(Path(blobs).resolve())


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
                fcntl.flock(held[0].fileno(), fcntl.LOCK_UN)
                held[0].close()


def release_blob_lease(root) -> None:
    """Give back the lease :func:`store_blob` took outside any :func:`blob_writer` scope (a long-lived process
    that has committed its rows: ``Project.close()`` calls it). A scope in progress keeps its lease."""
    key = _lease_key(Path(root) / "blobs")
    held = _WRITERS.get(key)
    if held is not None and held[1] < 0:
        _WRITERS.pop(key)
        fcntl.flock(held[0].fileno(), fcntl.LOCK_UN)
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


def sweep_blobs(project: Project, known_paths: set[str] | None = None) -> dict:
    """Remove ``blobs/.tmp`` leftovers and blob files that no ``images`` row names.

    Only files named like blobs (``blobs/<2 hex>/<64 hex>.<ext>``) are considered, and only while no other
    process is writing blobs (see :func:`blob_writer`); otherwise nothing is removed and ``skipped`` says why.
    ``known_paths`` defaults to the ``path`` column of ``images``. Returns ``{"tmp_removed": n,
    "orphans_removed": n}`` (plus ``"skipped"`` when it skipped).
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


#: A folder whose modification time is this close to the clock is listed again next time: a change within
#: the same clock tick would not change the time ("racy" times, as git's index has them). Linux file systems
#: stamp times from a clock of a few milliseconds; a whole-second time suggests a coarse one (FAT: 2 s).
RACY_NS = 100_000_000
RACY_COARSE_NS = 2_000_000_000


class _Presence:
    """Which blob paths exist, from folder listings (``os.listdir``, names starting with a dot left out): each
    folder is listed at most once, and its modification time is taken just before (``mtime``)."""

    def __init__(self, root: Path):
        self.root = root
        self.paths: set[str] = set()   # "<folder>/<name>" of every listed file
        self.mtime: dict[str, int | None] = {}
        self.fingerprint: dict[str, tuple[int, int]] = {}  # folder -> (number of names, hash of their set)

    def list(self, folder: str) -> None:
        if folder in self.mtime:
            return
        try:
            self.mtime[folder] = os.stat(self.root / folder).st_mtime_ns  # before the listing: a later change shows
            names = os.listdir(self.root / folder)
        except OSError:  # the folder itself is gone (or not a folder)
            self.mtime[folder], names = None, []
        self.paths.update(f"{folder}/{n}" for n in names if n[0] != ".")
        self.fingerprint[folder] = _fingerprint(names)

    def settle(self, clock: int) -> int:
        """Folders listed within :data:`RACY_NS` of their last change are listed again once that window has
        passed: unchanged (same time, same names), their time can be trusted. Returns the clock after."""
        racy = [f for f, m in self.mtime.items() if m is not None and _racy_ns(m) == RACY_NS and clock - m <= RACY_NS]
        if not racy:
            return clock
        time.sleep(max(0.0, (max(self.mtime[f] for f in racy) + RACY_NS - clock) / 1e9) + 0.01)
        for f in racy:
            try:
                m = os.stat(self.root / f).st_mtime_ns
                same = m == self.mtime[f] and _fingerprint(os.listdir(self.root / f)) == self.fingerprint[f]
            except OSError:
                same = False
            if not same:
                self.mtime[f] = -1  # changed meanwhile: listed again by the next check
        return time.time_ns()

    def present(self, rel: str) -> bool:
        if rel in self.paths:
            return True
        folder = rel.rpartition("/")[0]
        if folder in self.mtime:
            return False
        self.list(folder)
        return rel in self.paths


def _fingerprint(names: list[str]) -> tuple[int, int]:
    return len(names), hash(frozenset(names))


def _check_all(db, seen: _Presence) -> list[str]:
    """:func:`check_blobs` of every ``ok`` row, skipping what ``blob_checks`` shows unchanged; records it.

    Every blob folder whose time changed is listed up front into one set of paths, so a row costs one set
    lookup; only a row not found there (a file gone, a path outside the blob folders, a row of a folder
    trusted unchanged) takes the slower way."""
    top = db.execute("SELECT coalesce(max(rowid), 0) FROM images").fetchone()[0]
    known = {f: (m, r) for f, m, r in db.execute("SELECT folder, mtime_ns, max_rowid FROM blob_checks")}
    trusted: dict[str, int] = {}  # folder -> its rows up to this rowid are known present
    for folder, (mtime, upto) in known.items():
        try:
            if os.stat(seen.root / folder).st_mtime_ns == mtime:
                trusted[folder] = upto
        except OSError:
            pass
    floor = min(trusted.values()) if len(trusted) == len(known) and known else 0
    # rows that became 'ok' again since the last check: checked whatever their rowid and folder
    recheck = [r for (r,) in db.execute("SELECT image_rowid FROM blob_recheck")]
    again = set(recheck)
    if floor < top and (seen.root / "blobs").is_dir():
        for shard in os.listdir(seen.root / "blobs"):
            if _SHARD.match(shard) and f"blobs/{shard}" not in trusted:
                seen.list(f"blobs/{shard}")
    gone: list[str] = []
    cur = db.execute("SELECT rowid, sha256, path FROM images WHERE status = 'ok' AND rowid > ? AND rowid <= ?",
                     [floor, top])
    paths = seen.paths
    while rows := cur.fetchmany(100_000):
        for rowid, sha, rel in [r for r in rows if r[2] not in paths]:  # the slower way
            if rowid <= trusted.get(rel.rpartition("/")[0], 0) and rowid not in again:
                continue
            if not seen.present(rel):
                gone.append(sha)
    for chunk in chunks(recheck, 500):
        gone += [sha for sha, rel in db.execute(
            f"SELECT sha256, path FROM images WHERE status = 'ok' AND rowid <= ? AND rowid IN "
            f"({','.join('?' * len(chunk))})", [floor, *chunk]) if not seen.present(rel)]
    clock = seen.settle(time.time_ns())
    # a folder gone, or changed too recently to trust its time, is kept with a time it cannot have (-1):
    # the next check then scans every row again (its trusted folders' rows are skipped without a listing)
    record = [(f, m if m is not None and m >= 0 and clock - m > _racy_ns(m) else -1, top, now())
              for f, m in seen.mtime.items()]
    with transaction(db):
        db.conn.executemany("INSERT INTO blob_checks (folder, mtime_ns, max_rowid, checked_at) VALUES (?, ?, ?, ?) "
                            "ON CONFLICT (folder) DO UPDATE SET mtime_ns = excluded.mtime_ns, "
                            "max_rowid = excluded.max_rowid, checked_at = excluded.checked_at", record)
        db.conn.executemany("DELETE FROM blob_recheck WHERE image_rowid = ?", [(r,) for r in recheck])
        # folders not listed this time and unchanged: every row up to `top` in them was checked now too
        db.conn.executemany("UPDATE blob_checks SET max_rowid = ? WHERE folder = ? AND max_rowid < ?",
                            [(top, f, top) for f in trusted if f not in seen.mtime])
    return gone


def _racy_ns(mtime_ns: int) -> int:
    """How close to the clock a folder time must be to be distrusted: a time of whole seconds may come from
    a file system with a coarse clock (FAT: 2 s), where a change within the same tick would not show."""
    return RACY_COARSE_NS if mtime_ns % 1_000_000_000 == 0 else RACY_NS


def check_blobs(project: Project, shas=None) -> dict:
    """Find ``images`` rows (status ``ok``; only ``shas`` when given) whose file is gone and mark them
    ``missing`` (reason ``file missing``), send their downloaded candidates back to ``pending`` so the next
    download fetches them again, and their ``ok`` import rows back to ``missing`` so a rerun of the import
    stores them again. Stages call it instead of aborting on a missing file. Returns ``{"missing": n}``.

    Each folder is listed once (``os.listdir``; names starting with a dot are not blobs) instead of one
    ``stat`` per row, and what was verified is remembered (``blob_checks``: each folder's modification time,
    the last ``images`` rowid checked). A file
    removed or added changes its folder's time, so a later check lists only the folders whose time changed
    and the rows added since; on an unchanged project of a million images it costs a ``stat`` per folder
    (milliseconds) instead of a second or more."""
    db = project.db
    seen = _Presence(_root(project))
    gone: list[str] = []
    with gc_paused():
        if shas is not None:
            for chunk in chunks(dict.fromkeys(shas), 500):
                gone += [sha for sha, rel in db.execute(
                    f"SELECT sha256, path FROM images WHERE status = 'ok' AND sha256 IN ({','.join('?' * len(chunk))})",
                    chunk) if not seen.present(rel)]
        else:
            gone = _check_all(db, seen)
        del seen
    if gone:
        ts = now()
        has_imports = db["import_rows"].exists()
        with transaction(db):
            db.conn.executemany("UPDATE images SET status = 'missing', reason = 'file missing' "
                                "WHERE sha256 = ? AND status = 'ok'", [(sha,) for sha in gone])
            db.conn.executemany("UPDATE candidates SET status = 'pending', reason = 'file missing', updated_at = ? "
                                "WHERE sha256 = ? AND status = 'downloaded' AND url NOT LIKE 'import:%'",
                                [(ts, sha) for sha in gone])
            if has_imports:
                db.conn.executemany("UPDATE import_rows SET status = 'missing', reason = 'file missing' "
                                    "WHERE sha256 = ? AND status = 'ok'", [(sha,) for sha in gone])
    return {"missing": len(gone)}
