"""The social-bias audit (seed 003) through the runner and its report section (figures)."""
from __future__ import annotations



from cultura.models.embedders import FakeEmbedder
from tests.unit.evaluate.test_social import EN_CRIME, FAST, GenderCrime, audited  # noqa: F401 - shared with the unit tests


def test_runner_and_report_section(audited):
    from cultura.evaluate.report import build_report
    from cultura.evaluate.runner import run_evaluation

    recs = run_evaluation(audited, [GenderCrime(dim=16), FakeEmbedder(dim=16)], "social",
                          options={**FAST, "languages": ["en", "es", "xx"]}, progress=False)
    assert all(r.status == "done" for r in recs), [r.reason for r in recs]
    sec = dict(build_report(audited)["sections"])["social"]
    for shape in ("Table 1", "Table 2", "Table 3", "Table 4", "Table 6", "Table 7", "Table 11", "App. E"):
        assert shape in sec.markdown, shape
    assert "synthetic" in sec.markdown.lower() and sec.csv_tables["tests"]
    assert "the es inventory has no" in sec.html  # the reason behind an empty cell
