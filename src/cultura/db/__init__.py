"""The project database: one SQLite file, WAL mode, versioned migrations per area.

>>> from cultura.db import open_db
>>> db = open_db(":memory:")
>>> "images" in db.table_names()
True
"""
from __future__ import annotations

import contextlib
import datetime as dt
import gc
import json
import os
from pathlib import Path
from typing import Any, Iterable

from ..redact import scrub
from .light import sqlite_utils  # first: sqlite-utils without pandas
from . import leases
from .atomic import transaction
from .migrations import Migrations
from .schema import core

BUSY_TIMEOUT_MS = 30_000
CACHE_KIB = 32_768


def open_db(path: str | Path, *, migrate: bool = True, sets: Iterable[Migrations] = ()) -> sqlite_utils.Database:
    """Open (creating if needed) a cultura database with WAL, a busy timeout and foreign keys on, and apply the
    core migrations plus ``sets`` (the areas' sets, in order; :data:`cultura.project.MIGRATION_SETS` lists
    them all — a project always opens with every set)."""
    if str(path) == ":memory:":
        db = sqlite_utils.Database(memory=True)
    else:
        db = sqlite_utils.Database(str(path), use_counts_table=False)
        db.enable_wal()
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    db.execute("PRAGMA foreign_keys = ON")
    db.execute("PRAGMA synchronous = NORMAL")
    # 32 MB of page cache (SQLite's default is 2 MB): a bulk write of 100k+ rows keyed by random sha256 text
    # touches index pages all over the file, and each page missing from the cache is a system call
    db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    if migrate:
        for m in (core, *sets):
            m.apply(db)
    return db


def now() -> str:
    """UTC timestamp as stored in every ``*_at`` column."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def dumps(obj: Any) -> str:
    """Canonical JSON for JSON columns (sorted keys, UTF-8 kept)."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)


def owner_token(db: sqlite_utils.Database) -> str:
    """This process's lease token on the project behind ``db`` (see :mod:`cultura.db.leases`)."""
    root = leases.db_root(db)
    return leases.process_token(root) if root else f"{os.getpid()}-memory"


def owner_alive(db: sqlite_utils.Database, token: str | None) -> bool:
    """Whether the process that wrote ``token`` (a ``runs.owner`` value) is still running."""
    root = leases.db_root(db)
    if root is None:
        return token == f"{os.getpid()}-memory"
    return leases.is_alive(root, token)


def interrupted_reason(token: str | None) -> str:
    pid = leases.token_pid(token)
    who = f"process {pid}" if pid else "a process of an older cultura"
    return f"interrupted: {who} ended before finishing this run (killed or crashed); rerun the stage to resume"


def reap_runs(db: sqlite_utils.Database, stage: str | None = None, *, table: str = "runs") -> int:
    """Mark ``running`` rows of ``table`` (``runs`` for ``stage``, or ``eval_runs``) whose writer is dead as
    ``interrupted`` with the reason; runs of live processes are left alone. Returns how many were marked."""
    where, args = "status = 'running'", []
    if stage is not None:
        where += " AND stage = ?"
        args.append(stage)
    stale = [(r[0], r[1]) for r in db.execute(f"SELECT id, owner FROM [{table}] WHERE {where}", args).fetchall()
             if not owner_alive(db, r[1])]
    if stale:
        with transaction(db):
            for run_id, owner in stale:
                db.execute(f"UPDATE [{table}] SET status = 'interrupted', error = ?, finished_at = ? "
                           "WHERE id = ? AND status = 'running'", [interrupted_reason(owner), now(), run_id])
    return len(stale)


def start_run(db: sqlite_utils.Database, stage: str, params: dict | None = None) -> int:
    """Record the start of a stage; finish it with :func:`finish_run`. Runs of this stage left ``running`` by
    a dead process are marked ``interrupted`` first (:func:`reap_runs`)."""
    reap_runs(db, stage)
    with transaction(db):
        return db["runs"].insert({"stage": stage, "params": dumps(params or {}), "status": "running",
                                  "started_at": now(), "owner": owner_token(db)}).last_pk


def finish_run(db: sqlite_utils.Database, run_id: int, summary: dict | None = None, *,
               status: str = "done", error: str | None = None) -> None:
    """Write a stage's summary row last: a stage is complete only once this is recorded."""
    with transaction(db):
        db["runs"].update(run_id, {"status": status, "finished_at": now(),
                                   "summary": dumps(summary or {}), "error": scrub(error)})


def chunks(seq: Iterable, n: int):
    buf = []
    for x in seq:
        buf.append(x)
        if len(buf) >= n:
            yield buf
            buf = []
    if buf:
        yield buf


@contextlib.contextmanager
def gc_paused():
    """Pause Python's cyclic garbage collector while a stage reads or writes millions of rows.

    Each fetched row is a tuple, and every ~700 new tuples start a collection that walks the objects still
    alive; with a million rows held that walk is repeated thousands of times (it doubled dedup's inventory
    read at 1M images). Rows hold no reference cycles, so nothing is lost by collecting once at the end.
    Nested use keeps the outer state."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
