"""Text→image association bias and latent-space probes (seed 000 §3.2 and App. N–P; seed 002 §3; spec §2–3)."""
from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._common import MetricInputError, as_1d, as_2d, check_k, check_level
from ._numpy_stats import silhouette_samples_cosine
from .resampling import BootstrapCI, _check_method, scipy_bootstrap_interval
from ...lazy import lazy

stats = lazy("scipy.stats")  # imported on first use (start-up)
skm = lazy("sklearn.metrics")  # imported on first use (start-up)

__all__ = [
    "win_rates",
    "win_rates_ci",
    "self_preference",
    "random_baseline",
    "similarity_drift",
    "PairedChi2",
    "paired_chi2",
    "silhouette_by_label",
    "c_asc",
]


def _win_matrix(s: np.ndarray) -> np.ndarray:
    """Per trial, 1/(number tied) for every candidate sharing the maximum, else 0."""
    best = s == s.max(axis=1, keepdims=True)
    return best / best.sum(axis=1, keepdims=True)


def win_rates(similarities: Any) -> np.ndarray:
    """Top-1 win rate of each candidate column over trials, ties split so the rates sum to 1.

    ``M_k = (1/N) sum_i [S_k,i = max_j S_j,i] / #{j : S_j,i = max_j S_j,i}`` for a trials × candidates matrix
    ``S`` (e.g. columns cr, lb, ti for the three-candidate trial, or the six categories of RQ3).
    Seed 000 §3.2 eq. (3) and App. P.1; spec §2 (ties).

    >>> win_rates([[0.9, 0.1, 0.2], [0.3, 0.3, 0.1]]).tolist()
    [0.75, 0.25, 0.0]
    """
    s = as_2d(similarities, "similarities", min_cols=2)
    return _win_matrix(s).mean(axis=0)


def win_rates_ci(
    similarities: Any, *, n_boot: int = 1000, seed: int = 0, level: float = 0.95, method: str = "percentile"
) -> BootstrapCI:
    """`win_rates` with a bootstrap confidence interval per candidate, resampling trials with replacement.

    Returns ``BootstrapCI(estimate, low, high)`` of 1-D arrays (one entry per candidate column), computed with
    ``scipy.stats.bootstrap`` over the per-trial win vectors. Spec §8 (intervals for headline rates), §2.

    >>> ci = win_rates_ci([[1, 0], [0, 1], [1, 0], [1, 0]], n_boot=200)
    >>> ci.estimate.tolist(), bool(np.all(ci.low <= ci.estimate)), bool(np.all(ci.estimate <= ci.high))
    ([0.75, 0.25], True, True)
    """
    s = as_2d(similarities, "similarities", min_rows=2, min_cols=2)
    n_boot = check_k(n_boot, "n_boot")
    level = check_level(level)
    _check_method(method)
    wins = _win_matrix(s)
    est = wins.mean(axis=0)
    if np.all(wins == wins[0]):
        return BootstrapCI(est, est.copy(), est.copy())

    def mean_rows(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        return np.moveaxis(wins[idx].mean(axis=-2), -1, 0)  # (candidates, ...) for vectorised calls

    # scipy.stats.bootstrap(paired) resamples the trial indices; its percentile and basic intervals are
    # computed in numpy the same way (no scipy import for a routine run), BCa by scipy itself
    low, high = scipy_bootstrap_interval(np.arange(len(wins)), mean_rows, n_boot=n_boot, seed=seed, level=level,
                                         method=method)
    return BootstrapCI(est, np.asarray(low), np.asarray(high))


def self_preference(similarities: Any, *, correct: int = 0, biased: int = 1) -> float:
    """Self-preference score ``SP = M_lb / M_cr`` from the win rates of two candidate columns.

    ``M_cr`` and ``M_lb`` are the `win_rates` of columns ``correct`` and ``biased``. SP = 1 means the
    language-biased candidate wins as often as the correct one; SP is ``inf`` when ``M_cr = 0`` (total
    retrieval failure — the report flags it). Seed 000 §3.2 eq. (4); spec §2.

    >>> self_preference([[0.9, 0.1, 0.2], [0.1, 0.9, 0.2], [0.8, 0.1, 0.2]])
    0.5
    >>> self_preference([[0.1, 0.9, 0.2]])
    inf
    """
    s = as_2d(similarities, "similarities", min_cols=2)
    for name, col in (("correct", correct), ("biased", biased)):
        if isinstance(col, bool) or not isinstance(col, (int, np.integer)) or not -s.shape[1] <= col < s.shape[1]:
            raise MetricInputError(f"{name} must be a column index of similarities (0..{s.shape[1] - 1}), got {col!r}.")
    if correct % s.shape[1] == biased % s.shape[1]:
        raise MetricInputError("correct and biased must name different candidate columns.")
    m = win_rates(s)
    if m[correct] == 0:
        return float("inf")
    return float(m[biased] / m[correct])


def random_baseline(n_trials: int, n_candidates: int, *, seed: int = 0, rounds: int = 10) -> dict[str, Any]:
    """Win rates and SP when the winner is picked uniformly at random (the SP ≈ 1 sanity baseline).

    Each round draws an ``n_trials × n_candidates`` matrix of i.i.d. uniform similarities (so every candidate
    is equally likely to win) and computes `win_rates` and `self_preference` (columns 0 = correct,
    1 = biased). Returns ``{"win_rates": mean over rounds, "self_preference": mean SP, "sp_rounds": [...],
    "sp_min", "sp_max", "rounds", "n_trials", "n_candidates", "seed"}``. Seed 000 §4 reports 0.98–1.02 over
    10 rounds; spec §2.

    >>> out = random_baseline(3000, 3, seed=0)
    >>> 0.9 < out["self_preference"] < 1.1, len(out["win_rates"])
    (True, 3)
    """
    n_trials = check_k(n_trials, "n_trials")
    n_candidates = check_k(n_candidates, "n_candidates")
    rounds = check_k(rounds, "rounds")
    if n_candidates < 2:
        raise MetricInputError(f"n_candidates must be >= 2 (correct and biased), got {n_candidates}.")
    rng = np.random.default_rng(seed)
    rates, sps = [], []
    for _ in range(rounds):
        s = rng.random((n_trials, n_candidates))
        m = win_rates(s)
        rates.append(m)
        sps.append(float("inf") if m[0] == 0 else float(m[1] / m[0]))
    return {
        "win_rates": np.mean(rates, axis=0),
        "self_preference": float(np.mean(sps)),
        "sp_rounds": sps,
        "sp_min": float(min(sps)),
        "sp_max": float(max(sps)),
        "rounds": rounds,
        "n_trials": n_trials,
        "n_candidates": n_candidates,
        "seed": seed,
    }


def similarity_drift(sim_with_descriptor: Any, sim_without: Any) -> np.ndarray:
    """Similarity drift ``Δsim(I) = S(q_C+CD, I) − S(q_C, I)`` elementwise.

    Positive values mean the cultural descriptor pulled the query towards the image. The report shows the
    mean ×100 per category, language and concept. Seed 000 §3.2 (RQ3) and App. S; spec §2.

    >>> similarity_drift([0.30, 0.25], [0.28, 0.27]).round(2).tolist()
    [0.02, -0.02]
    """
    a = np.asarray(sim_with_descriptor, dtype=float)
    b = np.asarray(sim_without, dtype=float)
    if a.shape != b.shape:
        raise MetricInputError(
            f"sim_with_descriptor and sim_without must have the same shape, got {a.shape} and {b.shape}."
        )
    if a.size == 0:
        raise MetricInputError("sim_with_descriptor is empty.")
    for name, arr in (("sim_with_descriptor", a), ("sim_without", b)):
        if not np.all(np.isfinite(arr)):
            raise MetricInputError(f"{name} contains NaN or infinite values.")
    return a - b


@dataclass(frozen=True)
class PairedChi2:
    """Result of `paired_chi2`: χ² statistic (1 dof), p-value and win-rate difference ``(O_A − O_B)/n``."""

    statistic: float
    p: float
    diff: float
    wins_a: int
    wins_b: int
    n_trials: int


def _count(x: Any, name: str) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 0:
        raise MetricInputError(f"{name} must be a non-negative integer count, got {x!r}.")
    return int(x)


def paired_chi2(wins_a: int, wins_b: int, n_trials: int) -> PairedChi2:
    """χ² goodness-of-fit test that two competing categories win equally often (1 degree of freedom).

    Expected ``E_A = E_B = (O_A + O_B)/2``; the other categories are fixed at their observed counts, so they
    add nothing: ``χ² = sum_{A,B} (O − E)² / E`` (``scipy.stats.chisquare``). ``diff = (O_A − O_B)/n_trials``.
    Statistic and p are ``nan`` when ``O_A + O_B = 0`` (the test is undefined). Seed 000 App. P.1–P.3
    (``orlb`` vs ``or``, ``cdr`` vs ``lb``); spec §2.

    >>> r = paired_chi2(30, 10, 100)
    >>> r.statistic, round(r.p, 5), r.diff
    (10.0, 0.00157, 0.2)
    """
    a, b, n = _count(wins_a, "wins_a"), _count(wins_b, "wins_b"), _count(n_trials, "n_trials")
    if n < 1:
        raise MetricInputError("n_trials must be >= 1.")
    if a + b > n:
        raise MetricInputError(f"wins_a + wins_b ({a + b}) cannot exceed n_trials ({n}).")
    if a + b == 0:
        return PairedChi2(float("nan"), float("nan"), 0.0, a, b, n)
    e = (a + b) / 2.0
    res = stats.chisquare([a, b], f_exp=[e, e])
    return PairedChi2(float(res.statistic), float(res.pvalue), (a - b) / n, a, b, n)


def silhouette_by_label(embeddings: Any, labels: Any, *, metric: str = "cosine") -> dict[Hashable, float]:
    """Mean silhouette coefficient of each label's samples, with the label as the cluster assignment.

    ``s(i) = (b(i) − a(i)) / max(a(i), b(i))`` from ``sklearn.metrics.silhouette_samples`` (cosine distance by
    default, matching the cosine convention); the result maps label → mean ``s`` over its samples. Higher means
    the label (language/country) forms its own cluster. Seed 000 App. N (text/image silhouette vs SP); spec §2.

    >>> emb = [[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]]
    >>> {k: round(v, 2) for k, v in silhouette_by_label(emb, ["en", "en", "th", "th"]).items()}
    {'en': 0.99, 'th': 0.99}
    """
    x = as_2d(embeddings, "embeddings", min_rows=2)
    lab = np.asarray(labels)
    if lab.ndim != 1 or lab.shape[0] != x.shape[0]:
        raise MetricInputError(
            f"labels must be 1-D with one label per embedding row ({x.shape[0]}), got shape {lab.shape}."
        )
    uniq = list(dict.fromkeys(lab.tolist()))
    if not 2 <= len(uniq) <= x.shape[0] - 1:
        raise MetricInputError(f"labels must have between 2 and n_samples - 1 distinct values, got {len(uniq)}.")
    # cosine (the default) in numpy, equal to sklearn's; any other distance by sklearn
    s = silhouette_samples_cosine(x, lab) if metric == "cosine" else skm.silhouette_samples(x, lab, metric=metric)
    return {u: float(s[lab == u].mean()) for u in uniq}


def c_asc(caption: Any, images: Any, in_group: Any) -> float:
    """Caption Association Score (an SC-WEAT effect size) of a caption towards an image group G.

    ``C-ASC(c, G) = (mean_{g in G} d(c, g) − mean_{g not in G} d(c, g)) / sd_{u in D} d(c, u)`` with d the
    cosine similarity and sd the sample standard deviation (ddof = 1) over all images D of the concept.
    Bands: small < 0.2, medium ≈ 0.5, large ≥ 0.8. Swapping G and its complement flips the sign. ``nan`` when
    all similarities are equal (sd = 0). Seed 002 §3 (C-ASC equation); spec §3.

    >>> round(c_asc([1, 0], [[1, 0], [1, 1], [0, 1], [1, -1]], [True, True, False, False]), 3)
    1.175
    """
    c = as_1d(caption, "caption")
    x = as_2d(images, "images", min_rows=2)
    if x.shape[1] != c.shape[0]:
        raise MetricInputError(f"caption has dimension {c.shape[0]} but images have {x.shape[1]}.")
    g = np.asarray(in_group)
    if g.dtype != bool or g.shape != (x.shape[0],):
        raise MetricInputError(f"in_group must be a boolean mask with one entry per image ({x.shape[0]}).")
    if g.all() or not g.any():
        raise MetricInputError("in_group must mark at least one image in G and one outside it.")
    cn, xn = np.linalg.norm(c), np.linalg.norm(x, axis=1)
    if cn == 0 or np.any(xn == 0):
        raise MetricInputError("caption and images must be non-zero vectors (cosine is undefined for zero).")
    d = (x @ c) / (xn * cn)
    sd = d.std(ddof=1)
    if sd == 0:
        return float("nan")
    return float((d[g].mean() - d[~g].mean()) / sd)
