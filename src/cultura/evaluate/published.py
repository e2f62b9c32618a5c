"""What a published result row says beside its number: the metric's direction, the CI method, and numbers
that stay numbers in JSON.

JSON has no ``nan`` or ``inf``; a results file that wrote them as strings made ``value`` a mixed column for
pandas. Here a non-finite number becomes ``null`` and the row says why (``value_reason``: ``"infinite (+inf)"``
with the suite's own reason, e.g. ``M_cr = 0``). The store keeps its own encoding (:mod:`.results`).
"""
from __future__ import annotations

import math
import re

from .common import DEFAULT_LEVEL, DEFAULT_RESAMPLES

#: metric name patterns → whether a higher value is better (True), worse (False); a metric matching none is
#: descriptive (counts, shares, ranks, effect sizes whose sign is the finding): ``higher_is_better`` null
_DIRECTIONS = (
    (r"(Acc|NDCG|acc|accuracy)@?\d*$|^M_cr$|^linking_acc$|^f1_ratio_to_gold$|^pearson$|^qa_acc_|"
     r"^demographic_accuracy$", True),
    (r"^(SP|random_SP|M_lb|M_ti|LBKL@\d+|DLBKL@\d+|harm_rate|negative_rate|n_failed|n_incomplete|"
     r"probe_missing)$", False),
)


def higher_is_better(metric: str) -> bool | None:
    """True when a higher value of ``metric`` is better, False when lower is better, None when the metric is
    descriptive (a share, a count of images, a CBS whose ideal is 0.5, a rank)."""
    for pattern, direction in _DIRECTIONS:
        if re.search(pattern, metric):
            return direction
    return None


def ci_method(options: dict | None) -> dict:
    """How the rows' ``ci_low``/``ci_high`` were computed: a percentile bootstrap over the suite's units
    (trials, query images, contexts), at the run's resamples and level."""
    options = options or {}
    return {"method": "percentile bootstrap", "resampled": "the suite's units (trials, query images, contexts)",
            "n_resamples": int(options.get("n_resamples", DEFAULT_RESAMPLES)),
            "level": float(options.get("level", DEFAULT_LEVEL)), "seed": int(options.get("seed", 0))}


def _why(x: float, reason: str | None) -> str:
    what = "undefined (NaN)" if math.isnan(x) else ("infinite (+inf)" if x > 0 else "infinite (-inf)")
    return f"{what}: {reason}" if reason else what


def finite_or(obj, nonfinite):
    """``obj`` ready for JSON (recursively: numpy scalars and arrays as Python, keys as text) with each
    non-finite float replaced by ``nonfinite(x)``: null here, the text ``"nan"``/``"inf"`` in the store."""
    if isinstance(obj, dict):
        return {str(k): finite_or(v, nonfinite) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or(v, nonfinite) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return finite_or(obj.tolist(), nonfinite)
    if isinstance(obj, float) and not math.isfinite(obj):
        return nonfinite(obj)
    return obj


def numbers(obj):
    """Non-finite floats → None (recursively, numpy scalars → Python); see :func:`published_row` for the
    reasons of a row's own numbers."""
    return finite_or(obj, lambda x: None)


def published_row(r: dict) -> dict:
    """One result row for a results JSON: its numbers as JSON numbers or null, with ``<field>_reason`` for
    each null that stands for a non-finite value, and ``higher_is_better``."""
    out = numbers(r)
    reason = (r.get("details") or {}).get("reason")
    for key in ("value", "ci_low", "ci_high"):
        x = r.get(key)
        if isinstance(x, str) and x in ("nan", "inf", "-inf"):  # rows already in the store's encoding
            x = float(x)
        if isinstance(x, float) and not math.isfinite(x):
            out[key] = None
            out[f"{key}_reason"] = _why(x, reason if key == "value" else None)
        elif x is None and key == "value":
            out["value_reason"] = f"not computed: {reason}" if reason else "not computed"
    if "metric" in r:
        out["higher_is_better"] = higher_is_better(r["metric"])
    return out
