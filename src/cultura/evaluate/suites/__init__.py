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

Built-in suites live in one folder per family (``retrieval/``, ``latent/``, ``social/``, ``llm_bias/``,
``attribution/``), each exposing ``SUITES`` (its :class:`Suite` objects, report section included);
:func:`load_suites` registers them on first use, then the ``cultura.suites`` entry point group (an entry point
names a callable taking no arguments that calls :func:`register_suite`, or a module exposing ``SUITES``).

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

from ...errors import unknown
from ...lazy import lazy
from .registry import (ROW_KEYS, SUITES, Suite, SuiteFunc, SuiteSkipped, add_suite, register_report_section,
                       register_suite, row)

ENTRY_POINT_GROUP = "cultura.suites"
#: read when the suites load (opening a project reads only the suites' schemas; importlib.metadata pulls in email)
metadata = lazy("importlib.metadata")
#: The built-in suite folders, in report order (imported by :func:`load_suites`, so that opening a project — which
#: reads each folder's ``schema`` — does not import every suite).
BUILTIN_FOLDERS = tuple(f"{__name__}.{name}" for name in ("retrieval", "latent", "social", "llm_bias", "attribution"))
_loaded = False


def load_suites() -> dict[str, Suite]:
    """Import the built-in suite modules and the ``cultura.suites`` entry points (once)."""
    global _loaded
    if _loaded:
        return SUITES
    _loaded = True
    for folder in BUILTIN_FOLDERS:
        for suite in importlib.import_module(folder).SUITES:
            if suite.name not in SUITES:  # a suite registered earlier by name (a test, a plugin) wins
                add_suite(suite)
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        obj = ep.load()
        if callable(obj):
            obj()
        for suite in getattr(obj, "SUITES", ()):
            add_suite(suite)
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


__all__ = ["Suite", "SuiteSkipped", "SUITES", "register_suite", "add_suite", "register_report_section",
           "get_suite", "resolve_suites", "load_suites", "row", "ROW_KEYS", "SuiteFunc"]
