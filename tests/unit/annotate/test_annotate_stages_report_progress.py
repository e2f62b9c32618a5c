"""The annotate stages that loop over many items tell a reporter how far they are (:mod:`cultura.progress`):
adjudication every 500 items with its counts, agreement a step per country, the annotator report a step per
annotator, each task closed once. Counted through a recording reporter, never timed; through the Python front
door, the context's reporter (the command line's path) and the command line itself. (The reporter's drawing:
tests/unit/test_machine_output.py; every front-door stage with a reporter: tests/integration/
test_long_stages_report_progress.py.)"""
from __future__ import annotations

import contextlib

import pytest
from click.testing import CliRunner

import cultura
from cultura.annotate.decide import PROGRESS_EVERY, adjudicate
from cultura.cli import cli
from cultura.progress import Event, reporting
from tests.fakes.crowd_world import plant_campaign


def _of(events: list[Event], stage: str) -> list[Event]:
    mine = [e for e in events if e.stage == stage]
    assert mine, f"no event of {stage!r} among {sorted({e.stage for e in events})}"
    assert [e.finished for e in mine].count(True) == 1 and mine[-1].finished, f"{stage} is closed once, at its end"
    assert len({e.task for e in mine}) == 1
    return mine


def test_adjudicating_many_items_tells_every_500_with_its_counts(project):
    n = 2 * PROGRESS_EVERY + 200
    plant_campaign(project, "filter", workers={"ana": 0.9, "ben": 0.7}, n_items=n, n_gold=10)
    events: list[Event] = []
    [summ] = cultura.open(project.root).annotate.adjudicate("filter", progress=events.append)
    mine = _of(events, "adjudicating filter")
    assert [e.done for e in mine] == [0, PROGRESS_EVERY, 2 * PROGRESS_EVERY, n, n]
    assert {e.total for e in mine} == {n}
    assert mine[-1].info == {"decided": summ["decided"] + summ["gold"] + summ["adjudicated"],
                             "disagreements": summ["disagreements"]}
    assert summ["disagreements"] > 0 and summ["unresolved"] == summ["disagreements"]  # no adjudicator to send to


def test_agreement_tells_a_step_per_country(project):
    plant_campaign(project, "relevance", workers={"ana": 0, "ben": 1, "cy": 0}, n_items=40)
    project.db.execute("UPDATE annotation_items SET country = CASE WHEN id % 2 THEN 'JP' ELSE 'US' END")
    project.db.conn.commit()
    events: list[Event] = []
    [rep] = cultura.open(project.root).annotate.agreement(progress=events.append)
    assert set(rep["by_country"]) == {"JP", "US"}
    mine = _of(events, "agreement of relevance")
    # opened; the answers read; the campaign's statistics; JP; US; the languages; closed
    assert [(e.done, e.total) for e in mine] == [(0, None), (1, 5), (2, 5), (3, 5), (4, 5), (5, 5), (5, 5)]
    assert mine[-1].info == {"answers": 120}


def test_the_annotator_report_tells_a_step_per_annotator_through_the_context_reporter(project):
    plant_campaign(project, "filter", workers={"ana": 0.9, "ben": 0.8, "cy": 0.85}, n_items=30)
    events: list[Event] = []
    with reporting(events.append):  # what the command line installs around every command
        [rep] = cultura.open(project.root).annotate.annotators.report()
        adjudicate(project)
    assert len(rep["annotators"]) == 3
    assert [e.done for e in _of(events, "annotators report of filter")] == [0, 1, 2, 3, 4, 5, 5]
    _of(events, "adjudicating filter")


@pytest.mark.parametrize("command, stage", [(("annotate", "agreement"), "agreement of filter"),
                                            (("annotate", "annotators", "report"), "annotators report of filter"),
                                            (("annotate", "adjudicate"), "adjudicating filter")])
def test_the_command_line_hands_its_reporter_to_the_stage(project, monkeypatch, command, stage):
    plant_campaign(project, "filter", workers={"ana": 0.9, "ben": 0.8}, n_items=12)
    events: list[Event] = []

    class Recording:  # stands in for the bar the command line draws
        def __call__(self, event):
            events.append(event)

        def close(self):
            pass

        @contextlib.contextmanager
        def command(self, name):   # the command's own line (off a terminal): not what this test looks at
            yield

    monkeypatch.setattr("cultura.cli.progress.BarReporter", Recording)
    res = CliRunner().invoke(cli, ["--project", str(project.root), *command, "--json"])
    assert res.exit_code == 0, res.output
    _of(events, stage)
