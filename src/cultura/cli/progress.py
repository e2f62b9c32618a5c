"""The command line's progress reporter: the library's :class:`cultura.progress.Event` s on stderr (never mixed
into normal or JSON output on stdout). On a terminal, a rich bar per running task and a closing summary line
when it ends; elsewhere (a log file, CI, a pipe), a task that runs longer than :data:`QUIET_S` prints one line
every :data:`EVERY_S` seconds and a closing summary, so no long stage is silent and a short one prints nothing.
Those lines come from a heartbeat thread as well as from the stage's own events, so a call that tells nothing
for minutes (a task :func:`cultura.progress.waiting` for a server) still gets its line every 5 s. A transient task
(such a wait) leaves no summary line on a terminal: the stage around it prints one.
The root group installs one around every command (:func:`cultura.progress.reporting`), so a stage several calls
down reports here without an argument threaded through each call, and opens a line for the whole command
(:meth:`BarReporter.command`): what keeps a command that has nothing of its own to report from looking hung."""
from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, ProgressColumn, TaskID, TextColumn, TimeRemainingColumn
from rich.text import Text

from ..progress import Event, reporter_for

#: Seconds a task runs before the first line when stderr is not a terminal, and between lines after it.
QUIET_S = 5.0
EVERY_S = 5.0
#: Seconds between the heartbeat thread's looks at the open tasks.
HEARTBEAT_S = 1.0
#: The task id of the whole command's line (the library's tasks count up from 1).
COMMAND = -1


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


class _Count(ProgressColumn):
    """``12/40``; ``12`` without a total; nothing for a task with neither (a wait, the command's own row)."""

    def render(self, task) -> Text:
        if task.total is None:
            return Text(f"{task.completed:.0f}" if task.completed else "", style="progress.download")
        return Text(f"{task.completed:.0f}/{task.total:.0f}", style="progress.download")


class _Time(ProgressColumn):
    """Time left where there is a total, time spent where there is none (a wait, the command's own row)."""

    def __init__(self):
        super().__init__()
        self._left = TimeRemainingColumn()

    def render(self, task) -> Text:
        if task.total is None:  # the command's row counts from the command's start, not the row's
            spent = task.get_time() - task.fields["since"] if "since" in task.fields else task.elapsed or 0
            return Text(f"{spent:.0f} s", style="progress.elapsed")
        return self._left.render(task)


class _EndsRowOnWrite:
    """``sys.stdout`` while the command's row is drawn: the first write (the command's result begins) ends the
    row, then everything goes to the stream it wraps."""

    def __init__(self, stream, reporter: BarReporter):
        self._stream, self._reporter, self._ended = stream, reporter, False

    def write(self, text: str) -> int:
        if text and not self._ended:   # a long result writes often: the row is ended once
            self._ended = True
            self._reporter.end_command()
        return self._stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


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
        self._open: dict[int, Event] = {}   # the last event of each open task the heartbeat looks at
        self._lock = threading.RLock()      # the heartbeat thread and the stage's own thread take turns
        self._beating: threading.Thread | None = None
        self._command_row: TaskID | None = None   # the whole command's row on a terminal (see :meth:`command`)
        self._last_said: float | None = None       # when a line was last printed (off a terminal)
        self._stdout = None                          # sys.stdout as it was before the command's row was drawn

    @contextmanager
    def command(self, name: str) -> Iterator[None]:
        """The whole command ``name`` as a line of its own, so a command never looks hung while it has nothing of
        its own to report (opening a database, a write the library does not count, the gap between two stages):
        off a terminal ``name: 12 s`` whenever nothing at all was printed for :data:`EVERY_S` (once it has run
        :data:`QUIET_S`), and a closing line if it printed any; on a terminal a row with the time spent, above the
        stages' bars, from :data:`QUIET_S` on. A command that ends sooner shows nothing. A command that prompts
        or serves ends this line first (:meth:`end_command`): a prompt must not sit under a live display."""
        self(Event(name, 0, None, {}, False, COMMAND, True))
        try:
            yield
        finally:
            self.end_command()
            with self._lock:
                self._restore_stdout()

    def end_command(self) -> None:
        """The command's own line stops here (a command that now serves until Ctrl-C or asks a question, or
        that ended)."""
        with self._lock:
            e = self._open.get(COMMAND)
            if e is not None:
                self._report(replace(e, finished=True))

    def __call__(self, event: Event) -> None:
        with self._lock:
            self._report(event)

    def _report(self, event: Event) -> None:
        now = self.clock()
        start = self._started.setdefault(event.task, now)
        if event.finished:
            self._open.pop(event.task, None)
        elif not self.console.is_terminal or event.task == COMMAND:
            self._open[event.task] = event   # what the heartbeat looks at
            self._beat()
        if not self.console.is_terminal:
            self._line(event, now, start)
            return
        if event.task == COMMAND:
            if event.finished:
                self._started.pop(COMMAND, None)
                if self._command_row is not None and self._bars is not None:
                    self._bars.remove_task(self._command_row)
                self._command_row = None  # stdout stays wrapped, passing through, until the command ends
                if not self._tasks:
                    self._stop_bars()
            return
        bars = self._draw()
        tid = self._tasks.get(event.task)
        if tid is None:
            tid = self._tasks[event.task] = bars.add_task(event.stage, total=event.total, info=_info(event.info))
        bars.update(tid, completed=event.done, total=event.total, info=_info(event.info))
        if event.finished:
            bars.remove_task(self._tasks.pop(event.task))
            self._started.pop(event.task, None)
            if not event.transient:
                self.console.print(escape(self._summary(event, now - start)), highlight=False)
            if not self._tasks and self._command_row is None:
                self._stop_bars()

    def _draw(self) -> Progress:
        """The live display of the rows (started on the first)."""
        if self._bars is None:
            # stdout is left alone: a result printed while a bar is drawn belongs on stdout (a file, a pipe),
            # never in the bars' stream
            self._bars = Progress(TextColumn("{task.description}"), BarColumn(), _Count(),
                                  TextColumn("{task.fields[info]}"), _Time(), console=self.console, transient=True,
                                  get_time=self.clock, redirect_stdout=False)
            self._bars.start()
        return self._bars

    def tick(self) -> None:
        """The line of every open task that is due one (what the heartbeat thread calls), so a task whose stage
        is silent inside one long call still says where it is; on a terminal, the command's row once due."""
        with self._lock:
            now = self.clock()
            if self.console.is_terminal:
                e = self._open.get(COMMAND)
                if e is not None and self._command_row is None and now - self._started.get(COMMAND, now) >= QUIET_S:
                    self._command_row = self._draw().add_task(e.stage, total=None, info="",
                                                              since=self._started[COMMAND])
                    self._stdout = sys.stdout
                    sys.stdout = _EndsRowOnWrite(sys.stdout, self)
                return
            for e in sorted(self._open.values(), key=lambda e: e.task == COMMAND):  # the stages speak first
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
        """Not a terminal: a task's line once it has run :data:`QUIET_S`, then every :data:`EVERY_S`; a summary
        at the end of a task that printed any. The command's own line speaks only when nothing at all was
        printed for :data:`EVERY_S`: a stage that speaks for itself needs no help."""
        last = self._said.get(event.task)
        whole = event.task == COMMAND
        if event.finished:
            self._started.pop(event.task, None)
            if self._said.pop(event.task, None) is not None or (now - start >= QUIET_S and not whole):
                self._print(self._summary(event, now - start), now)
            return
        if whole:
            quiet_since = start if self._last_said is None else max(start, self._last_said)
            due = now - start >= QUIET_S and now - quiet_since >= EVERY_S
        else:
            due = (last is None and now - start >= QUIET_S) or (last is not None and now - last >= EVERY_S)
        if due:
            self._said[event.task] = now
            self._print(_line_text(event, f"{now - start:.0f} s"), now)

    def _print(self, text: str, now: float) -> None:
        self._last_said = now
        self.console.print(escape(text), highlight=False, soft_wrap=True)

    @staticmethod
    def _summary(event: Event, took: float) -> str:
        info = f" ({_info(event.info)})" if event.info else ""
        count = _count(event)
        return f"{event.stage}: done{', ' + count if count else ''}{info} in {took:.1f} s"

    def close(self) -> None:
        """Stop drawing (a command that ends, or fails, with a task still open)."""
        with self._lock:
            self._open.clear()
            self._command_row = None
            self._restore_stdout()
            self._stop_bars()

    def _restore_stdout(self) -> None:
        """Put back the stdout the command's row wrapped, once the command is over: never from inside a write
        (``print`` holds only a borrowed reference to ``sys.stdout``: swapping it mid-call frees the object
        it is still writing to)."""
        if self._stdout is not None:
            if isinstance(sys.stdout, _EndsRowOnWrite):
                sys.stdout = self._stdout
            self._stdout = None

    def _stop_bars(self) -> None:
        if self._bars is not None:
            self._bars.stop()
            self._bars = None
            self._tasks.clear()


def end_command_line() -> None:
    """End the command's own line (:meth:`BarReporter.command`) before a command serves until Ctrl-C or asks a
    question: serving is not work in progress, and a prompt must not sit under a live display."""
    reporter = reporter_for(None)
    if isinstance(reporter, BarReporter):
        reporter.end_command()
