"""Evaluate attribution scores against human relevance ratings (seed 004 §5–6, Tables 1–2; spec §6), and
rank the pairs the judge is least sure about for annotation.

Human ratings are the mean Likert rating per image × country from cultura's own ``relevance`` campaign (the
current annotations of every annotator; the final ``decisions`` value where no raw annotations are stored), or
an imported CAIRe-style ratings file (columns ``sha256``, ``country`` (a culture label), ``rating``, optional
``concept``; several rows per pair are averaged; binary gold labels as a ``relevant`` column of 0/1 become
ratings 5/1).

- binary relevance by seed 004 §5.4's rule by default, ``score > 3`` on both sides ("assigning scores greater
  than 3 on the five-point scale (relevant, highly relevant) to positive label 1"; a continuous expected score
  of 3.6 is relevant), or ``score >= t`` (``rule="ge"``) → precision, recall and F1 over all (image, label)
  pairs (``sklearn.metrics``), and at C.7's thresholds 2..5 in C.7's convention ``score >= t`` (its
  Threshold=5 column is not all zero, so it cannot be "> 5");
- Pearson correlation of the scores with the mean human ratings per country, by default averaged over the
  concepts within each country (Table 2: "correlation scores averaged over all concepts within specific
  countries"; the overall value is the mean over countries), or pooled over a country's pairs
  (``aggregation="pooled"``, labelled as such) (``scipy.stats.pearsonr``'s r, p and interval, computed in
  numpy; NaN with a reason when fewer than 3 pairs or a constant side).

A ratings file may carry a ``concept`` column; otherwise an image's concepts come from ``image_links``.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ....annotate.decisions import relevance_ratings
from ....bounds import Bound
from ....cultures import resolve_culture
from ....curate.images import named_links
from ....db.readers import read_rows
from ....errors import CulturaError
from ....lazy import lazy
from ...metrics._numpy_stats import pearson

if TYPE_CHECKING:
    from ....project import Project

skm = lazy("sklearn.metrics")  # imported on first use (start-up)

#: Binary gold labels (seed 004's specific set) are stored as ratings 5 / 1, so that "relevant at >= t" equals
#: the gold label for every threshold t in 2..5.
GOLD_RELEVANT, GOLD_NOT_RELEVANT = 5.0, 1.0


def _truthy(v) -> bool:
    if isinstance(v, str):
        s = v.strip().casefold()
        if s in ("1", "true", "yes", "y", "t", "relevant"):
            return True
        if s in ("0", "false", "no", "n", "f", "not relevant", ""):
            return False
        raise CulturaError(f"'relevant' must be 0/1 or true/false, got {v!r}.")
    return bool(v)


def human_ratings(project: Project, *, source: str | Path | None = None) -> dict[tuple[str, str], tuple[float, int]]:
    """``{(sha256, country): (mean rating, n ratings)}`` from the project's relevance campaign (or ``source``)."""
    if source is not None:
        acc: dict[tuple[str, str], list[float]] = {}
        keys: dict[str, str] = {}
        for n, r in enumerate(read_rows(source, strict=True), 1):
            sha = str(r.get("sha256") or r.get("image") or "").strip()
            cc = str(r.get("country") or r.get("culture") or "").strip()
            if cc and cc not in keys:
                keys[cc] = resolve_culture(project, cc).key
            cc = keys.get(cc, cc)
            val = r.get("rating", r.get("value", r.get("score")))
            if val in (None, "") and r.get("relevant") not in (None, ""):
                val = GOLD_RELEVANT if _truthy(r["relevant"]) else GOLD_NOT_RELEVANT
            if not sha or not cc or val in (None, ""):
                raise CulturaError(f"{source} row {n}: ratings need 'sha256', 'country' and 'rating' (or a binary "
                                   "'relevant') columns.")
            acc.setdefault((sha, cc), []).append(float(val))
        return {k: (float(np.mean(v)), len(v)) for k, v in acc.items()}
    return relevance_ratings(project.db)


#: Binary relevance of seed 004 §5.4 / Table 1: "scores greater than 3 ... to positive label 1" (score > 3).
DEFAULT_THRESHOLD = 3.0
#: A threshold on the 1-5 judge scores.
THRESHOLD = Bound(0, 5, float)
#: "gt": relevant when score > threshold (the paper's Table 1); "ge": score >= threshold (App. C.7's columns).
RULES = {"gt": ">", "ge": ">="}
DEFAULT_RULE = "gt"
#: The thresholds of seed 004 App. C.7 (Table "Alternate Thresholds").
C7_THRESHOLDS = (2.0, 3.0, 4.0, 5.0)
AGGREGATIONS = ("per_concept", "pooled")


def binarise(scores, threshold: float = DEFAULT_THRESHOLD, rule: str = DEFAULT_RULE) -> np.ndarray:
    """Relevant (True) when ``score > threshold`` (``rule="gt"``, seed 004 Table 1) or ``score >= threshold``
    (``rule="ge"``, App. C.7)."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {sorted(RULES)}, got {rule!r}.")
    s = np.asarray(scores, dtype=float)
    return s > threshold if rule == "gt" else s >= threshold


def rule_text(threshold: float, rule: str) -> str:
    return f"score {RULES[rule]} {threshold:g}"


def binary_metrics(pred, human, *, threshold: float = DEFAULT_THRESHOLD, rule: str = DEFAULT_RULE) -> dict:
    """Precision, recall and F1 of binary relevance on both sides (:func:`binarise`: ``score > 3`` by default,
    seed 004 §5.4; ``sklearn.metrics``; NaN where undefined).

    >>> binary_metrics([4.0, 3.6, 5.0], [4, 4, 1])["recall"]   # 3.6 > 3 is relevant
    1.0
    >>> binary_metrics([4.0, 3.6, 5.0], [4, 4, 1], threshold=4, rule="ge")["recall"]
    0.5
    """

    yt = binarise(human, threshold, rule)
    yp = binarise(pred, threshold, rule)
    return {"threshold": float(threshold), "rule": rule_text(threshold, rule),
            "precision": float(skm.precision_score(yt, yp, zero_division=np.nan)),
            "recall": float(skm.recall_score(yt, yp, zero_division=np.nan)),
            "f1": float(skm.f1_score(yt, yp, zero_division=np.nan)),
            "n_positive_human": int(yt.sum()), "n_positive_pred": int(yp.sum())}


def _concept_sets(concepts, n):
    if concepts is None:
        return None
    out = []
    for c in concepts:
        if c is None or (isinstance(c, float) and math.isnan(c)):
            out.append(())
        elif isinstance(c, str):
            out.append((c,))
        else:
            out.append(tuple(c))
    if len(out) != n:
        raise ValueError("concepts must have one entry (a concept or a list of concepts) per pair.")
    return out


def per_concept_pearson(pred, human, concepts) -> dict:
    """Seed 004 Table 2's aggregation for ONE country: Pearson r per concept (over that concept's images),
    averaged over the concepts where r is defined. ``concepts``: one concept (or a list, when an image shows
    several) per pair. Returns ``{"pearson", "n_concepts", "n_concepts_undefined", "sd", "by_concept",
    "reason"}``."""
    p = np.asarray(pred, dtype=float)
    h = np.asarray(human, dtype=float)
    sets = _concept_sets(concepts, len(p))
    names = sorted({c for cs in sets for c in cs})
    by_concept = {}
    for name in names:
        m = np.array([name in cs for cs in sets])
        r, _pv, reason, _lo, _hi = _pearson(p[m], h[m])
        by_concept[name] = {"pearson": r, "n": int(m.sum()), "reason": reason}
    rs = [v["pearson"] for v in by_concept.values() if not math.isnan(v["pearson"])]
    out = {"n_concepts": len(rs), "n_concepts_undefined": len(by_concept) - len(rs), "by_concept": by_concept}
    if not rs:
        reasons = sorted({v["reason"] for v in by_concept.values() if v["reason"]})
        out.update(pearson=math.nan, sd=math.nan,
                   reason=("no concept has a defined Pearson r" + (f" ({'; '.join(reasons)})" if reasons else "")
                           if by_concept else "no pair carries a concept"))
    else:
        out.update(pearson=float(np.mean(rs)), sd=float(np.std(rs, ddof=1)) if len(rs) > 1 else math.nan,
                   reason=None)
    return out


def relevance_agreement(pred, human, countries, *, threshold: float = DEFAULT_THRESHOLD, concepts=None,
                        aggregation: str = "per_concept", thresholds=C7_THRESHOLDS, rule: str = DEFAULT_RULE) -> dict:
    """Binary precision / recall / F1 at ``score > threshold`` (seed 004 Table 1; ``rule="ge"``: >=), at App.
    C.7's ``thresholds`` (``score >= t``, in ``by_threshold``) and Pearson r per country and on average
    (Table 2).

    ``pred`` and ``human`` are 1-D scores of the same (image, culture label) pairs, ``countries`` their labels,
    ``concepts`` (needed for ``aggregation="per_concept"``) the concept of each pair's image.

    - ``aggregation="per_concept"`` (the paper's Table 2): per country, Pearson r within each concept, averaged
      over concepts; the overall value is the mean over countries (Table 2's "Avg." column).
    - ``aggregation="pooled"``: per country, one Pearson r over all its pairs; overall, one r over all pairs.

    Returns ``{"precision", "recall", "f1", "threshold", "by_threshold": {t: {...}}, "aggregation",
    "pearson", "pearson_p", "pearson_reason", "pearson_ci", "pearson_pooled", "n",
    "per_country": {cc: {"pearson", "p", "n", "reason", "ci", "pooled", "n_concepts"}}}``.

    >>> r = relevance_agreement([4.5, 1.2, 3.8, 2.0], [5, 1, 4, 2], ["JP", "JP", "TH", "TH"], aggregation="pooled")
    >>> r["precision"], r["recall"], round(r["pearson"], 3)   # 3.8 > 3 is relevant
    (1.0, 1.0, 0.999)
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}.")
    p = np.asarray(pred, dtype=float)
    h = np.asarray(human, dtype=float)
    c = np.asarray(countries)
    if p.ndim != 1 or p.shape != h.shape or c.shape != p.shape:
        raise ValueError("pred, human and countries must be 1-D arrays of the same length.")
    if len(p) == 0:
        raise ValueError("pred is empty: no (image, country) pair has both a score and a human rating.")
    sets = _concept_sets(concepts, len(p))
    if aggregation == "per_concept" and sets is None:
        raise ValueError("aggregation='per_concept' needs concepts (the concept of each pair's image); pass "
                         "concepts=... or aggregation='pooled'.")
    out = {**binary_metrics(p, h, threshold=threshold, rule=rule), "n": int(len(p)), "aggregation": aggregation,
           "by_threshold": {float(t): binary_metrics(p, h, threshold=t, rule="ge")
                            for t in sorted(map(float, thresholds or ()))}}
    r, pv, reason, lo, hi = _pearson(p, h)
    out["pearson_pooled"] = r
    if aggregation == "pooled":
        out.update({"pearson": r, "pearson_p": pv, "pearson_reason": reason, "pearson_ci": (lo, hi)})
    out["per_country"] = {}
    for cc in sorted(set(c.tolist())):
        m = c == cc
        r, pv, reason, lo, hi = _pearson(p[m], h[m])
        pc = {"pooled": r, "n": int(m.sum())}
        if aggregation == "pooled":
            pc.update(pearson=r, p=pv, reason=reason, ci=(lo, hi))
        else:
            agg = per_concept_pearson(p[m], h[m], [s for s, keep in zip(sets, m) if keep])
            pc.update(pearson=agg["pearson"], p=math.nan, reason=agg["reason"], ci=(math.nan, math.nan),
                      n_concepts=agg["n_concepts"], n_concepts_undefined=agg["n_concepts_undefined"],
                      sd=agg["sd"])
        out["per_country"][cc] = pc
    if aggregation == "per_concept":
        vals = [v["pearson"] for v in out["per_country"].values() if not math.isnan(v["pearson"])]
        out.update({"pearson": float(np.mean(vals)) if vals else math.nan, "pearson_p": math.nan,
                    "pearson_ci": (math.nan, math.nan),
                    "pearson_reason": None if vals else "no country has a defined per-concept Pearson r"})
    return out


def _pearson(x, y) -> tuple[float, float, str | None, float, float]:
    """r, p, reason (None when defined) and the 95% Fisher-z interval (scipy's ``confidence_interval``)."""

    nan = math.nan
    if len(x) < 3:
        return nan, nan, f"only {len(x)} rated pairs; Pearson needs at least 3", nan, nan
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return nan, nan, "one side is constant; the correlation is undefined", nan, nan
    r, p, lo, hi = pearson(x, y)  # scipy's pearsonr and Fisher-z interval, without importing scipy
    return r, p, None, lo, hi


def load_scores(project: Project, *, judge: str | None = None, encoder: str | None = None, kb: str | None = None,
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


def image_concepts(project: Project, *, source: str | Path | None = None) -> dict[str, tuple[str, ...]]:
    """``{sha256: (concept, ...)}``: from the ratings file's ``concept`` column when it has one, else from the
    project's ``image_links`` (an image found for several concepts counts under each)."""
    out: dict[str, set] = {}
    if source is not None:
        for r in read_rows(source, strict=True):
            sha = str(r.get("sha256") or r.get("image") or "").strip()
            con = str(r.get("concept") or "").strip()
            if sha and con:
                out.setdefault(sha, set()).add(con)
        if out:
            return {k: tuple(sorted(v)) for k, v in out.items()}
    for sha, name in named_links(project.db, distinct_concepts=True):
        out.setdefault(sha, set()).add(name)
    return {k: tuple(sorted(v)) for k, v in out.items()}


def evaluate_attribution(project: Project, *, judge: str | None = None, encoder: str | None = None,
                         kb: str | None = None,
                         context: str | None = None, ratings: str | Path | None = None,
                         threshold: float = DEFAULT_THRESHOLD, aggregation: str = "per_concept",
                         thresholds=C7_THRESHOLDS, rule: str = DEFAULT_RULE) -> list[dict]:
    """One result per (judge, encoder, kb, context) configuration found in ``attribution_scores``:
    ``{"judge", "encoder", "kb", "context", **relevance_agreement(...)}`` over the pairs with a human
    rating (configurations without any rated pair are reported with ``n = 0`` and a reason). Relevance is
    ``score > threshold`` (``rule="ge"``: >=); Pearson is aggregated per concept within each country unless
    ``aggregation="pooled"``."""
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}.")
    threshold = THRESHOLD.check(threshold, "threshold")
    human = human_ratings(project, source=ratings)
    concepts = image_concepts(project, source=ratings) if aggregation == "per_concept" else {}
    scores = load_scores(project, judge=judge, encoder=encoder, kb=kb, context=context)
    configs: dict[tuple, list[dict]] = {}
    for r in scores:
        configs.setdefault((r["judge"], r["encoder"], r["kb"], r["context"]), []).append(r)
    out = []
    for (j, e, k, c), rows in configs.items():
        pairs = [(r["score"], human[(r["sha256"], r["country"])][0], r["country"], concepts.get(r["sha256"], ()))
                 for r in rows if (r["sha256"], r["country"]) in human]
        base = {"judge": j, "encoder": e, "kb": k, "context": c, "n_scored": len(rows)}
        if not pairs:
            out.append({**base, "n": 0, "aggregation": aggregation, "threshold": float(threshold),
                        "reason": "no scored pair has a human rating; run the relevance campaign or pass a "
                                  "ratings file"})
            continue
        p, h, cc, con = zip(*pairs)
        out.append({**base, **relevance_agreement(p, h, cc, threshold=threshold, aggregation=aggregation,
                                                  concepts=con if aggregation == "per_concept" else None,
                                                  thresholds=thresholds, rule=rule)})
    return out


def upper_bound_ratios(results: list[dict]) -> list[dict]:
    """Seed 004 App. C.5 (Table 11): for each judge/encoder/kb evaluated both with the retrieved page
    (context ``entity``) and with the gold page (context ``gold``), the ratio F1(retrieved) / F1(gold) in
    percent. ``results``: :func:`evaluate_attribution` output."""
    by = {(r["judge"], r["encoder"], r["kb"], r["context"]): r for r in results if r.get("n")}
    out = []
    for (j, e, k, c), r in sorted(by.items()):
        g = by.get((j, e, k, "gold"))
        if c != "entity" or g is None:
            continue
        ratio = (100.0 * r["f1"] / g["f1"]) if g["f1"] and not math.isnan(g["f1"]) else math.nan
        out.append({"judge": j, "encoder": e, "kb": k, "f1_retrieved": r["f1"], "f1_gold": g["f1"],
                    "ratio": ratio, "threshold": r["threshold"]})
    return out
