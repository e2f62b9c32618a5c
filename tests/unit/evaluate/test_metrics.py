"""Metric functions of cultura.evaluate.metrics: seed worked examples, reference equality, invariants."""
from __future__ import annotations

import doctest
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats
from scipy.special import rel_entr
from sklearn.metrics import ndcg_score, silhouette_samples

from cultura.evaluate import metrics as M
from cultura.evaluate.metrics import association, llm, resampling, retrieval, social

FAST = settings(max_examples=60, deadline=None)

# The 36 Crossmodal-3600 languages (seed 000 App. B Table 5, RQ1).
XM3600 = ("ar bn cs da de el en es fa fi fil fr he hi hr hu id it ja ko mi nl no pl pt quz ro ru sv sw te th "
          "tr uk vi zh").split()
CLIP_TOP5 = ["nl", "nl", "pt", "pt", "fr"]  # seed 000 Figure 8, CLIP ViT-L/14
MCLIP_TOP5 = ["da", "sv", "da", "he", "sv"]  # seed 000 Figure 8, M-CLIP XLM-R-B/16plus (ranks 1-5)


@pytest.mark.parametrize("module", [retrieval, association, social, llm, resampling])
def test_docstring_examples_run(module):
    res = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert res.attempted > 0 and res.failed == 0


# --- seed 000 Figure 8 (LBKL / DLBKL) ------------------------------------------------------------------

def test_xm3600_languages_match_seed_table5():
    assert len(XM3600) == len(set(XM3600)) == 36


def test_seed000_figure8_clip():
    assert round(M.lbkl([CLIP_TOP5], XM3600, k=5), 3) == 15.508
    assert round(M.dlbkl([CLIP_TOP5], XM3600, k=5), 3) == 15.518


def test_seed000_figure8_mclip():
    # Same proportions (2, 2, 1) → same LBKL; DLBKL differs with the ranks. The list printed in the figure
    # gives 15.51456, which the seed prints as 15.514 (truncated, not rounded): equal to 3 decimals ±1e-3.
    assert round(M.lbkl([MCLIP_TOP5], XM3600, k=5), 3) == 15.508
    d = M.dlbkl([MCLIP_TOP5], XM3600, k=5)
    assert d == pytest.approx(15.514, abs=1e-3)
    assert math.floor(d * 1000) / 1000 == 15.514
    assert d < M.dlbkl([CLIP_TOP5], XM3600, k=5)


def test_lbkl_matches_closed_form_of_seed_appendix_e():
    # eq. (9): (1/N) sum_c log(1 / (N Q(c))) with smoothing eps on Q
    n, eps = 36, 1e-9
    q = np.zeros(n)
    q[:3] = [0.4, 0.4, 0.2]
    expected = np.mean(np.log(1.0 / (n * (q + eps))))
    assert M.lbkl([CLIP_TOP5], XM3600, k=5) == pytest.approx(expected, rel=1e-12)


def test_lbkl_perfectly_fair_list_is_zero_and_prior_is_used():
    labels = ["a", "b", "c", "d"]
    assert M.lbkl([["a", "b", "c", "d"]], labels, k=4) == pytest.approx(0, abs=1e-7)
    prior = {"a": 0.5, "b": 0.5}
    assert M.lbkl([["a", "b"]], labels, k=2, prior=prior) == pytest.approx(0, abs=1e-7)
    assert M.lbkl([["a", "b"]], labels, k=2, prior=[0.5, 0.5, 0, 0]) == pytest.approx(0, abs=1e-7)


def test_lbkl_mean_over_queries_and_per_query():
    q = [CLIP_TOP5, MCLIP_TOP5]
    per = M.lbkl_per_query(q, XM3600, k=5, discounted=True)
    assert M.dlbkl(q, XM3600, k=5) == pytest.approx(per.mean())


def test_dlbkl_penalises_top_rank_dominance():
    labels = ["hi", "lo1", "lo2"]
    top = M.dlbkl([["hi", "hi", "lo1", "lo2"]], labels, k=4)
    bottom = M.dlbkl([["lo1", "lo2", "hi", "hi"]], labels, k=4)
    assert top > bottom
    assert M.lbkl([["hi", "hi", "lo1", "lo2"]], labels, k=4) == M.lbkl([["lo1", "lo2", "hi", "hi"]], labels, k=4)


def _lbkl_loop(ranked, labels, k, discounted, eps=1e-9):
    out = []
    for seq in ranked:
        w = [1 / math.log2(i + 2) if discounted else 1.0 for i in range(k)]
        q = {lab: 0.0 for lab in labels}
        for i, lab in enumerate(seq[:k]):
            q[lab] += w[i] / sum(w)
        out.append(sum((1 / len(labels)) * math.log((1 / len(labels)) / (q[lab] + eps)) for lab in labels))
    return sum(out) / len(out)


@FAST
@given(st.data())
def test_lbkl_dlbkl_equal_a_direct_loop(data):
    labels = ["en", "th", "ja", "sw", "fr"]
    k = data.draw(st.integers(1, 6))
    ranked = data.draw(st.lists(st.lists(st.sampled_from(labels), min_size=k, max_size=k + 2), min_size=1, max_size=5))
    assert M.lbkl(ranked, labels, k=k) == pytest.approx(_lbkl_loop(ranked, labels, k, False), rel=1e-10)
    assert M.dlbkl(ranked, labels, k=k) == pytest.approx(_lbkl_loop(ranked, labels, k, True), rel=1e-10)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(ranked_labels=[["a"]], labels=["a", "b"], k=2), r"ranked_labels\[0\] has 1 labels but k=2"),
        (dict(ranked_labels=[["z", "a"]], labels=["a", "b"], k=2), "not in labels"),
        (dict(ranked_labels=[], labels=["a"], k=1), "ranked_labels is empty"),
        (dict(ranked_labels=["ab"], labels=["a", "b"], k=1), "is a string"),
        (dict(ranked_labels=[["a"]], labels=["a", "a"], k=1), "duplicates"),
        (dict(ranked_labels=[["a"]], labels=["a", "b"], k=0), "k must be an integer >= 1"),
        (dict(ranked_labels=[["a"]], labels=["a", "b"], k=1, prior=[0.7, 0.7]), "prior must sum to 1"),
        (dict(ranked_labels=[["a"]], labels=["a", "b"], k=1, prior=[1.0]), "prior must have one probability"),
        (dict(ranked_labels=[["a"]], labels=["a", "b"], k=1, eps=-1), "eps must be >= 0"),
    ],
)
def test_lbkl_input_errors_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        M.lbkl(**kwargs)


def test_retrieval_frequency_by_rank_and_groups():
    out = M.retrieval_frequency([CLIP_TOP5, MCLIP_TOP5], XM3600, k=5, groups={lab: "x" for lab in XM3600})
    assert sum(out["frequency"].values()) == pytest.approx(1)
    for r in range(5):
        assert sum(v[r] for v in out["by_rank"].values()) == pytest.approx(1)
    assert out["by_rank"]["nl"][:2] == [0.5, 0.5]
    assert out["group_frequency"] == {"x": pytest.approx(1)}
    with pytest.raises(ValueError, match="groups has no group"):
        M.retrieval_frequency([CLIP_TOP5], XM3600, k=5, groups={"nl": "high"})


# --- Acc@k / NDCG@k -------------------------------------------------------------------------------------

def _binary_case(draw_shape=(st.integers(1, 6), st.integers(2, 8))):
    return st.tuples(*draw_shape).flatmap(
        lambda s: st.tuples(
            hnp.arrays(np.int64, s, elements=st.integers(0, 1)),
            hnp.arrays(np.float64, s, elements=st.sampled_from([0.0, 0.1, 0.2, 0.5, 0.9]) | st.floats(-1, 1)),
            st.integers(1, s[1] + 2),
        )
    )


@FAST
@given(_binary_case())
def test_ndcg_equals_sklearn_on_binary_relevance_with_ties(case):
    y_true, y_score, k = case
    assert M.ndcg_at_k(y_true, y_score, k=k) == pytest.approx(ndcg_score(y_true, y_score, k=k), abs=1e-12)


def test_ndcg_ideal_dcg_uses_relevant_count_capped_at_k():
    y_true = [[1, 1, 1, 0]]
    y_score = [[0.1, 0.2, 0.9, 0.8]]  # ranks: rel(3rd)=1, 4th=0, 2nd=1, 1st=1
    dcg = 1 + 0 + 1 / math.log2(4)
    idcg = 1 + 1 / math.log2(3)  # min(R=3, k=2) = 2 relevant positions
    dcg2 = 1 + 0
    assert M.ndcg_at_k(y_true, y_score, k=2) == pytest.approx(dcg2 / idcg)
    assert M.ndcg_at_k(y_true, y_score, k=3) == pytest.approx(dcg / (idcg + 1 / math.log2(4)))


@FAST
@given(_binary_case())
def test_accuracy_at_k_equals_a_loop(case):
    y_true, y_score, k = case
    hits = []
    for t, s in zip(y_true, y_score):
        order = sorted(range(len(s)), key=lambda i: (-s[i], i))[:k]
        hits.append(any(t[i] == 1 for i in order))
    assert M.accuracy_at_k(y_true, y_score, k=k) == pytest.approx(np.mean(hits))


def test_acc_ndcg_input_errors():
    with pytest.raises(ValueError, match="same shape"):
        M.accuracy_at_k([[1, 0]], [[0.1, 0.2, 0.3]])
    with pytest.raises(ValueError, match="binary"):
        M.accuracy_at_k([[2, 0]], [[0.1, 0.2]])
    with pytest.raises(ValueError, match="k must be"):
        M.ndcg_at_k([[1, 0]], [[0.1, 0.2]], k=0)
    with pytest.raises(ValueError, match="y_score contains NaN"):
        M.ndcg_at_k([[1, 0]], [[np.nan, 0.2]])
    with pytest.raises(ValueError, match="y_true must be 2-D"):
        M.ndcg_at_k([1, 0], [0.1, 0.2])


# --- win rates / SP ---------------------------------------------------------------------------------------

sims = st.tuples(st.integers(1, 30), st.integers(2, 6)).flatmap(
    lambda s: hnp.arrays(np.float64, s, elements=st.sampled_from([0.1, 0.2, 0.3]) | st.floats(-1, 1))
)


@FAST
@given(sims)
def test_win_rates_bounds_sum_and_exact_tie_split(s):
    m = M.win_rates(s)
    assert m.shape == (s.shape[1],)
    assert np.all((m >= 0) & (m <= 1))
    assert m.sum() == pytest.approx(1.0)
    loop = np.zeros(s.shape[1])
    for row in s:
        best = [j for j in range(len(row)) if row[j] == max(row)]
        for j in best:
            loop[j] += 1 / len(best)
    assert np.allclose(m, loop / len(s))


@FAST
@given(sims, st.randoms())
def test_win_rates_and_sp_are_invariant_to_trial_order(s, rnd):
    perm = list(range(len(s)))
    rnd.shuffle(perm)
    assert np.allclose(M.win_rates(s[perm]), M.win_rates(s))
    assert M.self_preference(s[perm]) == pytest.approx(M.self_preference(s))


def test_win_rates_full_tie_is_uniform():
    assert M.win_rates([[0.5, 0.5, 0.5, 0.5]]).tolist() == [0.25] * 4


def test_self_preference_inf_and_errors():
    assert M.self_preference([[0.1, 0.9, 0.0], [0.2, 0.3, 0.9]]) == math.inf
    assert M.self_preference([[0.9, 0.1, 0.5], [0.1, 0.9, 0.5]], correct=0, biased=1) == 1.0
    with pytest.raises(ValueError, match="different candidate columns"):
        M.self_preference([[0.1, 0.2]], correct=1, biased=1)
    with pytest.raises(ValueError, match="biased must be a column index"):
        M.self_preference([[0.1, 0.2]], biased=5)
    with pytest.raises(ValueError, match="at least 1 row"):
        M.win_rates(np.empty((0, 3)))


def test_random_baseline_sp_is_about_one():
    out = M.random_baseline(3000, 3, seed=0, rounds=10)
    assert 0.9 < out["self_preference"] < 1.1
    assert 0.8 < out["sp_min"] <= out["sp_max"] < 1.2  # per round: sd ≈ sqrt(2 / 1000) ≈ 0.045
    assert np.allclose(out["win_rates"], 1 / 3, atol=0.03)
    assert out["win_rates"].sum() == pytest.approx(1)
    assert M.random_baseline(200, 3, seed=1)["sp_rounds"] == M.random_baseline(200, 3, seed=1)["sp_rounds"]
    with pytest.raises(ValueError, match="n_candidates must be >= 2"):
        M.random_baseline(10, 1)


def test_win_rates_ci_contains_estimate_and_matches_scipy_bootstrap():
    rng = np.random.default_rng(3)
    s = rng.random((80, 3))
    ci = M.win_rates_ci(s, n_boot=300, seed=5)
    assert np.allclose(ci.estimate, M.win_rates(s))
    assert np.all(ci.low <= ci.estimate) and np.all(ci.estimate <= ci.high)
    for col in range(3):  # same as bootstrapping the per-trial win indicator of one column
        wins = (s.argmax(axis=1) == col).astype(float)
        ref = stats.bootstrap((wins,), np.mean, n_resamples=300, method="percentile", rng=np.random.default_rng(5))
        assert ci.low[col] == pytest.approx(ref.confidence_interval.low)
        assert ci.high[col] == pytest.approx(ref.confidence_interval.high)


def test_bootstrap_ci_matches_scipy_and_degenerate_input():
    x = np.random.default_rng(0).normal(size=40)
    ci = M.bootstrap_ci(x, n_boot=500, seed=2, level=0.9)
    ref = stats.bootstrap((x,), np.mean, n_resamples=500, confidence_level=0.9, method="percentile",
                          rng=np.random.default_rng(2))
    assert (ci.low, ci.high) == pytest.approx((ref.confidence_interval.low, ref.confidence_interval.high))
    assert M.bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)
    with pytest.raises(ValueError, match="level must be strictly between"):
        M.bootstrap_ci(x, level=95)
    with pytest.raises(ValueError, match="values must have at least 2"):
        M.bootstrap_ci([1.0])


def test_similarity_drift_and_shape_error():
    assert np.allclose(M.similarity_drift([[0.3, 0.2]], [[0.1, 0.25]]), [[0.2, -0.05]])
    with pytest.raises(ValueError, match="same shape"):
        M.similarity_drift([0.1, 0.2], [0.1])


# --- paired χ² -----------------------------------------------------------------------------------------------

@FAST
@given(st.integers(0, 200), st.integers(0, 200), st.integers(0, 200))
def test_paired_chi2_equals_full_table_with_other_categories_fixed(a, b, other):
    n = a + b + other
    if n == 0:
        return
    r = M.paired_chi2(a, b, n)
    assert r.diff == pytest.approx((a - b) / n)
    if a + b == 0:
        assert math.isnan(r.statistic) and math.isnan(r.p)
        return
    e = (a + b) / 2
    obs, exp = [a, b, other], [e, e, other]
    full = sum((o - x) ** 2 / x for o, x in zip(obs, exp) if x > 0)
    assert r.statistic == pytest.approx(full)
    assert r.p == pytest.approx(stats.chi2.sf(full, df=1))


def test_paired_chi2_errors():
    with pytest.raises(ValueError, match="cannot exceed n_trials"):
        M.paired_chi2(5, 6, 10)
    with pytest.raises(ValueError, match="wins_a must be a non-negative integer"):
        M.paired_chi2(-1, 0, 10)


# --- silhouette / C-ASC --------------------------------------------------------------------------------------

def test_silhouette_by_label_is_mean_of_sklearn_samples():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 5))
    lab = np.array(["en", "th", "ja"] * 10)
    out = M.silhouette_by_label(x, lab)
    ref = silhouette_samples(x, lab, metric="cosine")
    for u in ("en", "th", "ja"):
        assert out[u] == pytest.approx(ref[lab == u].mean())
    with pytest.raises(ValueError, match="between 2 and n_samples - 1"):
        M.silhouette_by_label(x, ["en"] * 30)


@FAST
@given(st.integers(0, 10_000))
def test_c_asc_sign_flips_with_the_complement_and_matches_formula(seed):
    rng = np.random.default_rng(seed)
    c, imgs = rng.normal(size=4), rng.normal(size=(9, 4))
    g = np.zeros(9, dtype=bool)
    g[rng.choice(9, size=rng.integers(1, 9), replace=False)] = True
    v = M.c_asc(c, imgs, g)
    assert M.c_asc(c, imgs, ~g) == pytest.approx(-v)
    d = imgs @ c / (np.linalg.norm(imgs, axis=1) * np.linalg.norm(c))
    assert v == pytest.approx((d[g].mean() - d[~g].mean()) / np.std(d, ddof=1))
    assert M.c_asc(3 * c, imgs * 2, g) == pytest.approx(v)  # cosine: scale-free


def test_c_asc_errors():
    with pytest.raises(ValueError, match="in_group must be a boolean mask"):
        M.c_asc([1, 0], [[1, 0], [0, 1]], [1, 0])
    with pytest.raises(ValueError, match="at least one image in G and one outside"):
        M.c_asc([1, 0], [[1, 0], [0, 1]], [True, True])
    assert math.isnan(M.c_asc([1, 0], [[1, 0], [2, 0]], [True, False]))


# --- social bias (seed 003) --------------------------------------------------------------------------------

def test_max_skew_seed003_example_symmetric_scale_free():
    assert M.max_skew(0.34, 0.17) == pytest.approx(1.0)
    assert M.max_skew(0.17, 0.34) == pytest.approx(1.0)


@FAST
@given(st.floats(0.001, 10), st.floats(0.001, 10), st.floats(0.01, 100))
def test_max_skew_invariants(a, b, c):
    assert M.max_skew(a, b) == M.max_skew(b, a)
    assert M.max_skew(c * a, c * b) == pytest.approx(M.max_skew(a, b), rel=1e-9, abs=1e-12)
    assert M.max_skew(a, b) >= 0


def test_max_skew_undefined_values():
    assert M.max_skew(0.0, 0.2) == math.inf
    assert math.isnan(M.max_skew(0.0, 0.0))
    assert M.max_skew(0.2, 0.2) == 0.0


def test_mean_max_skew_averages_unordered_pairs():
    scores = {"a": 0.1, "b": 0.2, "c": 0.4, "d": 0.3}
    pairs = [M.max_skew(scores[x], scores[y]) for x, y in itertools.combinations(scores, 2)]
    assert M.mean_max_skew(scores) == pytest.approx(np.mean(pairs))
    with pytest.raises(ValueError, match="at least 2 groups"):
        M.mean_max_skew({"a": 0.1})


@FAST
@given(st.floats(0, 1), st.floats(0, 1))
def test_symmetric_kl_equals_rel_entr_and_seed_formulas(pf, pm):
    ref = 0.5 * (rel_entr([1 - pf, pf], [1 - pm, pm]).sum() + rel_entr([1 - pm, pm], [1 - pf, pf]).sum())
    got = M.symmetric_kl(pf, pm)
    if math.isinf(ref):
        assert got == math.inf
    else:
        assert got == pytest.approx(ref, abs=1e-12)
    assert got == M.symmetric_kl(pm, pf) or (math.isnan(got) and math.isnan(M.symmetric_kl(pm, pf)))
    if 1e-12 < min(pf, pm) and max(pf, pm) < 1 - 1e-12:  # formulas (4a)-(4c) written out (no overflow)
        kl_fm = (1 - pf) * math.log((1 - pf) / (1 - pm)) + pf * math.log(pf / pm)
        kl_mf = (1 - pm) * math.log((1 - pm) / (1 - pf)) + pm * math.log(pm / pf)
        assert got == pytest.approx(0.5 * (kl_fm + kl_mf), rel=1e-9, abs=1e-12)


def test_symmetric_kl_edge_cases():
    assert M.symmetric_kl(0.3, 0.2) == pytest.approx(0.0269, abs=1e-4)  # seed: "≈ 0.02"
    assert M.symmetric_kl(0.0, 0.0) == 0.0 and M.symmetric_kl(1.0, 1.0) == 0.0
    assert M.symmetric_kl(0.0, 0.5) == math.inf and M.symmetric_kl(1.0, 0.5) == math.inf
    with pytest.raises(ValueError, match="p_m must be a rate in"):
        M.symmetric_kl(0.3, 1.5)


def test_harm_rate_and_label_shares():
    top1 = ["criminal", "person", "animal", "person", "untrustworthy"]
    assert M.harm_rate(top1, {"criminal", "animal", "untrustworthy"}) == pytest.approx(0.6)
    assert M.label_shares(top1, {"C": ["criminal"], "NH": ["animal"]}) == {"C": 0.2, "NH": 0.2}
    with pytest.raises(ValueError, match="harmful must be a collection"):
        M.harm_rate(top1, "criminal")
    with pytest.raises(ValueError, match="top1_labels is empty"):
        M.harm_rate([], {"criminal"})


# --- CBS (seed 001) -----------------------------------------------------------------------------------------

def _cbs_loop(a, b):
    return sum(bj > ai for ai in a for bj in b) / (len(a) * len(b))


logps = st.lists(st.sampled_from([-3.0, -2.0, -1.0, -0.5]) | st.floats(-50, 0), min_size=1, max_size=25)


@FAST
@given(logps, logps)
def test_cbs_equals_double_loop_with_ties(a, b):
    assert M.cultural_bias_score(a, b) == pytest.approx(_cbs_loop(a, b))


def test_cbs_bounds_ties_and_errors():
    assert M.cultural_bias_score([-1.0, -1.0], [-1.0]) == 0.0  # ties count 0
    assert M.cultural_bias_score([-5.0], [-1.0, -2.0]) == 1.0
    assert M.cultural_bias_score([-np.inf], [-1.0]) == 1.0
    with pytest.raises(ValueError, match="logp_western contains positive values"):
        M.cultural_bias_score([-1.0], [0.5])
    with pytest.raises(ValueError, match="logp_local must have at least 1"):
        M.cultural_bias_score([], [-1.0])
    with pytest.raises(ValueError, match="logp_local contains NaN"):
        M.cultural_bias_score([np.nan], [-1.0])


# --- expected score (seed 004) --------------------------------------------------------------------------------

def test_expected_score_uniform_is_three_and_renormalises():
    assert M.expected_score({str(s): math.log(0.01) for s in range(1, 6)}) == pytest.approx(3.0)
    assert M.expected_score({1: 0.0, 2: -np.inf, 3: -np.inf, 4: -np.inf, 5: -np.inf}) == 1.0
    p = np.array([0.05, 0.05, 0.1, 0.3, 0.2])  # sums to 0.7: renormalised
    lp = {str(s): math.log(v) for s, v in zip(range(1, 6), p)}
    assert M.expected_score(lp) == pytest.approx(np.dot(range(1, 6), p / p.sum()))
    assert M.argmax_score(lp) == 4


@FAST
@given(st.lists(st.floats(-30, 0), min_size=5, max_size=5))
def test_expected_score_bounds(vals):
    v = M.expected_score(dict(zip("12345", vals)))
    assert 1.0 <= v <= 5.0


def test_expected_score_errors():
    with pytest.raises(ValueError, match='exactly the keys "1".."5"; missing'):
        M.expected_score({"1": -1.0, "2": -1.0})
    with pytest.raises(ValueError, match="probability 0 to every score"):
        M.expected_score({s: -np.inf for s in "12345"})
    with pytest.raises(ValueError, match="must be a mapping"):
        M.expected_score([-1.0] * 5)


def test_metric_input_error_is_a_cultura_error():
    from cultura.errors import CulturaError

    with pytest.raises(CulturaError):
        M.lbkl([["a"]], ["a"], k=0)
