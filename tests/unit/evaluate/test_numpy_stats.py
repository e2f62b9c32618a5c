"""The statistics an evaluation computes in numpy (so that a routine run imports neither scipy nor scikit-learn)
are the libraries' own numbers: the bootstrap intervals bit for bit (same draws, same quantile rule), the
silhouette, Pearson's r, its p-value and Fisher interval and the PCA projection to floating-point rounding, on
many random inputs and on real photographs' pixels. The public metrics that use them give what the library
path gives."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special
import scipy.stats
from sklearn.decomposition import PCA
from sklearn.metrics import silhouette_samples

from cultura.evaluate.metrics import bootstrap_ci, silhouette_by_label, win_rates_ci
from cultura.evaluate.metrics._numpy_stats import (betainc, bootstrap_interval, pca_2d, pearson,
                                                   silhouette_samples_cosine)


@pytest.fixture(scope="module")
def photo_rows():
    """Rows of real photographs' pixels (scikit-image samples), 48 features each: embeddings with the
    correlations of natural images rather than of white noise."""
    from skimage import data, transform

    rows, labels = [], []
    for name in ("astronaut", "coffee", "chelsea", "rocket"):
        img = transform.resize(getattr(data, name)(), (48, 48), anti_aliasing=True)
        for i in range(0, 48, 4):
            rows.append(img[i:i + 4].mean(axis=(0, 2)))  # a band of the photo: 48 values
            labels.append(name)
    return np.asarray(rows), np.asarray(labels)


@pytest.mark.parametrize("method", ["percentile", "basic"])
def test_bootstrap_intervals_equal_scipys_bit_for_bit(method):
    rng = np.random.default_rng(1)
    for trial in range(40):
        n, resamples = int(rng.integers(2, 60)), int(rng.integers(1, 400))
        x = rng.random(n) if trial % 2 else rng.integers(0, 2, n).astype(float)
        if trial % 5 == 0:
            x = rng.random((3, n))  # a vector-valued statistic
        level = (0.5, 0.9, 0.95, 0.99)[trial % 4]
        ours = bootstrap_interval(x, np.mean, n_resamples=resamples, rng=np.random.default_rng(trial), level=level,
                                  method=method)
        theirs = scipy.stats.bootstrap((x,), np.mean, n_resamples=resamples, confidence_level=level, method=method,
                                       rng=np.random.default_rng(trial), axis=-1).confidence_interval
        assert np.array_equal(ours[0], theirs.low) and np.array_equal(ours[1], theirs.high), (trial, ours, theirs)


def test_what_numpy_does_not_compute_is_left_to_scipy():
    x = np.arange(10.0)
    rng = np.random.default_rng(0)
    assert bootstrap_interval(x, np.mean, n_resamples=50, rng=rng, level=0.95, method="BCa") is None
    assert bootstrap_interval(x, lambda v: float(np.mean(v)), n_resamples=50, rng=rng, level=0.95,
                              method="percentile") is None  # no ``axis``: scipy loops over the resamples
    ci = bootstrap_ci(x, np.median, n_boot=200, seed=3, method="BCa")
    ref = scipy.stats.bootstrap((x,), np.median, n_resamples=200, method="BCa",
                                rng=np.random.default_rng(3)).confidence_interval
    assert (ci.low, ci.high) == (float(ref.low), float(ref.high))


def test_public_intervals_are_scipys():
    rng = np.random.default_rng(7)
    values = rng.integers(0, 2, 40).astype(float)
    ci = bootstrap_ci(values, np.mean, n_boot=300, seed=5)
    ref = scipy.stats.bootstrap((values,), np.mean, n_resamples=300, method="percentile",
                                rng=np.random.default_rng(5)).confidence_interval
    assert (ci.low, ci.high) == (float(ref.low), float(ref.high))

    sims = rng.random((30, 3))
    wins = (sims == sims.max(axis=1, keepdims=True)).astype(float)
    ci = win_rates_ci(sims, n_boot=250, seed=2)

    def mean_rows(idx, axis=-1):
        return np.moveaxis(wins[np.asarray(idx)].mean(axis=-2), -1, 0)

    ref = scipy.stats.bootstrap((np.arange(30),), mean_rows, n_resamples=250, method="percentile",
                                rng=np.random.default_rng(2)).confidence_interval
    assert np.array_equal(ci.low, ref.low) and np.array_equal(ci.high, ref.high)


def test_cosine_silhouette_equals_sklearns(photo_rows):
    x, labels = photo_rows
    assert np.allclose(silhouette_samples_cosine(x, labels), silhouette_samples(x, labels, metric="cosine"),
                       rtol=0, atol=1e-12)
    rng = np.random.default_rng(0)
    for trial in range(20):
        n, d = int(rng.integers(3, 300)), int(rng.integers(2, 64))
        k = int(rng.integers(2, min(n, 8)))
        x = rng.normal(size=(n, d))
        lab = rng.integers(0, k, n)
        lab[:k] = np.arange(k)
        lab[k] = 0 if n > k else lab[k - 1]
        if trial % 3 == 0:
            x[1] = 0.0  # a zero vector: sklearn's normalize leaves it at zero
        ours = silhouette_samples_cosine(x, lab, chunk=int(rng.integers(1, 400)))
        assert np.allclose(ours, silhouette_samples(x, lab, metric="cosine"), rtol=0, atol=1e-12), trial
    by_label = silhouette_by_label(photo_rows[0], photo_rows[1])
    ref = silhouette_samples(photo_rows[0], photo_rows[1], metric="cosine")
    assert by_label == pytest.approx({u: ref[photo_rows[1] == u].mean() for u in set(photo_rows[1])}, abs=1e-12)


def test_pearson_is_scipys(photo_rows):
    rng = np.random.default_rng(0)
    x = photo_rows[0]
    cases = [(x[i], x[j]) for i, j in [(0, 1), (0, 30), (5, 40), (12, 13)]]
    for _ in range(100):
        n = int(rng.integers(2, 40))
        a = rng.normal(size=n)
        cases.append((a, rng.choice([0.0, 0.3, 3.0]) * a + rng.normal(size=n)))
    for a, b in cases:
        r, p, low, high = pearson(a, b)
        ref = scipy.stats.pearsonr(a, b)
        assert r == pytest.approx(float(ref.statistic), rel=0, abs=1e-14)
        assert p == pytest.approx(float(ref.pvalue), rel=1e-11, abs=1e-300)
        if len(a) > 3:
            ci = ref.confidence_interval(confidence_level=0.95)
            assert (low, high) == pytest.approx((float(ci.low), float(ci.high)), rel=0, abs=1e-14)


def test_incomplete_beta_is_scipys():
    rng = np.random.default_rng(3)
    for _ in range(500):
        a = float(rng.choice([0.5, 1.0, 1.5, 2.0, 3.5, 10.0, 50.0, 200.0]))
        b = float(rng.choice([0.5, a, 1.0, 7.0]))
        x = float(rng.random()) ** float(rng.choice([1, 3, 10]))
        assert betainc(a, b, x) == pytest.approx(float(scipy.special.betainc(a, b, x)), rel=1e-11, abs=1e-300)
    assert betainc(2.0, 3.0, 0.0) == 0.0 and betainc(2.0, 3.0, 1.0) == 1.0


def test_pca_projection_is_sklearns_exact_solver(photo_rows):
    """Float64 to rounding; float32 (what the suites pass) to float32's precision. The inputs have distinct
    leading variances (as embeddings do): the two axes are then defined, up to the sign sklearn fixes."""
    rng = np.random.default_rng(0)
    inputs = [photo_rows[0]]
    for _ in range(12):
        n, d = int(rng.integers(3, 80)), int(rng.integers(2, 130))
        inputs.append(rng.normal(size=(n, d)) * 0.7 ** np.arange(d))
    for x in inputs:
        for dtype, tol in ((np.float64, 1e-9), (np.float32, 1e-3)):
            ours = pca_2d(x.astype(dtype))
            ref = PCA(n_components=2, svd_solver="full").fit_transform(x.astype(dtype))
            assert ours.dtype == ref.dtype == dtype
            assert np.allclose(ours, ref, rtol=0, atol=tol * np.abs(ref).max()), (x.shape, dtype)
