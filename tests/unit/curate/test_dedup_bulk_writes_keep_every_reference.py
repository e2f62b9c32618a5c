"""Dedup's bulk inserts skip SQLite's per-row foreign-key look-up only while the change counter proves the
references (curate/dedup_clusters.py ``bulk_writes``): a row naming an image that is not there never commits
once another writer got in, and the connection's foreign keys are on again after every write, failed or not."""
from __future__ import annotations

import sqlite3

import pytest

from cultura.curate import dedup_clusters
from cultura.curate.dedup_inventory import Writes, read_counter
from cultura.db import now, open_db
from cultura.project import init_project

GONE = "f" * 64  # no images row has it


@pytest.fixture
def project(tmp_path):
    p = init_project(tmp_path / "p", countries=["US"])
    p.db["images"].insert({"sha256": "a" * 64, "path": "blobs/aa/x.jpg", "format": "jpeg", "width": 1,
                           "height": 1, "bytes": 1, "created_at": now()})
    yield p
    p.close()


def flag(db, sha):
    db.execute("INSERT INTO image_flags (sha256, flag, details, status, created_at) VALUES (?, 'culture_conflict', "
               "'{}', 'open', ?)", [sha, now()])


def foreign_keys(db) -> int:
    return db.execute("PRAGMA foreign_keys").fetchone()[0]


def test_rows_of_images_read_in_the_call_commit_and_the_checks_come_back_on(project):
    db = project.db
    writes = Writes(db, read_counter(db))
    with dedup_clusters.bulk_writes(writes, ("image_flags",)):
        assert foreign_keys(db) == 0  # the counter is the call's own: proven
        flag(db, "a" * 64)
    assert foreign_keys(db) == 1 and not writes.foreign
    assert db.execute("SELECT count(*) FROM image_flags").fetchone()[0] == 1


def test_a_writer_between_the_look_and_the_lock_gets_the_whole_table_checked(project, monkeypatch):
    db = project.db
    writes = Writes(db, read_counter(db))
    real = dedup_clusters.read_counter

    def look_then_someone_writes(d):
        value = real(d)
        other = open_db(project.root / "cultura.db", migrate=False)
        other.execute("UPDATE change_counters SET value = value + 1 WHERE name = 'dedup'")
        other.conn.commit()
        other.conn.close()
        return value
    monkeypatch.setattr(dedup_clusters, "read_counter", look_then_someone_writes)
    with pytest.raises(sqlite3.IntegrityError, match="image_flags"):
        with dedup_clusters.bulk_writes(writes, ("image_flags",)):
            flag(db, GONE)
    assert writes.foreign and foreign_keys(db) == 1
    assert db.execute("SELECT count(*) FROM image_flags").fetchone()[0] == 0  # rolled back


def test_after_another_writer_every_row_is_checked_as_it_goes_in(project):
    db = project.db
    writes = Writes(db, read_counter(db) - 1)  # someone wrote since the call read the project
    with pytest.raises(sqlite3.IntegrityError):
        with dedup_clusters.bulk_writes(writes, ("image_flags",)):
            assert foreign_keys(db) == 1
            flag(db, GONE)
    assert foreign_keys(db) == 1
    assert db.execute("SELECT count(*) FROM image_flags").fetchone()[0] == 0


def test_a_caller_that_passes_no_counter_keeps_every_check(project):
    """``update_conflict_flags`` called on its own has no counter read with the inventory, so nothing proves
    the images it names are still there: an image removed since the inventory was read fails the write."""
    from cultura.curate import dedup
    from cultura.curate.dedup_inventory import load_inventory

    db = project.db
    project.db["images"].insert({"sha256": "b" * 64, "path": "blobs/bb/y.jpg", "format": "jpeg", "width": 1,
                                 "height": 1, "bytes": 1, "created_at": now()})
    inv = load_inventory(project)
    other = open_db(project.root / "cultura.db", migrate=False)
    other.execute("DELETE FROM images WHERE sha256 = ?", ["b" * 64])
    other.conn.commit()
    other.conn.close()
    gone = inv.sha.index("b" * 64)
    with pytest.raises(sqlite3.IntegrityError):
        dedup.update_conflict_flags(project, inv, "phash/within-concept",
                                    {gone: {"pairs": [(None, "US")], "cluster_ids": [1]}})
    assert foreign_keys(db) == 1
    assert db.execute("SELECT count(*) FROM image_flags").fetchone()[0] == 0
