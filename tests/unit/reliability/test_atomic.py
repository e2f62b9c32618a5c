"""``cultura.db.transaction`` is atomic with this sqlite-utils; ``with db.conn:`` is not."""
from __future__ import annotations

import pytest

from cultura.db import open_db, transaction
from cultura.db.migrations import Migrations


def _db(tmp_path):
    db = open_db(tmp_path / "t.db")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    return db


def test_with_conn_alone_is_not_atomic(tmp_path):
    """The reason for the helper: sqlite-utils 4 commits each call on its own inside ``with db.conn:``."""
    db = _db(tmp_path)
    with pytest.raises(RuntimeError):
        with db.conn:
            db["t"].insert({"v": "a"})
            db.execute("INSERT INTO t (v) VALUES ('b')")
            raise RuntimeError("boom")
    assert db["t"].count == 2       # both survived the exception


@pytest.mark.parametrize("write", ["insert", "insert_all", "upsert", "update", "execute", "executemany"])
def test_no_write_survives_an_exception(tmp_path, write):
    db = _db(tmp_path)
    db["t"].insert({"id": 1, "v": "orig"})
    with pytest.raises(RuntimeError):
        with transaction(db):
            {"insert": lambda: db["t"].insert({"v": "x"}),
             "insert_all": lambda: db["t"].insert_all([{"v": "x"}, {"v": "y"}]),
             "upsert": lambda: db["t"].upsert({"id": 1, "v": "x"}, pk="id"),
             "update": lambda: db["t"].update(1, {"v": "x"}),
             "execute": lambda: db.execute("INSERT INTO t (v) VALUES ('x')"),
             "executemany": lambda: db.conn.executemany("INSERT INTO t (v) VALUES (?)", [("x",), ("y",)]),
             }[write]()
            db["t"].insert({"v": "second"})
            raise RuntimeError("boom")
    assert list(db.execute("SELECT id, v FROM t")) == [(1, "orig")]
    # a second connection (another process) sees the same
    other = open_db(tmp_path / "t.db", migrate=False)
    assert list(other.execute("SELECT id, v FROM t")) == [(1, "orig")]


def test_keyboard_interrupt_rolls_back_and_commit_commits(tmp_path):
    db = _db(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        with transaction(db):
            db["t"].insert({"v": "a"})
            raise KeyboardInterrupt
    with transaction(db):
        db["t"].insert({"v": "b"})
        db["t"].insert({"v": "c"})
    assert [r[0] for r in db.execute("SELECT v FROM t ORDER BY id")] == ["b", "c"]
    assert not db.conn.in_transaction


def test_nested_transaction_is_a_savepoint(tmp_path):
    db = _db(tmp_path)
    with transaction(db):
        db["t"].insert({"v": "outer"})
        with pytest.raises(ValueError):
            with transaction(db):
                db["t"].insert({"v": "inner"})
                raise ValueError
        db["t"].insert({"v": "after"})
    assert [r[0] for r in db.execute("SELECT v FROM t ORDER BY id")] == ["outer", "after"]
    with pytest.raises(ValueError):
        with transaction(db):
            with transaction(db):
                db["t"].insert({"v": "inner-ok"})
            raise ValueError   # the outer failure takes the committed-looking inner savepoint with it
    assert db["t"].count == 2


def test_a_failing_migration_leaves_nothing(tmp_path):
    """Each migration step and its record land together (applied with ``transaction``)."""
    m = Migrations("x")

    @m()
    def m001_two_tables(db):
        db.execute("CREATE TABLE a (id INTEGER)")
        db["a"].insert({"id": 1})
        raise RuntimeError("half-way")

    db = open_db(tmp_path / "m.db")
    with pytest.raises(RuntimeError):
        m.apply(db)
    assert "a" not in db.table_names() and m.pending(db) == ["m001_two_tables"]


def test_migrations_applied_by_a_second_opener_are_not_applied_twice(tmp_path, monkeypatch):
    """Two processes opening one project at once: the second re-reads under the write lock."""
    import cultura.db.migrations as mig

    m = Migrations("y")
    calls = []

    @m()
    def m001(db):
        calls.append(1)
        db.execute("CREATE TABLE b (id INTEGER)")

    db1 = open_db(tmp_path / "m.db")
    db2 = open_db(tmp_path / "m.db")
    assert m.apply(db1) == ["m001"]
    real, reads = mig.applied, []

    def stale_first(db, name):  # db2 read the applied set before db1 committed
        reads.append(name)
        return set() if len(reads) == 1 else real(db, name)

    monkeypatch.setattr(mig, "applied", stale_first)
    assert m.apply(db2) == [] and calls == [1]
