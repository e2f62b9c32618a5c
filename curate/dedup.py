"""Image de-duplication: exact (sha256), perceptual (pHash, dHash) and embedding duplicates, and culture
conflicts. Nothing is deleted: the output is clusters for a person to review (seed 000, App. J guideline).

Methods (a registry, :data:`METHODS`):

- ``sha256`` — identical bytes are one ``images`` row by construction, so this method makes no clusters;
  it flags an image linked (through ``image_links``) to more than one (concept, country) pair;
- ``phash`` / ``dhash`` — 64-bit perceptual hashes (:mod:`cultura.curate.hashing`), pairs within a Hamming
  threshold found exactly by a faiss binary index; the hashes are computed once per image and stored in
  ``images.phash`` / ``images.dhash`` (16-hex), so a rerun hashes nothing;
- ``embedding`` — image embeddings of any :mod:`cultura.models.embedders` embedder (cached in
  ``embeddings``), pairs with cosine similarity ``>= threshold`` (faiss ``IndexFlatIP.range_search``).

Scope: ``within-concept`` links two images only inside a concept they were both found for (one cluster set
per concept, ``dup_clusters.concept_id`` set); ``global`` links any two images.

Clusters are the connected components of the pair graph. Each has a representative — the largest
resolution, then the most bytes, then the smallest sha256 — and each member's distance to it (Hamming bits,
or ``1 - cosine``). They are stored in ``dup_clusters`` / ``dup_members`` under a ``dedup_runs`` row holding
method, scope and params (thresholds, hash definition or embedder identity).

Culture conflicts: an image found for two different (concept, country) pairs, or a cluster whose members
were found for different pairs (within its concept, for within-concept scope), gets an ``image_flags`` row
``culture_conflict`` whose ``details`` JSON lists the pairs and the evidence (per ``method/scope``).

Idempotency (rerun rule): clusters are matched to the active (``open`` or ``resolved``) clusters of earlier
runs with the same method, scope and params by (concept, exact member set). A matching cluster is kept as
it is (id, status and any review decision stay valid); an earlier cluster with no match becomes
``superseded``; only the unmatched new ones are inserted, under a new ``dedup_runs`` row. A rerun on an
unchanged image set therefore writes nothing (no run row, no cluster, no hash). Flags follow the same rule:
an evidence entry that no longer holds is removed, a flag left with none becomes ``superseded``, and a
``resolved`` flag is reopened only when its list of pairs grows.

>>> from cultura.curate.dedup import METHODS
>>> sorted(METHODS)
['dhash', 'embedding', 'phash', 'sha256']
"""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..db import chunks, dumps, finish_run, now, start_run
from ..errors import ConfigError, unknown
from . import hashing

SCOPES = ("within-concept", "global")
ACTIVE = ("open", "resolved")
FLAG = "culture_conflict"
UNREADABLE = "unreadable"
HASH_CHUNK = 1024  # images hashed and written per step (an interrupted run keeps what it finished)


# ------------------------------------------------------------------------------------------ inventory
@dataclass
class Inventory:
    """The images under consideration (status ``ok``), in sha256 order, with their links and hashes."""

    sha: list[str]
    path: list[str]
    pixels: np.ndarray
    nbytes: np.ndarray
    phash: list[str | None]
    dhash: list[str | None]
    links: list[set[tuple[int, str]]]          # (concept_id, country) per image
    concept_names: dict[int, str]
    unreadable: set[int] = field(default_factory=set)

    @property
    def n(self) -> int:
        return len(self.sha)

    def hashes(self, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """(indexes of images that have a ``kind`` hash, their uint64 hashes)."""
        col = self.phash if kind == "phash" else self.dhash
        idx = np.array([i for i, v in enumerate(col) if v], dtype=np.int64)
        return idx, hashing.from_hex([col[i] for i in idx])


def load_inventory(project) -> Inventory:
    """Read ``images`` (status ok), their (concept, country) links and open ``unreadable`` flags."""
    db = project.db
    rows = db.execute("SELECT sha256, path, width, height, bytes, phash, dhash FROM images "
                      "WHERE status = 'ok' ORDER BY sha256").fetchall()
    index = {r[0]: k for k, r in enumerate(rows)}
    concepts = {cid: (name, status, merged) for cid, name, status, merged in
                db.execute("SELECT id, name, status, merged_into FROM concepts").fetchall()}

    def final_concept(cid):  # a merged concept counts as the one it was merged into; removed ones not at all
        seen = set()
        while cid in concepts and concepts[cid][1] == "merged" and concepts[cid][2] and cid not in seen:
            seen.add(cid)
            cid = concepts[cid][2]
        return None if cid not in concepts or concepts[cid][1] == "removed" else cid

    links: list[set] = [set() for _ in rows]
    for sha, cid, country in db.execute("SELECT DISTINCT sha256, concept_id, country FROM image_links"):
        k, c = index.get(sha), final_concept(cid)
        if k is not None and c is not None:
            links[k].add((c, country))
    unreadable = {index[s] for (s,) in db.execute(
        "SELECT sha256 FROM image_flags WHERE flag = ? AND status = 'open'", [UNREADABLE]) if s in index}
    return Inventory(
        sha=[r[0] for r in rows], path=[r[1] for r in rows],
        pixels=np.array([r[2] * r[3] for r in rows], dtype=np.int64),
        nbytes=np.array([r[4] for r in rows], dtype=np.int64),
        phash=[r[5] for r in rows], dhash=[r[6] for r in rows], links=links,
        concept_names={cid: v[0] for cid, v in concepts.items()}, unreadable=unreadable)


def ensure_hashes(project, inv: Inventory, *, progress: bool = True) -> dict:
    """Compute and store pHash/dHash of the images that lack them; an unreadable blob gets an
    ``unreadable`` flag (skipped by later runs until that flag is resolved). Returns counts."""
    todo = [i for i in range(inv.n) if (not inv.phash[i] or not inv.dhash[i]) and i not in inv.unreadable]
    done = failed = 0
    if not todo:
        return {"hashes_computed": 0, "hash_failures": 0}
    bar = _bar("Hashing images", len(todo)) if progress else None
    db = project.db
    try:
        for part in chunks(todo, HASH_CHUNK):
            res = hashing.hash_images([project.blob_path(inv.path[i]) for i in part])
            ph, dh = hashing.to_hex(res.phash), hashing.to_hex(res.dhash)
            ts = now()
            with db.conn:
                ok = [(ph[k], dh[k], inv.sha[i]) for k, i in enumerate(part) if k not in res.errors]
                db.conn.executemany("UPDATE images SET phash = ?, dhash = ? WHERE sha256 = ?", ok)
                for k, err in res.errors.items():
                    db["image_flags"].upsert({"sha256": inv.sha[part[k]], "flag": UNREADABLE, "status": "open",
                                              "details": dumps({"stage": "dedup", "error": err}),
                                              "created_at": ts}, pk=("sha256", "flag"))
            for k, i in enumerate(part):
                if k in res.errors:
                    inv.unreadable.add(i)
                else:
                    inv.phash[i], inv.dhash[i] = ph[k], dh[k]
            done += len(part) - len(res.errors)
            failed += len(res.errors)
            if bar is not None:
                bar[0].update(bar[1], advance=len(part))
    finally:
        if bar is not None:
            bar[0].stop()
    return {"hashes_computed": done, "hash_failures": failed}


def _bar(label: str, total: int):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    p = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                 transient=True)
    p.start()
    return p, p.add_task(label, total=total)


# ------------------------------------------------------------------------------------------ methods
@dataclass
class Found:
    """A method's result: pairs of inventory indexes (i < j) and a distance function to a representative."""

    pairs: np.ndarray
    distance: Callable[[int, np.ndarray], np.ndarray]


@dataclass
class Method:
    """One de-duplication method: ``params(opts)`` names the run, ``find(project, inv, opts)`` finds pairs.

    ``find`` returns None for a method that makes no clusters (sha256)."""

    name: str
    params: Callable[[dict], dict]
    find: Callable[[Any, Inventory, dict], Found | None]
    needs_hashes: bool = False


def _hash_method(kind: str) -> Method:
    def params(opts):
        return {"threshold": opts[f"{kind}_threshold"], "hash": hashing.HASH_VERSION}

    def find(project, inv, opts):
        idx, h = inv.hashes(kind)
        local, dist = hashing.hamming_pairs(h, opts[f"{kind}_threshold"], return_distances=True)
        full = np.zeros(inv.n, dtype=np.uint64)
        full[idx] = h
        return Found(idx[local].reshape(-1, 2), lambda rep, members: hashing.hamming_to(full[members], full[rep]))

    return Method(kind, params, find, needs_hashes=True)


def _embedder(opts):
    from ..models.embedders import get_embedder

    if opts.get("_embedder_obj") is None:
        opts["_embedder_obj"] = get_embedder(opts["embedder"])
    return opts["_embedder_obj"]


def _embedding_params(opts):
    return {"embedder": _embedder(opts).identity, "threshold": opts["embedding_threshold"]}


def _embedding_find(project, inv, opts):
    from ..models.embedders import embed_images_cached

    emb = _embedder(opts)
    idx = np.array([i for i in range(inv.n) if i not in inv.unreadable], dtype=np.int64)
    vecs = np.zeros((inv.n, 1), dtype=np.float32)
    if len(idx):
        x = np.ascontiguousarray(embed_images_cached(project, emb, [inv.sha[i] for i in idx]), dtype=np.float32)
        vecs = np.zeros((inv.n, x.shape[1]), dtype=np.float32)
        vecs[idx] = x
        local = cosine_pairs(x, opts["embedding_threshold"])
    else:
        local = np.zeros((0, 2), dtype=np.int64)
    return Found(idx[local].reshape(-1, 2),
                 lambda rep, members: np.clip(1.0 - vecs[members] @ vecs[rep], 0.0, 2.0))


def cosine_pairs(vectors: np.ndarray, threshold: float, *, block: int = 4096) -> np.ndarray:
    """Pairs ``(i, j)``, ``i < j``, of L2-normalised rows with cosine similarity ``>= threshold``.

    faiss ``IndexFlatIP.range_search`` (which keeps similarities above the radius), queried in blocks.

    >>> v = np.array([[1, 0], [0.99, 0.141], [0, 1]], dtype=np.float32)
    >>> cosine_pairs(v, 0.9).tolist()
    [[0, 1]]
    """
    import faiss

    x = np.ascontiguousarray(vectors, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"vectors must be a 2-D array, got shape {x.shape}.")
    if not -1.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be a cosine similarity in [-1, 1], got {threshold!r}.")
    if len(x) < 2:
        return np.zeros((0, 2), dtype=np.int64)
    index = faiss.IndexFlatIP(x.shape[1])
    index.add(x)
    out = []
    for s in range(0, len(x), block):
        lims, sims, ids = index.range_search(x[s:s + block], float(threshold) - 1e-6)
        q = np.repeat(np.arange(s, min(s + block, len(x)), dtype=np.int64), np.diff(lims).astype(np.int64))
        keep = (q < ids) & (sims >= threshold - 1e-6)
        out.append(np.stack([q[keep], ids[keep].astype(np.int64)], axis=1))
    pairs = np.concatenate(out)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


METHODS: dict[str, Method] = {
    "sha256": Method("sha256", lambda opts: {}, lambda project, inv, opts: None),
    "phash": _hash_method("phash"),
    "dhash": _hash_method("dhash"),
    "embedding": Method("embedding", _embedding_params, _embedding_find),
}


# ------------------------------------------------------------------------------------------ clusters
def scoped_clusters(inv: Inventory, pairs: np.ndarray, scope: str) -> list[tuple[int | None, np.ndarray]]:
    """``[(concept_id or None, member indexes), ...]``: connected components of the pair graph, per concept
    (edges only between two images both found for that concept) or over everything (global)."""
    if scope == "global":
        return [(None, c) for c in hashing.connected_clusters(inv.n, pairs)]
    concepts = [{c for c, _ in links} for links in inv.links]
    edges: dict[int, list] = defaultdict(list)
    for i, j in pairs.tolist():
        for c in concepts[i] & concepts[j]:
            edges[c].append((i, j))
    out = []
    for c in sorted(edges):
        e = np.array(edges[c], dtype=np.int64)
        nodes, local = np.unique(e, return_inverse=True)
        out += [(c, nodes[comp]) for comp in hashing.connected_clusters(len(nodes), local.reshape(-1, 2))]
    return out


def representative(inv: Inventory, members: np.ndarray) -> int:
    """The member with the largest resolution, then the most bytes, then the smallest sha256."""
    return min(members.tolist(), key=lambda i: (-int(inv.pixels[i]), -int(inv.nbytes[i]), inv.sha[i]))


def _pairs_of(inv: Inventory, members, concept_id: int | None) -> list[tuple[int, str]]:
    return sorted({p for i in members for p in inv.links[i] if concept_id is None or p[0] == concept_id})


def _save_clusters(project, method: str, scope: str, params: dict, inv: Inventory, found: Found,
                   clusters: list[tuple[int | None, np.ndarray]]) -> dict:
    """Insert new clusters, keep matching ones, supersede vanished ones (see the module docstring)."""
    db = project.db
    ptext = dumps(params)
    existing: dict[tuple, int] = {}
    for cid, concept_id, members in db.execute(
            "SELECT c.id, c.concept_id, group_concat(m.sha256) FROM dup_clusters c "
            "JOIN dedup_runs r ON r.id = c.run_id JOIN dup_members m ON m.cluster_id = c.id "
            f"WHERE c.method = ? AND c.scope = ? AND r.params = ? AND c.status IN {ACTIVE} GROUP BY c.id",
            [method, scope, ptext]).fetchall():
        existing[(concept_id, tuple(sorted(members.split(","))))] = cid
    had_run = db.execute("SELECT 1 FROM dedup_runs WHERE method = ? AND scope = ? AND params = ? LIMIT 1",
                         [method, scope, ptext]).fetchone() is not None
    ids: list[int] = []
    new = []
    for concept_id, members in clusters:
        key = (concept_id, tuple(sorted(inv.sha[i] for i in members)))
        if key in existing:
            ids.append(existing.pop(key))
        else:
            new.append((len(ids), concept_id, members))
            ids.append(-1)
    if new or existing or not had_run:
        ts = now()
        with db.conn:
            run_id = db["dedup_runs"].insert({"method": method, "scope": scope, "params": ptext,
                                              "created_at": ts}).last_pk
            for pos, concept_id, members in new:
                rep = representative(inv, members)
                dist = found.distance(rep, members)
                cid = db["dup_clusters"].insert({
                    "run_id": run_id, "method": method, "scope": scope, "concept_id": concept_id,
                    "representative": inv.sha[rep], "size": len(members), "status": "open",
                    "created_at": ts}).last_pk
                db["dup_members"].insert_all(
                    [{"cluster_id": cid, "sha256": inv.sha[i], "distance": float(d)}
                     for i, d in zip(members.tolist(), dist.tolist())])
                ids[pos] = cid
            if existing:
                marks = ",".join("?" * len(existing))
                db.execute(f"UPDATE dup_clusters SET status = 'superseded' WHERE id IN ({marks})",
                           list(existing.values()))
    return {"clusters": len(clusters), "new_clusters": len(new), "superseded_clusters": len(existing),
            "images_in_clusters": len({i for _, m in clusters for i in m.tolist()}), "pairs": len(found.pairs),
            "cluster_ids": ids}


# ------------------------------------------------------------------------------------------ conflicts
def _pair_json(inv: Inventory, pairs) -> list[dict]:
    return [{"concept_id": c, "concept": inv.concept_names.get(c), "country": k} for c, k in pairs]


def update_conflict_flags(project, inv: Inventory, evidence_key: str,
                          evidence: dict[int, dict]) -> dict:
    """Write ``culture_conflict`` flags for one ``method/scope``: ``evidence`` maps an inventory index to
    ``{"pairs": [(concept_id, country), ...], ...}``. Returns ``{"flagged": n, "new": n}``."""
    db = project.db
    current = {sha: (json.loads(d or "{}"), st) for sha, d, st in db.execute(
        "SELECT sha256, details, status FROM image_flags WHERE flag = ?", [FLAG])}
    ts = now()
    inserts, updates = [], []
    by_sha = {inv.sha[i]: ev for i, ev in evidence.items()}
    for sha in set(by_sha) | {s for s, (d, _) in current.items() if evidence_key in d.get("evidence", {})}:
        details, status = current.get(sha, ({}, None))
        ev = dict(details.get("evidence", {}))
        if sha in by_sha:
            item = dict(by_sha[sha])
            item["pairs"] = _pair_json(inv, item["pairs"])
            ev[evidence_key] = item
        else:
            ev.pop(evidence_key, None)
        pairs = sorted({(p["concept_id"], p["country"]) for e in ev.values() for p in e["pairs"]})
        old_pairs = {(p["concept_id"], p["country"]) for p in details.get("pairs", [])}
        new_details = {"pairs": _pair_json(inv, pairs), "evidence": ev}
        if "resolution" in details:  # who resolved it and why survives reruns
            new_details["resolution"] = details["resolution"]
        if status is None:
            inserts.append({"sha256": sha, "flag": FLAG, "details": dumps(new_details), "status": "open",
                            "created_at": ts})
            continue
        if not ev:
            new_status = "superseded"
        elif status == "superseded" or (status == "resolved" and not set(pairs) <= old_pairs):
            new_status = "open"
        else:
            new_status = status
        if new_details != details or new_status != status:
            updates.append([dumps(new_details), new_status, sha, FLAG])
    with db.conn:
        db.conn.executemany("UPDATE image_flags SET details = ?, status = ? WHERE sha256 = ? AND flag = ?",
                            updates)
        if inserts:
            db["image_flags"].insert_all(inserts)
    return {"flagged": len(evidence), "new": len(inserts)}


def resolve_flags(db, shas, *, resolution: str, by: str = "review", flag: str = FLAG) -> int:
    """Mark the open ``flag`` rows of ``shas`` resolved, recording ``{"by", "resolution", "at"}`` in their
    details (kept by later dedup runs; a flag reopens only when its pairs grow). Returns how many changed.
    Called by review decisions (dedup review, relevance) and by ``cultura images flags --resolve``."""
    shas = list(dict.fromkeys(shas))
    n = 0
    for sha, details in db.execute(
            f"SELECT sha256, details FROM image_flags WHERE flag = ? AND status = 'open' AND sha256 IN "
            f"({','.join('?' * len(shas))})", [flag, *shas]).fetchall() if shas else []:
        d = json.loads(details or "{}")
        d["resolution"] = {"by": by, "resolution": resolution, "at": now()}
        db.execute("UPDATE image_flags SET status = 'resolved', details = ? WHERE sha256 = ? AND flag = ?",
                   [dumps(d), sha, flag])
        n += 1
    return n


def reopen_flags(db, shas, *, flag: str = FLAG) -> int:
    """Reopen resolved ``flag`` rows of ``shas`` (an undo of :func:`resolve_flags`)."""
    n = 0
    for sha in dict.fromkeys(shas):
        cur = db.execute("UPDATE image_flags SET status = 'open' WHERE sha256 = ? AND flag = ? AND "
                         "status = 'resolved'", [sha, flag])
        n += cur.rowcount
    return n


def list_flags(db, *, status: str | None = "open", flag: str | None = None) -> list[dict]:
    """Flags with their pairs (concept × country) and resolution, oldest first."""
    sql, args = "SELECT sha256, flag, status, details, created_at FROM image_flags WHERE 1 = 1", []
    if status:
        sql, args = sql + " AND status = ?", [*args, status]
    if flag:
        sql, args = sql + " AND flag = ?", [*args, flag]
    out = []
    for sha, fl, st, details, created in db.execute(sql + " ORDER BY created_at, sha256", args):
        d = json.loads(details or "{}")
        res = d.get("resolution") or {}
        out.append({"sha256": sha, "flag": fl, "status": st,
                    "pairs": ", ".join(f"{p.get('concept')}/{p.get('country')}" for p in d.get("pairs", [])),
                    "evidence": ", ".join(sorted(d.get("evidence", {}))),
                    "resolved_by": res.get("by"), "resolution": res.get("resolution"), "created_at": created})
    return out


def _link_conflicts(inv: Inventory) -> dict[int, dict]:
    return {i: {"pairs": sorted(links)} for i, links in enumerate(inv.links) if len(links) > 1}


def _cluster_conflicts(inv: Inventory, clusters, ids, params) -> dict[int, dict]:
    out = {}
    for (concept_id, members), cid in zip(clusters, ids):
        pairs = _pairs_of(inv, members.tolist(), concept_id)
        if len(pairs) > 1:
            for i in members.tolist():
                out[i] = {"pairs": pairs, "cluster_id": cid, "size": len(members), "params": params}
    return out


# ------------------------------------------------------------------------------------------ entry point
def resolve_options(project, *, methods=None, scope=None, phash_threshold=None, dhash_threshold=None,
                    embedder=None, embedding_threshold=None) -> dict:
    """Fill unset options from ``project.config.dedup`` and validate them (ConfigError naming the option)."""
    cfg = project.config.dedup
    methods = list(dict.fromkeys(methods if methods else cfg.methods))
    for m in methods:
        if m not in METHODS:
            raise unknown("dedup method", m, METHODS, param="methods")
    scope = scope or cfg.scope
    if scope not in SCOPES:
        raise unknown("dedup scope", scope, SCOPES)
    opts = {"methods": methods, "scope": scope,
            "phash_threshold": cfg.phash_threshold if phash_threshold is None else phash_threshold,
            "dhash_threshold": cfg.dhash_threshold if dhash_threshold is None else dhash_threshold,
            "embedder": cfg.embedder if embedder is None else embedder,
            "embedding_threshold": cfg.embedding_threshold if embedding_threshold is None else embedding_threshold}
    for name in ("phash_threshold", "dhash_threshold"):
        v = opts[name]
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v <= 64:
            raise ConfigError(f"{name} must be a whole number of bits between 0 and 64, got {v!r}; set "
                              f"--{name.replace('_', '-')} or dedup.{name} in cultura.toml.")
        opts[name] = int(v)
    t = opts["embedding_threshold"]
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not -1 <= t <= 1:
        raise ConfigError(f"embedding_threshold must be a cosine similarity between -1 and 1, got {t!r}; set "
                          "--embedding-threshold or dedup.embedding_threshold in cultura.toml.")
    opts["embedding_threshold"] = float(t)
    if not isinstance(opts["embedder"], str):  # an Embedder instance
        opts["_embedder_obj"], opts["embedder"] = opts["embedder"], opts["embedder"].identity
    return opts


def dedup_images(project, *, methods=None, scope=None, phash_threshold=None, dhash_threshold=None,
                 embedder=None, embedding_threshold=None, progress=True) -> dict:
    """Find duplicate images and culture conflicts; store clusters and flags for review (nothing deleted).

    Unset options come from ``project.config.dedup``. ``embedder`` is a spec string or an Embedder.
    Returns a summary: ``hashes_computed``, ``clusters`` / ``images_in_clusters`` / ``new_clusters`` /
    ``superseded_clusters`` per method, ``conflicts_flagged`` (images with a conflict found by this call),
    ``conflicts_new`` (flags created), and counts of images and hash failures.
    """
    opts = resolve_options(project, methods=methods, scope=scope, phash_threshold=phash_threshold,
                           dhash_threshold=dhash_threshold, embedder=embedder,
                           embedding_threshold=embedding_threshold)
    db = project.db
    run = start_run(db, "dedup", {k: v for k, v in opts.items() if not k.startswith("_")})
    try:
        inv = load_inventory(project)
        summary: dict[str, Any] = {"scope": opts["scope"], "methods": opts["methods"], "images": inv.n,
                                   "hashes_computed": 0, "hash_failures": 0}
        if any(METHODS[m].needs_hashes for m in opts["methods"]):
            summary.update(ensure_hashes(project, inv, progress=progress))
        flagged: set[int] = set()
        new_flags = 0
        per: dict[str, dict] = {}
        for name in opts["methods"]:
            method = METHODS[name]
            params = method.params(opts)
            found = method.find(project, inv, opts)
            if found is None:  # sha256: conflicts from links only
                ev = _link_conflicts(inv)
                per[name] = {"multi_linked_images": len(ev)}
            else:
                clusters = scoped_clusters(inv, found.pairs, opts["scope"])
                per[name] = _save_clusters(project, name, opts["scope"], params, inv, found, clusters)
                ev = _cluster_conflicts(inv, clusters, per[name].pop("cluster_ids"), params)
            key = name if found is None else f"{name}/{opts['scope']}"
            res = update_conflict_flags(project, inv, key, ev)
            per[name]["conflicts"] = res["flagged"]
            flagged |= set(ev)
            new_flags += res["new"]
        for k in ("clusters", "images_in_clusters", "new_clusters", "superseded_clusters"):
            summary[k] = {m: v[k] for m, v in per.items() if k in v}
        summary["multi_linked_images"] = per.get("sha256", {}).get("multi_linked_images", 0)
        summary["conflicts_flagged"] = len(flagged)
        summary["conflicts_new"] = new_flags
    except BaseException as e:
        finish_run(db, run, status="failed" if isinstance(e, Exception) else "interrupted",
                   error=f"{type(e).__name__}: {e}")
        raise
    finish_run(db, run, summary)
    return summary


__all__ = ["METHODS", "SCOPES", "Inventory", "Method", "Found", "dedup_images", "load_inventory",
           "ensure_hashes", "scoped_clusters", "representative", "cosine_pairs", "update_conflict_flags",
           "resolve_flags", "reopen_flags", "list_flags",
           "resolve_options"]
