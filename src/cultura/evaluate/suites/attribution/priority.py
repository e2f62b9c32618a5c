"""Which items people should rate first: the pairs the automated CAIRe judge is least sure about.

Read from the scores the attribution stage writes (``attribution_scores``, this folder's) and the human ratings
annotation holds (:func:`cultura.annotate.decisions.relevance_ratings`). ``cultura annotate push relevance
--prioritise attribution`` orders its items with :func:`prioritised`, which the doors hand to
:func:`cultura.annotate.push.push` (annotation sits below evaluation and reads no suite's table).
"""
from __future__ import annotations

import functools
import json
import math
from typing import TYPE_CHECKING, Callable

import numpy as np

from ....annotate.decisions import relevance_ratings
from ....errors import CulturaError, unknown
from ....lazy import lazy

if TYPE_CHECKING:
    from ....project import Project

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
    return set(relevance_ratings(project.db))


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


PRIORITIES = ("attribution",)


def prioritised(project: Project, kind: str, items: list[dict], how: str) -> list[dict]:
    """Reorder ``items`` by ``how`` (``attribution``: the judge's uncertainty, most uncertain first); a stable
    sort, so ties keep their order and pairs the judge has not scored follow in their usual order."""
    if how not in PRIORITIES:
        raise unknown("priority", how, PRIORITIES)
    if kind != "relevance":
        raise CulturaError("Prioritising by attribution applies to 'relevance' pushes only.", param="prioritise")
    uncertainty = {(s, c): u for s, c, u in judge_uncertainty(project)}
    if not uncertainty:
        raise CulturaError("No attribution scores to prioritise by. Run 'cultura attribution run' first, or push "
                           "without --prioritise.")
    return sorted(items, key=lambda it: -uncertainty.get((it.get("sha256"), it.get("country")), -1.0))


def ordering(how: str | None) -> Callable[[Project, str, list[dict]], list[dict]] | None:
    """What ``push(..., prioritise=…)`` takes for ``--prioritise how`` (None: the items' own order); an unknown
    name is an error listing the valid ones."""
    if how is None:
        return None
    if how not in PRIORITIES:
        raise unknown("priority", how, PRIORITIES)
    return functools.partial(prioritised, how=how)
