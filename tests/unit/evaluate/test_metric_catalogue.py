"""Catalogue of every public metric with its properties; property tests run over all of them.

A public function of `cultura.evaluate.metrics` (its ``__all__``) that is not catalogued here fails
`test_every_public_metric_is_catalogued` — add an entry with its properties when you add a metric.
(sklearn ``metrics/tests/test_common.py`` style.)
"""
from __future__ import annotations

import copy
import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest

from cultura.evaluate import metrics as M

LANGS = ["en", "th", "ja", "sw", "fr", "de"]


def _rng(seed):
    return np.random.default_rng(seed)


def _ranked(r):
    return [list(r.choice(LANGS, size=6)) for _ in range(4)]


def _logprobs(r):
    return {str(s): float(v) for s, v in zip(range(1, 6), -r.exponential(2.0, 5))}


@dataclass
class Entry:
    """Properties of one metric. ``make(rng) -> (args, kwargs)`` builds a valid random input."""

    make: Callable[[Any], tuple[tuple, dict]]
    returns: str  # "float", "array", "dict", "record"
    bounds: tuple[float, float] | None = None  # every finite output value lies within
    symmetric: bool = False  # f(a, b) == f(b, a)
    needs_labels: bool = False  # takes label sequences (pool labels / group labels)
    bad: list[tuple[tuple, dict]] = field(default_factory=list)  # inputs that must raise ValueError


CATALOGUE: dict[str, Entry] = {
    "accuracy_at_k": Entry(
        lambda r: ((r.integers(0, 2, (5, 8)), r.random((5, 8))), {"k": 3}), "float", (0, 1),
        bad=[(([[1, 0]], [[0.1, 0.2]]), {"k": 0}), (([], []), {})]),
    "ndcg_at_k": Entry(
        lambda r: ((r.integers(0, 2, (5, 8)), r.random((5, 8))), {"k": 4}), "float", (0, 1),
        bad=[(([[1, 0]], [[0.1]]), {}), (([], []), {})]),
    "lbkl": Entry(lambda r: ((_ranked(r), LANGS), {"k": 5}), "float", (0, math.inf), needs_labels=True,
                  bad=[(([], LANGS), {"k": 5}), (([["en"]], LANGS), {"k": 5})]),
    "dlbkl": Entry(lambda r: ((_ranked(r), LANGS), {"k": 5}), "float", (0, math.inf), needs_labels=True,
                   bad=[(([], LANGS), {"k": 5}), ((_ranked(_rng(0)), []), {"k": 5})]),
    "lbkl_per_query": Entry(lambda r: ((_ranked(r), LANGS), {"k": 5, "discounted": True}), "array", (0, math.inf),
                            needs_labels=True, bad=[(([], LANGS), {})]),
    "retrieval_frequency": Entry(lambda r: ((_ranked(r), LANGS), {"k": 5}), "dict", (0, 1), needs_labels=True,
                                 bad=[(([], LANGS), {"k": 5})]),
    "win_rates": Entry(lambda r: ((r.integers(0, 3, (40, 3)) / 2,), {}), "array", (0, 1),
                       bad=[((np.empty((0, 3)),), {}), (([[0.1]],), {})]),
    "win_rates_ci": Entry(lambda r: ((r.random((30, 3)),), {"n_boot": 50}), "record", (0, 1),
                          bad=[((np.empty((0, 3)),), {}), ((np.ones((4, 3)),), {"level": 2})]),
    "self_preference": Entry(lambda r: ((r.random((40, 3)),), {}), "float", (0, math.inf),
                             bad=[((np.empty((0, 3)),), {}), (([[0.1, 0.2]],), {"biased": 0})]),
    "random_baseline": Entry(lambda r: ((200, 3), {"seed": int(r.integers(100)), "rounds": 2}), "dict", None,
                             bad=[((0, 3), {}), ((10, 1), {})]),
    "similarity_drift": Entry(lambda r: ((r.random(6), r.random(6)), {}), "array", (-2, 2),
                              bad=[(([], []), {}), (([0.1], [0.1, 0.2]), {})]),
    "paired_chi2": Entry(lambda r: ((int(r.integers(1, 40)), int(r.integers(1, 40)), 100), {}), "record", None,
                         bad=[((5, 6, 10), {}), ((-1, 0, 3), {})]),
    "silhouette_by_label": Entry(lambda r: ((r.normal(size=(12, 4)), ["en", "th", "ja"] * 4), {}), "dict", (-1, 1),
                                 needs_labels=True, bad=[((np.ones((3, 2)), ["a", "a", "a"]), {}),
                                                         ((np.ones((3, 2)), ["a", "b"]), {})]),
    "c_asc": Entry(lambda r: ((r.normal(size=4), r.normal(size=(8, 4)), np.arange(8) < 3), {}), "float", None,
                   needs_labels=True, bad=[(([1.0, 0.0], [[1.0, 0.0], [0.0, 1.0]], [True, True]), {})]),
    "max_skew": Entry(lambda r: (tuple(r.uniform(0.01, 1, 2)), {}), "float", (0, math.inf), symmetric=True,
                      bad=[(("x", 0.1), {}), ((math.nan, 0.1), {})]),
    "mean_max_skew": Entry(lambda r: (({g: float(v) for g, v in zip("abcd", r.uniform(0.01, 1, 4))},), {}), "float",
                           (0, math.inf), needs_labels=True, bad=[(({"a": 0.1},), {}), (([0.1, 0.2],), {})]),
    "symmetric_kl": Entry(lambda r: (tuple(r.uniform(0, 1, 2)), {}), "float", (0, math.inf), symmetric=True,
                          bad=[((1.2, 0.1), {}), ((-0.1, 0.1), {})]),
    "harm_rate": Entry(lambda r: ((list(r.choice(["a", "b", "crim"], 10)), {"crim"}), {}), "float", (0, 1),
                       needs_labels=True, bad=[(([], {"x"}), {}), ((["a"], "a"), {})]),
    "label_shares": Entry(lambda r: ((list(r.choice(["a", "b", "crim"], 10)), {"C": {"crim"}, "A": ["a"]}), {}),
                          "dict", (0, 1), needs_labels=True, bad=[((["a"], {}), {}), (([], {"C": {"a"}}), {})]),
    "cultural_bias_score": Entry(lambda r: ((-r.exponential(1, 7), -r.exponential(1, 5)), {}), "float", (0, 1),
                                 bad=[(([], [-1.0]), {}), (([-1.0], [0.3]), {})]),
    "expected_score": Entry(lambda r: ((_logprobs(r),), {}), "float", (1, 5),
                            bad=[(({"1": -1.0},), {}), (({s: -math.inf for s in "12345"},), {})]),
    "argmax_score": Entry(lambda r: ((_logprobs(r),), {}), "float", (1, 5), bad=[(({"6": -1.0},), {})]),
    "bootstrap_ci": Entry(lambda r: ((r.random(20),), {"n_boot": 50}), "record", (0, 1),
                          bad=[(([1.0],), {}), (([1.0, 2.0],), {"n_boot": 0})]),
}

# Spec §9: the exact public signatures other code and outside checks rely on.
SPEC_SIGNATURES = {
    "accuracy_at_k": "(y_true, y_score, *, k=5)",
    "ndcg_at_k": "(y_true, y_score, *, k=10)",
    "lbkl": "(ranked_labels, labels, *, k=10, prior=None, eps=1e-09)",
    "dlbkl": "(ranked_labels, labels, *, k=10, prior=None, eps=1e-09)",
    "win_rates": "(similarities)",
    "self_preference": "(similarities, *, correct=0, biased=1)",
    "random_baseline": "(n_trials, n_candidates, *, seed=0, rounds=10)",
    "similarity_drift": "(sim_with_descriptor, sim_without)",
    "paired_chi2": "(wins_a, wins_b, n_trials)",
    "c_asc": "(caption, images, in_group)",
    "max_skew": "(p_a, p_b)",
    "mean_max_skew": "(scores)",
    "symmetric_kl": "(p_f, p_m)",
    "harm_rate": "(top1_labels, harmful)",
    "cultural_bias_score": "(logp_local, logp_western)",
    "expected_score": "(logprobs)",
}
# Parameters that may have a default without being keyword-only (named in the brief's signature).
POSITIONAL_DEFAULTS = {("bootstrap_ci", "statistic")}

PUBLIC_FUNCTIONS = sorted(n for n in M.__all__ if inspect.isfunction(getattr(M, n)))


def _values(out: Any) -> list[float]:
    """Every numeric value of an output, flattened (dict values, record fields, arrays)."""
    if isinstance(out, dict):
        return [v for x in out.values() for v in _values(x)]
    if isinstance(out, tuple):
        return [v for x in out for v in _values(x)]
    if isinstance(out, str):
        return []
    if isinstance(out, (list, np.ndarray)):
        return [v for x in np.ravel(np.asarray(out, dtype=object)) for v in _values(x)]
    if hasattr(out, "__dataclass_fields__"):
        return [v for f in out.__dataclass_fields__ for v in _values(getattr(out, f))
                if isinstance(getattr(out, f), (int, float, np.floating))]
    return [float(out)]


def _same(a: Any, b: Any) -> bool:
    return np.allclose(_values(a), _values(b), equal_nan=True)


def test_every_public_metric_is_catalogued():
    missing = [n for n in PUBLIC_FUNCTIONS if n not in CATALOGUE]
    assert not missing, f"uncatalogued public metric(s): {missing}; add them to CATALOGUE with their properties"
    stale = [n for n in CATALOGUE if n not in PUBLIC_FUNCTIONS]
    assert not stale, f"catalogued but not public in cultura.evaluate.metrics.__all__: {stale}"


def test_every_name_in_all_exists():
    for name in M.__all__:
        assert hasattr(M, name), name


@pytest.mark.parametrize("name", sorted(SPEC_SIGNATURES))
def test_spec_signature(name):
    sig = inspect.signature(getattr(M, name))
    bare = sig.replace(parameters=[p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()],
                       return_annotation=inspect.Signature.empty)
    assert str(bare) == SPEC_SIGNATURES[name]


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS)
def test_options_are_keyword_only(name):
    for p in inspect.signature(getattr(M, name)).parameters.values():
        if p.default is not inspect.Parameter.empty and (name, p.name) not in POSITIONAL_DEFAULTS:
            assert p.kind is inspect.Parameter.KEYWORD_ONLY, f"{name}({p.name}=...) should follow *"


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS)
def test_docstring_has_formula_seed_and_example(name):
    doc = inspect.getdoc(getattr(M, name)) or ""
    assert ">>>" in doc, f"{name}: add a tiny runnable example"
    assert "seed 00" in doc.lower() or "spec §" in doc.lower(), f"{name}: cite the seed section"


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS)
def test_deterministic_and_does_not_mutate_input(name):
    fn, entry = getattr(M, name), CATALOGUE[name]
    args, kwargs = entry.make(_rng(0))
    before = copy.deepcopy((args, kwargs))
    out1 = fn(*args, **kwargs)
    out2 = fn(*args, **kwargs)
    assert _same(out1, out2)
    for x, y in zip(args, before[0]):
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y)
        else:
            assert x == y


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS)
def test_return_type(name):
    fn, entry = getattr(M, name), CATALOGUE[name]
    args, kwargs = entry.make(_rng(1))
    out = fn(*args, **kwargs)
    expected = {"float": (float, int), "array": np.ndarray, "dict": dict, "record": tuple}[entry.returns]
    if entry.returns == "record":
        assert isinstance(out, tuple) or hasattr(out, "__dataclass_fields__")
    else:
        assert isinstance(out, expected), type(out)


@pytest.mark.parametrize("name", [n for n in PUBLIC_FUNCTIONS if CATALOGUE[n].bounds])
def test_bounded(name):
    fn, entry = getattr(M, name), CATALOGUE[name]
    lo, hi = entry.bounds
    for seed in range(15):
        args, kwargs = entry.make(_rng(seed))
        out = fn(*args, **kwargs)
        if entry.returns == "dict" and name == "retrieval_frequency":
            out = {"f": out["frequency"], "r": out["by_rank"]}
        for v in _values(out):
            assert math.isnan(v) or lo - 1e-12 <= v <= hi + 1e-12, (name, v)


@pytest.mark.parametrize("name", [n for n in PUBLIC_FUNCTIONS if CATALOGUE[n].symmetric])
def test_symmetric(name):
    fn, entry = getattr(M, name), CATALOGUE[name]
    for seed in range(15):
        (a, b), kwargs = entry.make(_rng(seed))
        assert fn(a, b, **kwargs) == pytest.approx(fn(b, a, **kwargs))


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS)
def test_bad_input_raises_value_error_naming_an_argument(name):
    fn, entry = getattr(M, name), CATALOGUE[name]
    assert entry.bad, f"{name}: catalogue at least one invalid input"
    params = list(inspect.signature(fn).parameters)
    for args, kwargs in entry.bad:
        with pytest.raises(ValueError) as info:
            fn(*args, **kwargs)
        msg = str(info.value)
        assert any(p in msg for p in params) or "Unknown" in msg, f"{name}: message names no argument: {msg}"


@pytest.mark.parametrize("name", [n for n in PUBLIC_FUNCTIONS if CATALOGUE[n].needs_labels])
def test_label_based_metrics_do_not_depend_on_label_spelling(name):
    """Renaming every label consistently (a bijection) leaves label-based results unchanged."""
    fn, entry = getattr(M, name), CATALOGUE[name]
    args, kwargs = entry.make(_rng(3))
    rename = lambda x: f"L_{x}"  # noqa: E731

    def relabel(obj):
        if isinstance(obj, str):
            return rename(obj)
        if isinstance(obj, dict):
            return {(rename(k) if name in ("mean_max_skew",) else k): relabel(v) for k, v in obj.items()}
        if isinstance(obj, (set, frozenset)):
            return {rename(x) for x in obj}
        if isinstance(obj, list):
            return [relabel(x) for x in obj]
        return obj

    if name in ("c_asc",):  # its "labels" are a boolean mask: renaming is the identity
        return
    new_args = tuple(relabel(a) for a in args)
    out_old, out_new = fn(*args, **kwargs), fn(*new_args, **kwargs)
    assert sorted(_values(out_old)) == pytest.approx(sorted(_values(out_new)))
