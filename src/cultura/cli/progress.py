"""The command line's progress reporter: the library's :class:`cultura.progress.Event` s on stderr (never mixed
into normal or JSON output on stdout). On a terminal, a rich bar per running task and a closing summary line
when it ends; elsewhere (a log file, CI, a pipe), a task that runs longer than :data:`QUIET_S` prints one line
every :data:`EVERY_S` seconds and a closing summary, so no long stage is silent and a short one prints nothing.
The root group installs one around every command (:func:`cultura.progress.reporting`), so a stage several calls
down reports here without an argument threaded through each call."""
from __future__ import annotations

import time

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from ..progress import Event

#: Seconds a task runs before the first line when stderr is not a terminal, and between lines after it.
QUIET_S = 10.0
EVERY_S = 10.0


def _info(info: dict) -> str:
    return ", ".join(f"{v} {k}" for k, v in info.items())


def _count(e: Event) -> str:
    return f"{e.done}/{e.total}" if e.total is not None else f"{e.done}"


class BarReporter:
    """One rich bar per running task on a terminal (a finished task's bar is replaced by its summary line);
    periodic lines and a summary elsewhere. ``clock`` is the time source (tests pass their own)."""

    def __init__(self, console: Console | None = None, *, clock=time.monotonic):
        self.console = console if console is not None else Console(stderr=True)
        self.clock = clock
        self._bars: Progress | None = None
        self._tasks: dict[int, TaskID] = {}
        self._started: dict[int, float] = {}
        self._said: dict[int, float] = {}

    def __call__(self, event: Event) -> None:
        now = self.clock()
        start = self._started.setdefault(event.task, now)
        if not self.console.is_terminal:
            self._line(event, now, start)
            return
        if self._bars is None:
            self._bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("{task.fields[info]}"), TimeRemainingColumn(), console=self.console,
                                  transient=True)
            self._bars.start()
        bars = self._bars
        tid = self._tasks.get(event.task)
        if tid is None:
            tid = self._tasks[event.task] = bars.add_task(event.stage, total=event.total, info=_info(event.info))
        bars.update(tid, completed=event.done, total=event.total, info=_info(event.info))
        if event.finished:
            bars.remove_task(self._tasks.pop(event.task))
            self._started.pop(event.task, None)
            self.console.print(escape(self._summary(event, now - start)), highlight=False)
            if not self._tasks:
                self.close()

    def _line(self, event: Event, now: float, start: float) -> None:
        """Not a terminal: a line once the task has run :data:`QUIET_S`, then every :data:`EVERY_S`; a summary
        at the end of a task that printed any."""
        last = self._said.get(event.task)
        if event.finished:
            self._started.pop(event.task, None)
            if self._said.pop(event.task, None) is not None or now - start >= QUIET_S:
                self.console.print(escape(self._summary(event, now - start)), highlight=False, soft_wrap=True)
            return
        if (last is None and now - start >= QUIET_S) or (last is not None and now - last >= EVERY_S):
            self._said[event.task] = now
            info = f" ({_info(event.info)})" if event.info else ""
            self.console.print(escape(f"{event.stage}: {_count(event)}{info}, {now - start:.0f} s"),
                               highlight=False, soft_wrap=True)

    @staticmethod
    def _summary(event: Event, took: float) -> str:
        info = f" ({_info(event.info)})" if event.info else ""
        return f"{event.stage}: done, {_count(event)}{info} in {took:.1f} s"

    def close(self) -> None:
        """Stop drawing (a command that ends, or fails, with a task still open)."""
        if self._bars is not None:
            self._bars.stop()
            self._bars = None
            self._tasks.clear()
