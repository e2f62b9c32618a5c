"""The attribution suite (seed 004) through the runner with a stub judge and a tiny model."""
from __future__ import annotations



from tests.unit.evaluate.test_attribution import COLORS, _store_images, world  # noqa: F401 - shared with the unit tests


def test_attribution_suite_with_stub_judge(world):
    from cultura.evaluate.runner import load_results, run_evaluation
    from cultura.evaluate.suites.attribution import suite as _  # noqa: F401 - registers the suite

    project, _shas = world
    rec = run_evaluation(project, ["fake:dim=16"], ["attribution"],
                         options={"attribution": {"judge": "stub", "kb": "tiny", "k": 2}})[0]
    assert rec.status == "done", rec.reason
    rows = load_results(project, suite="attribution")
    assert {"n_scored", "mean_score", "pearson"} <= {r["metric"] for r in rows}
    no_ratings = [r for r in rows if r["metric"] == "pearson"]
    assert all(r["n"] == 0 and "human rating" in r["details"]["reason"] for r in no_ratings)
    from cultura.evaluate.report import build_report
    sections = dict(build_report(project)["sections"])
    assert "CAIRe" in sections["attribution"].title
