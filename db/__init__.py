"""The project database: one SQLite file, WAL mode, versioned migrations per area.

>>> from cultura.db import open_db
>>> db = open_db(":memory:")
>>> "images" in db.table_names()
True
"""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import secrets
from pathlib import Path
from typing import Any, Iterable

import sqlite_utils

from ..redact import scrub
from .migrations import Migrations
from .schema import core

BUSY_TIMEOUT_MS = 30_000


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
    if migrate:
        for m in (core, *sets):
            m.apply(db)
    return db


@contextlib.contextmanager
def transaction(db: sqlite_utils.Database):
    """One atomic write: every statement inside commits together or not at all.

    ``with db.conn:`` is not enough with sqlite-utils 4: its ``execute``/``insert``/``upsert``/``update`` commit
    on their own whenever no transaction is open, and Python's ``sqlite3`` context manager opens none until a
    write. This helper opens one explicitly (``BEGIN IMMEDIATE``: the write lock is taken up front, so two
    processes wait on the busy timeout instead of failing to upgrade a read lock), commits on success and rolls
    back on any exception (``KeyboardInterrupt`` included). Nested use becomes a ``SAVEPOINT``, so a library
    function that uses it can be called inside a caller's transaction.

    >>> db = open_db(":memory:")
    >>> try:
    ...     with transaction(db):
    ...         _ = db["meta"].insert({"key": "a", "value": "1"})
    ...         raise RuntimeError("boom")
    ... except RuntimeError:
    ...     pass
    >>> db["meta"].count_where("key = 'a'")
    0
    """
    conn = db.conn
    if conn.in_transaction:
        name = f"cultura_{secrets.token_hex(8)}"
        conn.execute(f"SAVEPOINT {name}")
        try:
            yield db
        except BaseException:
            if conn.in_transaction:
                conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
                conn.execute(f"RELEASE SAVEPOINT {name}")
            raise
        else:
            conn.execute(f"RELEASE SAVEPOINT {name}")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    else:
        try:
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def now() -> str:
    """UTC timestamp as stored in every ``*_at`` column."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def dumps(obj: Any) -> str:
    """Canonical JSON for JSON columns (sorted keys, UTF-8 kept)."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)


def start_run(db: sqlite_utils.Database, stage: str, params: dict | None = None) -> int:
    """Record the start of a stage; finish it with :func:`finish_run`."""
    return db["runs"].insert({"stage": stage, "params": dumps(params or {}), "status": "running",
                              "started_at": now()}).last_pk


def finish_run(db: sqlite_utils.Database, run_id: int, summary: dict | None = None, *,
               status: str = "done", error: str | None = None) -> None:
    """Write a stage's summary row last: a stage is complete only once this is recorded."""
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
