"""Inter-annotator agreement and annotation throughput (spec §7).

Everything works on a raters × items float matrix with NaN for "not rated" (build one from long-format
records with `to_matrix`). Reference libraries do the arithmetic: ``sklearn.metrics.cohen_kappa_score``,
``krippendorff.alpha`` and ``statsmodels.stats.inter_rater.fleiss_kappa``; the functions here validate input,
handle missing ratings and return ``nan`` where agreement is undefined (too few common items, a single
category). Bad input raises `AgreementInputError` (a `ValueError` and a `CulturaError`) naming the argument.
"""
from __future__ import annotations

import itertools
import warnings
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from cultura.errors import CulturaError
from ..lazy import lazy

_krippendorff = lazy("krippendorff")  # imported on first use (start-up)
skm = lazy("sklearn.metrics")  # imported on first use (start-up)
inter_rater = lazy("statsmodels.stats.inter_rater")  # imported on first use (start-up)

__all__ = [
    "AgreementInputError",
    "to_matrix",
    "cohen_kappa",
    "krippendorff_alpha",
    "fleiss_kappa",
    "percent_agreement",
    "pairwise_kappas",
    "loo_consensus_agreement",
    "gold_accuracy",
    "throughput",
]

_WEIGHTS = (None, "linear", "quadratic")
_LEVELS = ("nominal", "ordinal", "interval", "ratio")


class AgreementInputError(CulturaError, ValueError):
    """Agreement input is unusable; the message names the argument and the fix."""


def _matrix(matrix: Any, name: str = "matrix", *, min_raters: int = 2) -> np.ndarray:
    try:
        m = np.asarray(matrix, dtype=float)
    except (TypeError, ValueError):
        raise AgreementInputError(f"{name} must be a raters × items numeric matrix (NaN = missing); map labels "
                                  "to numbers first (to_matrix(..., categories=[...]) does it).") from None
    if m.ndim != 2:
        raise AgreementInputError(f"{name} must be 2-D (raters × items), got shape {m.shape}.")
    if m.shape[0] < min_raters or m.shape[1] < 1:
        raise AgreementInputError(f"{name} needs at least {min_raters} raters and 1 item, got shape {m.shape}.")
    if np.any(np.isinf(m)):
        raise AgreementInputError(f"{name} contains infinite values; use NaN for missing ratings.")
    return m


def to_matrix(
    records: Iterable[Mapping[str, Any]],
    item_key: str,
    rater_key: str,
    value_key: str,
    *,
    categories: Sequence[Any] | None = None,
) -> tuple[np.ndarray, list[Hashable], list[Hashable]]:
    """Long-format ratings → ``(matrix, raters, items)`` with NaN where a rater did not rate an item.

    Raters and items keep their order of first appearance. Values must be numbers, unless ``categories`` is
    given: then each value is replaced by its index in ``categories`` (nominal labels, or an ordered Likert
    scale for ordinal agreement). A rater rating the same item twice is an error. Records with a missing
    (None) value are skipped.

    >>> m, raters, items = to_matrix([{"i": 1, "r": "ann", "v": 3}, {"i": 2, "r": "bob", "v": 4}], "i", "r", "v")
    >>> m.tolist(), raters, items
    ([[3.0, nan], [nan, 4.0]], ['ann', 'bob'], [1, 2])
    """
    code = None if categories is None else {c: i for i, c in enumerate(categories)}
    cells: dict[tuple[Hashable, Hashable], float] = {}
    raters: dict[Hashable, int] = {}
    items: dict[Hashable, int] = {}
    for n, rec in enumerate(records):
        try:
            item, rater, value = rec[item_key], rec[rater_key], rec[value_key]
        except KeyError as exc:
            raise AgreementInputError(f"records[{n}] has no key {exc.args[0]!r}.") from None
        if value is None:
            continue
        if code is not None:
            if value not in code:
                raise AgreementInputError(f"records[{n}] value {value!r} is not in categories {list(code)!r}.")
            value = code[value]
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise AgreementInputError(f"records[{n}] value {value!r} is not a number; pass categories=[...].") from None
        if (rater, item) in cells:
            raise AgreementInputError(f"rater {rater!r} rated item {item!r} twice; keep one rating per pair.")
        raters.setdefault(rater, len(raters))
        items.setdefault(item, len(items))
        cells[(rater, item)] = value
    if not cells:
        raise AgreementInputError("records holds no ratings.")
    m = np.full((len(raters), len(items)), np.nan)
    for (rater, item), v in cells.items():
        m[raters[rater], items[item]] = v
    return m, list(raters), list(items)


def _check_weights(weights: Any) -> None:
    if weights not in _WEIGHTS:
        raise AgreementInputError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}.")


def cohen_kappa(a: Any, b: Any, *, weights: str | None = None, labels: Sequence[Any] | None = None) -> float:
    """Cohen's κ between two raters (``sklearn.metrics.cohen_kappa_score``), over items both rated.

    ``κ = (p_o − p_e) / (1 − p_e)``; ``weights`` = None (nominal), "linear" or "quadratic" (Likert). Items with
    NaN in ``a`` or ``b`` are dropped. Weighted κ measures distance by position in the sorted label list, so pass
    the full scale as ``labels`` (e.g. ``[1, 2, 3, 4, 5]``) when a rating level may be unused. ``nan`` when
    undefined (a single category overall, or fewer than 1 common item raises). Spec §7.

    >>> round(cohen_kappa([1, 2, 3, 3], [1, 2, 3, 2]), 3)
    0.636
    """
    _check_weights(weights)
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.ndim != 1 or x.shape != y.shape:
        raise AgreementInputError(f"a and b must be 1-D with one rating per item, got shapes {x.shape} and {y.shape}.")
    keep = ~(np.isnan(x) | np.isnan(y))
    if not keep.any():
        raise AgreementInputError("a and b have no item rated by both; κ needs common items.")
    x, y = x[keep], y[keep]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns and returns nan on a single category: we document nan
        k = skm.cohen_kappa_score(x, y, weights=weights, labels=labels)
    return float(k)


def krippendorff_alpha(
    reliability_data: Any, *, level: str = "nominal", value_domain: Sequence[float] | None = None
) -> float:
    """Krippendorff's α (``krippendorff.alpha``) on a raters × items matrix with NaN = missing.

    ``α = 1 − D_o / D_e`` at ``level`` "nominal", "ordinal", "interval" or "ratio". For ordinal data pass the
    full scale as ``value_domain`` if some level is unused. ``nan`` when fewer than two distinct values occur
    (α undefined). Spec §7.

    >>> round(krippendorff_alpha([[1, 2, 3, 3], [1, 2, 3, 2]]), 3)
    0.667
    """
    if level not in _LEVELS:
        raise AgreementInputError(f"level must be one of {', '.join(_LEVELS)}, got {level!r}.")
    m = _matrix(reliability_data, "reliability_data")
    values = m[~np.isnan(m)]
    if np.unique(values).size < 2 and value_domain is None:
        return float("nan")
    pairable = (np.sum(~np.isnan(m), axis=0) >= 2).sum()
    if pairable == 0:
        raise AgreementInputError("reliability_data has no item rated by 2 or more raters.")
    kwargs = {} if value_domain is None else {"value_domain": list(value_domain)}
    try:
        return float(_krippendorff.alpha(reliability_data=m, level_of_measurement=level, **kwargs))
    except ValueError as exc:
        raise AgreementInputError(f"krippendorff_alpha: {exc}") from None


def fleiss_kappa(matrix: Any, *, method: str = "fleiss") -> float:
    """Fleiss' κ (``statsmodels.stats.inter_rater.fleiss_kappa``) for many raters, NaN = missing.

    Fleiss' κ needs the same number of ratings m per item (not the same raters): m is the most common number of
    ratings per item (≥ 2), and only items with exactly m ratings are used. ``method`` "fleiss" or
    "randolph". ``nan`` when only one category occurs. Spec §7.

    >>> round(fleiss_kappa([[1, 2, 3, 3], [1, 2, 3, 2], [1, 2, 3, 3]]), 3)
    0.745
    """
    if method not in ("fleiss", "randolph"):
        raise AgreementInputError(f"method must be 'fleiss' or 'randolph', got {method!r}.")
    m = _matrix(matrix)
    counts = np.sum(~np.isnan(m), axis=0)
    usable = Counter(int(c) for c in counts if c >= 2)
    if not usable:
        raise AgreementInputError("matrix has no item rated by 2 or more raters.")
    n_ratings = max(usable, key=lambda c: (usable[c], c))
    cols = m[:, counts == n_ratings]
    data = np.array([col[~np.isnan(col)] for col in cols.T])  # items × n_ratings
    table, _ = inter_rater.aggregate_raters(data)
    if table.shape[1] < 2:
        return float("nan")
    return float(inter_rater.fleiss_kappa(table, method=method))


def percent_agreement(matrix: Any) -> float:
    """Mean share of agreeing rater pairs per item, over items with ≥ 2 ratings (``nan`` if none).

    ``PA = mean_items #{pairs (r, s) with x_ri = x_si} / C(m_i, 2)``. Spec §7.

    >>> percent_agreement([[1, 2, 3], [1, 2, 1], [1, 1, np.nan]])
    0.4444444444444444
    """
    m = _matrix(matrix)
    shares = []
    for col in m.T:
        v = col[~np.isnan(col)]
        if v.size < 2:
            continue
        pairs = [x == y for x, y in itertools.combinations(v, 2)]
        shares.append(np.mean(pairs))
    return float(np.mean(shares)) if shares else float("nan")


def pairwise_kappas(
    matrix: Any, annotator_names: Sequence[Hashable], *, weights: str | None = None
) -> list[dict[str, Any]]:
    """Cohen's κ for every pair of annotators on the items both rated.

    Returns ``[{"pair": (a, b), "n_common": n, "kappa": κ}, ...]``; κ is ``nan`` when fewer than 2 common items
    or undefined (one category). Spec §7.

    >>> pairwise_kappas([[1, 2, 1], [1, 2, 2]], ["ann", "bob"])[0]["n_common"]
    3
    """
    _check_weights(weights)
    m = _matrix(matrix)
    names = list(annotator_names)
    if len(names) != m.shape[0]:
        raise AgreementInputError(f"annotator_names has {len(names)} names for {m.shape[0]} matrix rows.")
    out = []
    for i, j in itertools.combinations(range(m.shape[0]), 2):
        common = ~(np.isnan(m[i]) | np.isnan(m[j]))
        n = int(common.sum())
        k = cohen_kappa(m[i], m[j], weights=weights) if n >= 2 else float("nan")
        out.append({"pair": (names[i], names[j]), "n_common": n, "kappa": k})
    return out


def _majority(values: np.ndarray) -> float:
    """Most frequent value, or NaN when the top count is tied."""
    c = Counter(values.tolist()).most_common()
    if len(c) > 1 and c[0][1] == c[1][1]:
        return float("nan")
    return float(c[0][0])


def loo_consensus_agreement(
    matrix: Any, *, level: str = "nominal", annotator_names: Sequence[Hashable] | None = None
) -> list[dict[str, Any]]:
    """Each annotator against the leave-one-out consensus of the others, on items both have.

    Consensus: the majority label of the other raters (items where it is tied are skipped) for "nominal" and
    "ordinal"; the mean of the others for "interval"/"ratio". Per annotator: ``n_items``, ``agreement`` (share
    equal to the consensus; nominal/ordinal), ``kappa`` (Cohen's κ vs consensus, quadratic-weighted for ordinal)
    or ``pearson`` and ``mae`` (interval/ratio). Undefined values are ``nan``. Spec §7.

    >>> rows = loo_consensus_agreement([[1, 2, 1, 2], [1, 2, 1, 1], [1, 2, 2, 2]])
    >>> [(r["rater"], r["n_items"], round(r["agreement"], 3)) for r in rows]
    [(0, 2, 1.0), (1, 3, 0.667), (2, 3, 0.667)]
    """
    if level not in _LEVELS:
        raise AgreementInputError(f"level must be one of {', '.join(_LEVELS)}, got {level!r}.")
    m = _matrix(matrix)
    names = list(range(m.shape[0])) if annotator_names is None else list(annotator_names)
    if len(names) != m.shape[0]:
        raise AgreementInputError(f"annotator_names has {len(names)} names for {m.shape[0]} matrix rows.")
    categorical = level in ("nominal", "ordinal")
    rows = []
    for r in range(m.shape[0]):
        others = np.delete(m, r, axis=0)
        own, cons = [], []
        for j in range(m.shape[1]):
            if np.isnan(m[r, j]):
                continue
            v = others[:, j][~np.isnan(others[:, j])]
            if v.size == 0:
                continue
            c = _majority(v) if categorical else float(v.mean())
            if np.isnan(c):
                continue
            own.append(m[r, j])
            cons.append(c)
        x, y = np.array(own), np.array(cons)
        row: dict[str, Any] = {"rater": names[r], "n_items": int(x.size)}
        if categorical:
            row["agreement"] = float(np.mean(x == y)) if x.size else float("nan")
            w = "quadratic" if level == "ordinal" else None
            row["kappa"] = cohen_kappa(x, y, weights=w) if x.size >= 2 else float("nan")
        else:
            ok = x.size >= 2 and x.std() > 0 and y.std() > 0
            row["pearson"] = float(np.corrcoef(x, y)[0, 1]) if ok else float("nan")
            row["mae"] = float(np.mean(np.abs(x - y))) if x.size else float("nan")
        rows.append(row)
    return rows


def gold_accuracy(labels: Any, gold: Any) -> float:
    """Share of gold-standard items an annotator labelled correctly (``nan`` when no gold item was rated).

    ``labels`` and ``gold`` are aligned 1-D sequences (NaN/None = not rated / no gold) or mappings
    item → label (compared on common keys).

    >>> gold_accuracy({"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 3})
    0.5
    """
    if isinstance(labels, Mapping) != isinstance(gold, Mapping):
        raise AgreementInputError("labels and gold must both be mappings item → label or both sequences.")
    if isinstance(labels, Mapping):
        pairs = [(labels[k], gold[k]) for k in gold if k in labels]
    else:
        lab, gol = list(labels), list(gold)
        if len(lab) != len(gol):
            raise AgreementInputError(f"labels and gold must have the same length, got {len(lab)} and {len(gol)}.")
        pairs = list(zip(lab, gol))

    def missing(v: Any) -> bool:
        return v is None or (isinstance(v, float) and np.isnan(v))

    pairs = [(a, g) for a, g in pairs if not missing(a) and not missing(g)]
    if not pairs:
        return float("nan")
    return float(np.mean([a == g for a, g in pairs]))


def throughput(lead_times_seconds: Any) -> dict[str, float]:
    """Annotation throughput from per-item lead times (seconds spent per item).

    ``items_per_hour = 3600 · n / sum(lead times)``; also ``median_lead_time_s``, ``mean_lead_time_s``,
    ``n_items`` and ``total_hours``. Spec §7.

    >>> throughput([30, 60, 90])["items_per_hour"]
    60.0
    """
    t = np.asarray(lead_times_seconds, dtype=float)
    if t.ndim != 1 or t.size == 0:
        raise AgreementInputError("lead_times_seconds must be a non-empty 1-D sequence of seconds.")
    if not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise AgreementInputError("lead_times_seconds must be positive, finite seconds; drop missing lead times.")
    return {
        "n_items": int(t.size),
        "items_per_hour": float(3600.0 * t.size / t.sum()),
        "median_lead_time_s": float(np.median(t)),
        "mean_lead_time_s": float(t.mean()),
        "total_hours": float(t.sum() / 3600.0),
    }
