"""Cultural Bias Score per context, aggregated per entity type, language and context kind (seed 001 §4.1).

For each masked context ``c`` of type ``D`` in language ``L``, every accepted local entity ``a_i`` and
Western entity ``b_j`` of type ``D`` in ``L`` is scored by the LLM (by default the log-likelihood of the
context completed with the entity, ``mode="sentence"``; ``mode="prefix"`` scores the entity given the text
before ``[MASK]`` only; see :mod:`cultura.models.scorers`), and

    CBS(c) = (1/(|A||B|)) sum_i sum_j [P(b_j | c) > P(a_i | c)]

(:func:`cultura.evaluate.metrics.cultural_bias_score`, by sorting). The CBS of a type / language / kind is the
mean over its contexts, with a bootstrap CI over contexts. ``english=True`` scores the parallel English
translations with the entities' English forms (seed 001 Figure 12 / Table 18). Grounded vs neutral (Figure 4)
is the same summary grouped by kind.

>>> # doctest: +SKIP
>>> rows = cbs_by_context(project, get_scorer("hf:cultura-tiny-gpt2"), language="ja")
>>> cbs_summary(rows, by=("language", "kind"))
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ....models.scorers import DEFAULT_MODE, LogProbScorer, get_scorer, score_cached
from ...common import mean_ci
from ...metrics import cultural_bias_score
from ..registry import log_samples, logging_samples, sample_limit
from ....curate.contexts import list_contexts
from ....curate.entities import entity_pool

if TYPE_CHECKING:
    from ....project import Project


def cbs_by_context(project: Project, scorer: "LogProbScorer | str", *, language: str | None = None,
                   kind: str | None = None, type: str | None = None, mode: str = DEFAULT_MODE,
                   english: bool = False, parallel: bool = False) -> list[dict]:
    """One row per scorable context: ``context_id, language (of the culture), test_language, country, kind,
    type, cbs, n_local, n_western, n_failed`` (``cbs`` NaN with ``reason`` when a side has no entities).
    QA contexts are left out (they are for extractive QA). With ``parallel`` only entities with an English form
    are scored in a native run, as in the English run (always), so ``cbs`` and ``cbs_en`` compare the same
    entity pairs (the suite sets it whenever it runs the English twins)."""
    scorer = get_scorer(scorer)
    kinds = [kind] if kind else ["grounded", "neutral"]
    rows = []
    jobs = []
    for k in kinds:
        for ctx in list_contexts(project, language=language, kind=k, type=type)[:sample_limit()]:
            text = ctx["english"] if english else ctx["text"]
            if english and not text:
                continue
            pool_l, pool_w = entity_pool(project, ctx["language"], ctx["type"], parallel=parallel or english)
            field = "english" if english else "native"
            local, western = [e[field] for e in pool_l], [e[field] for e in pool_w]
            base = {"context_id": ctx["id"], "language": ctx["language"],
                    "test_language": "en" if english else ctx["language"], "country": ctx["country"],
                    "kind": ctx["kind"], "type": ctx["type"], "n_local": len(local), "n_western": len(western)}
            if not local or not western:
                rows.append({**base, "cbs": math.nan, "n_failed": 0,
                             "reason": f"no accepted {'local' if not local else 'Western'} {ctx['type']} "
                                       f"entities in {ctx['language']}"})
                continue
            rows.append(None)  # filled below, in context order
            jobs.append((len(rows) - 1, base, text, local, western))
    logging = logging_samples()
    samples = []
    # every context's items in one call: one scoring job (one Ray job under the ray executor), then sliced
    every = score_cached(project, scorer, [(text, e) for _, _, text, local, western in jobs
                                           for e in local + western], mode=mode) if jobs else []
    start = 0
    # each job carries its own context text: the log names the text this context was scored with
    for at, base, text, local, western in jobs:
        lp = every[start:start + len(local) + len(western)]
        start += len(local) + len(western)
        a, b = lp[:len(local)], lp[len(local):]
        a_ok, b_ok = a[~np.isnan(a)], b[~np.isnan(b)]
        n_failed = int(np.isnan(lp).sum())
        if len(a_ok) == 0 or len(b_ok) == 0:
            rows[at] = {**base, "cbs": math.nan, "n_failed": n_failed,
                        "reason": "every entity of one side failed to score"}
        else:
            rows[at] = {**base, "cbs": cultural_bias_score(np.minimum(a_ok, 0.0), np.minimum(b_ok, 0.0)),
                        "n_failed": n_failed, "n_local": len(a_ok), "n_western": len(b_ok)}
        if logging:  # the masked context, every candidate entity's log-likelihood (NaN: failed), the CBS
            samples.append({**{k: v for k, v in base.items() if k != "kind"}, "context_kind": base["kind"],
                            "mode": mode, "context": text, "cbs": rows[at]["cbs"],
                            "local": [{"entity": e, "loglik": float(v)} for e, v in zip(local, a)],
                            "western": [{"entity": e, "loglik": float(v)} for e, v in zip(western, b)]})
    log_samples("masked_context", samples)
    return rows


def cbs_summary(rows: list[dict], *, by=("language", "type", "kind"), n_resamples: int = 1000,
                seed: int = 0) -> list[dict]:
    """Mean CBS over contexts per group of ``by`` keys, with a percentile bootstrap CI over contexts.
    Returns ``[{**group, "cbs", "ci_low", "ci_high", "n_contexts"}]`` (NaN-CBS contexts are left out and
    counted in ``n_undefined``)."""

    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in by), []).append(r)
    out = []
    for key, members in groups.items():
        vals = np.array([m["cbs"] for m in members], dtype=float)
        ok = vals[~np.isnan(vals)]
        lo, hi = mean_ci(ok, n_resamples=n_resamples, seed=seed) if len(ok) else (math.nan, math.nan)
        out.append({**dict(zip(by, key)), "cbs": float(ok.mean()) if len(ok) else math.nan, "ci_low": lo,
                    "ci_high": hi, "n_contexts": int(len(ok)), "n_undefined": int(len(vals) - len(ok))})
    return out


def compute_cbs(project: Project, scorer, *, language: str | None = None, kind: str | None = None,
                type: str | None = None, mode: str = DEFAULT_MODE, english: bool = False,
                by=("language", "type", "kind"), n_resamples: int = 1000, seed: int = 0,
                parallel: bool = False) -> dict:
    """:func:`cbs_by_context` then :func:`cbs_summary`; returns ``{"contexts": [...], "summary": [...]}``."""
    per = cbs_by_context(project, scorer, language=language, kind=kind, type=type, mode=mode, english=english,
                         parallel=parallel)
    return {"contexts": per, "summary": cbs_summary(per, by=by, n_resamples=n_resamples, seed=seed)}
