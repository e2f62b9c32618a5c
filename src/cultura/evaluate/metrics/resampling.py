"""Bootstrap confidence intervals for headline rates (spec §8): `scipy.stats.bootstrap`'s intervals, the
percentile and basic ones computed in numpy the way scipy computes them (`._numpy_stats`), BCa by scipy."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from ._common import MetricInputError, as_1d, check_k, check_level
from ._numpy_stats import bootstrap_interval
from ...lazy import lazy

stats = lazy("scipy.stats")  # imported on first use (start-up)

__all__ = ["BootstrapCI", "bootstrap_ci"]

_METHODS = ("percentile", "basic", "BCa")


class BootstrapCI(NamedTuple):
    """A point estimate with its bootstrap interval (arrays for vector-valued statistics)."""

    estimate: Any
    low: Any
    high: Any


def _check_method(method: str) -> str:
    if method not in _METHODS:
        raise MetricInputError(f"method must be one of {', '.join(_METHODS)}, got {method!r}.")
    return method


def bootstrap_ci(
    values: Any,
    statistic: Callable[..., Any] = np.mean,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    method: str = "percentile",
) -> BootstrapCI:
    """Bootstrap confidence interval of ``statistic(values)`` (resampling values with replacement).

    Returns ``BootstrapCI(estimate, low, high)``: ``estimate = statistic(values)`` and the ``level`` interval
    from ``scipy.stats.bootstrap`` with ``n_boot`` resamples drawn from ``numpy.random.default_rng(seed)``
    (``method`` = "percentile", "basic" or "BCa"). A statistic that accepts ``axis`` is called vectorised.
    Spec §8 ("bootstrap confidence intervals for every headline rate"); seed 000 App. P reports rates per
    country, which this puts intervals on.

    >>> ci = bootstrap_ci([0, 1, 1, 1, 0, 1, 1, 1], n_boot=200, seed=0)
    >>> ci.estimate, bool(ci.low <= ci.estimate <= ci.high)
    (0.75, True)
    """
    x = as_1d(values, "values", min_len=2)
    n_boot = check_k(n_boot, "n_boot")
    level = check_level(level)
    _check_method(method)
    if not callable(statistic):
        raise MetricInputError("statistic must be callable, e.g. numpy.mean.")
    estimate = statistic(x)
    if np.all(x == x[0]):  # every resample is identical: the interval is the point
        return BootstrapCI(estimate, estimate, estimate)
    interval = scipy_bootstrap_interval(x, statistic, n_boot=n_boot, seed=seed, level=level, method=method)
    est = float(estimate) if np.ndim(estimate) == 0 else np.asarray(estimate)
    low, high = interval
    if np.ndim(low) == 0:
        low, high = float(low), float(high)
    return BootstrapCI(est, low, high)


def scipy_bootstrap_interval(sample: np.ndarray, statistic: Callable[..., Any], *, n_boot: int, seed: int,
                             level: float, method: str):
    """``scipy.stats.bootstrap((sample,), statistic, ...).confidence_interval`` with ``n_boot`` resamples drawn
    from ``numpy.random.default_rng(seed)``: computed in numpy where it can be (no scipy import on the way,
    :func:`bootstrap_interval`), by scipy itself otherwise (BCa, a statistic without ``axis``)."""
    interval = bootstrap_interval(sample, statistic, n_resamples=n_boot, rng=np.random.default_rng(seed),
                                  level=level, method=method)
    if interval is None:
        interval = stats.bootstrap((sample,), statistic, n_resamples=n_boot, confidence_level=level, method=method,
                                   rng=np.random.default_rng(seed)).confidence_interval
    return interval
