"""The one atomic-write helper: :func:`transaction` (re-exported as ``cultura.db.transaction``).

It lives in its own module so that :mod:`cultura.db.migrations` can use it without importing the package.
"""
from __future__ import annotations

import contextlib
import secrets

import sqlite_utils

__all__ = ["transaction"]


@contextlib.contextmanager
def transaction(db: sqlite_utils.Database):
    """One atomic write: every statement inside commits together or not at all.

    ``with db.conn:`` is not enough with sqlite-utils 4: its ``execute``/``insert``/``upsert``/``update`` commit
    on their own whenever no transaction is open, and Python's ``sqlite3`` context manager opens none until a
    write. This helper opens one explicitly (``BEGIN IMMEDIATE``: the write lock is taken up front, so two
    processes wait on the busy timeout instead of failing to upgrade a read lock), commits on success and rolls
    back on any exception (``KeyboardInterrupt`` included). Nested use becomes a ``SAVEPOINT``, so a library
    function that uses it can be called inside a caller's transaction.

    >>> from cultura.db import open_db
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
