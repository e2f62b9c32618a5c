"""The suite registry: every evaluation suite is a function registered under a name.

A suite function has the signature::

    func(project, embedder, *, benchmark=None, options: dict) -> list[dict]

and returns result rows, each a dict with the keys ``suite, metric, value, ci_low, ci_high, n, group, details``
(``group`` a dict such as ``{"country": "JP"}``, ``details`` a dict of anything else worth keeping). The runner
(:mod:`cultura.evaluate.runner`) adds the provenance (model identity, benchmark name/version/hash, parameters,
git revision, date) and stores the rows.

``benchmark`` is ``None`` (the suite picks its default data) or a benchmark name, optionally ``NAME@VERSION``;
when a suite is registered with ``benchmark_kind``, the runner resolves the name first (latest ready version of
that kind) and passes ``NAME@VERSION`` so the suite evaluates exactly the benchmark recorded for the run.

Built-in suites register themselves exactly as an outside plugin would: at import time of their module, or
through the ``cultura.suites`` entry point group (an entry point names a module, or a callable taking no
arguments, that calls :func:`register_suite`).

>>> from cultura.evaluate.suites import register_suite, get_suite, row, SUITES
>>> def hello(project, embedder, *, benchmark=None, options):
...     return [row("hello", "answer", 42.0, n=1)]
>>> _ = register_suite("hello-doc", hello, description="A doctest suite.")
>>> get_suite("hello-doc").func(None, None, options={})[0]["value"]
42.0
>>> _ = SUITES.pop("hello-doc")
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Callable

from ...errors import CulturaError, unknown

SuiteFunc = Callable[..., list]

#: Modules of the built-in suites, imported on first use (a module that does not exist yet is skipped).
BUILTIN_MODULES = [
    "cultura.evaluate.suites.retrieval.prevalence",
    "cultura.evaluate.suites.retrieval.association",
    "cultura.evaluate.suites.retrieval.descriptor",
    "cultura.evaluate.suites.latent.suite",
    "cultura.evaluate.suites.social.suite",
    "cultura.evaluate.suites.llm_bias.suite",
    "cultura.evaluate.suites.attribution.suite",
]
ENTRY_POINT_GROUP = "cultura.suites"
ROW_KEYS = ("suite", "metric", "value", "ci_low", "ci_high", "n", "group", "details")


class SuiteSkipped(CulturaError):
    """Raised by a suite when the project holds no data it can evaluate (no benchmark of its kind, no caption
    pool, no portrait set). Under ``--suite all`` the run is recorded as ``skipped`` with this reason; asked for
    by name, it is an error that says what to build or import first."""


@dataclass(frozen=True)
class Suite:
    """A registered suite: its name, function, one-line description and the benchmark kind it reads
    (``None`` when it resolves its own data)."""

    name: str
    func: SuiteFunc
    description: str
    benchmark_kind: str | None = None
    in_all: bool = True
    model_kind: str = "embedder"
    extra: dict = field(default_factory=dict, compare=False, hash=False)


SUITES: dict[str, Suite] = {}
_loaded = False


def register_suite(name: str, func: SuiteFunc, *, description: str, benchmark_kind: str | None = None,
                   in_all: bool = True, model_kind: str = "embedder") -> Suite:
    """Register ``func`` as suite ``name`` (re-registering a name replaces it). ``in_all``: whether
    ``--suite all`` runs it. ``model_kind``: ``"embedder"`` (the runner builds an Embedder from each
    ``--model``) or ``"llm"`` (a suite named explicitly gets each ``--model`` spec as ``options["llm"]`` and a
    :class:`ModelRef` in place of the embedder)."""
    if not name or not callable(func):
        raise ValueError("register_suite needs a non-empty name and a callable func")
    if model_kind not in ("embedder", "llm"):
        raise ValueError("model_kind must be 'embedder' or 'llm'")
    suite = Suite(name=name, func=func, description=description, benchmark_kind=benchmark_kind,
                  in_all=in_all, model_kind=model_kind)
    SUITES[name] = suite
    return suite


def load_suites() -> dict[str, Suite]:
    """Import the built-in suite modules and the ``cultura.suites`` entry points (once)."""
    global _loaded
    if _loaded:
        return SUITES
    _loaded = True
    for mod_name in BUILTIN_MODULES:
        try:
            importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            if e.name != mod_name:
                raise
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        obj = ep.load()
        if callable(obj):
            obj()
    return SUITES


def get_suite(name: str) -> Suite:
    """The suite registered as ``name``; an unknown name is an error listing the valid ones."""
    load_suites()
    if name not in SUITES:
        raise unknown("suite", name, [*SUITES, "all"])
    return SUITES[name]


def resolve_suites(names) -> list[Suite]:
    """Suites for a list of names (or one comma-separated string); ``all`` expands to every suite with
    ``in_all``, in registration order."""
    load_suites()
    if isinstance(names, str):
        names = [names]
    names = [part for n in names for part in str(n).split(",") if part.strip()]
    if not names:
        raise unknown("suite", "", [*SUITES, "all"])
    out: list[Suite] = []
    for n in names:
        n = n.strip()
        picked = [s for s in SUITES.values() if s.in_all] if n == "all" else [get_suite(n)]
        out += [s for s in picked if s not in out]
    return out


def row(suite: str, metric: str, value, *, ci_low=None, ci_high=None, n: int | None = None,
        group: dict | None = None, details: dict | None = None) -> dict[str, Any]:
    """Build one result row with every key of the contract (floats as Python floats)."""
    return {
        "suite": suite, "metric": metric, "value": _num(value), "ci_low": _num(ci_low),
        "ci_high": _num(ci_high), "n": None if n is None else int(n), "group": dict(group or {}),
        "details": dict(details or {}),
    }


def _num(x):
    return None if x is None else float(x)


__all__ = ["Suite", "SuiteSkipped", "SUITES", "register_suite", "get_suite", "resolve_suites", "load_suites",
           "row", "ROW_KEYS"]
