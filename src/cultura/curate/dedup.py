"""Image de-duplication: exact (sha256), perceptual (pHash, dHash) and embedding duplicates, and culture
conflicts. Nothing is deleted: the output is clusters for a person to review (seed 000, App. J guideline).

Methods (a registry, :data:`METHODS`):

- ``sha256`` — identical bytes are one ``images`` row by construction, so this method makes no clusters;
  it flags an image linked (through ``image_links``) to more than one (concept, country) pair;
- ``phash`` / ``dhash`` — 64-bit perceptual hashes (:mod:`cultura.curate.hashing`), pairs within a Hamming
  threshold found exactly by a faiss binary index. Both hash the image's content box (uniform borders
  trimmed); pHash compares every view of an image with every view of the other — the full, 5 % and 10 %
  centre (``images.phash_centre``, ``images.phash_variants``), mirrored and upside-down pHashes
  (:mod:`cultura.curate.invariance`) — which finds padded, cropped, slightly rotated and mirrored copies. The
  hashes come from the downloader's or importer's validating decode (or are computed here once, in this
  process or on Ray: ``executor``) and are stored in ``images`` (16-hex), so a rerun hashes nothing;
- ``embedding`` — image embeddings of any :mod:`cultura.models.embedders` embedder (cached in
  ``embeddings``, read into one matrix), pairs with cosine similarity ``>= threshold``, found by
  :func:`cultura.curate.vector_search.similar_pairs`: exact blocked products up to 100k rows per search,
  an IVF search above (exact products inside the probed cells: exact precision, measured recall), or as
  ``embedding_index`` says.

Scope: ``within-concept`` links two images only inside a concept they were both found for (one cluster set
per concept, ``dup_clusters.concept_id`` set; each concept's images are searched apart); ``global`` links
any two images.

A hash method's candidate pairs are confirmed by the fine hashes of the same view before anything else
(:mod:`cultura.curate.confirm`), then by their detail aligned frame on frame (:mod:`cultura.curate.aligned`,
from the blobs of the candidates only). Clusters are stars of the pair graph: each has a representative — the
largest resolution, then the most bytes, then the smallest sha256 — and every member is paired with the
representative itself (no chaining through a third image), with its distance to it (Hamming bits, or
``1 - cosine``). They are stored in ``dup_clusters`` / ``dup_members`` under a ``dedup_runs`` row holding
method, scope and params (thresholds, hash definition or embedder identity).

Culture conflicts: an image found for two different (concept, country) pairs, or a cluster whose members
were found for different pairs (within its concept, for within-concept scope), gets an ``image_flags`` row
``culture_conflict`` whose ``details`` JSON lists the pairs and the evidence (per ``method/scope``); the
flags and the culture decisions that settle them live in :mod:`cultura.curate.cultures_decide` (the dedup
review decides which copy stays, never which culture).

Idempotency (rerun rule): clusters are matched to the active (``open`` or ``resolved``) clusters of earlier
runs with the same method, scope and params by (concept, exact member set). A matching cluster is kept as
it is (id, status and any review decision stay valid); an earlier cluster with no match becomes
``superseded``; only the unmatched new ones are inserted, under a new ``dedup_runs`` row. A rerun on an
unchanged image set therefore writes nothing (no run row, no cluster, no hash); when nothing dedup reads or
writes changed since the same call last finished, it returns that call's summary at once (``unchanged``,
see :func:`dedup_images`). Flags follow the same rule:
an evidence entry that no longer holds is removed, a flag left with none becomes ``superseded``, and a
``resolved`` flag is reopened only when its list of pairs grows.

>>> from cultura.curate.dedup import METHODS
>>> sorted(METHODS)
['dhash', 'embedding', 'phash', 'sha256']
"""
from __future__ import annotations

import functools
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..bounds import from_field
from ..config import DedupSection
from ..db import dumps, finish_run, gc_paused, now, start_run, transaction
from .blobs import check_blobs
from .images import image_files, image_paths
from ..db.leases import stage_lock
from ..errors import unknown
from ..executor import use_executor
from ..progress import Progress
from ..progress import track
from ..models.embedders import embed_images_cached, get_embedder
from . import executor as executors
from . import aligned, confirm, hashing, vector_search
from .dedup_inventory import (Inventory, Writes, bump_counter, decode_waiting, ensure_hashes, load_inventory,
                              read_counter, read_snapshot)
from .cultures_decide import FLAG, cluster_conflicts, link_conflicts, list_flags, reopen_flags, resolve_flags
from .cultures_decide import update_conflict_flags_many as _update_flags
from .vector_search import cosine_pairs  # dedup.cosine_pairs: the exact search, kept importable here
# the cluster phase (dedup_clusters.py); representative(s) are kept importable here
from .dedup_clusters import (_save_clusters, bulk_writes, representative,  # noqa: F401
                             representatives, scoped_clusters)

if TYPE_CHECKING:
    from ..project import Project

SCOPES = ("within-concept", "global")


# ------------------------------------------------------------------------------------------ methods
@dataclass
class Found:
    """A method's result: pairs of inventory indexes (i < j) and a distance function: ``distance(reps,
    members)`` gives, element-wise, each member's distance to its representative (``reps`` broadcasts)."""

    pairs: np.ndarray
    distance: Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass
class Method:
    """One de-duplication method: ``params(opts)`` names the run, ``find(project, inv, opts)`` finds pairs.

    ``find`` returns None for a method that makes no clusters (sha256)."""

    name: str
    params: Callable[[dict], dict]
    find: Callable[[Any, Inventory, dict], Found | None]
    needs_hashes: bool = False


def _hash_method(kind: str) -> Method:
    """pHash: every view of an image (full, 5 % and 10 % centre, mirror, flip: :mod:`cultura.curate.invariance`)
    against every view of the other (:func:`hashing.pair_views`), which finds padded, cropped, slightly
    rotated and mirrored copies; dHash: full hashes (of the content box). Either way a candidate pair is
    kept only when the fine hashes confirm it (:func:`confirm.confirm_pairs`) and then its aligned detail
    agrees (:func:`aligned.verify_pairs`, from the blobs of the candidates only). The distance to a
    representative is the smallest of the compared combinations."""
    views = kind == "phash"

    def params(opts):
        p = {"threshold": opts[f"{kind}_threshold"], "hash": hashing.HASH_VERSION, "confirm": confirm.VERSION,
             "aligned": aligned.VERSION}
        if views:
            p["centre_crop"] = hashing.CENTRE_CROP
            p["views"] = ["full", "centre", *hashing.VARIANTS]
        return p

    def find(project: Project, inv, opts):
        t = opts[f"{kind}_threshold"]
        if views:
            has = inv.has_phash  # a missing view is 0 in the table: never compared
            table = inv.phash_views()

            def search(idx, workers=None):
                return hashing.pair_views(table[idx], t, workers=workers)
        else:
            full, has = inv.dhash, inv.has_dhash

            def search(idx, workers=None):
                return hashing.hamming_pairs(full[idx], t, workers=workers)
        if opts.get("scope") == "within-concept":
            # concepts searched in parallel, one thread each (faiss releases the GIL)
            pairs = concept_pairs(inv, has, functools.partial(search, workers=1), workers=os.cpu_count() or 1)
        else:
            idx = np.flatnonzero(has)
            pairs = idx[search(idx)].reshape(-1, 2)
        pairs = confirm.confirm_pairs(pairs, inv.fine)  # the second, stricter look (confirm.py)
        pairs = _aligned_look(project, inv, pairs, opts)  # the third

        def distance(reps, members):
            reps = np.broadcast_to(reps, np.shape(members))
            if not views:
                return hashing.hamming_to_each(inv.dhash[members], inv.dhash[reps])
            d = hashing.view_distances(table[members], table[reps])
            d[members == reps] = 0
            return d

        return Found(pairs, distance)

    return Method(kind, params, find, needs_hashes=True)


def _aligned_look(project: Project, inv: Inventory, pairs: np.ndarray, opts: dict) -> np.ndarray:
    """The ``pairs`` whose aligned detail agrees (:func:`aligned.verify_pairs`). Its verdict depends on the
    two images only, so a pair both pHash and dHash found (every plain copy) is looked at once per run: the
    verdicts are kept in ``opts`` for the next method."""
    seen = opts.setdefault("_aligned_seen", {"checked": np.zeros(0, np.int64), "kept": np.zeros(0, np.int64)})
    key = pairs[:, 0] * inv.n + pairs[:, 1]
    known = np.isin(key, seen["checked"])
    new = aligned.verify_pairs(pairs[~known], inv.fine, functools.partial(_view_thumbs, project, inv))
    new_key = new[:, 0] * inv.n + new[:, 1]
    seen["checked"] = np.union1d(seen["checked"], key[~known])
    seen["kept"] = np.union1d(seen["kept"], new_key)
    return pairs[np.isin(key, seen["kept"])]


def _view_thumbs(project: Project, inv: Inventory, images: np.ndarray) -> list:
    """:func:`aligned.view_thumbs` of inventory ``images`` from their blobs (None where one cannot be read)."""
    shas = [inv.sha[int(i)] for i in images]
    paths = image_paths(project.db, shas)
    return aligned.load_thumbs([project.blob_path(paths[s]) if paths.get(s) else None for s in shas])


def concept_groups(inv: Inventory, mask: np.ndarray | None = None) -> list[tuple[int, np.ndarray]]:
    """``[(concept_id, sorted image indexes), ...]``: the images found for each concept (an image found for
    several concepts is in each of their groups), restricted to ``mask`` when given."""
    if not len(inv.link_img):
        return []
    n_c = int(inv.link_concept.max()) + 1
    node = np.unique(inv.link_concept * inv.n + inv.link_img)   # sorted by concept, then image
    node_c, node_img = node // inv.n, node % inv.n
    if mask is not None:
        keep = mask[node_img]
        node_c, node_img = node_c[keep], node_img[keep]
    bounds = np.searchsorted(node_c, np.arange(n_c + 1))
    return [(c, node_img[bounds[c]:bounds[c + 1]]) for c in range(n_c) if bounds[c + 1] - bounds[c] > 1]


def concept_pairs(inv: Inventory, mask: np.ndarray, search: Callable[[np.ndarray], np.ndarray], *,
                  workers: int = 1) -> np.ndarray:
    """Pairs ``(i, j)``, ``i < j``, found by ``search`` inside each concept's group of images (see
    :func:`concept_groups`); ``search(indexes)`` returns local pairs into ``indexes``. Sorted, each once.
    ``workers > 1``: concepts are searched by a pool of that many threads (``search`` must then be
    single-threaded and release the GIL, as faiss does).

    Within-concept scope needs no pair across concepts, so one search per concept replaces one search over
    everything: with ``n`` images in ``k`` concepts a brute-force search costs ``n**2 / k`` instead of
    ``n**2``."""
    def one(group):
        idx = group[1]
        local = np.asarray(search(idx), dtype=np.int64).reshape(-1, 2)
        return idx[local]  # idx is ascending, so i < j is kept

    groups = concept_groups(inv, mask)
    if workers > 1 and len(groups) > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            found = [p for p in pool.map(one, groups) if len(p)]
    else:
        found = [p for p in map(one, groups) if len(p)]
    if not found:
        return np.zeros((0, 2), dtype=np.int64)
    pairs = np.concatenate(found)
    key = np.unique(pairs[:, 0] * inv.n + pairs[:, 1])
    return np.stack([key // inv.n, key % inv.n], axis=1)


def _embedder(opts):

    if opts.get("_embedder_obj") is None:
        opts["_embedder_obj"] = get_embedder(opts["embedder"])
    return opts["_embedder_obj"]


def _index_options(opts) -> dict:
    """The embedding search's index options (``[dedup] embedding_index / embedding_nlist /
    embedding_nprobe``), validated; defaults where ``opts`` has none."""
    o = {"index": opts.get("embedding_index", "auto"), "nlist": opts.get("embedding_nlist"),
         "nprobe": opts.get("embedding_nprobe", vector_search.DEFAULT_NPROBE)}
    vector_search.validate_index_options(o["index"], o["nlist"], o["nprobe"])
    return o


def _embedding_params(opts):
    """Embedder identity, threshold, and how pairs are searched (:func:`vector_search.index_params`: exact,
    IVF with its parameters, or the ``auto`` rule), so stored clusters record how they were found."""
    return {"embedder": _embedder(opts).identity, "threshold": opts["embedding_threshold"],
            "index": vector_search.index_params(**_index_options(opts))}


def _embedding_find(project: Project, inv, opts):
    """Cosine pairs of image embeddings (cached). The matrix is held once: one row per readable image,
    filled in place from the cache (:func:`embed_images_cached`). Within-concept scope searches each
    concept's images apart (``n**2 / k`` work for ``k`` concepts), global scope everything at once; each
    search is exact or IVF (:func:`vector_search.similar_pairs`: ``auto`` picks exact up to
    ``EXACT_MAX_ROWS`` rows; IVF pairs are exact products, only recall is approximate)."""

    emb = _embedder(opts)
    ix = _index_options(opts)
    keep = np.ones(inv.n, dtype=bool)
    keep[list(inv.unreadable)] = False
    idx = np.flatnonzero(keep)
    t = opts["embedding_threshold"]
    pos = np.full(inv.n, -1, dtype=np.int64)      # image index -> row of the matrix (-1: unreadable)
    pos[idx] = np.arange(len(idx))
    vecs = np.zeros((0, 1), dtype=np.float32)
    pairs = np.zeros((0, 2), dtype=np.int64)
    if len(idx):
        vecs = embed_images_cached(project, emb, [inv.sha[i] for i in idx], files=image_files(project.db))
        if opts.get("scope") == "within-concept":
            pairs = concept_pairs(inv, keep, lambda g: vector_search.similar_pairs(vecs, t, rows=pos[g], **ix))
        else:
            pairs = idx[vector_search.similar_pairs(vecs, t, **ix)].reshape(-1, 2)

    def distance(reps, members):
        reps = np.broadcast_to(reps, np.shape(members))
        return np.clip(1.0 - np.einsum("ij,ij->i", vecs[pos[members]], vecs[pos[reps]]), 0.0, 2.0)

    return Found(pairs, distance)


METHODS: dict[str, Method] = {
    "sha256": Method("sha256", lambda opts: {}, lambda project, inv, opts: None),
    "phash": _hash_method("phash"),
    "dhash": _hash_method("dhash"),
    "embedding": Method("embedding", _embedding_params, _embedding_find),
}


# ------------------------------------------------------------------------------------------ conflicts
def update_conflict_flags(project: Project, inv: Inventory, evidence_key: str,
                          evidence: dict[int, dict], writes: Writes | None = None) -> dict:
    """Write ``culture_conflict`` flags for one ``method/scope`` (:mod:`cultura.curate.cultures_decide`):
    ``evidence`` maps an inventory index to ``{"pairs": [(concept_id, country), ...], ...}``. Returns
    ``{"flagged": n, "new": n}``."""
    return update_conflict_flags_many(project, inv, {evidence_key: evidence}, writes)[evidence_key]


def update_conflict_flags_many(project: Project, inv: Inventory, evidence_by_key: dict[str, dict[int, dict]],
                               writes: Writes | None = None) -> dict[str, dict]:
    """:func:`cultura.curate.cultures_decide.update_conflict_flags_many` under dedup's change counter."""
    writes = writes or Writes(project.db, None)  # no counter read with the inventory: checks stay on
    flag_writes = functools.partial(bulk_writes, writes, ("image_flags",))
    return _update_flags(project, inv, evidence_by_key, writes=flag_writes, bump=bump_counter)


# ------------------------------------------------------------------------------------------ entry point
#: The thresholds of the hash and embedding methods: the ranges of the dedup settings of cultura.toml.
THRESHOLDS = {name: from_field(DedupSection, name)
              for name in ("phash_threshold", "dhash_threshold", "embedding_threshold")}


def resolve_options(project: Project, *, methods=None, scope=None, phash_threshold=None, dhash_threshold=None,
                    embedder=None, embedding_threshold=None, executor=None, embedding_index=None) -> dict:
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
            "embedding_threshold": cfg.embedding_threshold if embedding_threshold is None else embedding_threshold,
            "executor": (executor or getattr(cfg, "executor", "local"))}
    if opts["executor"] not in executors.EXECUTORS:
        raise unknown("executor", opts["executor"], executors.EXECUTORS, param="executor")
    for name, bound in THRESHOLDS.items():
        opts[name] = bound.check(opts[name], name)
    opts.update({k: getattr(cfg, k) for k in ("embedding_index", "embedding_nlist", "embedding_nprobe")})
    if embedding_index is not None:
        opts["embedding_index"] = embedding_index
    _index_options(opts)  # validated here, before any work
    if not isinstance(opts["embedder"], str):  # an Embedder instance
        opts["_embedder_obj"], opts["embedder"] = opts["embedder"], opts["embedder"].identity
    return opts


def dedup_images(project: Project, *, methods=None, scope=None, phash_threshold=None, dhash_threshold=None,
                 embedder=None, embedding_threshold=None, progress: Progress = None, executor=None,
                 embedding_index=None) -> dict:
    """Find duplicate images and culture conflicts; store clusters and flags for review (nothing deleted).

    Unset options come from ``project.config.dedup``. ``embedder`` is a spec string or an Embedder.
    Returns a summary: ``hashes_computed``, ``clusters`` / ``images_in_clusters`` / ``new_clusters`` /
    ``superseded_clusters`` per method, ``conflicts_flagged`` (images with a conflict found by this call),
    ``conflicts_new`` (flags created), and counts of images and hash failures.

    No-op rerun: triggers bump ``change_counters.dedup`` on every write to the tables dedup reads (images,
    candidates, search results, queries, concepts, image flags) or writes (runs, clusters, members). A call
    whose own writes were the only ones since it read the project records the counter under its options
    (``dedup_state``); a later call with the same options that finds the counter unchanged returns the
    recorded summary (``unchanged: true``, nothing new) without reading the images.
    """
    opts = resolve_options(project, methods=methods, scope=scope, phash_threshold=phash_threshold,
                           dhash_threshold=dhash_threshold, embedder=embedder,
                           embedding_threshold=embedding_threshold, executor=executor,
                           embedding_index=embedding_index)
    # two at once would store clusters twice; millions of row tuples: the cyclic GC paused (db.gc_paused);
    # hashing and embedding run where the executor says (cultura.executor)
    with stage_lock(project.root, "dedup", "cultura images dedup"), gc_paused(), \
            use_executor(opts["executor"], config=project.config):
        return _dedup_alone(project, opts, progress)


def _dedup_alone(project: Project, opts: dict, progress: Progress) -> dict:
    db = project.db
    run = start_run(db, "dedup", {k: v for k, v in opts.items() if not k.startswith("_")})
    try:
        check_blobs(project)  # an image whose file is gone is marked 'missing' (re-fetched later), not fatal
        with transaction(db):  # a cluster left without members by an older, non-atomic writer: repaired
            db.execute("DELETE FROM dup_clusters WHERE NOT EXISTS "
                       "(SELECT 1 FROM dup_members m WHERE m.cluster_id = dup_clusters.id)")
        key = dumps({"scope": opts["scope"], "methods": {m: METHODS[m].params(opts) for m in opts["methods"]}})
        with read_snapshot(db):
            start = read_counter(db)
            state = db.execute("SELECT counter, summary FROM dedup_state WHERE key = ?", [key]).fetchone() \
                if start is not None else None
            if state is not None and state[0] == start:
                summary = _unchanged(json.loads(state[1]))
            else:
                summary = None
                inv = load_inventory(project)
        if summary is None:
            writes = Writes(db, start)
            summary = _dedup(project, inv, opts, writes, progress)
            with writes():
                if not writes.foreign:
                    db.execute("INSERT INTO dedup_state (key, counter, summary, updated_at) VALUES (?, ?, ?, ?) "
                               "ON CONFLICT (key) DO UPDATE SET counter = excluded.counter, "
                               "summary = excluded.summary, updated_at = excluded.updated_at",
                               [key, writes.expected, json.dumps(summary, default=str), now()])  # keeps key order
    except BaseException as e:
        finish_run(db, run, status="failed" if isinstance(e, Exception) else "interrupted",
                   error=f"{type(e).__name__}: {e}")
        raise
    finish_run(db, run, summary)
    return summary


def _unchanged(summary: dict) -> dict:
    """A recorded summary as a no-op rerun reports it: nothing computed, created or superseded."""
    out = dict(summary, hashes_computed=0, hash_failures=0, conflicts_new=0, unchanged=True)
    for k in ("new_clusters", "superseded_clusters"):
        out[k] = {m: 0 for m in summary.get(k, {})}
    return out


def _dedup(project: Project, inv: Inventory, opts: dict, writes: Writes, progress: Progress) -> dict:
    summary: dict[str, Any] = {"scope": opts["scope"], "methods": opts["methods"], "images": inv.n,
                               "hashes_computed": 0, "hash_failures": 0}
    # an image stored after a header check, or one a person sent back to be decoded again, is decoded by every
    # dedup, whatever its methods: until then it is out of the reviewed pool (or would be hashed by nobody), and
    # "run cultura images dedup" is what its flag tells the user
    if any(METHODS[m].needs_hashes for m in opts["methods"]) or decode_waiting(project.db):
        summary.update(ensure_hashes(project, inv, progress=progress, writes=writes, executor=opts["executor"]))
    flagged: set[int] = set()
    per: dict[str, dict] = {}
    evidence: dict[str, dict[int, dict]] = {}
    keys: dict[str, str] = {}
    for name in track(opts["methods"], "dedup: finding duplicate sets", progress=progress):
        method = METHODS[name]
        params = method.params(opts)
        found = method.find(project, inv, opts)
        keys[name] = name if found is None else f"{name}/{opts['scope']}"
        if found is None:  # sha256: conflicts from links only
            ev = link_conflicts(inv)
            per[name] = {"multi_linked_images": len(ev)}
        else:
            clusters = scoped_clusters(inv, found.pairs, opts["scope"])
            per[name] = _save_clusters(project, name, opts["scope"], params, inv, found, clusters, writes)
            ev = cluster_conflicts(inv, clusters, per[name].pop("cluster_ids"), params)
            del found, clusters
        evidence[keys[name]] = ev
        flagged |= set(ev)
    res = update_conflict_flags_many(project, inv, evidence, writes)
    for name, key in keys.items():
        per[name]["conflicts"] = res[key]["flagged"]
    new_flags = sum(r["new"] for r in res.values())
    for k in ("clusters", "images_in_clusters", "new_clusters", "superseded_clusters"):
        summary[k] = {m: v[k] for m, v in per.items() if k in v}
    summary["multi_linked_images"] = per.get("sha256", {}).get("multi_linked_images", 0)
    summary["conflicts_flagged"] = len(flagged)
    summary["conflicts_new"] = new_flags
    summary["unchanged"] = False
    return summary


__all__ = ["FLAG", "METHODS", "SCOPES", "Inventory", "Method", "Found", "dedup_images", "load_inventory",
           "ensure_hashes", "scoped_clusters", "representative", "cosine_pairs", "update_conflict_flags",
           "resolve_flags", "reopen_flags", "list_flags",
           "resolve_options"]
