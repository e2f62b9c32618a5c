"""cultura.evaluate.stats: every wrapper equals the scipy/statsmodels call it wraps; degenerate input refused."""
from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from cultura.evaluate import stats as S
from cultura.evaluate.stats import StatsInputError

rng = np.random.default_rng(42)
A = rng.normal(0.5, 1.0, 25)
B = rng.normal(0.0, 1.5, 30)
X = rng.normal(0.3, 1.0, 20)
Y = X + rng.normal(0.2, 0.5, 20)


def test_docstring_examples_run():
    res = doctest.testmod(S)
    assert res.attempted > 0 and res.failed == 0


@pytest.mark.parametrize("alt", ["greater", "less", "two-sided"])
def test_welch_t_equals_scipy(alt):
    r = S.welch_t(A, B, alternative=alt)
    ref = stats.ttest_ind(A, B, equal_var=False, alternative=alt)
    assert (r.statistic, r.p) == pytest.approx((ref.statistic, ref.pvalue))
    assert r.extra["p_two_sided"] == pytest.approx(stats.ttest_ind(A, B, equal_var=False).pvalue)
    assert r.n == 55 and r.effect_name == "cohens_d"


def test_welch_ww_wn_and_table_with_bonferroni():
    r = S.welch_ww_wn(A, B)
    assert r.p == pytest.approx(stats.ttest_ind(A, B, equal_var=False, alternative="greater").pvalue)
    assert r.extra["n_ww"] == 25 and r.extra["n_wn"] == 30
    rows = S.welch_ww_wn_table({"a": (A, B), "b": (B, A), "c": ([1.0], [2.0, 3.0])})
    assert [row["status"] for row in rows] == ["ok", "ok", "skipped"]
    assert "needs at least 2" in rows[2]["reason"]
    assert rows[0]["p_adj"] == pytest.approx(min(1.0, 2 * rows[0]["p"]))  # 2 concepts tested


def test_cohens_d_reproduces_seed003_t_from_d():
    # seed 003 App. D: Student t with n = 3 + 3 gives t = d * sqrt(n1 n2 / (n1 + n2))
    a, b = [2.1, 2.5, 2.3], [1.0, 1.4, 1.1]
    t = stats.ttest_ind(a, b).statistic
    assert t == pytest.approx(S.cohens_d(a, b) * math.sqrt(1.5))


def test_chi2_gof_equals_scipy():
    obs = [18, 22, 35, 25]
    r = S.chi2_gof(obs)
    ref = stats.chisquare(obs)
    assert (r.statistic, r.p) == pytest.approx((ref.statistic, ref.pvalue))
    exp = [25, 25, 25, 25]
    assert S.chi2_gof(obs, exp).p == pytest.approx(stats.chisquare(obs, exp).pvalue)
    assert r.effect_size == pytest.approx(math.sqrt(ref.statistic / 100))


def test_paired_chi2_wrapper():
    r = S.paired_chi2(40, 20, 100)
    ref = stats.chisquare([40, 20], [30, 30])
    assert (r.statistic, r.p, r.effect_size) == pytest.approx((ref.statistic, ref.pvalue, 0.2))


@pytest.mark.parametrize("alt", ["two-sided", "greater", "less"])
def test_wilcoxon_equals_scipy_and_r_is_z_over_sqrt_n(alt):
    r = S.wilcoxon_signed_rank(Y, X, alternative=alt)
    ref = stats.wilcoxon(Y, X, alternative=alt)
    assert (r.statistic, r.p) == pytest.approx((ref.statistic, ref.pvalue))
    z_two = stats.wilcoxon(Y, X, method="approx").zstatistic
    assert abs(r.effect_size) == pytest.approx(abs(z_two) / math.sqrt(20))
    # the paper's r is the Z of min(W+, W−): never positive; the side is reported separately
    assert r.effect_size < 0 and r.extra["direction"] == "x > y"  # Y tends to exceed X
    d = S.wilcoxon_signed_rank(Y, X, alternative=alt, r_sign="direction")
    assert d.effect_size == pytest.approx(-r.effect_size) and d.extra["r_paper"] == pytest.approx(r.effect_size)


def test_wilcoxon_r_is_printed_as_seed_003_table_8():
    """Seed 003 App. D, Table 8: "Gender max-skew (T2) | FF | c | SIGLIP2 vs NLLB | 10 | 8.0 | .0488 | -0.629"
    (and "PATA | c | SIGLIP2 vs NLLB | 10 | 0.0 | .0020 | -0.886", "PATA | com | CAPIVARA vs mCLIP | 10 | 3.0 |
    .0098 | -0.790"): r = Z/√n with Z of W = min(W+, W−), negative although the first model is larger."""
    for negative, w, p, r_paper in (({1, 3, 4}, 8.0, 0.0488, -0.629), (set(), 0.0, 0.0020, -0.886),
                                    ({1, 2}, 3.0, 0.0098, -0.790)):
        diffs = [-k if k in negative else k for k in range(1, 11)]  # SIGLIP2 − NLLB, mostly positive
        siglip2 = [10.0 + k for k in diffs]
        nllb = [10.0] * 10
        r = S.wilcoxon_signed_rank(siglip2, nllb)
        assert (r.n, r.statistic) == (10, w)
        assert round(r.p, 4) == p and round(r.effect_size, 3) == r_paper
        assert r.extra["direction"] == "x > y"
        assert round(S.wilcoxon_signed_rank(siglip2, nllb, r_sign="direction").effect_size, 3) == -r_paper
    with pytest.raises(S.StatsInputError, match="r_sign"):
        S.wilcoxon_signed_rank([1.0, 2.0, 3.0], [0.0, 0.0, 0.0], r_sign="signed")


def test_wilcoxon_drops_zero_differences():
    x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    y = [1.0, 1.5, 2.0, 3.5, 6.0, 4.0]
    r = S.wilcoxon_signed_rank(x, y)
    assert r.n == 5 and r.extra["n_pairs"] == 6
    assert r.p == pytest.approx(stats.wilcoxon(x, y).pvalue)


def test_mann_whitney_equals_scipy_with_a12_and_rank_biserial():
    r = S.mann_whitney(A, B)
    ref = stats.mannwhitneyu(A, B)
    assert (r.statistic, r.p) == pytest.approx((ref.statistic, ref.pvalue))
    a12 = np.mean([(a > b) + 0.5 * (a == b) for a in A for b in B])
    assert r.effect_size == pytest.approx(a12)
    assert r.extra["rank_biserial"] == pytest.approx(2 * a12 - 1)


def test_compare_two_groups_screens():
    local = np.random.default_rng(7)
    skewed, other = np.exp(local.normal(0, 2, 40)), local.normal(0, 1, 40)
    r = S.compare_two_groups(skewed, other)
    assert r.extra["chosen"] == "mann-whitney" and r.extra["shapiro_p_a"] < 0.05
    assert r.p == pytest.approx(stats.mannwhitneyu(skewed, other).pvalue)
    t = S.compare_two_groups([2.1, 2.5, 2.3, 2.8], [1.0, 1.4, 1.1, 1.3])
    ref = stats.ttest_ind([2.1, 2.5, 2.3, 2.8], [1.0, 1.4, 1.1, 1.3])
    assert t.extra["chosen"] == "t-test" and t.p == pytest.approx(ref.pvalue)


def test_kruskal_equals_scipy_and_epsilon_squared():
    g = [A[:10], B[:10], X[:11]]
    r = S.kruskal_wallis(*g)
    ref = stats.kruskal(*g)
    assert (r.statistic, r.p) == pytest.approx((ref.statistic, ref.pvalue))
    assert r.effect_size == pytest.approx((ref.statistic - 3 + 1) / (31 - 1))
    assert r.extra["eta_squared_h"] == pytest.approx((ref.statistic - 3 + 1) / (31 - 3))


def test_kruskal_reproduces_seed003_appendix_d():
    """Seed 003 App. D: 3-way Kruskal–Wallis over {high, low, gender-neutral} (3 languages each, n = 9):
    H = 0.62, p = 0.733, ε² = −0.17. Rank sums 12 / 16 / 17 give exactly that H."""
    r = S.kruskal_wallis([1, 2, 9], [3, 5, 8], [4, 6, 7])
    assert round(r.statistic, 2) == 0.62 and round(r.p, 3) == 0.733 and r.n == 9
    assert round(r.effect_size, 2) == -0.17 and r.effect_name == "epsilon_squared"
    assert round(r.extra["eta_squared_h"], 2) == -0.23   # the formula the code used before: not the paper's
    assert round(S.kruskal_effect_size(0.62, 9, 3), 2) == -0.17


def test_sign_test_reproduces_seed003():
    r = S.sign_test([1.0] * 9 + [-1.0])
    assert r.p == pytest.approx(stats.binomtest(9, 10).pvalue)
    assert round(r.p, 4) == 0.0215
    r2 = S.sign_test(Y, X, alternative="greater")
    k = int((Y - X > 0).sum())
    assert r2.p == pytest.approx(stats.binomtest(k, 20, alternative="greater").pvalue)


@pytest.mark.parametrize("method", ["holm", "bonferroni", "fdr_bh"])
def test_correct_pvalues_equals_statsmodels(method):
    p = [0.001, 0.02, 0.04, 0.3, 0.049]
    out = S.correct_pvalues(p, method)
    rej, adj, _, _ = multipletests(p, alpha=0.05, method=method)
    assert np.allclose(out.p_adjusted, adj) and (out.reject == rej).all()


def test_bootstrap_ci_is_shared_with_metrics():
    from cultura.evaluate.metrics import bootstrap_ci

    assert S.bootstrap_ci is bootstrap_ci


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: S.welch_t([1.0], [1.0, 2.0]), "a has 1 value"),
        (lambda: S.welch_t([1.0, 1.0], [2.0, 2.0]), "zero variance"),
        (lambda: S.welch_t([1.0, np.nan], [2.0, 3.0]), "NaN"),
        (lambda: S.welch_t(A, B, alternative="bigger"), "alternative must be"),
        (lambda: S.wilcoxon_signed_rank([1.0, 2.0], [1.0, 2.0]), "all paired differences are zero"),
        (lambda: S.wilcoxon_signed_rank([1.0, 2.0], [1.0]), "same length"),
        (lambda: S.wilcoxon_signed_rank([1.0, 2.0], [1.0, 1.0]), "only 1 non-zero difference"),
        (lambda: S.mann_whitney([1.0, 1.0], [1.0]), "all ties"),
        (lambda: S.kruskal_wallis([1.0, 1.0], [1.0, 1.0]), "all ties"),
        (lambda: S.kruskal_wallis([1.0, 2.0]), "at least 2 groups"),
        (lambda: S.compare_two_groups([1.0, 2.0], [1.0, 2.0, 3.0]), "a has 2 value"),
        (lambda: S.chi2_gof([0, 0]), "sum to 0"),
        (lambda: S.chi2_gof([5, 5], [3, 3]), "rescale expected"),
        (lambda: S.paired_chi2(0, 0, 10), "O_A \\+ O_B = 0"),
        (lambda: S.sign_test([0.0, 0.0]), "all paired differences are zero"),
        (lambda: S.correct_pvalues([0.1], "hol"), "Did you mean 'holm'"),
        (lambda: S.correct_pvalues([1.5], "holm"), r"pvals must lie in \[0, 1\]"),
    ],
)
def test_degenerate_input_is_refused_with_a_clear_message(call, match):
    with pytest.raises(StatsInputError, match=match):
        call()


def test_stats_input_error_is_value_error_and_cultura_error():
    from cultura.errors import CulturaError

    assert issubclass(StatsInputError, ValueError) and issubclass(StatsInputError, CulturaError)


def test_test_result_as_dict_is_flat_and_frozen():
    r = S.welch_t(A, B)
    d = r.as_dict()
    assert {"statistic", "p", "effect_size", "method", "p_two_sided"} <= set(d)
    with pytest.raises(AttributeError):
        r.p = 0.5  # type: ignore[misc]
