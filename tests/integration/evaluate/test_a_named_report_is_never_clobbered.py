"""``cultura evaluate report OUT.html`` refuses an existing OUT.html or OUT.md (its Markdown twin) in one sentence
unless ``--overwrite``; the default report in ``reports/`` is the project's own and is rewritten without asking.
(The report draws figures, hence this tier; the other outputs: tests/unit/reliability/
test_outputs_are_never_clobbered.py.)"""
from __future__ import annotations

from cultura.evaluate.runner import run_evaluation
from tests.fakes.benchmark_world import make_benchmarks
from tests.unit.reliability.test_outputs_are_never_clobbered import _refused, _run


def test_a_named_report_is_refused_where_a_file_exists(project, tmp_path):
    make_benchmarks(project)
    run_evaluation(project, ["fake"], "association", options={"n_resamples": 50, "projection": "none"}, limit=3)
    report, notes = tmp_path / "notes.html", tmp_path / "notes.md"
    notes.write_text("my notes\n")
    _refused(_run(project, "evaluate", "report", str(report)), notes)
    assert not report.exists() and notes.read_text() == "my notes\n"
    assert _run(project, "evaluate", "report", str(report), "--overwrite").exit_code == 0
    assert "<html" in report.read_text(encoding="utf-8").lower() and notes.read_text() != "my notes\n"
    _refused(_run(project, "evaluate", "report", str(report)), report)
    for _ in range(2):
        assert _run(project, "evaluate", "report").exit_code == 0
