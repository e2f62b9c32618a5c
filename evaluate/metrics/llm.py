"""LLM entity bias (seed 001 §4.1) and judge-score expectations (seed 004 §3; spec §5–6)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.special import softmax

from ._common import MetricInputError, as_1d

__all__ = ["cultural_bias_score", "expected_score", "argmax_score"]

_SCORES = ("1", "2", "3", "4", "5")


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


def _score_logprobs(logprobs: Any) -> np.ndarray:
    if not isinstance(logprobs, Mapping):
        raise MetricInputError('logprobs must be a mapping score token → log-probability, e.g. {"1": -2.3, ...}.')
    keyed = {str(k).strip(): v for k, v in logprobs.items()}
    missing = [s for s in _SCORES if s not in keyed]
    extra = sorted(set(keyed) - set(_SCORES))
    if missing or extra:
        raise MetricInputError(
            f'logprobs must have exactly the keys "1".."5"; missing {missing}, unexpected {extra}. '
            "Use -inf for a score the judge never produced."
        )
    lp = _logprobs_1d([keyed[s] for s in _SCORES], "logprobs")
    if np.all(lp == -np.inf):
        raise MetricInputError("logprobs gives probability 0 to every score; the expectation is undefined.")
    return lp


def expected_score(logprobs: Mapping[Any, float]) -> float:
    """Expected relevance score ``sum_s s · P(s)`` over the judge's renormalised probabilities of "1".."5".

    ``P(s) = exp(logprob_s) / sum_{t=1..5} exp(logprob_t)`` (the five token probabilities renormalised, the
    rest of the vocabulary ignored), so the result lies in [1, 5]. Seed 004 §3 eq. (1) (CAIRe relevance
    score); spec §6.

    >>> expected_score({"1": 0.0, "2": 0.0, "3": 0.0, "4": 0.0, "5": 0.0})
    3.0
    >>> round(expected_score({"1": -30.0, "2": -30.0, "3": -30.0, "4": -0.7, "5": -0.7}), 3)
    4.5
    """
    p = softmax(_score_logprobs(logprobs))
    return float(np.clip(np.dot(np.arange(1, 6), p), 1.0, 5.0))


def argmax_score(logprobs: Mapping[Any, float]) -> int:
    """The most probable score token (1–5) of the judge; ties go to the lower score. Seed 004 §3; spec §6.

    >>> argmax_score({"1": -3.0, "2": -2.0, "3": -0.1, "4": -2.5, "5": -4.0})
    3
    """
    return int(np.argmax(_score_logprobs(logprobs)) + 1)
