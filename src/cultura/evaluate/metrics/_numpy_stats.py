"""The few statistics an everyday evaluation run needs, in numpy alone (private).

Importing scipy.stats, scikit-learn and pandas costs seconds of CPU — more than a whole evaluation whose
vectors are cached — so the routine statistics of a run are computed here: the percentile and basic bootstrap
interval of ``scipy.stats.bootstrap``, the cosine silhouette of ``sklearn.metrics.silhouette_samples``, the
2-D projection of ``sklearn.decomposition.PCA`` and Pearson's r with its p-value and Fisher-z interval of
``scipy.stats.pearsonr``. Each is the same computation as the library's (same resamples from the same
generator, same quantile rule, same sign convention), and ``tests/unit/evaluate/test_numpy_stats.py`` compares
every one with the library on many inputs; anything outside that common case (BCa intervals, other distances,
NaN bootstrap distributions) is left to the library itself.
"""
from __future__ import annotations

import inspect
import math
from statistics import NormalDist
from typing import Any, Callable

import numpy as np

__all__ = ["bootstrap_interval", "quantile_linear", "silhouette_samples_cosine", "pca_2d", "pearson", "betainc"]


def quantile_linear(values: np.ndarray, p: float) -> np.ndarray:
    """The ``p`` quantile along the last axis by Hyndman & Fan's rule 7, evaluated as ``scipy.stats.quantile``
    evaluates it (bit for bit: the bootstrap intervals below equal scipy's)."""
    y = np.sort(values, axis=-1)
    n = y.shape[-1]
    p = np.float64(p)
    jg = p * n + (1 - p)
    jp1 = jg // 1
    j = jp1 - 1
    g = jg % 1
    if j < 0:
        g = 0.0
    j, jp1 = min(max(j, 0.0), n - 1), min(max(jp1, 0.0), n - 1)
    return (1 - g) * y[..., int(j)] + g * y[..., int(jp1)]


def vectorised(statistic: Callable[..., Any]) -> bool:
    """Whether ``statistic`` takes ``axis`` (scipy's own test for calling it on all resamples at once)."""
    try:
        return "axis" in inspect.signature(statistic).parameters
    except (TypeError, ValueError):
        return False


def bootstrap_interval(sample: np.ndarray, statistic: Callable[..., Any], *, n_resamples: int,
                       rng: np.random.Generator, level: float, method: str):
    """``scipy.stats.bootstrap((sample,), statistic, axis=-1, ...).confidence_interval`` for the percentile and
    basic methods, or None where scipy must compute it (BCa, a statistic without ``axis``, a bootstrap
    distribution with NaN).

    The same draws in the same order (``rng.integers(0, n, (n_resamples, n))``, one batch), the statistic
    over the last axis, and the rule-7 quantiles at ``(1 - level) / 2`` and ``1 - (1 - level) / 2``.
    """
    if method not in ("percentile", "basic") or not vectorised(statistic):
        return None
    n = sample.shape[-1]
    theta = np.asarray(statistic(sample[..., rng.integers(0, n, (n_resamples, n))], axis=-1))
    if np.isnan(theta).any():
        return None
    alpha = (1 - level) / 2
    low, high = quantile_linear(theta, alpha), quantile_linear(theta, 1 - alpha)
    if method == "basic":
        estimate = statistic(sample, axis=-1)
        low, high = 2 * estimate - high, 2 * estimate - low
    return low, high


def silhouette_samples_cosine(x: np.ndarray, labels: np.ndarray, *, chunk: int = 2048) -> np.ndarray:
    """``sklearn.metrics.silhouette_samples(x, labels, metric="cosine")``: per sample ``(b - a) / max(a, b)``
    with ``a`` the mean cosine distance to the other members of its label and ``b`` the smallest mean distance
    to another label's members; 0 for a label with one member. Rows are taken ``chunk`` at a time (memory)."""
    x = np.asarray(x, dtype=float)
    _, codes, freqs = np.unique(labels, return_inverse=True, return_counts=True)
    norms = np.sqrt(np.einsum("ij,ij->i", x, x))
    norms[norms == 0] = 1.0  # sklearn's normalize leaves a zero vector at zero
    xn = x / norms[:, None]
    onehot = np.zeros((len(x), len(freqs)))
    onehot[np.arange(len(x)), codes] = 1.0
    intra = np.empty(len(x))
    inter = np.empty(len(x))
    for start in range(0, len(x), chunk):
        rows = slice(start, start + chunk)
        dist = np.clip(1.0 - xn[rows] @ xn.T, 0.0, 2.0)
        index = np.arange(dist.shape[0])
        dist[index, start + index] = 0.0  # a sample is at distance 0 from itself (a zero vector too, as in sklearn)
        sums = dist @ onehot
        own = codes[rows]
        intra[rows] = sums[index, own]
        sums[index, own] = np.inf
        inter[rows] = (sums / freqs).min(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        intra /= np.maximum(freqs - 1, 0)[codes]
        s = (inter - intra) / np.maximum(intra, inter)
    return np.nan_to_num(s)  # a one-member label: 0/0, which sklearn also sets to 0


def pca_2d(x: np.ndarray) -> np.ndarray:
    """``sklearn.decomposition.PCA(n_components=2, svd_solver="full").fit_transform(x)``: the centred rows'
    coordinates on the first two right singular vectors, each signed so that its largest entry is positive
    (sklearn's ``svd_flip(u_based_decision=False)``), in the input's float type. Where sklearn's "auto" would
    pick its randomized solver (wide inputs), this is the exact answer that solver approximates."""
    centred = x - x.mean(axis=0)
    u, s, vt = np.linalg.svd(centred, full_matrices=False)
    signs = np.sign(vt[np.arange(vt.shape[0]), np.abs(vt).argmax(axis=1)])
    return (u[:, :2] * signs[:2]) * s[:2]


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)`` (``scipy.special.betainc``), by its continued
    fraction (modified Lentz), taken on the side where it converges fast."""
    if not 0.0 <= x <= 1.0:
        return math.nan
    if x == 0.0 or x == 1.0:
        return x
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b
    return front * _beta_fraction(a, b, x) / a


def _beta_fraction(a: float, b: float, x: float) -> float:
    tiny, eps = 1e-300, 1e-16
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def pearson(x: Any, y: Any, *, level: float = 0.95) -> tuple[float, float, float, float]:
    """``scipy.stats.pearsonr(x, y)`` for two non-constant samples: ``(r, two-sided p, low, high)`` with the
    Fisher-z interval at ``level`` (NaN bounds for fewer than 4 points, where it is undefined). r is computed
    on rescaled deviations as scipy does; the p-value is ``2 I_{(1-|r|)/2}(n/2 - 1, n/2 - 1)``, the two tails of
    the Beta distribution of r under independence that scipy uses."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(x)
    xm, ym = x - x.mean(), y - y.mean()
    xmax, ymax = np.abs(xm).max(), np.abs(ym).max()
    normx, normy = xmax * np.linalg.norm(xm / xmax), ymax * np.linalg.norm(ym / ymax)
    r = float(np.clip(np.dot(xm / normx, ym / normy), -1.0, 1.0))
    if n == 2:
        return float(round(r)), 1.0, math.nan, math.nan
    a = n / 2.0 - 1.0
    p = min(1.0, 2.0 * betainc(a, a, (1.0 - abs(r)) / 2.0))
    if n < 4:
        return r, p, math.nan, math.nan
    z = NormalDist().inv_cdf(0.5 + level / 2)
    zr, se = math.atanh(r), math.sqrt(1.0 / (n - 3))
    return r, p, math.tanh(zr - z * se), math.tanh(zr + z * se)
