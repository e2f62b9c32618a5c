"""Which items people should rate first: the pairs the automated CAIRe judge is least sure about.

Read from the tables the attribution stage writes (``attribution_scores``) and the ratings this area holds
(``annotations``, ``decisions``); annotate imports nothing from evaluate.
"""
from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

import numpy as np
from ..lazy import lazy

if TYPE_CHECKING:
    from ..project import Project

stats = lazy("scipy.stats")  # imported on first use (start-up)

SCORES = ("1", "2", "3", "4", "5")


def normalised_entropy(logprobs: dict) -> float:
    """Entropy of the judge's renormalised five-score distribution divided by ln 5 (0 = certain, 1 = uniform).

    >>> round(normalised_entropy({s: 0.0 for s in SCORES}), 6), normalised_entropy({"4": 0.0})
    (1.0, 0.0)
    """
    v = np.array([float(logprobs.get(s, -math.inf)) for s in SCORES])
    if not np.isfinite(v).any():
        return 0.0
    p = np.exp(v - np.max(v[np.isfinite(v)]))
    return float(stats.entropy(p / p.sum(), base=5))


def rated_pairs(project: Project) -> set[tuple[str, str]]:
    """``(sha256, country)`` pairs that already have a human relevance rating (current annotations or
    decisions)."""
    db = project.db
    out: set[tuple[str, str]] = set()
    if db["annotations"].exists():
        out |= {(s, c) for s, c in db.execute(
            "SELECT DISTINCT i.sha256, i.country FROM annotations a JOIN annotation_items i ON i.id = a.item_id "
            "WHERE i.kind = 'relevance' AND a.is_current = 1 AND a.was_cancelled = 0 AND a.purpose = 'annotate' "
            "AND a.value IS NOT NULL").fetchall()}
    out |= {(s, c) for s, c in db.execute(
        "SELECT sha256, country FROM decisions WHERE kind = 'relevance' AND superseded = 0 "
        "AND value IS NOT NULL").fetchall() if s and c}
    return out


def judge_uncertainty(project: Project, *, judge: str | None = None, encoder: str | None = None, kb: str | None = None,
                      context: str | None = None, unrated_only: bool = True) -> list[tuple[str, str, float]]:
    """``[(sha256, country, uncertainty)]``, most uncertain first (:func:`normalised_entropy`; a parsed
    (one-hot) score counts 0; the encoder baseline is left out). With several judge configurations the most
    uncertain one per pair is kept. ``unrated_only`` leaves out pairs that already have a human rating."""
    if not project.db["attribution_scores"].exists():
        return []
    where, args = ["status IN ('ok', 'parsed')", "judge != 'baseline'"], []
    for col, val in (("judge", judge), ("encoder", encoder), ("kb", kb), ("context", context)):
        if val is not None:
            where.append(f"{col} = ?")
            args.append(val)
    rated = rated_pairs(project) if unrated_only else set()
    best: dict[tuple[str, str], float] = {}
    for sha, cc, status, lps in project.db.execute(
            f"SELECT sha256, country, status, logprobs FROM attribution_scores WHERE {' AND '.join(where)}",
            args).fetchall():
        if (sha, cc) in rated:
            continue
        u = normalised_entropy(json.loads(lps)) if lps and status == "ok" else 0.0
        best[(sha, cc)] = max(best.get((sha, cc), 0.0), u)
    return sorted(((s, c, u) for (s, c), u in best.items()), key=lambda t: (-t[2], t[0], t[1]))
