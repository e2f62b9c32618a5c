"""Evaluate attribution scores against human relevance ratings (seed 004 §5–6, Tables 1–2; spec §6), and
rank the pairs the judge is least sure about for annotation.

Human ratings are the mean Likert rating per image × country from cultura's own ``relevance`` campaign (the
current annotations of every annotator; the final ``decisions`` value where no raw annotations are stored), or
an imported CAIRe-style ratings file (columns ``sha256``, ``country``, ``rating``; several rows per pair are
averaged).

- binary relevance at ``score > threshold`` (3: "relevant" and "highly relevant") on both sides → precision
  and F1 over all (image, label) pairs (``sklearn.metrics``);
- Pearson correlation of the scores with the mean human ratings, overall and per country
  (``scipy.stats.pearsonr``; NaN with a reason when fewer than 3 pairs or a constant side).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ....db.readers import read_rows
from ....errors import CulturaError


def human_ratings(project, *, source: str | Path | None = None) -> dict[tuple[str, str], tuple[float, int]]:
    """``{(sha256, country): (mean rating, n ratings)}`` from the project's relevance campaign (or ``source``)."""
    if source is not None:

        acc: dict[tuple[str, str], list[float]] = {}
        for n, r in enumerate(read_rows(source, strict=True), 1):
            sha = str(r.get("sha256") or r.get("image") or "").strip()
            cc = str(r.get("country") or r.get("culture") or "").strip().upper()
            val = r.get("rating", r.get("value", r.get("score")))
            if not sha or not cc or val in (None, ""):
                raise CulturaError(f"{source} row {n}: ratings need 'sha256', 'country' and 'rating' columns.")
            acc.setdefault((sha, cc), []).append(float(val))
        return {k: (float(np.mean(v)), len(v)) for k, v in acc.items()}
    db = project.db
    out: dict[tuple[str, str], tuple[float, int]] = {}
    if "annotations" in db.table_names():
        for sha, cc, mean, n in db.execute(
                "SELECT i.sha256, i.country, avg(a.value), count(*) FROM annotations a "
                "JOIN annotation_items i ON i.id = a.item_id WHERE i.kind = 'relevance' AND a.is_current = 1 "
                "AND a.was_cancelled = 0 AND a.purpose = 'annotate' AND a.value IS NOT NULL "
                "GROUP BY i.sha256, i.country").fetchall():
            out[(sha, cc)] = (float(mean), int(n))
    for sha, cc, val, n in db.execute(
            "SELECT sha256, country, value, n_annotations FROM decisions WHERE kind = 'relevance' "
            "AND superseded = 0 AND value IS NOT NULL").fetchall():
        if (sha, cc) not in out and sha and cc:
            out[(sha, cc)] = (float(val), int(n or 1))
    return out


def relevance_agreement(pred, human, countries, *, threshold: float = 3.0) -> dict:
    """Precision / F1 at ``> threshold`` and Pearson r (overall and per country) of aligned arrays.

    ``pred`` and ``human`` are 1-D scores of the same (image, country) pairs, ``countries`` their labels.
    Returns ``{"precision", "f1", "pearson", "pearson_p", "n", "per_country": {cc: {"pearson", "p", "n"}}}``.

    >>> r = relevance_agreement([4.5, 1.2, 3.8, 2.0], [5, 1, 4, 2], ["JP", "JP", "TH", "TH"])
    >>> r["precision"], r["f1"], round(r["pearson"], 3)
    (1.0, 1.0, 0.999)
    """
    from sklearn.metrics import f1_score, precision_score

    p = np.asarray(pred, dtype=float)
    h = np.asarray(human, dtype=float)
    c = np.asarray(countries)
    if p.ndim != 1 or p.shape != h.shape or c.shape != p.shape:
        raise ValueError("pred, human and countries must be 1-D arrays of the same length.")
    if len(p) == 0:
        raise ValueError("pred is empty: no (image, country) pair has both a score and a human rating.")
    yt, yp = h > threshold, p > threshold
    out = {"precision": float(precision_score(yt, yp, zero_division=np.nan)),
           "f1": float(f1_score(yt, yp, zero_division=np.nan)), "n": int(len(p)),
           "n_positive_human": int(yt.sum()), "n_positive_pred": int(yp.sum())}
    r, pv, reason, lo, hi = _pearson(p, h)
    out.update({"pearson": r, "pearson_p": pv, "pearson_reason": reason, "pearson_ci": (lo, hi)})
    out["per_country"] = {}
    for cc in sorted(set(c.tolist())):
        m = c == cc
        r, pv, reason, lo, hi = _pearson(p[m], h[m])
        out["per_country"][cc] = {"pearson": r, "p": pv, "n": int(m.sum()), "reason": reason, "ci": (lo, hi)}
    return out


def _pearson(x, y) -> tuple[float, float, str | None, float, float]:
    """r, p, reason (None when defined) and the 95% Fisher-z interval (scipy's ``confidence_interval``)."""
    from scipy.stats import pearsonr

    nan = math.nan
    if len(x) < 3:
        return nan, nan, f"only {len(x)} rated pairs; Pearson needs at least 3", nan, nan
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return nan, nan, "one side is constant; the correlation is undefined", nan, nan
    res = pearsonr(x, y)
    if len(x) > 3:
        ci = res.confidence_interval(0.95)
        lo, hi = float(ci.low), float(ci.high)
    else:
        lo = hi = nan
    return float(res.statistic), float(res.pvalue), None, lo, hi


def load_scores(project, *, judge: str | None = None, encoder: str | None = None, kb: str | None = None,
                context: str | None = None) -> list[dict]:
    """``attribution_scores`` rows with status ok/parsed (logprobs decoded)."""
    where, args = ["status IN ('ok', 'parsed')"], []
    for col, val in (("judge", judge), ("encoder", encoder), ("kb", kb), ("context", context)):
        if val is not None:
            where.append(f"{col} = ?")
            args.append(val)
    out = []
    for r in project.db.query(f"SELECT * FROM attribution_scores WHERE {' AND '.join(where)} ORDER BY id", args):
        r = dict(r)
        r["logprobs"] = {k: float(v) for k, v in json.loads(r["logprobs"]).items()} if r["logprobs"] else None
        out.append(r)
    return out


def evaluate_attribution(project, *, judge: str | None = None, encoder: str | None = None, kb: str | None = None,
                         context: str | None = None, ratings: str | Path | None = None,
                         threshold: float = 3.0) -> list[dict]:
    """One result per (judge, encoder, kb, context) configuration found in ``attribution_scores``:
    ``{"judge", "encoder", "kb", "context", **relevance_agreement(...)}`` over the pairs with a human
    rating (configurations without any rated pair are reported with ``n = 0`` and a reason)."""
    human = human_ratings(project, source=ratings)
    scores = load_scores(project, judge=judge, encoder=encoder, kb=kb, context=context)
    configs: dict[tuple, list[dict]] = {}
    for r in scores:
        configs.setdefault((r["judge"], r["encoder"], r["kb"], r["context"]), []).append(r)
    out = []
    for (j, e, k, c), rows in configs.items():
        pairs = [(r["score"], human[(r["sha256"], r["country"])][0], r["country"]) for r in rows
                 if (r["sha256"], r["country"]) in human]
        base = {"judge": j, "encoder": e, "kb": k, "context": c, "n_scored": len(rows)}
        if not pairs:
            out.append({**base, "n": 0, "reason": "no scored pair has a human rating; run the relevance "
                                                   "campaign or pass a ratings file"})
            continue
        p, h, cc = zip(*pairs)
        out.append({**base, **relevance_agreement(p, h, cc, threshold=threshold)})
    return out
