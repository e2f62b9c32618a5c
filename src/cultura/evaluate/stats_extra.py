"""Statistics the latent and social suites need beyond :mod:`cultura.evaluate.stats` (spec §3, §4, §8).

- :func:`bernoulli_kl`: one direction of seed 003's KL between negative-attribution rates (eqs. 4a/4b);
- :func:`country_permutation_test`: WW − WN mean-similarity difference against re-labelling the countries
  (``scipy.stats.permutation_test``), a check that does not assume independent image pairs;
- :func:`correct_within_families`: Holm and Benjamini–Hochberg within each family of hypotheses (seed 003
  App. D) over a list of result dicts;
- :func:`effect_band` / :func:`r_band`: the seeds' magnitude words for C-ASC (and Cohen's d) and for r = Z/√n.

All p-values come from scipy / statsmodels; nothing is derived by hand.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from .stats import StatsInputError, correct_pvalues
from ..lazy import lazy

stats = lazy("scipy.stats")  # imported on first use (start-up)
special = lazy("scipy.special")  # imported on first use (start-up)

__all__ = ["bernoulli_kl", "country_permutation_test", "correct_within_families", "effect_band", "r_band"]


def bernoulli_kl(p: float, q: float) -> float:
    """``KL(Bern(p) ‖ Bern(q)) = (1 − p) ln((1 − p)/(1 − q)) + p ln(p/q)`` with ``0 ln 0 = 0``.

    ``inf`` when ``q`` is 0 or 1 and ``p`` differs from it. Seed 003 App. A.4 eq. (4a) with p = p_f, q = p_m
    (eq. 4b swaps them); their mean is :func:`cultura.evaluate.metrics.symmetric_kl`.

    >>> round(bernoulli_kl(0.30, 0.20), 4), round(bernoulli_kl(0.20, 0.30), 4)
    (0.0282, 0.0257)
    """
    for name, v in (("p", p), ("q", q)):
        if not isinstance(v, (int, float, np.floating, np.integer)) or not 0.0 <= float(v) <= 1.0:
            raise StatsInputError(f"{name} must be a rate in [0, 1], got {v!r}.")
    a, b = np.array([1.0 - p, p]), np.array([1.0 - q, q])
    return float(special.rel_entr(a, b).sum())


def effect_band(value: float) -> str:
    """Seed 002's magnitude word for |C-ASC| (SC-WEAT effect size): ``small`` (< 0.2), ``medium`` (0.2–0.8,
    ≈ 0.5), ``large`` (≥ 0.8); ``undefined`` for NaN.

    >>> effect_band(-0.83), effect_band(0.45), effect_band(0.03)
    ('large', 'medium', 'small')
    """
    if value is None or not math.isfinite(value):
        return "undefined"
    a = abs(value)
    return "small" if a < 0.2 else ("medium" if a < 0.8 else "large")


def r_band(r: float) -> str:
    """Seed 003 App. D's words for the Wilcoxon effect size r = Z/√n: small ≈ 0.1, medium ≈ 0.3,
    large ≳ 0.5 (``negligible`` below 0.1).

    >>> r_band(-0.886), r_band(0.2)
    ('large', 'small')
    """
    if r is None or not math.isfinite(r):
        return "undefined"
    a = abs(r)
    return "negligible" if a < 0.1 else "small" if a < 0.3 else "medium" if a < 0.5 else "large"


def _group_means(sums: np.ndarray, counts: np.ndarray, g: np.ndarray, *, same_country: bool) -> tuple[float, float]:
    """Mean WW and WN similarity from country × country pair sums/counts for in-group mask ``g``."""
    ww_s, ww_n = sums[np.ix_(g, g)], counts[np.ix_(g, g)]
    if same_country:
        ww_sum = np.triu(ww_s).sum()
        ww_cnt = np.triu(ww_n).sum()
    else:
        ww_sum = np.triu(ww_s, 1).sum()
        ww_cnt = np.triu(ww_n, 1).sum()
    wn_sum, wn_cnt = sums[np.ix_(g, ~g)].sum(), counts[np.ix_(g, ~g)].sum()
    if ww_cnt == 0 or wn_cnt == 0:
        return math.nan, math.nan
    return ww_sum / ww_cnt, wn_sum / wn_cnt


def country_permutation_test(pair_sums: Any, pair_counts: Any, in_group: Any, *, same_country: bool = False,
                             n_resamples: int = 999, seed: int = 0) -> dict:
    """One-sided permutation test of ``mean WW − mean WN`` image similarity, permuting the group labels of
    whole countries (``scipy.stats.permutation_test``, independent samples; exact when the number of
    re-labellings is at most ``n_resamples``).

    ``pair_sums[a, b]`` / ``pair_counts[a, b]`` are the sum / number of image-pair similarities between
    countries a and b (symmetric; the diagonal holds within-country pairs, used only with ``same_country``).
    Pairs of images are not independent (each image appears in many pairs), which makes a pair-level Welch
    test optimistic; treating the country as the unit answers the same question without that assumption.
    Returns ``{"statistic", "p", "n_resamples", "exact"}``.

    >>> s = np.array([[0, 9, 1, 1], [9, 0, 1, 1], [1, 1, 0, 2], [1, 1, 2, 0]], float)
    >>> r = country_permutation_test(s, np.ones((4, 4)), [True, True, False, False])
    >>> r["statistic"], round(r["p"], 3)
    (8.0, 0.167)
    """
    sums, counts = np.asarray(pair_sums, float), np.asarray(pair_counts, float)
    g = np.asarray(in_group, bool)
    k = g.size
    if sums.shape != (k, k) or counts.shape != (k, k):
        raise StatsInputError(f"pair_sums and pair_counts must be {k} × {k} (one row per country).")
    if g.sum() < 2 or (~g).sum() < 1:
        raise StatsInputError("the permutation test needs at least 2 in-group countries and 1 other country.")
    idx = np.arange(k)

    def statistic(x, y):
        mask = np.zeros(k, bool)
        mask[np.asarray(x, int)] = True
        ww, wn = _group_means(sums, counts, mask, same_country=same_country)
        return ww - wn if math.isfinite(ww) else -np.inf

    observed = statistic(idx[g], idx[~g])
    if not math.isfinite(observed):
        raise StatsInputError("no WW or no WN pairs; the permutation test is undefined.")
    n_ways = math.comb(k, int(g.sum()))
    res = stats.permutation_test((idx[g], idx[~g]), statistic, permutation_type="independent", vectorized=False,
                                 n_resamples=n_resamples, alternative="greater", rng=np.random.default_rng(seed))
    return {"statistic": float(res.statistic), "p": float(res.pvalue), "n_resamples": int(min(n_resamples, n_ways)),
            "exact": bool(n_ways <= n_resamples)}


def correct_within_families(rows: list[dict], *, family: str = "family", p: str = "p",
                            methods=("holm", "fdr_bh"), alpha: float = 0.05) -> list[dict]:
    """Add ``p_<method>`` and ``reject_<method>`` to each row, correcting the p-values of rows that share
    ``row[family]`` together (seed 003 App. D: Holm and BH within each family of hypotheses). Rows whose p is
    missing or NaN get NaN / False and do not count towards the family size. Returns new dicts.

    >>> out = correct_within_families([{"family": "a", "p": 0.01}, {"family": "a", "p": 0.04},
    ...                                {"family": "b", "p": 0.04}])
    >>> [round(r["p_holm"], 2) for r in out]
    [0.02, 0.04, 0.04]
    """
    out = [dict(r) for r in rows]
    fams: dict[Any, list[int]] = defaultdict(list)
    for i, r in enumerate(out):
        v = r.get(p)
        for m in methods:
            r[f"p_{m}"], r[f"reject_{m}"] = math.nan, False
        if v is not None and isinstance(v, (int, float)) and math.isfinite(v):
            fams[r.get(family)].append(i)
    for members in fams.values():
        for m in methods:
            adj = correct_pvalues([out[i][p] for i in members], m, alpha=alpha)
            for i, pa, rej in zip(members, adj.p_adjusted, adj.reject):
                out[i][f"p_{m}"], out[i][f"reject_{m}"] = float(pa), bool(rej)
    return out
