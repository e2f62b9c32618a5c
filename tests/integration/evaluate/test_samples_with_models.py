"""Per-sample logs of model runs: masked contexts rescore CBS exactly, and the report's choices and banners."""
from __future__ import annotations


import numpy as np
from click.testing import CliRunner

from cultura.cli import cli
from cultura.evaluate.metrics import cultural_bias_score
from cultura.evaluate.results import load_samples
from cultura.evaluate.runner import load_results, run_evaluation
from tests.unit.evaluate.test_llm_bias import CTXS, ENTS, _write_jsonl
from tests.fakes.benchmark_world import FAST, Planted
from tests.fakes.tiny_lm import tiny_lm  # noqa: F401
from tests.unit.evaluate.test_samples import _one, _rows, world  # noqa: F401 - shared with the unit tests


def test_masked_contexts_rescore_cbs_exactly(project, tmp_path, tiny_lm):  # noqa: F811
    from cultura.evaluate.suites.llm_bias import import_contexts, import_entities

    import_entities(project, _write_jsonl(tmp_path / "e.jsonl", ENTS))
    import_contexts(project, _write_jsonl(tmp_path / "c.jsonl", CTXS))
    rec = run_evaluation(project, ["fake"], ["llm"], options={"llm": {
        "llm": f"hf:{tiny_lm}", "generator": "none", "n_resamples": 20, "english": False}}, log_samples=True)[0]
    assert rec.status == "done", rec.reason
    ctxs = load_samples(project, rec.run_id, kind="masked_context")
    assert len(ctxs) == len(CTXS)
    rows = _rows(project, rec.run_id)
    for c in ctxs:
        a = np.array([e["loglik"] for e in c["local"]])
        b = np.array([e["loglik"] for e in c["western"]])
        assert {e["entity"] for e in c["local"]} == {"sushi", "ramen"} and "[MASK]" in c["context"]
        cbs = cultural_bias_score(np.minimum(a[~np.isnan(a)], 0.0), np.minimum(b[~np.isnan(b)], 0.0))
        assert cbs == c["cbs"]
        assert _one(rows, "cbs", language=c["language"], type=c["type"], kind=c["context_kind"]) == cbs


def test_report_choices_and_banners(project, world, tmp_path):
    run_evaluation(project, ["fake", Planted(world["meta"], alpha=0.9)], "association", options=FAST, limit=4)
    from cultura.evaluate.report import build_report, select_results, warnings

    rows = load_results(project)
    banners = " ".join(warnings(project, rows))
    assert "Non-models (" in banners and "fake:dim=32" in banners and "Smoke runs" in banners
    planted = next(r["model"] for r in rows if r["model"] != "fake:dim=32")   # a FakeEmbedder too
    only = select_results(rows, models=[planted])
    assert {r["model"] for r in only} == {planted}
    assert f"Non-model ({planted})" in " ".join(warnings(project, only))
    r = CliRunner().invoke(cli, ["--project", str(project.root), "evaluate", "report", str(tmp_path / "r.html"),
                                 "--model", "fake", "--suite", "association", "--benchmark", "xcm@1"])
    assert r.exit_code == 0, r.output
    html = (tmp_path / "r.html").read_text()
    assert "Non-model" in html and planted not in html
    r = CliRunner().invoke(cli, ["--project", str(project.root), "evaluate", "report", "--suite", "latent"])
    assert r.exit_code == 1 and "No results for suite latent" in r.output and "association" in r.output
    assert build_report(project, results=only)["sections"]
    # fake comes last in the help text of --model
    r = CliRunner().invoke(cli, ["evaluate", "run", "--help"])
    text = " ".join(r.output.split())
    assert text.index("openclip:ViT-B-32/openai") < text.index("fake")
