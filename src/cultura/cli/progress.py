"""The command line's progress reporter: the library's :class:`cultura.progress.Event` s on stderr (never mixed
into normal or JSON output on stdout). On a terminal, a rich bar per running task and a closing summary line
when it ends; elsewhere (a log file, CI, a pipe), a task that runs longer than :data:`QUIET_S` prints one line
every :data:`EVERY_S` seconds and a closing summary, so no long stage is silent and a short one prints nothing.
Those lines come from a heartbeat thread as well as from the stage's own events, so a call that tells nothing
for minutes (a task :func:`cultura.progress.waiting` for a server) still gets its line every 5 s (so no stage is silent for 10 s). A transient
task (such a wait) leaves no summary line on a terminal: the stage around it prints one.
The root group installs one around every command (:func:`cultura.progress.reporting`), so a stage several calls
down reports here without an argument threaded through each call."""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from ..progress import Event, Task

#: Seconds a task runs before the first line when stderr is not a terminal, and between lines after it.
QUIET_S = 5.0
EVERY_S = 5.0
#: Seconds between the heartbeat thread's looks at the open tasks (off a terminal).
HEARTBEAT_S = 1.0


def _info(info: dict) -> str:
    return ", ".join(f"{v} {k}" for k, v in info.items())


def _count(e: Event) -> str:
    """``12/40``, or ``12`` without a total; nothing for a task with neither (a wait)."""
    if e.total is None:
        return f"{e.done}" if e.done else ""
    return f"{e.done}/{e.total}"


def _line_text(e: Event, tail: str) -> str:
    """``stage: 12/40 (3 ok), tail`` with the parts a task has."""
    info = f" ({_info(e.info)})" if e.info else ""
    what = f"{_count(e)}{info}".strip()
    return f"{e.stage}: {what + ', ' if what else ''}{tail}"


class BarReporter:
    """One rich bar per running task on a terminal (a finished task's bar is replaced by its summary line);
    periodic lines and a summary elsewhere. ``clock`` is the time source (tests pass their own, and then no
    heartbeat thread runs unless ``heartbeat`` asks for one: they call :meth:`tick` themselves)."""

    def __init__(self, console: Console | None = None, *, clock=None, heartbeat: float | None = None):
        self.console = console if console is not None else Console(stderr=True)
        self.clock = clock if clock is not None else time.monotonic
        self.heartbeat = heartbeat if heartbeat is not None or clock is not None else HEARTBEAT_S
        self._bars: Progress | None = None
        self._tasks: dict[int, TaskID] = {}
        self._started: dict[int, float] = {}
        self._said: dict[int, float] = {}
        self._open: dict[int, Event] = {}   # the last event of each open task (off a terminal)
        self._lock = threading.RLock()      # the heartbeat thread and the stage's own thread take turns
        self._beating: threading.Thread | None = None
        self._command: Task | None = None   # the whole command, off a terminal (see :meth:`command`)

    @contextmanager
    def command(self, name: str) -> Iterator[None]:
        """Off a terminal, the whole command ``name`` as a task of its own that speaks only while no stage's task
        is open: a command that runs longer than :data:`QUIET_S` with nothing of its own to report (opening a
        database, a write that the library does not count) still prints ``name: 12 s`` every :data:`EVERY_S`,
        and a closing line if it printed any; a command that ends sooner prints nothing. On a terminal the
        stages' bars are what a person watches, and a prompt must not sit under a live display: nothing here."""
        if self.console.is_terminal:
            yield
            return
        self._command = Task(name, None, self, {}, transient=True)
        try:
            yield
        finally:
            self.end_command()

    def end_command(self) -> None:
        """The command's own line stops here (a command that now serves until Ctrl-C, or that ended)."""
        if self._command is not None:
            self._command.close()
            self._command = None

    def __call__(self, event: Event) -> None:
        with self._lock:
            self._report(event)

    def _report(self, event: Event) -> None:
        now = self.clock()
        start = self._started.setdefault(event.task, now)
        if not self.console.is_terminal:
            if event.finished:
                self._open.pop(event.task, None)
            else:
                self._open[event.task] = event
                self._beat()
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
            if not event.transient:
                self.console.print(escape(self._summary(event, now - start)), highlight=False)
            if not self._tasks:
                self.close()

    def tick(self) -> None:
        """Off a terminal: the line of every open task that is due one (what the heartbeat thread calls), so a
        task whose stage is silent inside one long call still says where it is."""
        with self._lock:
            now = self.clock()
            for e in list(self._open.values()):
                self._line(e, now, self._started.get(e.task, now))

    def _beat(self) -> None:
        """Start the heartbeat thread if none runs (it ends once no task is open)."""
        if not self.heartbeat or (self._beating is not None and self._beating.is_alive()):
            return
        self._beating = threading.Thread(target=self._heartbeat, name="cultura-progress", daemon=True)
        self._beating.start()

    def _heartbeat(self) -> None:
        while True:
            time.sleep(self.heartbeat)
            with self._lock:
                if not self._open:
                    self._beating = None
                    return
                self.tick()

    def _line(self, event: Event, now: float, start: float) -> None:
        """Not a terminal: a line once the task has run :data:`QUIET_S`, then every :data:`EVERY_S`; a summary
        at the end of a task that printed any."""
        last = self._said.get(event.task)
        whole = self._command is not None and event.task == self._command.id
        if whole and not event.finished and len(self._open) > 1:
            return  # a stage's task is open and speaks for itself
        if event.finished:
            self._started.pop(event.task, None)
            if self._said.pop(event.task, None) is not None or (now - start >= QUIET_S and not whole):
                self.console.print(escape(self._summary(event, now - start)), highlight=False, soft_wrap=True)
            return
        if (last is None and now - start >= QUIET_S) or (last is not None and now - last >= EVERY_S):
            self._said[event.task] = now
            self.console.print(escape(_line_text(event, f"{now - start:.0f} s")), highlight=False, soft_wrap=True)

    @staticmethod
    def _summary(event: Event, took: float) -> str:
        info = f" ({_info(event.info)})" if event.info else ""
        count = _count(event)
        return f"{event.stage}: done{', ' + count if count else ''}{info} in {took:.1f} s"

    def close(self) -> None:
        """Stop drawing (a command that ends, or fails, with a task still open)."""
        with self._lock:
            self._open.clear()
            if self._bars is not None:
                self._bars.stop()
                self._bars = None
                self._tasks.clear()
