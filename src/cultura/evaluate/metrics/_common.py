"""Input validation shared by the metric functions (private).

Every check raises `MetricInputError` — a `ValueError` (so sklearn-style callers can catch it) that is also a
`CulturaError` (so the CLI prints it as one sentence) — and the message names the offending argument.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from cultura.errors import CulturaError

__all__ = ["MetricInputError"]


class MetricInputError(CulturaError, ValueError):
    """A metric was given input it cannot use; the message names the argument and the fix."""


def as_1d(x: Any, name: str, *, min_len: int = 1, finite: bool = True, dtype=float) -> np.ndarray:
    """`x` as a 1-D array of at least `min_len` entries (finite unless `finite=False`)."""
    try:
        arr = np.asarray(x, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise MetricInputError(f"{name} must be a 1-D array of numbers ({exc}).") from None
    if arr.ndim != 1:
        raise MetricInputError(f"{name} must be 1-D, got shape {arr.shape}.")
    if arr.shape[0] < min_len:
        raise MetricInputError(f"{name} must have at least {min_len} value(s), got {arr.shape[0]}.")
    if finite and dtype is float and not np.all(np.isfinite(arr)):
        raise MetricInputError(f"{name} contains NaN or infinite values; drop or impute them first.")
    return arr


def as_2d(x: Any, name: str, *, min_rows: int = 1, min_cols: int = 1, finite: bool = True) -> np.ndarray:
    """`x` as a 2-D float array with at least `min_rows` × `min_cols` entries."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise MetricInputError(f"{name} must be a 2-D array of numbers ({exc}).") from None
    if arr.ndim != 2:
        raise MetricInputError(f"{name} must be 2-D, got shape {arr.shape}.")
    if arr.shape[0] < min_rows or arr.shape[1] < min_cols:
        raise MetricInputError(
            f"{name} must have at least {min_rows} row(s) and {min_cols} column(s), got shape {arr.shape}."
        )
    if finite and not np.all(np.isfinite(arr)):
        raise MetricInputError(f"{name} contains NaN or infinite values; drop or impute them first.")
    return arr


def check_k(k: Any, name: str = "k") -> int:
    """A positive integer cutoff."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise MetricInputError(f"{name} must be an integer >= 1, got {k!r}.")
    return int(k)


def as_number(x: Any, name: str) -> float:
    """A finite real scalar."""
    try:
        val = float(x)
    except (TypeError, ValueError):
        raise MetricInputError(f"{name} must be a number, got {x!r}.") from None
    if not np.isfinite(val):
        raise MetricInputError(f"{name} must be finite, got {x!r}.")
    return val


def check_level(level: Any) -> float:
    """A confidence level strictly between 0 and 1."""
    val = as_number(level, "level")
    if not 0.0 < val < 1.0:
        raise MetricInputError(f"level must be strictly between 0 and 1 (e.g. 0.95), got {level!r}.")
    return val
