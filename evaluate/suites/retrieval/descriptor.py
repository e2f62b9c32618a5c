"""Suite ``descriptor``: six-candidate trials with an explicit cultural descriptor (seed 000 §3.2.3, RQ3).

The query names concept C with a cultural descriptor D (a country other than the query language's), written in
the query language. Candidates: ``cr`` (C, D's culture), ``orlb`` (C, the query language's culture), ``or``
(C, a third culture), ``cdr`` (other concept, D's culture), ``lb`` (other concept, the language's culture),
``ti`` (neither). Reported:

- the six win rates with bootstrap CIs, overall (Table 3) and per query country (Figure 7), and for the
  verbose descriptor variants ``task_mention`` / ``casual_mention`` when present (App. S.2);
- similarity drift ``Δsim = S(q_C+CD, I) − S(q_C, I)`` ×100 per candidate category, overall, by query culture
  (Table 18) and by concept (Table 19), with bootstrap CIs;
- per model and country, the paired χ² tests ``orlb`` vs ``or`` (query-language association) and ``cdr`` vs
  ``lb`` (descriptor vs language) (App. P, Tables 15–17).

Options: ``variants`` (descriptor variant prefixes, default all present), ``n_resamples``, ``seed``.
"""
from __future__ import annotations

import math

import numpy as np

from ...metrics.association import paired_chi2, similarity_drift
from ..registry import Suite, row
from .report import render_descriptor
from .association import variant_trials, win_rate_rows
from ...common import embed_images, embed_texts, mean_ci, per_trial_wins
from ...data import DESCRIPTOR_ROLES, base_texts, resolve_benchmark

NAME = "descriptor"
CHI2_TESTS = (("orlb", "or", "query-language association (object relevant: language culture vs other)"),
              ("cdr", "lb", "descriptor vs language (semantic failure: descriptor culture vs language culture)"))
BASE_VARIANT = {"mention": "short", "task_mention": "task", "casual_mention": "casual"}


def chi2_rows(sims: np.ndarray, roles, *, group: dict, details: dict) -> list[dict]:
    """The two paired χ² tests for one set of trials. ``value`` is the win-rate difference A − B; the
    statistic, p and the counts are in ``details`` (ties split: counts are rounded shares × n)."""
    n = sims.shape[0]
    out = []
    if n == 0:
        return out
    wins = per_trial_wins(sims).sum(axis=0)
    for a, b, what in CHI2_TESTS:
        wa, wb = wins[roles.index(a)], wins[roles.index(b)]
        res = paired_chi2(int(round(wa)), int(round(wb)), n)
        d = {**details, "test": what, "statistic": res.statistic, "p": res.p, "wins_a": res.wins_a,
             "wins_b": res.wins_b, "significant": bool(res.p < 0.05) if math.isfinite(res.p) else None}
        if not math.isfinite(res.statistic):
            d["reason"] = f"neither {a} nor {b} won a trial: the test is undefined"
        out.append(row(NAME, f"chi2_{a}_vs_{b}", res.diff, n=n, group=group, details=d))
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


def descriptor(project, embedder, *, benchmark=None, options: dict) -> list[dict]:
    """Run the descriptor suite (see the module docstring for the options)."""
    opts = dict(options or {})
    seed, n_res = int(opts.get("seed", 0)), int(opts.get("n_resamples", 1000))
    bench = resolve_benchmark(project, benchmark, "descriptor")
    roles = DESCRIPTOR_ROLES
    out: list[dict] = []
    for variant, trials, sims, vg, det in variant_trials(project, embedder, bench, opts, roles, main="mention"):
        out += win_rate_rows(NAME, sims, roles, group=vg, details=det, n_resamples=n_res, seed=seed,
                             sp_pair=None)
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
            q0 = embed_texts(project, embedder, [b for b in base if b is not None])
            imgs = embed_images(project, embedder, trials.sha256[has].ravel().tolist()).reshape(
                int(has.sum()), len(roles), -1)
            sims0 = np.full(sims.shape, np.nan)
            sims0[has] = np.einsum("td,trd->tr", q0, imgs)
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


SUITE = Suite(NAME, descriptor, section=render_descriptor, benchmark_kind="descriptor",
               description="Cultural-descriptor compliance on 6-candidate trials: six win rates, similarity drift, "
                           "paired χ² tests (seed 000 RQ3).")
