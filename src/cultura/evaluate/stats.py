"""Statistical tests shared by the suites: thin, documented wrappers over scipy and statsmodels (spec §8).

Every test returns a frozen `TestResult(statistic, p, effect_size, effect_name, n, method, extra)`; the
statistic and p-value are exactly those of the scipy/statsmodels call named in ``method`` (tested), and the
effect size is the one the seeds report (Cohen's d, r = Z/√n, A12 and rank-biserial r, ε², Cohen's w).
Degenerate input (too few values, all ties, zero variance) raises `StatsInputError` — a `ValueError` and a
`CulturaError` — with one sentence saying what is wrong; no p-value is ever derived by hand.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Hashable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

import numpy as np

from cultura.errors import CulturaError
from cultura.evaluate.metrics import bootstrap_ci
from cultura.evaluate.metrics import paired_chi2 as _paired_chi2_metric
from ..lazy import lazy

stats = lazy("scipy.stats")  # imported on first use (start-up)
multitest = lazy("statsmodels.stats.multitest")  # imported on first use (start-up)

__all__ = [
    "StatsInputError",
    "TestResult",
    "CorrectedPValues",
    "cohens_d",
    "welch_t",
    "welch_ww_wn",
    "welch_ww_wn_table",
    "chi2_gof",
    "paired_chi2",
    "wilcoxon_signed_rank",
    "mann_whitney",
    "compare_two_groups",
    "kruskal_wallis",
    "kruskal_effect_size",
    "sign_test",
    "correct_pvalues",
    "bootstrap_ci",
]

_ALTERNATIVES = ("two-sided", "greater", "less")
_CORRECTIONS = {"holm": "holm", "bonferroni": "bonferroni", "fdr_bh": "fdr_bh"}


class StatsInputError(CulturaError, ValueError):
    """A test cannot be run on this input (too few values, all ties, zero variance…); the message says why."""


@dataclass(frozen=True)
class TestResult:
    """Outcome of one statistical test (``method`` names the scipy/statsmodels call that produced it)."""

    __test__ = False  # not a pytest test class

    statistic: float
    p: float
    effect_size: float
    effect_name: str
    n: int
    method: str
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Flat dict for tables and JSON (``extra`` merged in)."""
        d = asdict(self)
        return {**{k: v for k, v in d.items() if k != "extra"}, **d["extra"]}


class CorrectedPValues(NamedTuple):
    """Adjusted p-values and the reject decisions at ``alpha``."""

    p_adjusted: np.ndarray
    reject: np.ndarray


def _sample(x: Any, name: str, *, min_n: int = 2) -> np.ndarray:
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise StatsInputError(f"{name} must be a 1-D sequence of numbers.") from None
    if arr.ndim != 1:
        raise StatsInputError(f"{name} must be 1-D, got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise StatsInputError(f"{name} contains NaN or infinite values; drop them first.")
    if arr.size < min_n:
        raise StatsInputError(f"{name} has {arr.size} value(s); this test needs at least {min_n}.")
    return arr


def _alternative(alternative: str) -> str:
    if alternative not in _ALTERNATIVES:
        raise StatsInputError(f"alternative must be one of {', '.join(_ALTERNATIVES)}, got {alternative!r}.")
    return alternative


def _differences(x: Any, y: Any, *, min_n: int = 1) -> np.ndarray:
    dx = _sample(x, "x", min_n=1)
    if y is not None:
        dy = _sample(y, "y", min_n=1)
        if dy.shape != dx.shape:
            raise StatsInputError(f"x and y must be paired (same length), got {dx.size} and {dy.size}.")
        dx = dx - dy
    nz = np.count_nonzero(dx)
    if nz == 0:
        raise StatsInputError("all paired differences are zero (all ties); there is nothing to test.")
    if nz < min_n:
        raise StatsInputError(f"only {nz} non-zero difference(s); this test needs at least {min_n}.")
    return dx


def cohens_d(a: Any, b: Any) -> float:
    """Cohen's d with the pooled standard deviation: ``(mean_a − mean_b) / s_pooled`` (ddof = 1).

    >>> round(cohens_d([1, 2, 3], [4, 5, 6]), 3)
    -3.0
    """
    x, y = _sample(a, "a"), _sample(b, "b")
    pooled = ((x.size - 1) * x.var(ddof=1) + (y.size - 1) * y.var(ddof=1)) / (x.size + y.size - 2)
    if pooled == 0:
        raise StatsInputError("both groups have zero variance; Cohen's d is undefined.")
    return float((x.mean() - y.mean()) / np.sqrt(pooled))


def in_words(exc: Exception, **names: str) -> str:
    """A test's refusal (:class:`StatsInputError`) said of what the caller passed, not of the test's argument
    names: ``in_words(e, a="WW pairs", b="WN pairs")`` turns "b has 0 value(s); this test needs at least 2." into
    "0 WN pairs, and the test needs at least 2".

    >>> in_words(StatsInputError("b has 0 value(s); this test needs at least 2."), a="WW pairs", b="WN pairs")
    '0 WN pairs, and the test needs at least 2'
    """
    text = str(exc)
    m = re.match(r"^(\w+) has (\d+) value\(s\); this test needs at least (\d+)\.$", text)
    if m and m.group(1) in names:
        return f"{m.group(2)} {names[m.group(1)]}, and the test needs at least {m.group(3)}"
    for arg, words in names.items():
        if text.startswith(arg + " "):
            text = words + text[len(arg):]
    return text.rstrip(".")


def welch_t(a: Any, b: Any, *, alternative: str = "greater") -> TestResult:
    """Welch's unequal-variance t-test of mean(a) vs mean(b) (``scipy.stats.ttest_ind(equal_var=False)``).

    ``p`` is for ``alternative`` (default one-sided a > b, as seed 002); the two-sided p is in
    ``extra["p_two_sided"]``. Effect size: Cohen's d (pooled sd). Seed 002 §4; spec §3, §8.

    >>> r = welch_t([0.9, 0.8, 0.85, 0.95], [0.5, 0.6, 0.55, 0.4])
    >>> r.p < r.extra["p_two_sided"] < 0.01
    True
    """
    x, y = _sample(a, "a"), _sample(b, "b")
    _alternative(alternative)
    if x.var() == 0 and y.var() == 0:
        raise StatsInputError("both groups have zero variance; the t statistic is undefined.")
    res = stats.ttest_ind(x, y, equal_var=False, alternative=alternative)
    two = stats.ttest_ind(x, y, equal_var=False, alternative="two-sided")
    return TestResult(
        float(res.statistic), float(res.pvalue), cohens_d(x, y), "cohens_d", int(x.size + y.size),
        "scipy.stats.ttest_ind(equal_var=False)",
        {"alternative": alternative, "p_two_sided": float(two.pvalue), "df": float(res.df),
         "n_a": int(x.size), "n_b": int(y.size), "mean_a": float(x.mean()), "mean_b": float(y.mean())},
    )


def welch_ww_wn(sim_ww: Any, sim_wn: Any) -> TestResult:
    """Seed 002's test that Western–Western image similarities exceed Western–non-Western ones.

    One-sided Welch t (WW > WN) with the two-sided p in ``extra``; ``extra`` also carries n_WW, n_WN and
    both means. Seed 002 §4 (image–image similarity); spec §3.

    >>> welch_ww_wn([0.8, 0.7, 0.75], [0.5, 0.55, 0.6]).extra["n_ww"]
    3
    """
    r = welch_t(sim_ww, sim_wn, alternative="greater")
    e = r.extra
    extra = {"p_two_sided": e["p_two_sided"], "df": e["df"], "n_ww": e["n_a"], "n_wn": e["n_b"],
             "mean_ww": e["mean_a"], "mean_wn": e["mean_b"]}
    return TestResult(r.statistic, r.p, r.effect_size, r.effect_name, r.n, r.method, extra)


def welch_ww_wn_table(
    samples: Mapping[Hashable, tuple[Any, Any]], *, alpha: float = 0.05, correction: str = "bonferroni"
) -> list[dict[str, Any]]:
    """`welch_ww_wn` per concept with a multiple-comparison correction over the concepts tested.

    ``samples`` maps concept → ``(sim_ww, sim_wn)``. Rows: concept, status ("ok" or "skipped"), reason,
    n_ww, n_wn, mean_ww, mean_wn, t, p, p_two_sided, p_adj, significant. A concept whose input is degenerate is a
    "skipped" row with the reason and is left out of the correction. Seed 002 §4 (Bonferroni); spec §3.

    >>> rows = welch_ww_wn_table({"food": ([0.8, 0.7, 0.75], [0.5, 0.55, 0.6]), "x": ([1.0], [0.2, 0.3])})
    >>> [(r["concept"], r["status"]) for r in rows]
    [('food', 'ok'), ('x', 'skipped')]
    """
    rows: list[dict[str, Any]] = []
    for concept, pair in samples.items():
        try:
            ww, wn = pair
            r = welch_ww_wn(ww, wn)
        except (StatsInputError, TypeError, ValueError) as exc:
            rows.append({"concept": concept, "status": "skipped", "reason": str(exc), "p_adj": float("nan"),
                         "significant": False})
            continue
        rows.append({"concept": concept, "status": "ok", "reason": "", **{k: r.extra[k] for k in
                     ("n_ww", "n_wn", "mean_ww", "mean_wn")}, "t": r.statistic, "p": r.p,
                     "p_two_sided": r.extra["p_two_sided"], "cohens_d": r.effect_size})
    ok = [row for row in rows if row["status"] == "ok"]
    if ok:
        adj = correct_pvalues([row["p"] for row in ok], method=correction, alpha=alpha)
        for row, p_adj, rej in zip(ok, adj.p_adjusted, adj.reject):
            row["p_adj"], row["significant"] = float(p_adj), bool(rej)
    return rows


def chi2_gof(observed: Any, expected: Any = None, *, ddof: int = 0) -> TestResult:
    """χ² goodness-of-fit test (``scipy.stats.chisquare``); uniform expectation when ``expected`` is None.

    Effect size: Cohen's ``w = sqrt(χ² / N)``. Spec §8.

    >>> chi2_gof([30, 10]).statistic
    10.0
    """
    obs = _sample(observed, "observed")
    if np.any(obs < 0):
        raise StatsInputError("observed must hold non-negative counts.")
    total = obs.sum()
    if total == 0:
        raise StatsInputError("observed counts sum to 0; there is nothing to test.")
    if expected is None:
        exp = np.full(obs.size, total / obs.size)
    else:
        exp = _sample(expected, "expected")
        if exp.shape != obs.shape:
            raise StatsInputError(f"expected must have one value per category ({obs.size}), got {exp.size}.")
        if np.any(exp <= 0):
            raise StatsInputError("expected counts must all be positive.")
        if not np.isclose(exp.sum(), total, rtol=1e-8):
            raise StatsInputError(f"expected sums to {exp.sum():g} but observed to {total:g}; rescale expected.")
    res = stats.chisquare(obs, f_exp=exp, ddof=ddof)
    return TestResult(float(res.statistic), float(res.pvalue), float(np.sqrt(res.statistic / total)), "cohens_w",
                      int(total), "scipy.stats.chisquare", {"dof": int(obs.size - 1 - ddof)})


def paired_chi2(wins_a: int, wins_b: int, n_trials: int) -> TestResult:
    """Seed 000 App. P.1's 1-dof χ² test of two competing categories, as a `TestResult`.

    Wraps `cultura.evaluate.metrics.paired_chi2`; effect size is the win-rate difference
    ``(O_A − O_B) / n_trials``. Refuses ``O_A + O_B = 0`` (undefined).

    >>> round(paired_chi2(30, 10, 100).p, 5)
    0.00157
    """
    try:
        r = _paired_chi2_metric(wins_a, wins_b, n_trials)
    except ValueError as exc:
        raise StatsInputError(str(exc)) from None
    if r.wins_a + r.wins_b == 0:
        raise StatsInputError("neither category won any trial (O_A + O_B = 0); the test is undefined.")
    return TestResult(r.statistic, r.p, r.diff, "win_rate_difference", r.n_trials, "scipy.stats.chisquare",
                      {"wins_a": r.wins_a, "wins_b": r.wins_b, "dof": 1})


def wilcoxon_signed_rank(
    x: Any, y: Any = None, *, alternative: str = "two-sided", zero_method: str = "wilcox", r_sign: str = "paper"
) -> TestResult:
    """Wilcoxon signed-rank test (``scipy.stats.wilcoxon``) with effect size ``r = Z / sqrt(n)``.

    ``statistic`` and ``p`` come from scipy's default method (exact for small samples without ties); n = number
    of non-zero differences (zeros dropped, ``zero_method="wilcox"``). Seed 003 App. D ("r = Z/√n. Ties were
    dropped by Wilcoxon"); spec §8.

    ``r_sign="paper"`` (default): Z is the normal-approximation z of W = min(W+, W−), so r ≤ 0 whichever side is
    larger, as seed 003 prints it (Table 8: "SIGLIP2 vs NLLB | 10 | 8.0 | .0488 | -0.629" with SIGLIP2 > NLLB);
    the side is ``extra["direction"]`` ("x > y", "x < y" or "none"). ``r_sign="direction"``: Z of W+, so
    r > 0 when x tends to exceed y. Both readings are always in ``extra`` (``r_paper``, ``r_direction``).

    >>> r = wilcoxon_signed_rank([1.2, 2.3, 3.1, 4.8, 5.0, 6.4], [1.0, 2.0, 3.0, 4.0, 5.5, 6.0])
    >>> r.effect_name, r.n
    ('r', 6)
    """
    _alternative(alternative)
    if zero_method not in ("wilcox", "pratt", "zsplit"):
        raise StatsInputError(f"zero_method must be 'wilcox', 'pratt' or 'zsplit', got {zero_method!r}.")
    if r_sign not in ("paper", "direction"):
        raise StatsInputError(f"r_sign must be 'paper' or 'direction', got {r_sign!r}.")
    d = _differences(x, y, min_n=2)
    res = stats.wilcoxon(d, alternative=alternative, zero_method=zero_method)
    approx = stats.wilcoxon(d, alternative="greater", zero_method=zero_method, method="approx")
    n = int(np.count_nonzero(d)) if zero_method == "wilcox" else int(d.size)
    z = float(approx.zstatistic)  # z of W+; W+ + W− = n(n+1)/2, so the z of min(W+, W−) is −|z|
    z_min = -abs(z)
    r_paper, r_dir = z_min / np.sqrt(n), z / np.sqrt(n)
    direction = "x > y" if z > 0 else ("x < y" if z < 0 else "none")
    return TestResult(float(res.statistic), float(res.pvalue), float(r_paper if r_sign == "paper" else r_dir), "r",
                      n, "scipy.stats.wilcoxon",
                      {"z": z_min if r_sign == "paper" else z, "z_w_plus": z, "r_paper": float(r_paper),
                       "r_direction": float(r_dir), "direction": direction, "r_sign": r_sign,
                       "alternative": alternative, "zero_method": zero_method, "n_pairs": int(d.size)})


def mann_whitney(a: Any, b: Any, *, alternative: str = "two-sided") -> TestResult:
    """Mann–Whitney U test (``scipy.stats.mannwhitneyu``) with Vargha–Delaney A12 and rank-biserial r.

    ``U`` is a's statistic; ``A12 = U / (n_a n_b)`` = P(a > b) + ½ P(a = b); ``r_rb = 2 A12 − 1``. Seed 003
    App. D (A12 / r_rb); spec §8.

    >>> r = mann_whitney([3, 4, 5], [1, 2, 3])
    >>> round(r.effect_size, 3), round(r.extra["rank_biserial"], 3)
    (0.944, 0.889)
    """
    x, y = _sample(a, "a", min_n=1), _sample(b, "b", min_n=1)
    _alternative(alternative)
    if np.all(np.concatenate([x, y]) == x[0]):
        raise StatsInputError("all values in a and b are identical (all ties); there is nothing to test.")
    res = stats.mannwhitneyu(x, y, alternative=alternative)
    a12 = float(res.statistic) / (x.size * y.size)
    return TestResult(float(res.statistic), float(res.pvalue), a12, "A12", int(x.size + y.size),
                      "scipy.stats.mannwhitneyu", {"rank_biserial": 2 * a12 - 1, "alternative": alternative,
                                                   "n_a": int(x.size), "n_b": int(y.size)})


def compare_two_groups(a: Any, b: Any, *, alpha: float = 0.05) -> TestResult:
    """Two independent groups with normality-aware screening (seed 003 App. D protocol).

    Shapiro–Wilk on each group and Levene (median-centred) on both; when no screen rejects at ``alpha``, Student's
    t-test (``scipy.stats.ttest_ind``) with Cohen's d, otherwise `mann_whitney` (A12). ``extra`` records the
    screening p-values and ``chosen``. Needs ≥ 3 values per group (Shapiro). Spec §8.

    >>> compare_two_groups([2.1, 2.5, 2.3, 2.8], [1.0, 1.4, 1.1, 1.3]).extra["chosen"]
    't-test'
    """
    x, y = _sample(a, "a", min_n=3), _sample(b, "b", min_n=3)
    if x.var() == 0 or y.var() == 0:
        raise StatsInputError("a group has zero variance; Shapiro–Wilk screening is undefined.")
    sh_a, sh_b = stats.shapiro(x).pvalue, stats.shapiro(y).pvalue
    lev = stats.levene(x, y).pvalue
    screens = {"shapiro_p_a": float(sh_a), "shapiro_p_b": float(sh_b), "levene_p": float(lev)}
    if min(sh_a, sh_b, lev) >= alpha:
        res = stats.ttest_ind(x, y, equal_var=True)
        return TestResult(float(res.statistic), float(res.pvalue), cohens_d(x, y), "cohens_d", int(x.size + y.size),
                          "scipy.stats.ttest_ind", {**screens, "chosen": "t-test", "df": float(res.df)})
    r = mann_whitney(x, y)
    return TestResult(r.statistic, r.p, r.effect_size, r.effect_name, r.n, r.method,
                      {**r.extra, **screens, "chosen": "mann-whitney"})


KRUSKAL_EFFECTS = ("epsilon_squared", "eta_squared_h", "epsilon_squared_tomczak")


def kruskal_effect_size(h: float, n: int, k: int, *, effect: str = "epsilon_squared") -> float:
    """Effect size of a Kruskal–Wallis ``H`` over ``n`` observations in ``k`` groups.

    - ``epsilon_squared`` (default; the definition behind seed 003 App. D): ``ε² = (H − k + 1) / (n − 1)``.
      The paper's "H = 0.62, ε² = −0.17" for SigLIP-2/FairFace across {high, low, gender-neutral} (3 languages
      each, n = 9, k = 3) is ``(0.62 − 2) / 8 = −0.17``; it is negative when H is below its expectation
      ``k − 1`` under the null.
    - ``eta_squared_h``: ``η²_H = (H − k + 1) / (n − k)`` (Tomczak & Tomczak 2014); −0.23 on the paper's numbers.
    - ``epsilon_squared_tomczak``: ``ε²_R = H / ((n² − 1) / (n + 1)) = H / (n − 1)``, in [0, 1].

    >>> round(kruskal_effect_size(0.62, 9, 3), 2), round(kruskal_effect_size(0.62, 9, 3, effect="eta_squared_h"), 2)
    (-0.17, -0.23)
    """
    if effect not in KRUSKAL_EFFECTS:
        raise ValueError(f"effect must be one of {', '.join(KRUSKAL_EFFECTS)}, got {effect!r}.")
    if n <= k or k < 2:
        raise ValueError(f"n must exceed k >= 2, got n={n}, k={k}.")
    if effect == "epsilon_squared":
        return (h - k + 1) / (n - 1)
    if effect == "eta_squared_h":
        return (h - k + 1) / (n - k)
    return h / (n - 1)


def kruskal_wallis(*groups: Any, effect: str = "epsilon_squared") -> TestResult:
    """Kruskal–Wallis H test (``scipy.stats.kruskal``) with the effect size of :func:`kruskal_effect_size`
    (default ``ε² = (H − k + 1) / (n − 1)``, seed 003 App. D's definition; the other definitions are in
    ``extra``). ε² can be negative for tiny effects (H = 0.62 over 3 × 3 languages → −0.17). Spec §8.

    >>> r = kruskal_wallis([1, 2, 3], [4, 5, 6], [7, 8, 9])
    >>> round(r.statistic, 3), round(r.effect_size, 3)
    (7.2, 0.65)
    """
    if len(groups) < 2:
        raise StatsInputError(f"kruskal_wallis needs at least 2 groups, got {len(groups)}.")
    if effect not in KRUSKAL_EFFECTS:
        raise StatsInputError(f"effect must be one of {', '.join(KRUSKAL_EFFECTS)}, got {effect!r}.")
    gs = [_sample(g, f"groups[{i}]", min_n=2) for i, g in enumerate(groups)]
    allv = np.concatenate(gs)
    if np.all(allv == allv[0]):
        raise StatsInputError("all values are identical (all ties); there is nothing to test.")
    res = stats.kruskal(*gs)
    n, k = allv.size, len(gs)
    h = float(res.statistic)
    sizes = {e: kruskal_effect_size(h, n, k, effect=e) for e in KRUSKAL_EFFECTS}
    return TestResult(h, float(res.pvalue), sizes[effect], effect, int(n),
                      "scipy.stats.kruskal", {"k": k, "dof": k - 1, **sizes})


def sign_test(x: Any, y: Any = None, *, alternative: str = "two-sided") -> TestResult:
    """Sign test: ``scipy.stats.binomtest`` of the number of positive differences among the non-zero ones.

    Effect size: share of positive differences. Seed 003 App. D ("9/10 positives, p = 0.0215"); spec §8.

    >>> round(sign_test([1] * 9 + [-1]).p, 4)
    0.0215
    """
    _alternative(alternative)
    d = _differences(x, y, min_n=1)
    nz = d[d != 0]
    k = int((nz > 0).sum())
    res = stats.binomtest(k, nz.size, 0.5, alternative=alternative)
    return TestResult(float(k), float(res.pvalue), k / nz.size, "share_positive", int(nz.size),
                      "scipy.stats.binomtest", {"n_zero": int(d.size - nz.size), "alternative": alternative})


def correct_pvalues(pvals: Any, method: str = "holm", *, alpha: float = 0.05) -> CorrectedPValues:
    """Multiple-comparison correction (``statsmodels.stats.multitest.multipletests``).

    ``method``: "holm" (family-wise), "bonferroni" or "fdr_bh" (Benjamini–Hochberg). Spec §8.

    >>> correct_pvalues([0.01, 0.04, 0.03], "bonferroni").p_adjusted.round(2).tolist()
    [0.03, 0.12, 0.09]
    """
    if method not in _CORRECTIONS:
        close = difflib.get_close_matches(str(method), list(_CORRECTIONS), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise StatsInputError(f"Unknown correction {method!r}.{hint} Valid: {', '.join(_CORRECTIONS)}.")
    p = _sample(pvals, "pvals", min_n=1)
    if np.any((p < 0) | (p > 1)):
        raise StatsInputError("pvals must lie in [0, 1].")
    if not 0 < alpha < 1:
        raise StatsInputError(f"alpha must be strictly between 0 and 1, got {alpha!r}.")
    reject, adj, _, _ = multitest.multipletests(p, alpha=alpha, method=_CORRECTIONS[method])
    return CorrectedPValues(np.asarray(adj), np.asarray(reject))
