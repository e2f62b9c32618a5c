"""Progress of the long stages, told to whoever asked for it: the library never draws.

A stage opens a :class:`Task` and advances it; every change is an :class:`Event` handed to a *reporter*, a plain
callable. The command line passes one that draws a bar on stderr (``cultura.cli.progress``); a notebook may pass
its own (``p.images.download(progress=print)``), or none at all (the default: silent)::

    with progress.task("hashing images", total=len(todo), progress=reporter) as bar:
        for chunk in chunks(todo):
            ...
            bar.advance(len(chunk))

``progress`` (the argument every long stage takes) is a reporter, ``False`` (silent), or ``None``/``True``: the
reporter of the calling context, set with :func:`reporting` (which is how the command line reaches a stage
several calls down without threading an argument through each).

A call that tells nothing until it returns (a server importing 2,000 tasks) runs inside :func:`waiting`, which
names what it waits for; the command line repeats that line off a terminal however long the call is silent.

>>> seen = []
>>> with task("demo", total=2, progress=seen.append) as t:
...     t.advance(); t.advance(ok=2)
>>> [(e.done, e.total, e.finished) for e in seen]
[(0, 2, False), (1, 2, False), (2, 2, False), (2, 2, True)]
>>> seen[2].info
{'ok': 2}
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar, Union

T = TypeVar("T")


@dataclass(frozen=True)
class Event:
    """One change of a task: ``stage`` (what runs, e.g. ``download``), ``done`` of ``total`` (None when unknown),
    ``info`` (counts worth showing, e.g. ``{"ok": 12}``), ``finished`` on the last event, ``task`` an id that
    tells concurrent tasks apart, ``transient`` for a wait inside a stage (:func:`waiting`): shown while it lasts,
    no summary of its own needed (the stage around it has one)."""

    stage: str
    done: int
    total: int | None
    info: dict[str, Any] = field(default_factory=dict)
    finished: bool = False
    task: int = 0
    transient: bool = False


#: A reporter: any callable taking an Event (its return value is ignored: ``print`` will do).
Reporter = Callable[[Event], object]
#: What a stage's ``progress`` argument takes: a reporter, False (silent), or None/True (the context's reporter).
Progress = Union[Reporter, bool, None]

_current: ContextVar[Reporter | None] = ContextVar("cultura_progress", default=None)
_ids = itertools.count(1)


@contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    """Within this block, stages called with ``progress=None`` (their default) report to ``reporter``."""
    token = _current.set(reporter)
    try:
        yield
    finally:
        _current.reset(token)


def reporter_for(progress: Progress) -> Reporter | None:
    """The reporter a stage called with ``progress`` reports to (None: nobody listens)."""
    if progress is False:
        return None
    if progress is None or progress is True:
        return _current.get()
    if not callable(progress):
        raise TypeError(f"progress must be a callable taking an Event, True, False or None, not {progress!r}")
    return progress


class Task:
    """A running task: :meth:`advance` it, :meth:`close` it once (a ``with`` block does)."""

    def __init__(self, stage: str, total: int | None, reporter: Reporter | None, info: dict[str, Any], *,
                 transient: bool = False):
        self.stage, self.total, self.done = stage, total, 0
        self.info = dict(info)
        self.transient = transient
        self._reporter = reporter
        self._id = next(_ids)
        self._closed = False
        self._emit(False)

    def _emit(self, finished: bool) -> None:
        if self._reporter is not None:
            self._reporter(Event(self.stage, self.done, self.total, dict(self.info), finished, self._id,
                                 self.transient))

    def advance(self, n: int = 1, **info: Any) -> None:
        """``n`` more items done; ``info`` updates the counts shown beside the bar."""
        self.done += n
        self.info.update(info)
        self._emit(False)

    def update(self, *, done: int | None = None, total: int | None = None, **info: Any) -> None:
        """Set the count done or the total outright (a stage that learns its size late)."""
        if done is not None:
            self.done = done
        if total is not None:
            self.total = total
        self.info.update(info)
        self._emit(False)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._emit(True)

    def __enter__(self) -> Task:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def task(stage: str, total: int | None = None, *, progress: Progress = None, **info: Any) -> Task:
    """Open a task of ``stage`` reporting to the reporter ``progress`` names (see the module's doc)."""
    return Task(stage, total, reporter_for(progress), info)


@contextmanager
def waiting(what: str, *, progress: Progress = None, **info: Any) -> Iterator[Task]:
    """Run a silent call (one request a server takes long to answer, a model that fits in one go) inside a
    ``transient`` task named ``waiting for WHAT``, so whoever watches knows what it waits for.

    >>> seen = []
    >>> with waiting("Label Studio to import 2,000 tasks into 'filter · aiko'", progress=seen.append):
    ...     pass
    >>> [(e.stage, e.total, e.finished, e.transient) for e in seen][-1]
    ("waiting for Label Studio to import 2,000 tasks into 'filter · aiko'", None, True, True)
    """
    with Task(f"waiting for {what}", None, reporter_for(progress), info, transient=True) as t:
        yield t


def track(items: Iterable[T], stage: str, *, total: int | None = None, progress: Progress = None) -> Iterator[T]:
    """Iterate ``items``, advancing a task of ``stage`` by one per item."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with task(stage, total, progress=progress) as t:
        for item in items:
            yield item
            t.advance()


__all__ = ["Event", "Reporter", "Progress", "Task", "task", "track", "waiting", "reporting", "reporter_for"]
