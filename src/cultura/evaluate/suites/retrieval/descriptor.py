"""Suite ``descriptor``: six-candidate trials with an explicit cultural descriptor (seed 000 §3.2.3, RQ3).

The query names concept C with a cultural descriptor D (a country other than the query language's), written in
the query language. Candidates: ``cr`` (C, D's culture), ``orlb`` (C, the query language's culture), ``or``
(C, a third culture), ``cdr`` (other concept, D's culture), ``lb`` (other concept, the language's culture),
``ti`` (neither). Reported:

- the six win rates with bootstrap CIs, overall (Table 3) and per query country (Figure 7) for the short
  descriptor query ``mention_<CC>`` (always: when those queries are missing the rows say so and name the
  command that makes them, ``details.warning``), and for the verbose descriptor variants ``task_mention`` /
  ``casual_mention`` when present (App. S.2), each under its own ``variant`` group;
- similarity drift ``Δsim = S(q_C+CD, I) − S(q_C, I)`` ×100 per candidate category, overall, by query culture
  (Table 18) and by concept (Table 19), with bootstrap CIs;
- per model and country, the paired χ² tests ``or`` vs ``orlb`` (query-language association) and ``cdr`` vs
  ``lb`` (descriptor vs language) (App. P, Tables 15–17), ``value`` = the paper's Diff, ``M_or − M_orlb`` and
  ``M_cdr − M_lb`` (metrics ``chi2_or_vs_orlb``, ``chi2_cdr_vs_lb``).

Options: ``variants`` (descriptor variant prefixes, default all present), ``n_resamples``, ``seed``.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ...metrics.association import paired_chi2, similarity_drift
from ..registry import Suite, row
from .options import OPTIONS
from .report import render_descriptor
from .association import query_image_scores, variant_trials, win_rate_rows
from ...common import mean_ci, per_trial_wins
from ...data import DESCRIPTOR_ROLES, base_texts, query_variants, resolve_benchmark

if TYPE_CHECKING:
    from ....project import Project

NAME = "descriptor"
#: The paired χ² tests in seed 000's orientation (App. P, Tables 15–17): ``Diff = M_A − M_B`` with A, B as the
#: paper's columns — "Blue − Purple" = ``or − orlb`` (negative: the query language's culture wins among the
#: right objects) and "Yellow − Pink" = ``cdr − lb`` (negative: the language prior beats the descriptor).
CHI2_TESTS = (("or", "orlb", "query-language association (object relevant: other culture vs language culture)"),
              ("cdr", "lb", "descriptor vs language (semantic failure: descriptor culture vs language culture)"))
BASE_VARIANT = {"mention": "short", "task_mention": "task", "casual_mention": "casual"}
#: What fixes missing short descriptor queries (the RQ3 main variant, ``mention_<CC>``).
MENTION_FIX = ("run 'cultura build mention-queries' (--method llm or pattern), or set one by hand with "
               "'cultura build set-query CONCEPT COUNTRY mention_CC TEXT', then rebuild the benchmark "
               "('cultura build descriptor')")


def missing_mention_reason(n_missing: int, n_items: int) -> str:
    return (f"{n_missing} of {n_items} trials have no short descriptor query mention_<CC> (\"Train of Japan\" in "
            f"the query language, seed 000 RQ3): {MENTION_FIX}. The verbose task_mention/casual_mention "
            "variants are reported separately, never in its place.")


def chi2_rows(sims: np.ndarray, roles, *, group: dict, details: dict) -> list[dict]:
    """The two paired χ² tests for one set of trials. ``value`` is the paper's Diff, the win-rate difference
    A − B of :data:`CHI2_TESTS`; the statistic, p, the two win rates and the counts are in ``details`` (ties
    split: counts are rounded shares × n)."""
    n = sims.shape[0]
    out = []
    if n == 0:
        return out
    wins = per_trial_wins(sims).sum(axis=0)
    for a, b, what in CHI2_TESTS:
        wa, wb = wins[roles.index(a)], wins[roles.index(b)]
        res = paired_chi2(int(round(wa)), int(round(wb)), n)
        d = {**details, "test": what, "diff": f"M_{a} − M_{b}", "statistic": res.statistic, "p": res.p,
             f"M_{a}": float(wa / n), f"M_{b}": float(wb / n), "wins_a": res.wins_a, "wins_b": res.wins_b,
             "significant": bool(res.p < 0.05) if math.isfinite(res.p) else None}
        if not math.isfinite(res.statistic):
            d["reason"] = f"neither {a} nor {b} won a trial: the test is undefined"
        out.append(row(NAME, f"chi2_{a}_vs_{b}", float((wa - wb) / n), n=n, group=group, details=d))
    return out


def drift_rows(delta: np.ndarray, roles, trials, mask: np.ndarray, *, details: dict, n_resamples: int,
               seed: int, variant_group: dict) -> list[dict]:
    """Mean Δsim ×100 per role: overall, by query country and by concept."""
    out = []
    d100 = delta * 100.0

    def emit(sel, group):
        vals = d100[sel]
        for i, r in enumerate(roles):
            v = vals[:, i]
            if v.size == 0:
                continue
            lo, hi = mean_ci(v, n_resamples=n_resamples, seed=seed)
            out.append(row(NAME, "drift_x100", float(v.mean()), ci_low=lo, ci_high=hi, n=v.size,
                           group={**variant_group, "role": r, **group}, details=details))

    emit(mask, {})
    for cc in sorted(set(trials.query_country[mask].tolist())):
        emit(mask & (trials.query_country == cc), {"country": cc})
    for concept in sorted(set(trials.concepts[mask].tolist())):
        emit(mask & (trials.concepts == concept), {"concept": concept})
    return out


def descriptor(project: Project, embedder, *, benchmark=None, options: dict) -> list[dict]:
    """Run the descriptor suite (see the module docstring for the options)."""
    opts = dict(options or {})
    seed, n_res = int(opts.get("seed", 0)), int(opts.get("n_resamples", 1000))
    bench = resolve_benchmark(project, benchmark, "descriptor")
    roles = DESCRIPTOR_ROLES
    out: list[dict] = []
    if not opts.get("variants"):  # the short mention_<CC> query is the main variant, always reported
        opts["variants"] = ["mention"] + [v for v in query_variants(project, bench, descriptor=True)
                                          if v != "mention"]
    for variant, trials, sims, vg, det in variant_trials(project, embedder, bench, opts, roles, main="mention"):
        missing = int(trials.excluded.get("missing_query", 0))
        if variant == "mention" and missing:
            det = {**det, "warning": missing_mention_reason(missing, missing + len(trials))}
        out += win_rate_rows(NAME, sims, roles, group=vg, details=det, n_resamples=n_res, seed=seed,
                             sp_pair=None, empty_reason=det.get("warning", "no trials"))
        if len(trials) == 0:
            continue
        out += chi2_rows(sims, roles, group=vg, details=det)
        if variant == "mention":
            for cc in sorted(set(trials.query_country.tolist())):
                mask = trials.query_country == cc
                cdet = {**det, "language": trials.query_language[mask][0]}
                out += win_rate_rows(NAME, sims[mask], roles, group={"country": cc}, details=cdet,
                                     n_resamples=n_res, seed=seed, sp_pair=None)
                out += chi2_rows(sims[mask], roles, group={"country": cc}, details=cdet)
        # similarity drift against the same query without the descriptor
        base = base_texts(project, bench, trials, variant=BASE_VARIANT.get(variant, "short"))
        has = np.array([b is not None for b in base], dtype=bool)
        if has.any():
            sims0 = np.full(sims.shape, np.nan)
            sims0[has] = query_image_scores(project, embedder, [b for b in base if b is not None],
                                            trials.sha256[has], languages=trials.query_language[has])
            delta = np.full(sims.shape, np.nan)
            delta[has] = similarity_drift(sims[has], sims0[has])
            ddet = {**det, "base_variant": BASE_VARIANT.get(variant, "short"),
                    "n_without_base_query": int((~has).sum())}
            out += drift_rows(delta, roles, trials, has, details=ddet, n_resamples=n_res, seed=seed,
                              variant_group=vg)
        elif len(trials):
            out.append(row(NAME, "drift_x100", math.nan, n=0, group=vg, details={
                **det, "reason": f"no descriptor-free '{BASE_VARIANT.get(variant, 'short')}' queries to compare "
                                 "with; run 'cultura build queries'"}))
    return out


SUITE = Suite(NAME, descriptor, section=render_descriptor, benchmark_kind="descriptor", options=OPTIONS,
               description="Cultural-descriptor compliance on 6-candidate trials: six win rates, similarity drift, "
                           "paired χ² tests (seed 000 RQ3).")
