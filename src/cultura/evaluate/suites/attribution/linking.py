"""Visual entity linking (seed 004 §3.1 eqs. (1)–(2), App. A.3; spec §6).

Image query + image keys, then text disambiguation ("V-T", App. A.3 methods 4–5): given an image embedding
``v``, the top-``k`` KB images by cosine (``k = 20``), the union of their entities, re-ranked by
``cos(v, lemma text embedding)`` (``method="lemma"``, the seed's choice), by the gloss embedding (``"gloss"``;
entities without a gloss fall back to their lemma) or by how many of the top-k images carry the entity
(``"frequency"``, ties by first appearance).

Image query + text keys only ("T", App. A.3 methods 1–3): the top-``k`` entities by ``cos(v, text key)`` over
a faiss index of every entity's lemma (``"lemma-t"``), gloss (``"gloss-t"``, entities with a gloss) or
page text (``"text-t"``, the seed's "Wikipedia (T)"; entities with a text).

Results per (encoder, kb, image, method, k) are cached in ``attribution_links``. :func:`linking_accuracy`
gives Acc@1/5/10/20 against gold entities (seed 004 Table 3 shape).
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

from ....bounds import Bound
from ....db import now, transaction
from ....errors import unknown
from ....curate.images import image_files
from ....models.embedders import embed_images_cached
from .kb import KBIndex

if TYPE_CHECKING:
    from ....project import Project

METHODS = ("lemma", "gloss", "frequency", "lemma-t", "gloss-t", "text-t")
#: The seed's labels for the methods (App. A.3, Table 3).
METHOD_LABELS = {"lemma": "Lemma (V-T)", "gloss": "Gloss (V-T)", "frequency": "Freq-Based (V-T)",
                 "lemma-t": "Lemma (T)", "gloss-t": "Gloss (T)", "text-t": "Wikipedia (T)"}
TEXT_ONLY = {"lemma-t": "lemma", "gloss-t": "gloss", "text-t": "text"}
ACC_KS = (1, 5, 10, 20)
DEFAULT_K = 20
#: KB images (or text keys) retrieved per image: ``--top-k`` and the suite's ``k``.
TOP_K = Bound(1, 10_000)
#: Candidates retrieved for linking accuracy: at least the largest Acc@k reported.
LINKING_K = Bound(max(ACC_KS), 10_000)


def link_image(index: KBIndex, query, *, k: int = DEFAULT_K, method: str = "lemma") -> list[tuple[str, float]]:
    """Ranked ``[(entity_id, score)]`` for one unit-norm image embedding ``query`` (best first)."""
    if method not in METHODS:
        raise unknown("linking method", method, METHODS)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}.")
    q = np.ascontiguousarray(np.asarray(query, dtype=np.float32).reshape(1, -1))
    if method in TEXT_ONLY:
        if method == "text-t" and not index.text_vecs and any(e.get("text") for e in index.entities.values()):
            raise ValueError("method 'text-t' needs the page-text embeddings: build the index with "
                             "build_kb_index(..., with_text=True).")
        ids, faiss_index = index.text_index(TEXT_ONLY[method])
        if not ids:
            return []
        sims, rows = faiss_index.search(q, min(k, len(ids)))
        return [(ids[r], float(v)) for v, r in zip(sims[0], rows[0]) if r >= 0]
    if index.size == 0:
        return []
    _, rows = index.index.search(q, min(k, index.size))
    counts: dict[str, int] = {}
    for r in rows[0]:
        if r < 0:
            continue
        for eid in index.image_entities[r]:
            counts[eid] = counts.get(eid, 0) + 1
    order = list(counts)
    if method == "frequency":
        scored = [(e, float(counts[e])) for e in order]
    else:
        vecs = index.gloss_vecs if method == "gloss" else index.lemma_vecs
        scored = [(e, float(np.dot(q[0], vecs.get(e, index.lemma_vecs[e])))) for e in order]
    return sorted(scored, key=lambda t: (-t[1], order.index(t[0])))


def link_images(project: Project, embedder, index: KBIndex, sha256s, *, k: int = DEFAULT_K, method: str = "lemma"
                ) -> dict[str, list[tuple[str, float]]]:
    """Linked entities for project images (by sha256), cached in ``attribution_links``."""

    db = project.db
    shas = list(dict.fromkeys(sha256s))
    out: dict[str, list] = {}
    for s in shas:
        row = db.execute("SELECT entities FROM attribution_links WHERE encoder = ? AND kb = ? AND sha256 = ? "
                         "AND method = ? AND k = ?", [embedder.identity, index.key, s, method, k]).fetchone()
        if row is not None:
            out[s] = [tuple(x) for x in json.loads(row[0])]
    todo = [s for s in shas if s not in out]
    if todo:
        vecs = np.asarray(embed_images_cached(project, embedder, todo, files=image_files(project.db)), dtype=np.float32)
        rows = []
        for s, v in zip(todo, vecs):
            out[s] = link_image(index, v, k=k, method=method)
            rows.append({"encoder": embedder.identity, "kb": index.key, "sha256": s, "method": method, "k": k,
                         "entities": json.dumps(out[s]), "created_at": now()})
        with transaction(db):
            db["attribution_links"].upsert_all(rows, pk=("encoder", "kb", "sha256", "method", "k"))
    return out


def linking_accuracy(project: Project, embedder, index: KBIndex, gold: dict, *, methods=("lemma", "gloss", "frequency",
                     "lemma-t", "gloss-t", "text-t"), ks=ACC_KS, k: int = DEFAULT_K) -> list[dict]:
    """Acc@k of visual entity linking against gold entities (seed 004 App. A.3, Table 3 shape): the share of
    images whose gold entity (or one of them) is among the first ``k'`` linked entities, for each ``k'`` in
    ``ks``. ``gold``: ``{sha256: entity_id or set of ids}``; ``k``: KB images (V-T) or text keys (T) retrieved.
    Images whose gold entity is not in the KB still count (as misses) and are reported in ``n_gold_missing``.
    Returns one row per method: ``{"method", "label", "n", "n_gold_missing", "acc": {k': value}}``.
    """
    if not gold:
        raise ValueError("gold is empty: give {sha256: entity_id} for at least one image.")
    k = LINKING_K.check(k, "k")
    gold = {s: ({g} if isinstance(g, str) else set(g)) for s, g in gold.items()}
    if max(ks) > k:
        raise ValueError(f"Acc@{max(ks)} needs at least {max(ks)} retrieved candidates; k={k}.")
    missing = sum(1 for g in gold.values() if not (g & set(index.entities)))
    out = []
    for method in methods:
        links = link_images(project, embedder, index, list(gold), k=k, method=method)
        acc = {}
        for kk in ks:
            hits = [bool({e for e, _ in links.get(s, [])[:kk]} & g) for s, g in gold.items()]
            acc[kk] = float(np.mean(hits))
        out.append({"method": method, "label": METHOD_LABELS[method], "n": len(gold), "n_gold_missing": missing,
                    "acc": acc})
    return out
