"""Run CAIRe over the project's images: link each image to KB entities, then ask the judge for a 1–5 score
per culture label (seed 004 §3). Resumable: pairs that already have an ``ok``/``parsed`` score for the same
(judge, encoder, kb, context mode) are skipped; failures are rows with status ``failed`` and their reason,
retried on the next run.
"""
from __future__ import annotations

import json

from ....db import now
from ....db.pool import image_exclusions
from ....errors import CulturaError, unknown
from .baseline import upsert_scores
from ....models.judges import get_judge
from .kb import build_kb_index
from .linking import DEFAULT_K, link_images

CONTEXTS = ("entity", "titles")


def project_images(project, sha256s=None) -> list[tuple[str, str]]:
    """``[(sha256, absolute path)]`` of the project's reviewed pool (:mod:`cultura.db.pool`: ``ok`` images that
    reviews have not dropped), or of the given sha256s among them."""
    out = image_exclusions(project.db)
    rows = [r for r in project.db.execute("SELECT sha256, path FROM images WHERE status = 'ok' ORDER BY sha256")
            if r[0] not in out]
    if sha256s is not None:
        want = set(sha256s)
        rows = [r for r in rows if r[0] in want]
    return [(s, str(project.blob_path(p))) for s, p in rows]


def run_attribution(project, embedder, judge, *, kb: str = "default", countries=None, sha256s=None,
                    k: int = DEFAULT_K, method: str = "lemma", context: str = "entity",
                    limit: int | None = None) -> dict:
    """Score every (image, culture) pair; returns ``{"judge", "encoder", "kb", "pairs", "scored", "skipped",
    "failed"}``. ``countries``: culture labels (default: the project's countries); ``context``: ``entity``
    (KB text of the best linked entity) or ``titles`` (lemmas of the top-k linked entities)."""
    from ....models.embedders import get_embedder

    if context not in CONTEXTS:
        raise unknown("attribution context", context, CONTEXTS)
    embedder = get_embedder(embedder)
    judge = get_judge(judge)
    codes = [c.upper() for c in (countries or [c.code for c in project.countries])]
    names = {cc: project.registry.country(cc).name for cc in codes}
    images = project_images(project, sha256s)
    if not images:
        raise CulturaError("The project has no stored images to attribute; run 'cultura images download' first.")
    index = build_kb_index(project, embedder, kb)
    done = {(s, c) for s, c in project.db.execute(
        "SELECT sha256, country FROM attribution_scores WHERE judge = ? AND encoder = ? AND kb = ? AND context = ? "
        "AND status IN ('ok', 'parsed')", [judge.identity, embedder.identity, index.key, context]).fetchall()}
    todo = [(s, p, cc) for s, p in images for cc in codes if (s, cc) not in done]
    if limit is not None:
        todo = todo[:limit]
    links = link_images(project, embedder, index, {s for s, _, _ in todo}, k=k, method=method)
    n = {"scored": 0, "failed": 0}
    for s, path, cc in todo:
        ranked = links.get(s) or []
        top = index.entities[ranked[0][0]] if ranked else None
        if context == "entity":
            text = (top.get("text") or top.get("gloss") or top["lemma"]) if top else ""
            titles = [top["lemma"]] if top else []
        else:
            text, titles = "", [index.entities[e]["lemma"] for e, _ in ranked[:k]]
        res = judge.rate(culture=names[cc], entity_text=text, titles=titles, image_path=path)
        n["scored" if res.status != "failed" else "failed"] += 1
        row = {"judge": judge.identity, "encoder": embedder.identity, "kb": index.key, "context": context,
               "sha256": s, "country": cc, "entity_id": top["entity_id"] if top else None, "score": res.score,
               "argmax": res.argmax, "logprobs": json.dumps({k_: (v if v != float("-inf") else "-inf")
                                                             for k_, v in res.logprobs.items()}) if res.logprobs
               else None, "status": res.status, "reason": res.reason, "created_at": now()}
        with project.db.conn:
            upsert_scores(project.db, [row])
    return {"judge": judge.identity, "encoder": embedder.identity, "kb": index.key, "pairs": len(images) * len(codes),
            "skipped": len(images) * len(codes) - len(todo), **n}
