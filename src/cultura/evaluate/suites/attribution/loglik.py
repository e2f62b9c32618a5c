"""Log-likelihood relevance scoring with affine debiasing (seed 004 App. B.1), the alternative to the 1–5
judge that the paper compares in Tables 9 and 11 ("CAIRe (Log-probabilities)").

For an image, its retrieved text ``D`` (the linked entity's page, or the gold page) and each culture label
``c``, an LM scores the completion "This text is relevant to c":

- ``ll(c)   = log P(" c" | D + "This text is relevant to")``  (eq. 5: the negative of the NLL of eq. 4);
- ``base(c) = log P(" c" | "This text is relevant to")``     — the label's base rate under the prompt alone;
- ``debiased(c) = ll(c) − α · max(base(c), τ)``               — the affine correction of eq. 6 as cultura reads
  it (the seed's text names α, τ and "Calibrate before use" [61] but the equation's symbols are lost): the
  base rate is subtracted with weight α and capped at τ so a very unlikely label's correction stays bounded.

Relevance ratings on the 1–5 scale are needed for Tables 1/2 and the thresholds of App. C.7; the seed does not
say how log-likelihoods were mapped. cultura maps per image over its candidate labels by min–max:
``score = 1 + 4 · (debiased − min) / (max − min)`` (the image's most relevant label gets 5, the least 1; all
equal → 3). Text-only LMs only: the seed's VLM variant also conditions on the image, which the project's
scorers (:mod:`cultura.models.scorers`) cannot.
"""
from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

from ....bounds import COUNT, Bound
from ....cultures import ensure_labels, resolve_cultures
from ....db import now, transaction
from ....errors import CulturaError
from ....models.embedders import get_embedder
from ....models.scorers import get_scorer
from .baseline import upsert_scores
from .gold import load_gold
from .kb import build_kb_index
from .linking import DEFAULT_K, TOP_K, link_images
from .run import _context_for, project_images

if TYPE_CHECKING:
    from ....project import Project

PROMPT = "This text is relevant to"
DEFAULT_ALPHA = 1.0
DEFAULT_TAU = -30.0
#: The weight of the base-rate correction (0: none).
ALPHA = Bound(0, 1000, float)
#: The cap on the base rate, a log-likelihood (nats, at most 0); none: no cap.
TAU = Bound(-1e6, 0, float, optional=True)


def affine_debias(ll: float, base: float, *, alpha: float = DEFAULT_ALPHA, tau: float | None = DEFAULT_TAU) -> float:
    """``ll − alpha · max(base, tau)`` (``tau=None``: no cap).

    >>> affine_debias(-5.0, -2.0, alpha=1.0, tau=None), affine_debias(-5.0, -50.0, alpha=0.5, tau=-30.0)
    (-3.0, 10.0)
    """
    b = base if tau is None else max(base, tau)
    return float(ll - alpha * b)


def to_likert(debiased: dict[str, float]) -> dict[str, float]:
    """Min–max over one image's labels onto 1..5 (see the module doc).

    >>> to_likert({"JP": -1.0, "TH": -3.0, "DE": -2.0})
    {'JP': 5.0, 'TH': 1.0, 'DE': 3.0}
    """
    vals = [v for v in debiased.values() if not math.isnan(v)]
    if not vals:
        return {k: math.nan for k in debiased}
    lo, hi = min(vals), max(vals)
    return {k: (math.nan if math.isnan(v) else 3.0 if hi == lo else 1.0 + 4.0 * (v - lo) / (hi - lo))
            for k, v in debiased.items()}


def loglik_identity(scorer, alpha: float, tau: float | None) -> str:
    return f"loglik:{scorer.identity}|alpha={alpha:g}|tau={'none' if tau is None else f'{tau:g}'}"


def score_labels(scorer, text: str, names: dict[str, str], *, alpha: float = DEFAULT_ALPHA,
                 tau: float | None = DEFAULT_TAU) -> dict[str, dict]:
    """``{key: {"ll", "base", "debiased", "score"}}`` for one retrieved text and the labels' display names."""
    keys = list(names)
    prefix = (text.strip() + "\n\n" + PROMPT) if text and text.strip() else PROMPT
    res = scorer.score_pairs([(prefix, " " + names[k]) for k in keys] + [(PROMPT, " " + names[k]) for k in keys])
    out = {}
    for i, k in enumerate(keys):
        (ll, _, e1), (base, _, e2) = res[i], res[len(keys) + i]
        if ll is None or base is None:
            out[k] = {"ll": ll, "base": base, "debiased": math.nan, "error": e1 or e2 or "not scored"}
        else:
            out[k] = {"ll": float(ll), "base": float(base),
                      "debiased": affine_debias(ll, base, alpha=alpha, tau=tau)}
    likert = to_likert({k: v["debiased"] for k, v in out.items()})
    for k in keys:
        out[k]["score"] = likert[k]
    return out


def run_loglik(project: Project, embedder, scorer, *, kb: str = "default", labels=None, sha256s=None,
               k: int = DEFAULT_K,
               method: str = "lemma", context: str = "entity", alpha: float = DEFAULT_ALPHA,
               tau: float | None = DEFAULT_TAU, limit: int | None = None) -> dict:
    """Score every (image, label) pair by debiased log-likelihood; rows go to ``attribution_scores`` with
    judge ``loglik:<scorer>|alpha=…|tau=…`` (``context``: ``entity`` retrieved page or ``gold`` page).
    Resumable per image. Returns ``{"judge", "encoder", "kb", "images", "scored", "failed", "skipped"}``."""

    if context not in ("entity", "gold"):
        raise CulturaError(f"Log-likelihood scoring reads a page: context must be 'entity' or 'gold', got {context!r}.")
    k, limit = TOP_K.check(k, "k"), COUNT.check_optional(limit, "limit")
    alpha, tau = ALPHA.check(alpha, "alpha"), TAU.check(tau, "tau")
    if embedder is None:
        raise CulturaError("run_loglik needs a vision-language encoder for entity linking: pass embedder=...")
    embedder, scorer = get_embedder(embedder), get_scorer(scorer)
    cultures = resolve_cultures(project, labels or [c.code for c in project.countries])
    ensure_labels(project, cultures)
    names = {c.key: c.name for c in cultures}
    judge = loglik_identity(scorer, alpha, tau)
    index = build_kb_index(project, embedder, kb)
    images = project_images(project, sha256s)
    gold = load_gold(project) if context == "gold" else {}
    if context == "gold":
        images = [(s, p) for s, p in images if s in gold]
    done = {}
    for s, c in project.db.execute(
            "SELECT sha256, country FROM attribution_scores WHERE judge = ? AND encoder = ? AND kb = ? AND "
            "context = ? AND status = 'ok'", [judge, embedder.identity, index.key, context]).fetchall():
        done.setdefault(s, set()).add(c)
    todo = [(s, p) for s, p in images if not set(names) <= done.get(s, set())]
    if limit is not None:
        todo = todo[:limit]
    links = link_images(project, embedder, index, [s for s, _ in todo], k=k, method=method) if context == "entity" else {}
    n = {"scored": 0, "failed": 0}
    for s, _path in todo:
        text, _titles, entity_id, why = _context_for(context, index, links.get(s) or [], gold.get(s), k)
        scored = ({key: {"error": why} for key in names} if why else
                  score_labels(scorer, text, names, alpha=alpha, tau=tau))
        rows = []
        for key, v in scored.items():
            ok = "error" not in v and not math.isnan(v.get("score", math.nan))
            n["scored" if ok else "failed"] += 1
            rows.append({"judge": judge, "encoder": embedder.identity, "kb": index.key, "context": context,
                         "sha256": s, "country": key, "entity_id": entity_id, "score": v["score"] if ok else None,
                         "argmax": int(round(v["score"])) if ok else None, "logprobs": None,
                         "status": "ok" if ok else "failed", "reason": None if ok else v.get("error"),
                         "missing_tokens": None,
                         "details": json.dumps({x: v.get(x) for x in ("ll", "base", "debiased")}),
                         "created_at": now()})
        with transaction(project.db):
            upsert_scores(project.db, rows)
    return {"judge": judge, "encoder": embedder.identity, "kb": index.key, "context": context,
            "images": len(images), "skipped": len(images) - len(todo), **n}
