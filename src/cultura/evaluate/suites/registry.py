"""The suite registry's types: :class:`Suite` (name, function, description, benchmark kind, report section),
:func:`register_suite`, :func:`row` (one result row of the contract) and :class:`SuiteSkipped`. Suite folders
import these; :mod:`cultura.evaluate.suites` registers the built-in folders and the entry points.

Per-sample logs and smoke runs: while the runner runs a suite it opens :func:`suite_run` (whether samples are
collected, the ``limit``); a suite reports every scored unit with :func:`log_samples` (a trial's candidate
scores and winner, an image query's top-k captions, a masked context's candidate log-likelihoods, a judge
score with its token probabilities) — a no-op unless collecting (:func:`logging_samples`) — and cuts its
units to :func:`sample_limit` for ``evaluate run --limit N``.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping

from ...bounds import N_RESAMPLES, SEED, Bound
from ...errors import SuiteSkipped  # noqa: F401  (re-exported)

SuiteFunc = Callable[..., list]
SectionFunc = Callable[[list, object], Any]
ROW_KEYS = ("suite", "metric", "value", "ci_low", "ci_high", "n", "group", "details")
#: The numeric options most suites read (``--option seed=1``, ``--option n_resamples=200``), with their ranges.
COMMON_OPTIONS: dict[str, Bound] = {"seed": SEED, "n_resamples": N_RESAMPLES}


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
    #: the version of the suite's protocol (bump when its rows or their meaning change); in every results JSON
    version: str = "1"
    #: the numeric options the suite reads, each with its range: the runner refuses a value outside it before
    #: anything runs (``--option n_resamples=10**12`` would ask numpy for terabytes)
    options: Mapping[str, Bound] = field(default_factory=dict, compare=False, hash=False)


SUITES: dict[str, Suite] = {}


def register_suite(name: str, func: SuiteFunc, *, description: str, benchmark_kind: str | None = None,
                   in_all: bool = True, model_kind: str = "embedder", section: SectionFunc | None = None,
                   options: Mapping[str, Bound] | None = None) -> Suite:
    """Register ``func`` as suite ``name`` (re-registering a name replaces it). ``in_all``: whether
    ``--suite all`` runs it. ``model_kind``: ``"embedder"`` (the runner builds an Embedder from each
    ``--model``) or ``"llm"`` (a suite named explicitly gets each ``--model`` spec as ``options["llm"]`` and a
    :class:`ModelRef` in place of the embedder). ``section``: ``render(results, project) -> ReportSection``,
    the suite's part of the report (see :mod:`cultura.evaluate.report`). ``options``: the numeric options it
    reads with their :class:`~cultura.bounds.Bound` (e.g. ``{**COMMON_OPTIONS, "k": Bound(1, 100)}``)."""
    if not name or not callable(func):
        raise ValueError("register_suite needs a non-empty name and a callable func")
    if model_kind not in ("embedder", "llm"):
        raise ValueError("model_kind must be 'embedder' or 'llm'")
    return add_suite(Suite(name=name, func=func, description=description, benchmark_kind=benchmark_kind,
                           in_all=in_all, model_kind=model_kind, section=section, options=dict(options or {})))


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


#: the reason :func:`explain_numbers` gives a number its suite left unexplained (tests look for it: never shown)
UNEXPLAINED = "gave no reason"


def _finite(x) -> bool:
    """``x`` is no number (None) or a finite one; results read back as JSON hold ``"nan"``/``"inf"`` as text."""
    return x is None or math.isfinite(float(x))


def unexplained(rows: list[dict]) -> list[dict]:
    """The rows that break the promise every suite keeps: a number that is not finite (the value or a bound of
    its interval: ``nan``, ``inf``) says why in ``details["reason"]`` (or ``details["degenerate"]``), in
    words; so does a number marked degenerate."""
    out = []
    for r in rows:
        d = r.get("details") or {}
        odd = not (_finite(r.get("value")) and _finite(r.get("ci_low")) and _finite(r.get("ci_high")))
        if (odd or "degenerate" in d) and not (d.get("reason") or d.get("degenerate")):
            out.append(r)
    return out


def explain_numbers(rows: list[dict], suite: str) -> list[dict]:
    """The one check every suite's rows pass on their way to the result store (the runner calls it): a row
    :func:`unexplained` would list gets a reason that says so (``UNEXPLAINED``), never a silent ``nan``."""
    for r in unexplained(rows):
        r["details"]["reason"] = (f"{r['metric']} is {r['value']} (interval {r.get('ci_low')}–{r.get('ci_high')}) "
                                  f"and the {suite} suite {UNEXPLAINED}")
    return rows



# -- per-sample logs and --limit (set by the runner around one suite run) -----------------------------------

class SampleLog(list):
    """The samples of one suite run; past ``cap`` records it drops them all (``overflow``) and stops."""

    def __init__(self, cap: int | None = None):
        super().__init__()
        self.cap, self.overflow = cap, False


_SAMPLES: ContextVar[SampleLog | None] = ContextVar("cultura_samples", default=None)
_LIMIT: ContextVar[int | None] = ContextVar("cultura_limit", default=None)


@contextmanager
def suite_run(*, samples: bool = False, cap: int | None = None, limit: int | None = None):
    """Around one suite run: collect per-sample records (yields the :class:`SampleLog`, or None) — at most
    ``cap`` of them, else none — and apply ``limit``."""
    buf = SampleLog(cap) if samples else None
    t1, t2 = _SAMPLES.set(buf), _LIMIT.set(limit)
    try:
        yield buf
    finally:
        _SAMPLES.reset(t1)
        _LIMIT.reset(t2)


def logging_samples() -> bool:
    """Whether the current suite run collects per-sample records (skip building them when not)."""
    buf = _SAMPLES.get()
    return buf is not None and not buf.overflow


def log_samples(kind: str, records: Iterable[dict]) -> None:
    """Add per-sample records of ``kind`` (``trial``, ``image_query``, ``masked_context``, ``judge_score``,
    …) to the current suite run's log; a no-op outside a collecting run. ``records`` may be a generator: it is
    not consumed past the log's cap."""
    buf = _SAMPLES.get()
    if buf is None or buf.overflow:
        return
    for r in records:
        if buf.cap is not None and len(buf) >= buf.cap:
            buf.overflow = True
            buf.clear()
            return
        buf.append({**r, "kind": kind})  # a record's own "kind" field must be renamed


def sample_limit() -> int | None:
    """``evaluate run --limit N``: the most units (trials, query images, contexts, judged pairs) a suite
    scores in this run (a smoke run), or None."""
    return _LIMIT.get()
