"""The project database: one SQLite file, WAL mode, versioned migrations per area.

>>> from cultura.db import open_db
>>> db = open_db(":memory:")
>>> "images" in db.table_names()
True
"""
from __future__ import annotations

import datetime as dt
import importlib
import json
from pathlib import Path
from typing import Any, Iterable

import sqlite_utils

from .migrations import Migrations

# Modules that define a ``migrations`` (or several ``Migrations``) set, applied in this order.
SCHEMA_MODULES = [
    "cultura.db.schema",
    "cultura.annotate.schema",
    "cultura.curate.build_schema",
    "cultura.evaluate.schema",
    "cultura.evaluate.social_schema",
    "cultura.evaluate.llm_schema",
]

BUSY_TIMEOUT_MS = 30_000


def migration_sets() -> list[Migrations]:
    sets: list[Migrations] = []
    for mod_name in SCHEMA_MODULES:
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:  # an area that does not exist yet
            if e.name == mod_name:
                continue
            raise
        sets.extend(v for v in vars(mod).values() if isinstance(v, Migrations))
    return sets


def open_db(path: str | Path, *, migrate: bool = True) -> sqlite_utils.Database:
    """Open (creating if needed) a cultura database with WAL, a busy timeout and foreign keys on."""
    if str(path) == ":memory:":
        db = sqlite_utils.Database(memory=True)
    else:
        db = sqlite_utils.Database(str(path), use_counts_table=False)
        db.enable_wal()
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    db.execute("PRAGMA foreign_keys = ON")
    db.execute("PRAGMA synchronous = NORMAL")
    if migrate:
        for m in migration_sets():
            m.apply(db)
    return db


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
                               "summary": dumps(summary or {}), "error": error})


def chunks(seq: Iterable, n: int):
    buf = []
    for x in seq:
        buf.append(x)
        if len(buf) >= n:
            yield buf
            buf = []
    if buf:
        yield buf
