"""What a download run writes to the project, in small transactions: the ``images`` rows of the bodies it
accepted, the open ``undecoded`` flags of those it checked from their header only (:mod:`.download`, ``check =
"header"``), the hashes of bytes stored that way before and now decoded, and every candidate's outcome."""
from __future__ import annotations

import collections
import json
import time

from .. import db as dbmod
from ..db import transaction
from .fetch_one import FetchResult
from .images import RESOLVE_OPEN_FLAG, UNDECODED, UNREADABLE, resolution
from .sniff import HASH_FIELDS


class DownloadRows:
    """Buffers outcomes and commits them in small transactions; only the event loop calls it."""

    def __init__(self, db, *, batch: int = 64, interval: float = 0.5):
        self.db, self.batch, self.interval = db, batch, interval
        self.images: list[tuple] = []
        self.undecoded: list[dict] = []
        self.hashed: list[dict] = []
        self.updates: list[tuple] = []
        # bytes a header check stored earlier may be decoded by this run (found again at another URL): their
        # hashes are then filled in and their flag resolved here, as dedup would (looked up once: a run finds
        # none when no image is waiting for its decode)
        self.fill = db.execute(f"SELECT 1 FROM image_flags WHERE flag = '{UNDECODED}' AND status = 'open' "
                               "LIMIT 1").fetchone() is not None
        self.last = time.monotonic()
        self.new_images = 0

    def add(self, cand_id: int, r: FetchResult, relpath: str | None) -> None:
        ts = dbmod.now()
        if r.ok:
            self.images.append((r.sha256, relpath, r.format, r.width, r.height, r.nbytes,
                                *(r.hashes or (None,) * 5), ts))
            if not r.decoded:
                self.undecoded.append({"sha": r.sha256, "details": _UNDECODED_DETAILS, "ts": ts})
            elif self.fill and r.hashes and r.hashes[0] is not None:
                self.hashed.append({"sha": r.sha256, "width": r.width, "height": r.height,
                                    **dict(zip(HASH_FIELDS, r.hashes)), "ts": ts})
        self.updates.append((r.status, r.reason, r.detail, r.http_status, r.content_type, r.nbytes,
                             r.sha256 if r.ok else None, r.attempts, ts, cand_id))
        if len(self.updates) >= self.batch or time.monotonic() - self.last >= self.interval:
            self.flush()

    def flush(self) -> None:
        self.last = time.monotonic()
        if not self.updates:
            return
        with transaction(self.db):
            if self.images:
                cur = self.db.conn.executemany(  # a row marked 'missing' (file gone) is restored
                    "INSERT INTO images (sha256, path, format, width, height, bytes, phash, dhash, phash_centre, "
                    "phash_variants, phash_fine, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'ok', ?) "
                    "ON CONFLICT (sha256) DO UPDATE "
                    "SET status = 'ok', reason = NULL, path = excluded.path WHERE images.status = 'missing'",
                    self.images)
                self.new_images += max(cur.rowcount, 0)
            if self.undecoded:
                # only an image still without hashes (bytes already decoded stay in the pool), and never
                # reopened: a resolved flag means dedup has tried these bytes (an unreadable image stays out
                # through its own flag, and dedup would not try it again to resolve a reopened one)
                self.db.conn.executemany(
                    "INSERT INTO image_flags (sha256, flag, status, details, created_at) "
                    f"SELECT :sha, '{UNDECODED}', 'open', :details, :ts WHERE EXISTS "
                    f"(SELECT 1 FROM images WHERE sha256 = :sha AND phash IS NULL) AND {_NOT_UNREADABLE} "
                    "ON CONFLICT (sha256, flag) DO NOTHING", self.undecoded)
            if self.hashed:
                self.db.conn.executemany(
                    f"UPDATE images SET {', '.join(f'{c} = :{c}' for c in HASH_FIELDS)}, width = :width, "
                    f"height = :height WHERE sha256 = :sha AND phash IS NULL AND {_NOT_UNREADABLE}", self.hashed)
                # (an open undecoded flag never stands beside an open unreadable one: the insert above and
                # dedup, which resolves the first as it raises the second, see to it)
                self.db.conn.executemany(RESOLVE_OPEN_FLAG, [(resolution("download", "decoded", h["ts"]), h["sha"],
                                                              UNDECODED) for h in self.hashed])
            self.db.conn.executemany(
                "UPDATE candidates SET status = ?, reason = ?, detail = ?, http_status = ?, content_type = ?, "
                "bytes = ?, sha256 = ?, attempts = attempts + ?, updated_at = ? WHERE id = ?", self.updates)
        self.images, self.undecoded, self.hashed, self.updates = [], [], [], []


class Tally:
    """What a download run has done so far: counts by status and reason, bytes, new ``images`` rows. A run
    interrupted or failed half-way reports what it had done (its rows are committed)."""

    __slots__ = ("by_status", "by_reason", "bytes", "new_images")

    def __init__(self):
        self.by_status: collections.Counter = collections.Counter()
        self.by_reason: collections.Counter = collections.Counter()
        self.bytes = self.new_images = 0

    def add(self, other: dict) -> None:
        """Add another run's :meth:`as_dict` (a download process's)."""
        self.by_status.update(other["by_status"])
        self.by_reason.update(other["by_reason"])
        self.bytes += other["bytes"]
        self.new_images += other["new_images"]

    def as_dict(self) -> dict:
        return {"by_status": dict(self.by_status), "by_reason": dict(self.by_reason), "bytes": self.bytes,
                "new_images": self.new_images}


#: no open ``unreadable`` flag on the image ``:sha`` (dedup found its bytes undecodable: a person decides)
_NOT_UNREADABLE = (f"NOT EXISTS (SELECT 1 FROM image_flags u WHERE u.sha256 = :sha AND u.flag = '{UNREADABLE}' "
                   "AND u.status = 'open')")
_UNDECODED_DETAILS = json.dumps({"stage": "download", "check": "header",
                                 "fix": "cultura images dedup decodes and hashes it"})
