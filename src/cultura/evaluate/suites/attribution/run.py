"""Run CAIRe over the project's images: link each image to KB entities, then ask the judge for a 1–5 score
per culture label (seed 004 §3). Resumable: pairs that already have an ``ok``/``parsed`` score for the same
(judge, encoder, kb, context mode) are skipped; failures are rows with status ``failed`` and their reason,
retried on the next run.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ....bounds import COUNT
from ....cultures import ensure_labels, resolve_cultures
from ....db import now, transaction
from ....annotate.pool import image_exclusions
from ....curate.images import ok_image_paths
from ....errors import CulturaError, unknown
from ....models.embedders import get_embedder
from ....models.judges import JudgeResult, get_judge
from .baseline import upsert_scores
from .evaluation import human_ratings
from .gold import load_gold
from .kb import build_kb_index
from .linking import DEFAULT_K, TOP_K, link_images

if TYPE_CHECKING:
    from ....project import Project

CONTEXTS = ("entity", "titles", "gold", "none")


def project_images(project: Project, sha256s=None) -> list[tuple[str, str]]:
    """``[(sha256, absolute path)]`` of the project's reviewed pool (:mod:`cultura.annotate.pool`: ``ok`` images that
    reviews have not dropped), or of the given sha256s among them."""
    out = image_exclusions(project.db)
    rows = [r for r in ok_image_paths(project.db) if r[0] not in out]
    if sha256s is not None:
        want = set(sha256s)
        rows = [r for r in rows if r[0] in want]
    return [(s, str(project.blob_path(p))) for s, p in rows]


def _context_for(context: str, index, ranked, gold_ids, k: int):
    """(entity text, titles, entity id, failure reason) the judge reads for one image."""
    if context == "none":
        return "", [], None, None
    if context == "gold":
        ids = [e for e in sorted(gold_ids or ()) if e in index.entities]
        if not ids:
            return None, None, None, (f"gold entity {', '.join(sorted(gold_ids or ())) or '(none)'} is not in "
                                      f"the knowledge base {index.kb!r}")
        top = index.entities[ids[0]]
        return top.get("text") or top.get("gloss") or top["lemma"], [top["lemma"]], top["entity_id"], None
    top = index.entities[ranked[0][0]] if ranked else None
    if context == "entity":
        text = (top.get("text") or top.get("gloss") or top["lemma"]) if top else ""
        return text, ([top["lemma"]] if top else []), (top["entity_id"] if top else None), None
    return "", [index.entities[e]["lemma"] for e, _ in ranked[:k]], (top["entity_id"] if top else None), None


def run_attribution(project: Project, embedder, judge, *, kb: str = "default", countries=None, sha256s=None,
                    k: int = DEFAULT_K, method: str = "lemma", context: str = "entity",
                    limit: int | None = None, labels=None, rated_only: bool = False) -> dict:
    """Score every (image, culture) pair; returns ``{"judge", "encoder", "kb", "pairs", "scored", "skipped",
    "failed", "incomplete"}``. ``labels`` (or ``countries``): culture labels — country codes, registered labels
    or free text such as "Shinto" (:mod:`cultura.cultures`; default: the project's countries).

    ``context`` — what the judge reads besides the image:

    - ``entity``: the KB text of the best linked entity (seed 004 "Wikipedia" augmentation, the default);
    - ``titles``: the lemmas of the top-k linked entities ("Top-20" augmentation);
    - ``gold``: the text of the image's gold entity (``attribution_gold``) instead of the retrieved one — the
      upper bound of App. C.5 (images without a gold entity are left out);
    - ``none``: nothing retrieved — with a VLM judge this is Baseline 2 (§5.2); no encoder or KB is used
      (``embedder`` may be None) and rows are stored with empty encoder and kb.

    ``rated_only``: score only the (image, label) pairs that have a human rating or gold label (the imported
    CAIRe specific set rates each image against its own proxy's labels, not every label); without ``labels``
    the labels are those of the rated pairs.
    """

    if context not in CONTEXTS:
        raise unknown("attribution context", context, CONTEXTS)
    k, limit = TOP_K.check(k, "k"), COUNT.check_optional(limit, "limit")
    if context != "none" and (embedder is None or (isinstance(embedder, str) and not embedder.strip())):
        raise CulturaError("run_attribution needs a vision-language encoder: pass embedder='openclip:ARCH/TAG' "
                           "(the seed used mSigLIP, 'openclip:ViT-SO400M-16-SigLIP-i18n-256/webli'). There is no "
                           "default: a fake or random-init encoder links images to arbitrary entities.")
    judge = get_judge(judge)
    rated = set(human_ratings(project)) if rated_only else None
    if rated_only and not rated:
        raise CulturaError("rated_only=True but no (image, label) pair has a human rating or gold label; import "
                           "them first (e.g. 'cultura caire import-specific').")
    default = sorted({c for _, c in rated}) if rated_only else [c.code for c in project.countries]
    cultures = resolve_cultures(project, labels or countries or default)
    ensure_labels(project, cultures)
    codes = [c.key for c in cultures]
    names = {c.key: c.prompt_name for c in cultures}
    images = project_images(project, sha256s)
    if not images:
        raise CulturaError("The project has no stored images to attribute; run 'cultura images download' first.")
    gold = load_gold(project) if context == "gold" else {}
    if context == "gold":
        images = [(s, p) for s, p in images if s in gold]
        if not images:
            raise CulturaError("No project image has a gold entity; import them first (import_gold / 'cultura "
                               "attribution gold FILE') for the gold-page upper bound.")
    if context == "none":
        index, enc_id, kb_key = None, "", ""
    else:
        embedder = get_embedder(embedder)
        index = build_kb_index(project, embedder, kb)
        enc_id, kb_key = embedder.identity, index.key
    done = {(s, c) for s, c in project.db.execute(
        "SELECT sha256, country FROM attribution_scores WHERE judge = ? AND encoder = ? AND kb = ? AND context = ? "
        "AND status IN ('ok', 'parsed')", [judge.identity, enc_id, kb_key, context]).fetchall()}
    todo = [(s, p, cc) for s, p in images for cc in codes if (s, cc) not in done
            and (rated is None or (s, cc) in rated)]
    n_pairs = len(images) * len(codes) if rated is None else sum(
        1 for s, _ in images for cc in codes if (s, cc) in rated)
    if limit is not None:
        todo = todo[:limit]
    links = (link_images(project, embedder, index, {s for s, _, _ in todo}, k=k, method=method)
             if context in ("entity", "titles") else {})
    n = {"scored": 0, "failed": 0, "incomplete": 0}
    for s, path, cc in todo:
        text, titles, entity_id, why = _context_for(context, index, links.get(s) or [], gold.get(s), k)
        if why:
            res = JudgeResult("failed", reason=why)
        else:
            res = judge.rate(culture=names[cc], entity_text=text, titles=titles, image_path=path)
        n["scored" if res.status != "failed" else "failed"] += 1
        n["incomplete"] += bool(res.missing)
        row = {"judge": judge.identity, "encoder": enc_id, "kb": kb_key, "context": context,
               "sha256": s, "country": cc, "entity_id": entity_id, "score": res.score,
               "argmax": res.argmax, "logprobs": json.dumps({k_: (v if v != float("-inf") else "-inf")
                                                             for k_, v in res.logprobs.items()}) if res.logprobs
               else None, "status": res.status, "reason": res.reason,
               "missing_tokens": json.dumps(res.missing) if res.missing else None, "created_at": now()}
        with transaction(project.db):
            upsert_scores(project.db, [row])
    return {"judge": judge.identity, "encoder": enc_id, "kb": kb_key, "context": context,
            "pairs": n_pairs, "skipped": n_pairs - len(todo), **n}
