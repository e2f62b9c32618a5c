"""The evaluation report (HTML + Markdown + CSV) and the ``cultura evaluate`` commands."""
from __future__ import annotations

import base64
import csv
import json
import re

import pytest
from click.testing import CliRunner

from cultura.cli import cli
from cultura.evaluate.report import write_report
from cultura.evaluate.reportkit import Cell, ReportSection, Table
from cultura.evaluate.runner import run_evaluation
from cultura.evaluate.suites import SUITES, register_suite, row
from cultura.errors import CulturaError

from tests.fakes.benchmark_world import Planted, make_benchmarks

FAST = {"n_resamples": 50, "projection": "pca"}


@pytest.fixture
def evaluated(project):
    w = make_benchmarks(project)
    run_evaluation(project, [Planted(w["meta"], alpha=0.9, gamma=1.0, noise=1.0),
                             Planted(w["meta"], concept=0.0, alpha=3.0, noise=0.0)], "all", options=FAST)
    return project


def test_report_has_every_section_figures_and_infinite_sp(evaluated, tmp_path):
    paths = write_report(evaluated, tmp_path / "out" / "report.html")
    html = paths["html"].read_text(encoding="utf-8")
    for title in ("Prevalence bias", "Association bias", "Cultural-descriptor compliance", "Runs &amp; provenance"):
        assert title in html
    for shape in ("Table 1 shape", "Table 8 shape", "Table 2 shape", "Table 12 shape", "Table 11 shape",
                  "Table 13 shape", "Table 14 shape", "Table 3 shape", "Table 15 shape", "Table 18 shape",
                  "Figure 5 shape", "Figure 6 shape", "Figure 7 shape", "Figure 18 shape", "Figure 19 shape"):
        assert shape in html, shape
    # self-contained: figures and example images are data URIs, nothing is fetched
    uris = re.findall(r'src="([^"]+)"', html)
    assert uris and all(u.startswith("data:image/") for u in uris)
    assert not re.search(r'(src|href)="https?://', html)
    # the example trial links into the static view (cultura view), by a stable trial address
    assert re.search(r'href="view/go\.html#trial-[A-Za-z0-9_.-]+"', html)
    png = base64.b64decode(next(u for u in uris if u.startswith("data:image/png")).split(",", 1)[1])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    # SP = ∞ with its reason; every shown CI has a bracket and n
    assert "∞" in html and "M_cr = 0: no trial ranked the correct image first" in html
    assert "Random baseline" in html and re.search(r'class="ci">\[', html)
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "## Association bias" in md and "∞" in md and "| model | M_cr ↑ |" in md
    with open(paths["csv_dir"] / "association-table2.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows[0]["model"] == "Random baseline"
    inf_row = next(r for r in rows if r["model"].startswith("fake-planted-a3.0"))
    assert inf_row["SP ↓"] == "inf" and "M_cr = 0" in inf_row["SP ↓ reason"] and inf_row["SP ↓ n"] == "64"
    # averages over models: an infinite SP makes the average undefined, with the reason
    assert "Average (2 models)" in html and "not finite or not measured for fake-planted-a3.0" in html
    # paired χ² in the paper's orientation (Table 15: Diff = Blue − Purple = or − orlb; Yellow − Pink = cdr − lb)
    assert "Diff = A − B" in html and "QL association (Blue − Purple)" in html and "CD vs QL (Yellow − Vermilion)" in html
    with open(paths["csv_dir"] / "descriptor-chi2.csv", encoding="utf-8") as f:
        chi = list(csv.DictReader(f))
    ql = next(r for r in chi if r["test"].startswith("QL"))
    assert float(ql["Diff = A − B"]) == pytest.approx(float(ql["A"]) - float(ql["B"]), abs=2e-3)


def test_report_computes_averages_over_models_and_the_dlbkl_sp_link(project, tmp_path):
    """Seed 000 App. N "Average" (Table 11) and §6's DLBKL↔SP link, computed by the report."""
    from scipy import stats as sps

    from cultura.evaluate.runner import load_results

    w = make_benchmarks(project, descriptor=False)
    models = [Planted(w["meta"], alpha=a, noise=1.0, english_boost=e) for a, e in ((0.6, 0.0), (0.8, 0.5),
                                                                                   (0.9, 1.0))]
    run_evaluation(project, models, "prevalence,association", options={**FAST, "ks": [10]})
    paths = write_report(project, tmp_path / "r.html")
    html = paths["html"].read_text(encoding="utf-8")
    assert "Average (3 models)" in html and "seed 000 §6" in html
    rows = load_results(project)

    def val(model, metric):
        return next(r["value"] for r in rows if r["model_spec"] == model and r["metric"] == metric and not r["group"])

    specs = sorted({r["model_spec"] for r in rows})
    with open(paths["csv_dir"] / "association-table11.csv", encoding="utf-8") as f:
        t11 = list(csv.DictReader(f))
    avg = next(r for r in t11 if r["model"] == "Average (3 models)")
    want = sum(val(m, "pearson_text_silhouette_SP") for m in specs) / 3
    assert float(avg["TSC (text silhouette vs SP)"]) == pytest.approx(want) and avg["TSC (text silhouette vs SP) n"] == "3"
    with open(paths["csv_dir"] / "association-prevalence-link.csv", encoding="utf-8") as f:
        link = {r["prevalence metric"]: r for r in csv.DictReader(f)}
    x, y = [val(m, "dlbkl@10") for m in specs], [val(m, "SP") for m in specs]
    assert float(link["DLBKL@10"]["Pearson r with SP"]) == pytest.approx(sps.pearsonr(x, y).statistic)
    assert float(link["DLBKL@10"]["Spearman ρ with SP"]) == pytest.approx(sps.spearmanr(x, y).statistic)


def test_a_registered_section_and_the_generic_fallback(evaluated, tmp_path):
    def extra(project, embedder, *, benchmark=None, options):
        return [row("extra", "score", 0.5, ci_low=0.4, ci_high=0.6, n=10, group={"country": "JP"})]

    def other(project, embedder, *, benchmark=None, options):
        return [row("other", "thing", float("nan"), n=0, details={"reason": "nothing to measure"})]

    register_suite("extra", extra, description="x", in_all=False, section=lambda results, project: ReportSection(
        "Extra section", f"<p>{len(results)} extra rows</p>", "extra", {"extra": [{"a": 1}]}))
    register_suite("other", other, description="y", in_all=False)
    try:
        run_evaluation(evaluated, ["fake"], "extra,other")
        paths = write_report(evaluated, tmp_path / "r.html")
        html = paths["html"].read_text(encoding="utf-8")
        assert "Extra section" in html and "1 extra rows" in html
        assert "Suite other" in html and "nothing to measure" in html
        assert (paths["csv_dir"] / "extra-extra.csv").exists()
    finally:
        SUITES.pop("extra")
        SUITES.pop("other")


def test_cells_and_tables_render_numbers_with_ci_n_and_reasons():
    c = Cell(0.5123, 0.49, 0.53, 100)
    assert c.text() == "0.512 [0.490, 0.530]"
    assert Cell(0.25, 0.2, 0.3, 8, pct=True).text() == "25.00% [20.00%, 30.00%]"
    inf = Cell(float("inf"), reason="M_cr = 0")
    assert inf.text(with_ci=False) == "∞" and 'title="M_cr = 0"' in inf.html()
    assert Cell(1e-9, digits=4, p=True).text() == "<0.0001"
    t = Table(["model", "SP"], [["m", inf], ["n", c]])
    assert "† M_cr = 0" in t.markdown() and t.csv_rows()[0]["SP"] == "inf"
    assert "<td class=\"n\">100</td>" in t.html()


def test_report_without_results_says_what_to_run(project):
    with pytest.raises(CulturaError, match="cultura evaluate run"):
        write_report(project)


def test_cli_run_results_report_and_cache(project, tmp_path):
    make_benchmarks(project, n_concepts=4, per_cell=1)
    runner = CliRunner()
    base = ["--project", str(project.root), "evaluate"]
    r = runner.invoke(cli, base + ["run", "--model", "fake", "--suite", "association,descriptor",
                                   "--option", "n_resamples=30", "--option", "association.projection=\"none\"",
                                   "--json"])
    assert r.exit_code == 0, r.output
    runs = json.loads(r.stdout)
    assert {x["suite"] for x in runs} == {"association", "descriptor"} and all(x["status"] == "done" for x in runs)
    assert all(x["n_embedded"] > 0 for x in runs[:1])
    r = runner.invoke(cli, base + ["run", "--model", "fake", "--suite", "association", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["n_embedded"] == 0
    r = runner.invoke(cli, base + ["results", "--suite", "association", "--json"])
    rows = json.loads(r.stdout)
    assert rows and all(x["benchmark"] == "xcm" and x["model"] == "fake:dim=32" for x in rows)
    r = runner.invoke(cli, base + ["results", "--suite", "association"])
    assert r.exit_code == 0 and "M_cr" in r.output
    out = tmp_path / "rep.html"
    r = runner.invoke(cli, base + ["report", str(out)])
    assert r.exit_code == 0, r.output
    assert out.exists() and out.with_suffix(".md").exists()
    r = runner.invoke(cli, base + ["cache", "size", "--json"])
    assert json.loads(r.stdout)["models"]["fake:dim=32"]["image"] > 0
    r = runner.invoke(cli, base + ["cache", "clear", "--yes"])
    assert r.exit_code == 0 and "Removed" in r.output
    r = runner.invoke(cli, base + ["suites"])
    assert "association" in r.output
    # a failure exits non-zero with the reason, and the run is recorded
    r = runner.invoke(cli, base + ["run", "--model", "fake", "--suite", "prevalence", "--benchmark", "nope"])
    assert r.exit_code == 1 and "No ready benchmark 'nope'" in r.output
    r = runner.invoke(cli, base + ["run", "--model", "fake", "--suite", "nosuch"])
    assert r.exit_code == 1 and "Unknown suite 'nosuch'" in r.output


def test_every_evaluate_command_has_help():
    runner = CliRunner()
    for args in (["evaluate"], ["evaluate", "run"], ["evaluate", "report"], ["evaluate", "results"],
                 ["evaluate", "cache"], ["evaluate", "cache", "size"], ["evaluate", "cache", "clear"],
                 ["evaluate", "suites"]):
        r = runner.invoke(cli, args + ["--help"])
        assert r.exit_code == 0, args
        cmd = cli
        for a in args:
            cmd = cmd.commands[a]
        # the help shows the command's own summary and every one of its options / subcommands
        assert cmd.help.strip().split("\n")[0][:60] in " ".join(r.output.split()), args
        for p in cmd.params:
            assert all(o in r.output for o in p.opts if o.startswith("--")), (args, p.opts)
        for sub in getattr(cmd, "commands", {}):
            assert sub in r.output, (args, sub)


def test_model_averages_never_mix_benchmarks():
    from cultura.evaluate.suites.retrieval.report import _average_rows

    rows = [{"model_spec": f"m{i} · b@{v}", "benchmark": "b", "benchmark_version": v} for i, v in
            ((1, 1), (2, 1), (3, 2))]
    lines = [[r["model_spec"], Cell(x)] for r, x in zip(rows, (0.2, 0.4, 0.9))]
    avg = _average_rows(lines, rows)
    assert len(avg) == 1 and avg[0][0] == "Average (2 models) · b@1" and avg[0][1].value == pytest.approx(0.3)
    lines[1][1] = Cell(float("inf"))
    assert _average_rows(lines, rows)[0][1].value is None  # an infinite SP makes the average undefined
