"""The suite registry's types: :class:`Suite` (name, function, description, benchmark kind, report section),
:func:`register_suite`, :func:`row` (one result row of the contract) and :class:`SuiteSkipped`. Suite folders
import these; :mod:`cultura.evaluate.suites` registers the built-in folders and the entry points.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ...errors import SuiteSkipped  # noqa: F401  (re-exported)

SuiteFunc = Callable[..., list]
SectionFunc = Callable[[list, object], Any]
ROW_KEYS = ("suite", "metric", "value", "ci_low", "ci_high", "n", "group", "details")


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
    section: SectionFunc | None = field(default=None, compare=False, hash=False)


SUITES: dict[str, Suite] = {}


def register_suite(name: str, func: SuiteFunc, *, description: str, benchmark_kind: str | None = None,
                   in_all: bool = True, model_kind: str = "embedder", section: SectionFunc | None = None) -> Suite:
    """Register ``func`` as suite ``name`` (re-registering a name replaces it). ``in_all``: whether
    ``--suite all`` runs it. ``model_kind``: ``"embedder"`` (the runner builds an Embedder from each
    ``--model``) or ``"llm"`` (a suite named explicitly gets each ``--model`` spec as ``options["llm"]`` and a
    :class:`ModelRef` in place of the embedder). ``section``: ``render(results, project) -> ReportSection``,
    the suite's part of the report (see :mod:`cultura.evaluate.report`)."""
    if not name or not callable(func):
        raise ValueError("register_suite needs a non-empty name and a callable func")
    if model_kind not in ("embedder", "llm"):
        raise ValueError("model_kind must be 'embedder' or 'llm'")
    return add_suite(Suite(name=name, func=func, description=description, benchmark_kind=benchmark_kind,
                           in_all=in_all, model_kind=model_kind, section=section))


def add_suite(suite: Suite) -> Suite:
    """Register a :class:`Suite` object (re-registering its name replaces it)."""
    if suite.model_kind not in ("embedder", "llm"):
        raise ValueError("model_kind must be 'embedder' or 'llm'")
    SUITES[suite.name] = suite
    return suite


def register_report_section(suite: str, render: SectionFunc) -> None:
    """Attach ``render`` as the report section of the registered suite ``suite``."""
    if suite not in SUITES or not callable(render):
        raise ValueError(f"register_report_section needs a registered suite and a callable (got {suite!r})")
    SUITES[suite] = replace(SUITES[suite], section=render)


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


def degenerate(rows: list[dict], reason: str | None) -> list[dict]:
    """Mark result rows whose input makes them trivial (k covers the whole pool, one language, one class):
    ``details["degenerate"]`` holds the reason, which the report repeats in its warnings. Returns ``rows``."""
    if reason:
        for r in rows:
            r["details"]["degenerate"] = reason
    return rows

