"""Duplicate clusters made from a method's pairs and stored (``dedup_runs``, ``dup_clusters``, ``dup_members``):
the star clusters of :func:`scoped_clusters`, the representative of each, and :func:`_save_clusters`, which
keeps the clusters an earlier run already stored and writes only the new ones (the rerun rule of
:mod:`cultura.curate.dedup`).

At 1M images a run stores ~100k clusters, nearly all pairs: the clusters are made and passed as flat arrays
(:func:`cultura.curate.confirm.star_clusters_flat`), and the rows go in with one ``executemany`` per table
in one transaction, with the foreign keys proven by dedup's change counter instead of one index look-up per
row (:func:`bulk_writes`).
"""
from __future__ import annotations

import contextlib
import sqlite3
from typing import TYPE_CHECKING

import numpy as np

from ..db import chunks, dumps, now
from . import confirm
from .dedup_inventory import Inventory, Writes, bump_counter, read_counter

if TYPE_CHECKING:
    from .dedup import Found
    from ..project import Project

ACTIVE = ("open", "resolved")


@contextlib.contextmanager
def bulk_writes(writes: Writes, tables: tuple[str, ...]):
    """``writes()`` (one transaction under dedup's change counter) for dedup's bulk inserts into ``tables``,
    without SQLite's foreign-key look-up of every row when the counter proves the references.

    Why: every ``dup_members`` and ``image_flags`` row references ``images(sha256)``; at 1M images each
    look-up is a descent of the images index at a random place, more than half the cost of the insert. The
    rows dedup writes name only images it read in this call, and any change to ``images`` bumps the change
    counter (db/schema.py), so while the counter is the value this call's own last write left, each of those
    images rows is still there. The counter is read before the transaction (a pragma cannot change inside
    one) and again under its lock: when another writer got in between, the whole of each table is checked
    (``PRAGMA foreign_key_check``) before the commit, and a reference that does not hold rolls it back."""
    db = writes.db
    conn = db.conn
    unchecked = (not writes.foreign and not conn.in_transaction
                 and conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1 and read_counter(db) == writes.expected)
    if unchecked:
        conn.execute("PRAGMA foreign_keys = OFF")
    try:
        with writes() as w:
            yield w
            if unchecked and writes.foreign:  # someone wrote between the look and the lock
                for table in tables:
                    bad = conn.execute(f"PRAGMA foreign_key_check({table})").fetchone()
                    if bad is not None:
                        raise sqlite3.IntegrityError(
                            f"FOREIGN KEY constraint failed ({table} row {bad[1]} names a missing {bad[2]} row): "
                            "another writer removed an image while dedup ran; nothing was written, run "
                            "`cultura images dedup` again.")
    finally:
        if unchecked:
            conn.execute("PRAGMA foreign_keys = ON")
            if conn.execute("PRAGMA foreign_keys").fetchone()[0] != 1:  # a failed rollback left a transaction
                raise RuntimeError("SQLite's foreign keys could not be turned on again after dedup's writes.")


def image_ranks(inv: Inventory, images: np.ndarray) -> np.ndarray:
    """``(n,)`` rank of each image in the representative's order (largest resolution, then most bytes, then
    smallest sha256; 0 is best), computed for ``images`` only (the others rank last)."""
    images = np.unique(np.asarray(images, dtype=np.int64))
    rank = np.full(inv.n, len(images), dtype=np.int64)
    if len(images):
        pixels, nbytes = inv.pixels[images], inv.nbytes[images]
        order = np.lexsort((-nbytes, -pixels))  # stable: ties in index order
        p, b = pixels[order], nbytes[order]
        same = (p[1:] == p[:-1]) & (b[1:] == b[:-1])  # a tie with the one before: the sha256 decides (rare)
        if same.any():
            edge = np.diff(np.concatenate([[0], same.astype(np.int8), [0]]))
            sha = inv.sha
            for s, e in zip(np.flatnonzero(edge == 1).tolist(), (np.flatnonzero(edge == -1) + 1).tolist()):
                order[s:e] = sorted(order[s:e].tolist(), key=lambda k: sha[int(images[k])])
        rank[images[order]] = np.arange(len(images))
    return rank


def scoped_clusters(inv: Inventory, pairs: np.ndarray, scope: str) -> list[tuple[int | None, np.ndarray]]:
    """``[(concept_id or None, member indexes), ...]``: star clusters of the pair graph
    (:func:`confirm.star_clusters`: every member is paired with the cluster's representative itself, so
    unrelated images are never chained together), per concept (edges only between two images both found
    for that concept) or over everything (global); sorted by concept, then by first member. Every door
    that makes clusters (pHash, dHash, embedding; hashed here or on Ray) goes through here.

    Within a concept, the nodes are the (image, concept) links, an edge joins ``(i, c)`` and ``(j, c)`` for a
    pair ``(i, j)`` and every concept ``c`` both were found for, and one clustering call over all concepts at
    once gives every concept's clusters (a node ranks as its image does).
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    rank = image_ranks(inv, pairs.reshape(-1))
    fine = inv.fine

    def agree(a, b, img=lambda x: x):
        fa, fb = fine[img(a)], fine[img(b)]
        missing = ~fa.reshape(len(a), -1).any(axis=1) | ~fb.reshape(len(b), -1).any(axis=1)
        return missing | (confirm.fine_distances(fa, fb) <= confirm.FINE_THRESHOLD)
    if scope == "global":
        return [(None, c) for c in confirm.star_clusters(pairs, rank, agree)]
    if not len(pairs) or not len(inv.link_img):
        return []
    n_c = int(inv.link_concept.max()) + 1
    node = np.unique(inv.link_img * n_c + inv.link_concept)          # (image, concept), sorted by image
    node_img, node_c = node // n_c, node % n_c
    bounds = np.searchsorted(node_img, np.arange(inv.n + 1))
    i, j = pairs[:, 0], pairs[:, 1]
    count = bounds[i + 1] - bounds[i]
    which = np.repeat(np.arange(len(pairs)), count)
    ni = confirm.runs(bounds[i], count)                              # every concept of i, per pair
    want = j[which] * n_c + node_c[ni]                               # the same concept for j
    nj = np.minimum(np.searchsorted(node, want), len(node) - 1)
    hit = node[nj] == want
    node_rank = rank[node_img] * n_c + node_c  # an image's rank; ties (one image, two concepts): by concept
    flat, sizes = confirm.star_clusters_flat(np.stack([ni[hit], nj[hit]], axis=1), node_rank,
                                             lambda a, b: agree(a, b, lambda x: node_img[x]))
    first = np.cumsum(sizes) - sizes
    concept, img = node_c[flat[first]], node_img[flat]
    order = np.lexsort((img[first], concept))  # by concept, then first member (each cluster's smallest)
    sizes = sizes[order]
    return list(zip(concept[order].tolist(), confirm.split_flat(img[confirm.runs(first[order], sizes)], sizes)))


def representative(inv: Inventory, members: np.ndarray) -> int:
    """The member with the largest resolution, then the most bytes, then the smallest sha256."""
    return min(np.asarray(members).tolist(), key=lambda i: (-int(inv.pixels[i]), -int(inv.nbytes[i]), inv.sha[i]))


def representatives(inv: Inventory, clusters: list[np.ndarray]) -> np.ndarray:
    """:func:`representative` of each cluster, for all clusters at once (one sort of all members by size; the
    sha256 is compared only in the clusters whose best resolution and bytes are tied)."""
    if not clusters:
        return np.zeros(0, dtype=np.int64)
    sizes = np.array([len(m) for m in clusters], dtype=np.int64)
    flat = np.concatenate(clusters).astype(np.int64)
    label = np.repeat(np.arange(len(clusters)), sizes)
    pixels, nbytes = inv.pixels[flat], inv.nbytes[flat]
    order = np.lexsort((-nbytes, -pixels, label))
    first = np.cumsum(sizes) - sizes  # each cluster's largest member sorts first
    best = order[first]
    tied = (pixels == pixels[best][label]) & (nbytes == nbytes[best][label])
    reps = flat[best]
    sha = inv.sha
    for c in np.flatnonzero(np.bincount(label[tied], minlength=len(clusters)) > 1).tolist():
        reps[c] = min(flat[first[c]:first[c] + sizes[c]][tied[first[c]:first[c] + sizes[c]]].tolist(),
                      key=sha.__getitem__)
    return reps


def _active_clusters(db, method: str, scope: str, ptext: str) -> dict[tuple, int]:
    existing: dict[tuple, int] = {}
    for cid, concept_id, members in db.execute(
            "SELECT c.id, c.concept_id, group_concat(m.sha256) FROM dup_clusters c "
            "JOIN dedup_runs r ON r.id = c.run_id JOIN dup_members m ON m.cluster_id = c.id "
            f"WHERE c.method = ? AND c.scope = ? AND r.params = ? AND c.status IN {ACTIVE} GROUP BY c.id",
            [method, scope, ptext]):
        existing[(concept_id, tuple(sorted(members.split(","))))] = cid
    return existing


def _save_clusters(project: Project, method: str, scope: str, params: dict, inv: Inventory, found: Found,
                   clusters: list[tuple[int | None, np.ndarray]], writes: Writes | None = None) -> dict:
    """Insert new clusters, keep matching ones, supersede vanished ones (see the module docstring).

    All writes of one call are one transaction of batched statements (cluster ids are allotted under the
    transaction's write lock, so clusters and members go in with two ``executemany`` calls)."""
    db = project.db
    writes = writes or Writes(db, None)  # no counter read with the inventory: nothing proven, checks stay on
    ptext = dumps(params)
    existing = _active_clusters(db, method, scope, ptext)
    had_run = db.execute("SELECT 1 FROM dedup_runs WHERE method = ? AND scope = ? AND params = ? LIMIT 1",
                         [method, scope, ptext]).fetchone() is not None
    ids: list[int] = []
    new = []
    sha = inv.sha
    for concept_id, members in clusters:
        # (a first run has no stored clusters to match: no keys built)
        cid = existing.pop((concept_id, tuple(sorted(sha[i] for i in members.tolist()))), None) if existing else None
        if cid is None:
            new.append((len(ids), concept_id, members))
            cid = -1
        ids.append(cid)
    if new or existing or not had_run:
        ts = now()
        reps = representatives(inv, [m for _, _, m in new])
        sizes = np.array([len(m) for _, _, m in new], dtype=np.int64)
        flat = np.concatenate([m for _, _, m in new]) if new else np.zeros(0, dtype=np.int64)
        dist = found.distance(np.repeat(reps, sizes), flat) if new else np.zeros(0)
        with bulk_writes(writes, ("dup_clusters", "dup_members")):
            run_id = db.execute("INSERT INTO dedup_runs (method, scope, params, created_at) VALUES (?, ?, ?, ?)",
                                [method, scope, ptext, ts]).lastrowid
            first = db.execute("SELECT coalesce(max(id), 0) + 1 FROM dup_clusters").fetchone()[0]
            cluster_ids = list(range(first, first + len(new)))
            db.conn.executemany(
                "INSERT INTO dup_clusters (id, run_id, method, scope, concept_id, representative, size, status, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'open', ?)",
                [(cid, run_id, method, scope, concept_id, sha[rep], len(members), ts)
                 for cid, (_, concept_id, members), rep in zip(cluster_ids, new, reps.tolist())])
            owner = np.repeat(np.array(cluster_ids, dtype=np.int64), sizes)
            db.conn.executemany("INSERT INTO dup_members (cluster_id, sha256, distance) VALUES (?, ?, ?)",
                                zip(owner.tolist(), (sha[i] for i in flat.tolist()), dist.astype(float).tolist()))
            bump_counter(db)  # cluster inserts fire no trigger (db/schema.py m008): one bump for all of them
            for part in chunks(list(existing.values()), 500):
                db.execute(f"UPDATE dup_clusters SET status = 'superseded' WHERE id IN ({','.join('?' * len(part))})",
                           part)
        for cid, (pos, _, _) in zip(cluster_ids, new):
            ids[pos] = cid
    return {"clusters": len(clusters), "new_clusters": len(new), "superseded_clusters": len(existing),
            "images_in_clusters": int(len(np.unique(np.concatenate([m for _, m in clusters])))) if clusters else 0,
            "pairs": len(found.pairs), "cluster_ids": ids}
