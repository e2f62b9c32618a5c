"""Visual entity linking (seed 004 §3.1 eqs. (1)–(2), App. A.3; spec §6).

Given an image embedding ``v``: the top-``k`` KB images by cosine (``k = 20``), the union of their entities,
re-ranked by ``cos(v, lemma text embedding)`` (``method="lemma"``, the seed's choice), by the gloss embedding
(``"gloss"``; entities without a gloss fall back to their lemma) or by how many of the top-k images carry the
entity (``"frequency"``, ties by first appearance). Results per (encoder, kb, image, method, k) are cached in
``attribution_links``.
"""
from __future__ import annotations

import json

import numpy as np

from ....db import now, transaction
from ....errors import unknown
from .kb import KBIndex

METHODS = ("lemma", "gloss", "frequency")
DEFAULT_K = 20


def link_image(index: KBIndex, query, *, k: int = DEFAULT_K, method: str = "lemma") -> list[tuple[str, float]]:
    """Ranked ``[(entity_id, score)]`` for one unit-norm image embedding ``query`` (best first)."""
    if method not in METHODS:
        raise unknown("linking method", method, METHODS)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}.")
    if index.size == 0:
        return []
    q = np.ascontiguousarray(np.asarray(query, dtype=np.float32).reshape(1, -1))
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


def link_images(project, embedder, index: KBIndex, sha256s, *, k: int = DEFAULT_K, method: str = "lemma"
                ) -> dict[str, list[tuple[str, float]]]:
    """Linked entities for project images (by sha256), cached in ``attribution_links``."""
    from ....models.embedders import embed_images_cached

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
        vecs = np.asarray(embed_images_cached(project, embedder, todo), dtype=np.float32)
        rows = []
        for s, v in zip(todo, vecs):
            out[s] = link_image(index, v, k=k, method=method)
            rows.append({"encoder": embedder.identity, "kb": index.key, "sha256": s, "method": method, "k": k,
                         "entities": json.dumps(out[s]), "created_at": now()})
        with transaction(db):
            db["attribution_links"].upsert_all(rows, pk=("encoder", "kb", "sha256", "method", "k"))
    return out
