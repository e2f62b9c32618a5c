"""cultura.annotate.agreement against sklearn, krippendorff and statsmodels; missing data; edge cases."""
from __future__ import annotations

import doctest
import math

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

from cultura.annotate import agreement as AG

FAST = settings(max_examples=40, deadline=None)


def _ratings(rng, n_raters, n_items, n_cat, p_missing=0.0, agree=0.6):
    truth = rng.integers(1, n_cat + 1, n_items)
    m = np.where(rng.random((n_raters, n_items)) < agree, truth, rng.integers(1, n_cat + 1, (n_raters, n_items)))
    m = m.astype(float)
    m[rng.random(m.shape) < p_missing] = np.nan
    return m


def test_docstring_examples_run():
    res = doctest.testmod(AG)
    assert res.attempted > 0 and res.failed == 0


@FAST
@given(st.integers(0, 10_000), st.sampled_from([None, "linear", "quadratic"]))
def test_cohen_kappa_equals_sklearn(seed, weights):
    rng = np.random.default_rng(seed)
    m = _ratings(rng, 2, 30, 5)
    ours = AG.cohen_kappa(m[0], m[1], weights=weights)
    ref = cohen_kappa_score(m[0], m[1], weights=weights)
    assert ours == pytest.approx(ref, nan_ok=True)


def test_cohen_kappa_drops_missing_items_and_is_nan_when_undefined():
    a = [1, 2, np.nan, 3, 1]
    b = [1, 2, 3, np.nan, 2]
    assert AG.cohen_kappa(a, b) == pytest.approx(cohen_kappa_score([1, 2, 1], [1, 2, 2]))
    assert math.isnan(AG.cohen_kappa([1, 1, 1], [1, 1, 1]))
    with pytest.raises(ValueError, match="no item rated by both"):
        AG.cohen_kappa([1, np.nan], [np.nan, 2])
    with pytest.raises(ValueError, match="weights must be"):
        AG.cohen_kappa([1, 2], [1, 2], weights="cubic")


@FAST
@given(st.integers(0, 10_000), st.sampled_from(["nominal", "ordinal", "interval"]))
def test_krippendorff_alpha_equals_package_with_missing_data(seed, level):
    rng = np.random.default_rng(seed)
    m = _ratings(rng, 4, 25, 5, p_missing=0.3)
    if np.unique(m[~np.isnan(m)]).size < 2 or (np.sum(~np.isnan(m), axis=0) >= 2).sum() == 0:
        return
    ours = AG.krippendorff_alpha(m, level=level)
    ref = krippendorff.alpha(reliability_data=m, level_of_measurement=level)
    assert ours == pytest.approx(ref)


def test_krippendorff_known_value_and_undefined():
    # Krippendorff (2011) example: 4 coders × 12 units, nominal α = 0.743
    data = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, np.nan, np.nan, np.nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, np.nan, 3],
        [np.nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, np.nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, np.nan],
    ]
    assert AG.krippendorff_alpha(data, level="nominal") == pytest.approx(0.743, abs=1e-3)
    assert math.isnan(AG.krippendorff_alpha([[1, 1], [1, 1]]))
    with pytest.raises(ValueError, match="level must be one of"):
        AG.krippendorff_alpha(data, level="nominally")


def test_fleiss_kappa_equals_statsmodels_on_complete_data():
    rng = np.random.default_rng(1)
    m = _ratings(rng, 5, 40, 4)
    table, _ = aggregate_raters(m.T)
    assert AG.fleiss_kappa(m) == pytest.approx(sm_fleiss(table))
    assert AG.fleiss_kappa(m, method="randolph") == pytest.approx(sm_fleiss(table, method="randolph"))


def test_fleiss_kappa_with_varying_raters_uses_items_with_the_common_count():
    rng = np.random.default_rng(2)
    full = _ratings(rng, 5, 30, 3)
    m = np.full_like(full, np.nan)
    for j in range(30):  # 3 of 5 raters per item (different raters), item 0 has only 2
        who = rng.choice(5, size=2 if j == 0 else 3, replace=False)
        m[who, j] = full[who, j]
    used = np.array([m[:, j][~np.isnan(m[:, j])] for j in range(1, 30)])
    table, _ = aggregate_raters(used)
    assert AG.fleiss_kappa(m) == pytest.approx(sm_fleiss(table))


def test_percent_agreement_and_pairwise_kappas():
    m = np.array([[1, 2, 3, 1, np.nan], [1, 2, 1, 1, 2], [1, 1, 3, np.nan, np.nan]], dtype=float)
    # items: [1,1,1]=1, [2,2,1]=1/3, [3,1,3]=1/3, [1,1]=1, [2] skipped
    assert AG.percent_agreement(m) == pytest.approx((1 + 1 / 3 + 1 / 3 + 1) / 4)
    assert math.isnan(AG.percent_agreement([[1, np.nan], [np.nan, 2]]))
    rows = AG.pairwise_kappas(m, ["ann", "bob", "cat"])
    assert [r["pair"] for r in rows] == [("ann", "bob"), ("ann", "cat"), ("bob", "cat")]
    assert rows[0]["n_common"] == 4 and rows[0]["kappa"] == pytest.approx(cohen_kappa_score([1, 2, 3, 1], [1, 2, 1, 1]))
    assert rows[2]["n_common"] == 3
    sparse = AG.pairwise_kappas([[1, np.nan, 2], [1, 2, np.nan]], ["a", "b"])
    assert sparse[0]["n_common"] == 1 and math.isnan(sparse[0]["kappa"])
    with pytest.raises(ValueError, match="annotator_names has 2 names for 3"):
        AG.pairwise_kappas(m, ["a", "b"])


def test_loo_consensus_agreement_levels():
    m = np.array([[1, 2, 3, 4], [1, 2, 3, 3], [1, 2, 2, 4]], dtype=float)
    rows = AG.loo_consensus_agreement(m, level="nominal", annotator_names=["a", "b", "c"])
    # rater a vs majority of b, c: items 0, 1 (3 vs 3,2 tie skipped; 4 vs 3,4 tie skipped)
    assert rows[0]["rater"] == "a" and rows[0]["n_items"] == 2 and rows[0]["agreement"] == 1.0
    interval = AG.loo_consensus_agreement(m, level="interval")
    assert interval[0]["n_items"] == 4 and interval[0]["mae"] == pytest.approx(np.mean([0, 0, 0.5, 0.5]))
    assert -1 <= interval[0]["pearson"] <= 1
    ordinal = AG.loo_consensus_agreement(m, level="ordinal")
    assert set(ordinal[0]) == {"rater", "n_items", "agreement", "kappa"}


def test_to_matrix_long_format_and_errors():
    recs = [
        {"item": "i1", "rater": "ann", "label": "yes"},
        {"item": "i1", "rater": "bob", "label": "no"},
        {"item": "i2", "rater": "bob", "label": "yes"},
        {"item": "i3", "rater": "ann", "label": None},
    ]
    m, raters, items = AG.to_matrix(recs, "item", "rater", "label", categories=["no", "yes"])
    assert raters == ["ann", "bob"] and items == ["i1", "i2"]
    assert np.array_equal(m, [[1, np.nan], [0, 1]], equal_nan=True)
    with pytest.raises(ValueError, match="is not a number; pass categories"):
        AG.to_matrix(recs[:1], "item", "rater", "label")
    with pytest.raises(ValueError, match="rated item 'i1' twice"):
        AG.to_matrix(recs[:1] * 2, "item", "rater", "label", categories=["yes"])
    with pytest.raises(ValueError, match="has no key 'score'"):
        AG.to_matrix(recs, "item", "rater", "score")


def test_gold_accuracy_and_throughput():
    assert AG.gold_accuracy([1, 2, None, 4], [1, 3, 3, np.nan]) == 0.5
    assert math.isnan(AG.gold_accuracy({"a": 1}, {"b": 1}))
    t = AG.throughput([10.0, 20.0, 30.0, 60.0])
    assert t["items_per_hour"] == pytest.approx(4 * 3600 / 120)
    assert t["median_lead_time_s"] == 25.0
    with pytest.raises(ValueError, match="positive, finite seconds"):
        AG.throughput([10.0, -1.0])


def test_matrix_validation_message():
    with pytest.raises(ValueError, match="raters × items"):
        AG.krippendorff_alpha([1, 2, 3])
    with pytest.raises(ValueError, match="at least 2 raters"):
        AG.percent_agreement([[1, 2, 3]])


def test_undefined_kappa_says_why():
    from cultura.annotate.report import agreement_stats

    recs = [{"item_id": i, "annotator": a, "label": "keep", "value": None} for i in range(4) for a in "xy"]
    out = agreement_stats(recs, "nominal")
    assert out["percent_agreement"] == 1.0
    assert "same value" in out["fleiss_kappa_undefined"]
    assert all("do not vary" in p["why_undefined"] for p in out["pairwise_kappa"])
