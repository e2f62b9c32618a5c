"""Machine output that means what it says: progress bars never reach stdout, adjudication summaries read at 80
columns. (Full sha256s and reasons in --json: tests/curate/test_cultures_decide.py and tests/test_walk.py, through
the CLI on real photographs.)"""
from __future__ import annotations

import time

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


def test_a_command_off_a_terminal_speaks_while_no_stage_does_and_stays_quiet_when_short(capsys):
    t = [0.0]
    bars = BarReporter(Console(stderr=True), clock=lambda: t[0])  # a log: the heartbeat's ticks made by hand

    def silent_for(seconds: int) -> None:
        for _ in range(seconds):
            t[0] += 1
            bars.tick()

    with reporting(bars), bars.command("cultura export"):
        silent_for(7)                        # opening, reading: nothing of the stage's own yet
        with task("writing items", 3) as job:
            silent_for(11)                   # the stage's task speaks for itself, the command does not
            job.advance(3)
        silent_for(6)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["cultura export: 5 s", "writing items: 0/3, 5 s", "writing items: 0/3, 10 s",
                     "writing items: done, 3/3 in 11.0 s", "cultura export: 19 s", "cultura export: 24 s",
                     "cultura export: done in 24.0 s"]

    with reporting(bars), bars.command("cultura status"):
        silent_for(4)
    assert capsys.readouterr().err == ""


def test_a_command_that_serves_stops_saying_it_is_at_work(capsys):
    t = [0.0]
    bars = BarReporter(Console(stderr=True), clock=lambda: t[0])
    with reporting(bars), bars.command("cultura view"):
        bars.end_command()                   # what serve_until_interrupted does before serving
        for _ in range(30):
            t[0] += 1
            bars.tick()
    assert capsys.readouterr().err == ""


def test_the_command_line_names_the_command_a_person_typed():
    from cultura.cli import cli
    from cultura.cli.console import command_path

    assert command_path(cli, ["annotate", "push", "filter", "--overlap", "2"]) == "cultura annotate push"
    assert command_path(cli, ["export", "out", "--format", "jsonl"]) == "cultura export"
