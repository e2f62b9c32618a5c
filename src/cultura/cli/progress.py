"""The command line's progress reporter: the library's :class:`cultura.progress.Event` s drawn as rich bars on
stderr (never mixed into normal or JSON output on stdout), and only while stderr is a terminal. The root group
installs one around every command (:func:`cultura.progress.reporting`), so a stage several calls down reports
here without an argument threaded through each call."""
from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from ..progress import Event


def _info(info: dict) -> str:
    return ", ".join(f"{v} {k}" for k, v in info.items())


class BarReporter:
    """One rich bar per running task; a finished task's bar is removed, and the display stops with the last."""

    def __init__(self, console: Console | None = None):
        self.console = console if console is not None else Console(stderr=True)
        self._bars: Progress | None = None
        self._tasks: dict[int, TaskID] = {}

    def __call__(self, event: Event) -> None:
        if not self.console.is_terminal:
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
            if not self._tasks:
                self.close()

    def close(self) -> None:
        """Stop drawing (a command that ends, or fails, with a task still open)."""
        if self._bars is not None:
            self._bars.stop()
            self._bars = None
            self._tasks.clear()
