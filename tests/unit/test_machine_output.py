"""Machine output that means what it says: progress bars never reach stdout, adjudication summaries read at 80
columns. (Full sha256s and reasons in --json: tests/curate/test_cultures_decide.py and tests/test_walk.py, through
the CLI on real photographs.)"""
from __future__ import annotations

import io
import random
import time
from types import SimpleNamespace

import click
import pytest
from rich.console import Console

from cultura.cli.annotate import adjudication_lines
from cultura.cli.progress import BarReporter
from cultura.progress import reporting, task, waiting


def test_progress_bars_draw_on_stderr_only(capsys):
    bars = BarReporter(Console(stderr=True, force_terminal=True))
    with reporting(bars):
        with task("embedding images (openclip:cultura-tiny)", 500) as t, task("hashing images", 3) as h:
            for _ in range(500):
                t.advance()
            h.advance(3)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "hashing images" in captured.err  # drawn, on stderr


def test_progress_is_silent_where_nobody_listens(capsys):
    bars = BarReporter(Console(stderr=True))  # stderr is not a terminal here
    with reporting(bars), task("download", 10) as t:
        t.advance(10, ok=10)
    with task("download", 10) as t:  # no reporter at all: a library call from a script
        t.advance(10)
    assert capsys.readouterr() == ("", "")


def test_adjudication_summary_at_80_columns():
    res = [{"campaign": "filter", "kind": "filter", "rule": "majority", "min_agreement": 1.0, "decided": 26,
            "unchanged": 27, "adjudicated": 1, "gold": 0, "pending": 2, "disagreements": 3,
            "sent_to_adjudication": 3, "adjudicator": "judy", "unresolved": 0},
           {"campaign": "relevance-batch-with-a-long-name", "kind": "relevance", "rule": "median",
            "min_agreement": 0.75, "decided": 40, "unchanged": 0, "adjudicated": 0, "gold": 0, "pending": 0,
            "disagreements": 0, "sent_to_adjudication": 0, "unresolved": 0, "flags_resolved": 2}]
    lines = adjudication_lines(res)
    assert max(map(len, lines)) <= 80
    text = " ".join(ln.strip() for ln in lines)
    assert "27 items decided (26 by the rule, 1 by an adjudicator, 0 gold), 27 of them as before" in text
    assert "open: 2 waiting for annotations, 3 disagreements, 3 sent to judy" in text
    assert "2 culture questions decided by the ratings" in text and "open: nothing" in text


def test_a_long_task_off_a_terminal_prints_a_line_now_and_then_and_a_summary(capsys):
    t = [0.0]
    bars = BarReporter(Console(stderr=True), clock=lambda: t[0])  # not a terminal: a log, CI, a pipe
    with reporting(bars), task("tagging", 100) as job:
        for i in range(100):
            t[0] += 0.5  # 50 s in all
            job.advance(ok=i + 1)
    err = capsys.readouterr().err.splitlines()
    periodic = [ln for ln in err if "done" not in ln]
    assert periodic[0].startswith("tagging: 10/100 (10 ok), 5 s") and len(periodic) == 10  # at 5, 10 … 50 s
    assert err[-1] == "tagging: done, 100/100 (100 ok) in 50.0 s"


def test_a_task_on_a_terminal_ends_with_its_summary(capsys):
    bars = BarReporter(Console(stderr=True, force_terminal=True, width=200), clock=lambda: 0.0)
    with reporting(bars), task("view pages", 3) as t:
        t.advance(3)
    assert "view pages: done, 3/3 in 0.0 s" in capsys.readouterr().err


WAIT = "Label Studio to import 2,000 tasks into 'filter · aiko'"


def test_a_silent_wait_off_a_terminal_still_prints_its_line_and_what_it_waits_for(capsys):
    t = [0.0]
    bars = BarReporter(Console(stderr=True), clock=lambda: t[0])  # a log: no event comes while the call runs
    with reporting(bars), waiting(WAIT):
        for _ in range(25):  # 25 s of silence; the heartbeat looks at the open tasks every second
            t[0] += 1
            bars.tick()
    assert capsys.readouterr().err.splitlines() == [
        *(f"waiting for {WAIT}: {s} s" for s in (5, 10, 15, 20, 25)), f"waiting for {WAIT}: done in 25.0 s"]


def test_the_heartbeat_thread_speaks_for_a_silent_call(capsys):
    t = [0.0]
    bars = BarReporter(Console(stderr=True), clock=lambda: t[0], heartbeat=0.01)
    err = ""
    with reporting(bars), waiting(WAIT):
        t[0] = 11.0  # the call has been silent for 11 s: only the heartbeat thread can print now
        deadline = time.monotonic() + 120  # guards against a hang only
        while f"waiting for {WAIT}: 11 s" not in err and time.monotonic() < deadline:
            time.sleep(0.01)
            err += capsys.readouterr().err
    assert f"waiting for {WAIT}: 11 s" in err


def test_a_wait_on_a_terminal_leaves_no_line_of_its_own(capsys):
    bars = BarReporter(Console(stderr=True, force_terminal=True, width=200), clock=lambda: 0.0)
    with reporting(bars), task("pushing filter", 2) as t:
        with waiting(WAIT):
            pass
        t.advance(2)
    err = capsys.readouterr().err
    assert "pushing filter: done, 2/2 in 0.0 s" in err and "waiting for Label Studio to import 2,000 tasks into " \
        "'filter · aiko': done" not in err


def test_a_command_off_a_terminal_speaks_whenever_nothing_was_printed_for_5_s_and_stays_quiet_when_short(capsys):
    t = [0.0]
    bars = BarReporter(Console(stderr=True), clock=lambda: t[0])  # a log: the heartbeat's ticks made by hand

    def silent_for(seconds: int) -> None:
        for _ in range(seconds):
            t[0] += 1
            bars.tick()

    with reporting(bars), bars.command("cultura export"):
        silent_for(7)                        # opening, reading: nothing of the stage's own yet
        with task("writing items", 3) as job:
            silent_for(11)                   # the stage speaks for itself from its 5th s; the command fills the gap
            job.advance(3)
        silent_for(6)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["cultura export: 5 s", "cultura export: 10 s", "writing items: 0/3, 5 s",
                     "writing items: 0/3, 10 s", "writing items: done, 3/3 in 11.0 s", "cultura export: 23 s",
                     "cultura export: done in 24.0 s"]

    with reporting(bars), bars.command("cultura status"):
        silent_for(4)
    assert capsys.readouterr().err == ""


class _Stamped:
    """A log file that notes the (made-up) time each line reached it."""

    def __init__(self, clock):
        self.clock, self.times, self.text = clock, [], ""

    def write(self, text: str) -> int:
        self.times += [self.clock()] * text.count("\n")
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("seed", range(40))
def test_off_a_terminal_no_command_is_silent_for_more_than_5_s_whatever_its_stages_do(seed):
    """The promise checked on the whole log rather than on one schedule: random stages (nested, short, long,
    with and without counts, waits) separated by random silent stretches; no two lines (nor the start and the
    first line, nor the last line and the end) more than 5 s apart."""
    rng = random.Random(seed)
    t = [0.0]
    log = _Stamped(lambda: t[0])
    bars = BarReporter(Console(file=log, force_terminal=False, width=200), clock=lambda: t[0])

    def silent_for(seconds: int) -> None:
        for _ in range(seconds):
            t[0] += 1
            bars.tick()

    def stage(depth: int) -> None:
        kind = rng.choice(["count", "wait", "nested"] if depth < 2 else ["count", "wait"])
        if kind == "wait":
            with waiting(f"a server ({depth})"):
                silent_for(rng.randrange(0, 14))
        elif kind == "count":
            with task(f"stage {depth}", 10) as job:
                for _ in range(rng.randrange(0, 4)):
                    silent_for(rng.randrange(0, 9))
                    job.advance(1)
        else:
            with task(f"outer {depth}", None):
                for _ in range(rng.randrange(1, 3)):
                    silent_for(rng.randrange(0, 6))
                    stage(depth + 1)

    with reporting(bars), bars.command("cultura annotate push"):
        for _ in range(rng.randrange(1, 5)):
            silent_for(rng.randrange(0, 12))
            stage(0)
        silent_for(rng.randrange(0, 12))
    end = t[0]
    moments = [0.0, *log.times, end] if end >= 5 else [0.0, end]
    gaps = [b - a for a, b in zip(moments, moments[1:])]
    assert max(gaps) <= 5, (max(gaps), log.text)
    assert end < 5 or log.text.splitlines()[-1].startswith("cultura annotate push: done in")


def test_on_a_terminal_a_command_shows_its_own_row_with_the_time_spent_from_its_5th_second():
    t = [0.0]
    screen = io.StringIO()
    bars = BarReporter(Console(file=screen, force_terminal=True, width=100), clock=lambda: t[0])
    with reporting(bars), bars.command("cultura annotate push"):
        for _ in range(4):   # building the items: nothing of a stage's own to show yet
            t[0] += 1
            bars.tick()
        assert screen.getvalue() == ""
        t[0] += 3
        bars.tick()
        drawn = screen.getvalue()
        assert "cultura annotate push" in drawn and "7 s" in drawn
        with task("pushing filter", 2) as job:   # the stage's bar joins the command's row
            job.advance(2)
    assert "pushing filter: done, 2/2 in 0.0 s" in screen.getvalue()


def test_a_question_ends_the_commands_row_before_it_is_asked(monkeypatch, project):
    from click.testing import CliRunner

    from cultura.cli import cli
    from cultura.cli.progress import end_command_line

    t = [0.0]
    screen = io.StringIO()
    bars = BarReporter(Console(file=screen, force_terminal=True, width=100), clock=lambda: t[0])
    with reporting(bars), bars.command("cultura evaluate cache clear"):
        end_command_line()
        t[0] += 30
        bars.tick()
    assert screen.getvalue() == ""
    # the one question the command line asks ends the row first
    seen = []
    monkeypatch.setattr("cultura.cli.progress.end_command_line", lambda: seen.append("ended"))
    monkeypatch.setattr("click.confirm", lambda *a, **k: seen.append("asked") or (_ for _ in ()).throw(
        click.exceptions.Abort()))
    a_person = SimpleNamespace(stdin=SimpleNamespace(isatty=lambda: True))  # the runner's stdin is no terminal
    monkeypatch.setattr("cultura.cli.evaluate.sys", a_person)
    r = CliRunner().invoke(cli, ["--project", str(project.root), "evaluate", "cache", "clear"])
    assert seen == ["ended", "asked"] and r.exit_code == 1, r.output


def test_a_command_that_serves_stops_saying_it_is_at_work(capsys):
    t = [0.0]
    bars = BarReporter(Console(stderr=True), clock=lambda: t[0])
    with reporting(bars), bars.command("cultura view"):
        bars.end_command()                   # what serve_until_interrupted does before serving
        for _ in range(30):
            t[0] += 1
            bars.tick()
    assert capsys.readouterr().err == ""


def test_the_command_line_names_the_command_a_person_typed(project, tmp_path, monkeypatch):
    """The name the command's own progress line carries, as the root group passes it on a real invocation."""
    from click.testing import CliRunner

    from cultura.cli import cli

    names = []
    real = BarReporter.command
    monkeypatch.setattr(BarReporter, "command", lambda self, name: names.append(name) or real(self, name))
    root = ["--project", str(project.root)]
    CliRunner().invoke(cli, [*root, "annotate", "push", "filter", "--overlap", "2"])
    CliRunner().invoke(cli, [*root, "export", str(tmp_path / "out"), "--format", "jsonl"])
    assert names[0] == "cultura annotate push"
    assert names[1] == "cultura export"


def test_what_a_command_prints_on_stdout_stays_on_stdout_under_its_row(capsys):
    """The command's row is drawn on stderr for as long as the command runs: its result (a table, JSON piped to a
    file) must still reach stdout, and the row ends once the result is being printed."""
    t = [0.0]
    screen = io.StringIO()
    bars = BarReporter(Console(file=screen, force_terminal=True, width=100), clock=lambda: t[0])
    with reporting(bars), bars.command("cultura export"):
        t[0] += 6
        bars.tick()
        assert "cultura export" in screen.getvalue()
        with task("writing items", 2) as job:
            print('{"stage": "half way"}')
            job.advance(2)
        click.echo('{"items": 2}')
        drawn = len(screen.getvalue())
        t[0] += 30
        bars.tick()
        assert len(screen.getvalue()) == drawn   # the row ended when the result began
    assert capsys.readouterr().out == '{"stage": "half way"}\n{"items": 2}\n'
    assert '"items"' not in screen.getvalue()
