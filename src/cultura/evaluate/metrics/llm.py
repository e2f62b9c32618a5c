"""LLM entity bias (seed 001 §4.1) and judge-score expectations (seed 004 §3; spec §5–6)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...models.judges import argmax_score, expected_score  # noqa: F401  (the judge's score: spec §6)
from ._common import MetricInputError, as_1d

__all__ = ["cultural_bias_score", "expected_score", "argmax_score"]


def _logprobs_1d(x: Any, name: str) -> np.ndarray:
    arr = as_1d(x, name, finite=False)
    if np.any(np.isnan(arr)) or np.any(arr == np.inf):
        raise MetricInputError(f"{name} contains NaN or +inf; pass log-probabilities (-inf allowed for p = 0).")
    if np.any(arr > 1e-9):
        raise MetricInputError(f"{name} contains positive values; pass log-probabilities (<= 0), not probabilities.")
    return arr


def cultural_bias_score(logp_local: Any, logp_western: Any) -> float:
    """Cultural Bias Score of one masked context: share of (local, Western) pairs where Western is likelier.

    ``CBS = (1/(|A||B|)) sum_i sum_j [P(b_j | c) > P(a_i | c)]`` with ``log P`` of each entity the sum of its
    token log-probabilities. Strict ``>``: ties count 0. Computed by sorting the Western scores and binary
    searching each local score, O((|A|+|B|) log |B|), equal to the double loop (tested). Average the result over
    contexts per entity type and language. Seed 001 §4.1 eq. (1); spec §5.

    >>> cultural_bias_score([-1.0, -3.0], [-2.0, -1.0])
    0.5
    """
    a = _logprobs_1d(logp_local, "logp_local")
    b = np.sort(_logprobs_1d(logp_western, "logp_western"))
    greater = len(b) - np.searchsorted(b, a, side="right")  # per a_i: #{b_j > a_i}
    return float(greater.sum() / (len(a) * len(b)))
