"""Duplicate clusters read back and resolved (``dedup_runs``, ``dup_clusters``, ``dup_members``): what the dedup
review (annotate), the build and the view need of the sets :mod:`cultura.curate.dedup` writes.
"""
from __future__ import annotations

from typing import Iterable


def open_clusters(db) -> list[tuple[int, str]]:
    """``(cluster id, representative)`` of the open clusters, oldest first."""
    return db.execute("SELECT id, representative FROM dup_clusters WHERE status = 'open' ORDER BY id").fetchall()


def cluster_members(db, cluster_id: int) -> list[tuple[str, float | None]]:
    """``(sha256, distance to the representative)`` of a cluster's members."""
    return db.execute("SELECT sha256, distance FROM dup_members WHERE cluster_id = ?", [cluster_id]).fetchall()


def memberships(db) -> list[tuple[int, str]]:
    """``(cluster id, sha256)`` of every membership, whatever the cluster's status."""
    return db.execute("SELECT cluster_id, sha256 FROM dup_members").fetchall()


def resolve_clusters(db, cluster_ids: Iterable[int]) -> None:
    """Mark clusters ``resolved`` (a dedup review decided which copies stay); part of the caller's transaction."""
    db.conn.executemany("UPDATE dup_clusters SET status = 'resolved' WHERE id = ?", [(x,) for x in cluster_ids])


def list_cluster_rows(db, status: str | None = None) -> list[tuple]:
    """``(id, method, scope, representative, size, status)`` of the clusters (of one ``status``), by id; with
    :func:`ordered_members`, what ``cultura images clusters`` lists."""
    sql, args = "SELECT id, method, scope, representative, size, status FROM dup_clusters", []
    if status:
        sql, args = sql + " WHERE status = ?", [status]
    return db.execute(sql + " ORDER BY id", args).fetchall()


def ordered_members(db, cluster_id: int, representative: str) -> list[tuple[str, float | None]]:
    """A cluster's ``(sha256, distance)``, representative first, then by distance and sha256."""
    return db.execute("SELECT sha256, distance FROM dup_members WHERE cluster_id = ? ORDER BY "
                      "(sha256 != ?), distance, sha256", [cluster_id, representative]).fetchall()


def live_clusters(db) -> list[tuple]:
    """The clusters no later run superseded, oldest first: ``(id, run_id, method, scope, concept_id,
    representative, size, status, created_at, run params)``."""
    return db.execute(
        "SELECT c.id, c.run_id, c.method, c.scope, c.concept_id, c.representative, c.size, c.status, "
        "c.created_at, r.params FROM dup_clusters c JOIN dedup_runs r ON r.id = c.run_id "
        "WHERE c.status != 'superseded' ORDER BY c.id").fetchall()


def live_members(db) -> list[tuple[int, str, float | None]]:
    """``(cluster id, sha256, distance)`` of the members of the clusters no later run superseded."""
    return db.execute(
        "SELECT m.cluster_id, m.sha256, m.distance FROM dup_members m JOIN dup_clusters c ON "
        "c.id = m.cluster_id WHERE c.status != 'superseded'").fetchall()


def live_cluster_members(db) -> list[tuple[int, str]]:
    """``(cluster id, sha256)`` of the members of the clusters no later run superseded."""
    return [(c, s) for c, s, _ in live_members(db)]


def cluster_sets(members_of: dict[int, list[str]]) -> dict[int, int]:
    """Cluster id → its duplicate set: clusters that share an image (directly or through a chain of clusters)
    are one set, named by its oldest (smallest) cluster id."""
    parent = {cid: cid for cid in members_of}

    def find(c):
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    first_with: dict[str, int] = {}
    for cid, shas in members_of.items():
        for sha in shas:
            if sha in first_with:
                a, b = find(first_with[sha]), find(cid)
                parent[max(a, b)] = min(a, b)
            else:
                first_with[sha] = cid
    return {cid: find(cid) for cid in members_of}


def open_sets(db) -> dict[str, int]:
    """sha256 → duplicate set of every member of an open cluster: open clusters that share an image are one set
    (the pHash and the dHash cluster of the same copies, or a chain of copies), named by its oldest cluster id.
    Until a dedup review resolves it, a set is one photograph."""
    # one read of every open membership (not one per cluster): the build, the view and every version's check call this
    members_of: dict[int, list[str]] = {}
    for cid, sha in db.execute("SELECT m.cluster_id, m.sha256 FROM dup_members m JOIN dup_clusters c ON "
                               "c.id = m.cluster_id WHERE c.status = 'open' ORDER BY m.cluster_id").fetchall():
        members_of.setdefault(cid, []).append(sha)
    set_of = cluster_sets(members_of)
    return {sha: set_of[cid] for cid, shas in members_of.items() for sha in shas}
