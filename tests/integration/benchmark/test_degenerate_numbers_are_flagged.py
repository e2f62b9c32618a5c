"""A degenerate prevalence (one image, no variance) is flagged in the results, not reported as a number, through
the CLI on real photographs with a tiny CLIP."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.cli_runner import ProjectCli
from tests.unit.benchmark.test_benchmark_integrity import curated, run, template  # noqa: F401 - shared with the unit tests


def test_degenerate_prevalence_is_flagged(tmp_path):
    run = ProjectCli(curated(tmp_path, countries=["US", "JP", "TH"]))   # 3 concepts × 3 countries = 9 captions
    run("build", "association", "--allow-unreviewed")
    run("evaluate", "run", "--model", "fake", "--suite", "prevalence", "--option", "n_resamples=50",
        "--option", "prevalence.pool=\"queries\"")
    rows = [r for r in run.json("evaluate", "results") if r["suite"] == "prevalence"]
    assert {r["details"]["n_captions"] for r in rows if "n_captions" in r["details"]} == {9}
    share = [r for r in rows if r["metric"] == "retrieval_share"]
    assert share and all("covers the whole pool of 9 captions" in r["details"]["degenerate"] for r in share)
    assert all(r["value"] == pytest.approx(r["details"]["pool_share"]) for r in share)  # why it is trivial
    lb10 = next(r for r in rows if r["metric"] == "lbkl@10")
    assert "only 9 captions" in lb10["details"]["reason"] and lb10["details"]["degenerate"]
    acc5 = next(r for r in rows if r["metric"] == "acc@5")
    assert "degenerate" not in acc5["details"]                      # k = 5 < 9: a real number
    rep = run.json("evaluate", "report")
    md = Path(rep["markdown"]).read_text(encoding="utf-8")
    assert "Degenerate numbers in prevalence" in md and "covers the whole pool of 9 captions" in md


def test_every_number_that_is_no_measurement_says_why_through_the_cli(tmp_path):
    """The association and latent suites on three countries of real photographs with the fake embedder: every
    nan/inf number in the stored results carries its reason in words (the unit tier enumerates every suite on
    smaller fixtures: tests/unit/evaluate/test_degenerate_numbers_say_why_in_every_suite.py)."""
    from cultura.evaluate.suites.registry import UNEXPLAINED, unexplained

    run = ProjectCli(curated(tmp_path, countries=["US", "JP", "TH"]))
    run("build", "association", "--allow-unreviewed")
    run("evaluate", "run", "--model", "fake", "--suite", "association,latent", "--option", "n_resamples=50",
        "--option", "latent.projection=\"none\"")
    # the stored results read back an absent interval as "nan": the values are checked here, the intervals on
    # the suites' own rows in the unit tier
    rows = [{**r, "ci_low": None, "ci_high": None} for r in run.json("evaluate", "results")
            if r["suite"] in ("association", "latent")]
    assert {r["suite"] for r in rows} == {"association", "latent"}
    assert unexplained(rows) == [], [(r["metric"], r["group"], r["value"], r["ci_low"], r["ci_high"], r["details"]) for r in unexplained(rows)][:3]
    reasons = [v for r in rows for k, v in r["details"].items() if k.endswith("reason") or k == "degenerate"]
    assert reasons and not any(UNEXPLAINED in t or "value(s)" in t for t in reasons), reasons[:5]
