"""The blob registry: which files the ``images`` rows name, and what becomes of a row whose file went missing.

The files themselves are the core store's (:mod:`cultura.db.blobs`: one writer protocol, atomic writes); the
rows are curation's. :func:`sweep_blobs` removes what no row names (a kill between a blob and its row), and a
row whose file has gone missing anyway (deleted by hand, a disk restored from backup) is not fatal:
:func:`check_blobs` marks it ``missing`` and sends its candidates back to ``pending`` (a download fetches
them again) and its import rows back to not-done (a rerun of the import stores it again).
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..db import chunks, gc_paused, now
from ..db.atomic import transaction
from ..db.blobs import SHARD, sweep_files

if TYPE_CHECKING:
    from ..project import Project

__all__ = ["sweep_blobs", "check_blobs"]


def sweep_blobs(project: Project, known_paths: set[str] | None = None) -> dict:
    """Remove ``blobs/.tmp`` leftovers and blob files that no ``images`` row names
    (:func:`cultura.db.blobs.sweep_files`); ``known_paths`` defaults to the ``path`` column of ``images``.
    Returns ``{"tmp_removed": n, "orphans_removed": n}`` (plus ``"skipped"`` when another process is writing
    blobs)."""
    if known_paths is None:
        known_paths = {r[0] for r in project.db.execute("SELECT path FROM images").fetchall()}
    return sweep_files(project, known_paths)


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
            if SHARD.match(shard) and f"blobs/{shard}" not in trusted:
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
    seen = _Presence(Path(project.root))
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
