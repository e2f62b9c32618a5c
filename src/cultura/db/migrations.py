"""Versioned schema migrations, one named set per area of the toolkit.

Each area (core, annotate, build, evaluate…) owns a :class:`Migrations` set; a migration is a function
``m001_name(db)`` registered with ``@migrations()``. Applied migrations are recorded in
``_cultura_migrations`` so every set is applied once, in order, on every open.
"""
from __future__ import annotations

import datetime as dt
from typing import Callable

import sqlite_utils

from .atomic import transaction

MigrationFn = Callable[[sqlite_utils.Database], None]


class Migrations:
    """An ordered, named set of migrations (the ``sqlite-migrate`` style used by llm)."""

    table = "_cultura_migrations"

    def __init__(self, name: str):
        self.name = name
        self._steps: list[tuple[str, MigrationFn]] = []

    def __call__(self, fn: MigrationFn | None = None, *, name: str | None = None):
        def register(f: MigrationFn) -> MigrationFn:
            step = name or f.__name__
            if any(s == step for s, _ in self._steps):
                raise ValueError(f"migration {self.name}:{step} registered twice")
            self._steps.append((step, f))
            return f

        return register(fn) if fn is not None else register

    @property
    def names(self) -> list[str]:
        return [s for s, _ in self._steps]

    def pending(self, db: sqlite_utils.Database) -> list[str]:
        done = applied(db, self.name)
        return [s for s in self.names if s not in done]

    def apply(self, db: sqlite_utils.Database) -> list[str]:
        """Apply the steps not yet applied; returns their names. Each step runs in one transaction."""
        _ensure_table(db)
        done = applied(db, self.name)
        ran = []
        for step, fn in self._steps:
            if step in done:
                continue
            with transaction(db):
                # re-read under the write lock: another process opening the same project may have applied it
                if step in applied(db, self.name):
                    continue
                fn(db)
                db[self.table].insert(
                    {
                        "migration_set": self.name,
                        "name": step,
                        "applied_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                    }
                )
            ran.append(step)
        return ran


def _ensure_table(db: sqlite_utils.Database) -> None:
    db.execute(
        f"CREATE TABLE IF NOT EXISTS [{Migrations.table}] "
        "([migration_set] TEXT, [name] TEXT, [applied_at] TEXT, PRIMARY KEY ([migration_set], [name]))"
    )


def applied(db: sqlite_utils.Database, set_name: str) -> set[str]:
    if not db[Migrations.table].exists():
        return set()
    return {r["name"] for r in db[Migrations.table].rows_where("migration_set = ?", [set_name])}
