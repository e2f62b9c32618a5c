"""The report for a paper: every LaTeX table compiles with pdflatex without an overfull box and shows the HTML's
numbers, with no nan/inf text; every figure has titled axes, no overlapping text, and comes as PNG, SVG and PDF
(fonts embedded) under a name that says what it shows and which seed figure it follows; a random-baseline round
with an infinite SP no longer crashes the report. The same checks run on the demo's report (slow)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cultura.cli import cli
from cultura.evaluate.report import build_report, write_report
from cultura.evaluate.reportkit import Cell, Table, figure_problems, merge_notes

from tests.integration.evaluate.test_report import evaluated  # noqa: F401 - the report's evaluated project

NAN_INF = re.compile(r"(?<![A-Za-z\\])(nan|inf|infinity)(?![A-Za-z])", re.IGNORECASE)


def compile_tables(tex_dir: Path, work: Path) -> str:
    """pdflatex on all-tables.tex (a copy in ``work``); returns the log. Fails on an error or an overfull box."""
    shutil.copytree(tex_dir, work)
    res = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "all-tables.tex"], cwd=work,
                         capture_output=True, text=True, timeout=600)
    log = (work / "all-tables.log").read_text(encoding="utf-8", errors="replace")
    assert res.returncode == 0, log[-3000:]
    over = [m.group(0) for m in re.finditer(r"Overfull \\[hv]box[^\n]*\n[^\n]*", log)]
    assert not over, "\n".join(over[:10])
    return log


def compile_alone(tex: Path, work: Path) -> list[float]:
    """Compile one table file in a bare ``\\documentclass{article}`` whose preamble is only what the file's
    ``% needs:`` line declares; returns the scale of each of its blocks (1.0 when not shrunk)."""
    text = tex.read_text(encoding="utf-8")
    head = [ln for ln in text.splitlines() if ln.startswith("%")]
    needs = [ln.removeprefix("% needs: ") for ln in head if ln.startswith("% needs: ")]
    assert needs, f"{tex.name} does not say which packages it needs"
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy(tex, work / tex.name)
    (work / "alone.tex").write_text("\\documentclass{article}\n" + "\n".join(needs)
                                    + f"\n\\begin{{document}}\n\\input{{{tex.stem}}}\n\\end{{document}}\n")
    res = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "alone.tex"], cwd=work,
                         capture_output=True, text=True, timeout=120)
    log = (work / "alone.log").read_text(encoding="utf-8", errors="replace")
    assert res.returncode == 0, (tex.name, log[-2000:])
    sizes = re.findall(r"cultura-table: ([\d.]+)pt\s*in ([\d.]+)pt", log)
    assert sizes, tex.name
    return [min(1.0, float(line) / float(width)) for width, line in sizes]


def check_tables_alone(tex_dir: Path, work: Path) -> None:
    """Every table compiles alone with what it declares, never shrunk below 0.8, with words for truth values,
    paper captions and no code points."""
    for tex in sorted(p for p in tex_dir.glob("*.tex") if p.name != "all-tables.tex"):
        scales = compile_alone(tex, work / tex.stem)
        assert min(scales) >= 0.8, (tex.name, scales)
        text = tex.read_text(encoding="utf-8")
        # a Python truth value as a whole cell (the words "False negatives" in a caption are English)
        assert not re.search(r"(?:^|&)\s*(True|False)\s*(?:&|\\\\)", text, re.M), tex.name
        assert "Hover" not in text and "u+" not in text, tex.name


def check_tables(paths: dict, tmp_path: Path) -> None:
    tex_dir = paths["latex_dir"]
    files = sorted(p for p in tex_dir.glob("*.tex") if p.name != "all-tables.tex")
    assert files
    html = paths["html"].read_text(encoding="utf-8")
    for f in files:
        tex = f.read_text(encoding="utf-8")
        assert not NAN_INF.search(tex), (f.name, NAN_INF.search(tex).group(0))
        assert "\\toprule" in tex and "\\caption{" in tex and not re.search(r"\\caption\{[^}]*: table\d+\}", tex)
        assert " ci\\_low" not in tex and " ci\\_high" not in tex  # CI in the value's cell, not a column
        assert len(re.search(r"\\begin\{tabular\}\{([^}]*(?:\{[^}]*\}[^}]*)*)\}", tex).group(1)) < 200
        body = tex.split("\\midrule", 1)[1].split("\\bottomrule", 1)[0]
        if not tex.startswith("% cultura: the report's table, as in the HTML"):
            continue  # a CSV-only table (the points behind a figure, the test list): not in the HTML
        for num in re.findall(r"(?<![\w.])-?\d+\.\d+(?:\\%)?", body):  # every number is the HTML's
            assert num.replace("\\%", "%").lstrip("-") in html, (f.name, num)
    assert "all-tables.tex" in {p.name for p in tex_dir.iterdir()}
    if shutil.which("pdflatex"):
        compile_tables(tex_dir, tmp_path / "tex")
        check_tables_alone(tex_dir, tmp_path / "alone")


def check_figures(figures: list[dict], fig_dir: Path) -> None:
    assert figures
    for f in figures:
        assert f["problems"] == [], (f["section"], f.get("name"), f["problems"][:5])
        assert f.get("name") and re.search(r"seed00\d-(fig|table)", f["name"]), f.get("name")
        assert f["pdf"][:5] == b"%PDF-" and b"/FontFile2" in f["pdf"]  # TrueType fonts embedded
        assert b"<text" not in f["svg"]  # text as paths: the SVG needs no font
    stems = {p.stem for p in fig_dir.iterdir()}
    assert all((fig_dir / f"{s}.{ext}").exists() for s in stems for ext in ("png", "svg", "pdf"))


@pytest.mark.skipif(not shutil.which("pdflatex"), reason="pdflatex missing: 'make setup' installs TeX Live "
                                                         "(texlive-latex-base, texlive-latex-recommended)")
def test_every_table_compiles_without_overfull_boxes_and_shows_the_htmls_numbers(evaluated, tmp_path):
    paths = write_report(evaluated, tmp_path / "out" / "report.html")
    check_tables(paths, tmp_path)
    t2 = (paths["latex_dir"] / "association-table2.tex").read_text(encoding="utf-8")
    assert "seed 000 Table 2" in t2 and "$\\infty$" in t2 and "\\textsuperscript{\\textdagger{}}" in t2  # ∞, a mark
    assert "M\\_cr = 0: no trial ranked the correct image first" in t2


def test_every_figure_is_fit_for_a_paper(evaluated, tmp_path):
    paths = write_report(evaluated, tmp_path / "r.html")
    check_figures(build_report(evaluated)["figures"], paths["figures_dir"])
    names = {p.name for p in paths["figures_dir"].iterdir()}
    assert "association-random-baseline-sp-per-round-seed000-fig19.pdf" in names


def test_figure_problems_finds_untitled_axes_and_overlapping_text():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.bar(["a very long label one", "a very long label two", "a very long label three"], [1, 2, 3])
    probs = figure_problems(fig)
    assert any("x axis has no title" in p for p in probs) and any("overlap" in p for p in probs)
    ax.set_xlabel("x"), ax.set_ylabel("y"), ax.set_xticks([0, 1, 2], ["a", "b", "c"])
    assert figure_problems(fig) == []
    plt.close(fig)


def test_an_infinite_random_baseline_round_does_not_crash_the_report(evaluated, tmp_path):
    """Small projects: sp_rounds [0.0, 1.0, 1.0, "inf", …] once crashed the report (numpy UFuncNoLoopError)."""
    db = evaluated.db
    rid, details = next(iter(db.execute("SELECT id, details FROM eval_results WHERE metric = 'random_SP'")))
    d = json.loads(details)
    d["sp_rounds"] = [0.0, 1.0, 1.0, "inf", None, 2.0, "nan", 0.5, 1.5, 1.0]
    db.execute("UPDATE eval_results SET details = ?, value = ?, ci_high = ? WHERE id = ?",
               [json.dumps(d), float("inf"), float("inf"), rid])
    db.conn.commit()
    res = CliRunner().invoke(cli, ["--project", str(evaluated.root), "evaluate", "report",
                                   str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Figure 19" in html
    assert (tmp_path / "r_figures" / "association-random-baseline-sp-per-round-seed000-fig19.png").exists()
    for f in (tmp_path / "r_latex").glob("*.tex"):
        assert not NAN_INF.search(f.read_text(encoding="utf-8")), f.name


def test_notes_one_mark_per_meaning_and_near_identical_reasons_merged():
    reasons = [f"the {x} inventory has no agency prompts; add them to inventories/{x}.toml" for x in ("es", "fi")]
    assert merge_notes(reasons + ["no finite value"]) == [
        ("the {es, fi} inventory has no agency prompts; add them to inventories/{es, fi}.toml", reasons),
        ("no finite value", ["no finite value"])]
    t = Table(["model", "a", "b"], [["m", Cell(None, reason=reasons[0]), Cell(float("inf"), reason="M_cr = 0")],
                                    ["n", Cell(None, reason=reasons[1]), Cell(0.5, 0.4, 0.6, 10)]])
    html = t.html()
    assert html.count('<p class="note">') == 2 and "† the {es, fi} inventory" in html and "‡ M_cr = 0" in html
    assert "n/a" in t.markdown() and "∞‡" in t.markdown()


@pytest.mark.slow
@pytest.mark.labelstudio
def test_the_demo_report_is_fit_for_a_paper(tmp_path):
    """The demo (every suite, real photographs, a real Label Studio): its tables compile and its figures pass."""
    from cultura.cli import demo
    from cultura.project import Project

    demo.run(tmp_path / "demo", say=lambda *a: None)
    p = Project(tmp_path / "demo" / "project")
    paths = write_report(p, tmp_path / "paper" / "report.html")
    check_tables(paths, tmp_path)
    check_figures(build_report(p)["figures"], paths["figures_dir"])


SIXTEEN = ["AU", "BR", "CN", "DE", "EG", "FR", "GB", "IN", "JP", "KE", "MX", "NG", "RU", "TH", "US", "ZA"]
MODELS = ("openclip:ViT-B-32/openai", "mclip:XLM-R")


def per_country_table(measures, countries=SIXTEEN, *, ci: bool = True) -> Table:
    """Seed 000 Table 8/12's shape: a row per model × measure, a column per country ("JP (n=120)")."""
    def cell(i):
        return Cell(0.1234 + i / 100, *((0.01 + i / 200, 0.9 - i / 100) if ci else (None, None)), n=120)
    rows = [[model, metric] + [cell(i) for i in range(len(countries))] for model in MODELS for metric in measures]
    rows[0][3] = Cell(None, reason="no trial for this country")
    return Table(["model", "metric"] + [f"{c} (n=120)" for c in countries], rows, n_column=False,
                 caption="Per query country: SP, TS and IS (seed 000 Table 8 shape) for 東京 and กรุงเทพ.")


@pytest.mark.skipif(not shutil.which("pdflatex"), reason="pdflatex missing")
def test_a_table_of_sixteen_countries_is_set_with_countries_as_rows_not_shrunk(tmp_path):
    """Split, 16 country columns of SP, TS and IS took 8 blocks; with countries as rows it is one block of one
    row per country and a column per measure, each model's rows under its heading."""
    from cultura.evaluate import latex

    tex = tmp_path / "wide.tex"
    tex.write_text(latex.needs() + latex.from_table(per_country_table(("SP ↓", "TS", "IS")), label="tab:wide"),
                   encoding="utf-8")
    scales = compile_alone(tex, tmp_path / "alone")
    assert scales == [1.0], scales                                   # one block, not shrunk
    text = tex.read_text(encoding="utf-8")
    assert "country & SP $\\downarrow$ & TS & IS \\\\" in text          # the measures are the columns
    assert all(text.count(f"\n{c} (n=120) & ") == len(MODELS) for c in SIXTEEN)  # a row per country and model
    assert all(text.count(f"\\textit{{{m}}}") == 1 for m in MODELS)    # each model heads its rows once
    assert "n/a\\textsuperscript{\\textdagger{}}" in text and "no trial for this country" in text
    assert "[Thai text]" in text and "[Chinese/Japanese text]" in text and latex.LEFT_OUT[:40] in text


@pytest.mark.skipif(not shutil.which("pdflatex"), reason="pdflatex missing")
def test_a_per_country_table_too_wide_either_way_is_split_not_shrunk(tmp_path):
    """Nine measures per country are wider than a page as rows too: the columns per country are split into
    blocks, each repeating the label columns, none below 0.8."""
    from cultura.evaluate import latex

    measures = [f"M{i}" for i in range(9)]
    tex = tmp_path / "wide.tex"
    tex.write_text(latex.needs() + latex.from_table(per_country_table(measures), label="tab:wide"),
                   encoding="utf-8")
    scales = compile_alone(tex, tmp_path / "alone")
    assert len(scales) > 2 and min(scales) >= 0.8, scales
    text = tex.read_text(encoding="utf-8")
    assert text.count("openclip:ViT-B-32/openai & M0 &") == len(scales)  # every block repeats the labels
    assert all(f"{c} (n=120)" in text for c in SIXTEEN) and "\\multicolumn" not in text


@pytest.mark.skipif(not shutil.which("pdflatex"), reason="pdflatex missing")
def test_a_per_country_table_that_fits_a_page_keeps_a_column_per_country(tmp_path):
    from cultura.evaluate import latex

    tex = tmp_path / "four.tex"
    tex.write_text(latex.needs() + latex.from_table(per_country_table(("SP ↓", "TS", "IS"), SIXTEEN[:4], ci=False)),
                   encoding="utf-8")
    assert min(compile_alone(tex, tmp_path / "alone")) >= 0.8
    assert "model & metric & AU (n=120) & BR (n=120)" in tex.read_text(encoding="utf-8")


def test_figure_problems_finds_a_missing_legend_missing_axis_labels_and_a_country_off_its_colour():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cultura.evaluate.reportkit import country_style

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.scatter([0, 1], [0, 1], color="#0072B2")
    ax.scatter([2, 3], [2, 3], color="#E69F00")
    ax.set_xticks([])
    ax.set_yticks([])
    probs = figure_problems(fig)
    assert any("no legend" in p for p in probs) and any("no axis label" in p for p in probs)
    plt.close(fig)
    # a country drawn in another country's colour is found; its own colour passes, in every panel
    fig, (a, b) = plt.subplots(1, 2, figsize=(6, 3))
    for ax, colour in ((a, country_style("US")[0]), (b, country_style("JP")[0])):
        ax.scatter([0, 1], [0, 1], color=colour, label="US")
        ax.scatter([1, 2], [0, 1], color=country_style("TH")[0], label="th (TH)")
        ax.set_xlabel("x"), ax.set_ylabel("y"), ax.legend(fontsize=6)
    probs = figure_problems(fig)
    assert len([p for p in probs if "country's colour" in p]) == 1 and "'US'" in probs[0]
    plt.close(fig)
    assert country_style("US") != country_style("JP") and country_style("US") == country_style("US")
    # reference lines in two greys are not two series: one series and its grid need no legend, two still do
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.axvline(0, color="#eeeeee"), ax.axhline(0, color="#dddddd")
    ax.plot([0, 1], [0, 1], color="#0072B2")
    ax.set_xlabel("x"), ax.set_ylabel("y")
    assert not [p for p in figure_problems(fig) if "legend" in p]
    ax.plot([0, 1], [1, 0], color="#E69F00")
    assert [p for p in figure_problems(fig) if "no legend" in p]
    plt.close(fig)


@pytest.mark.skipif(not shutil.which("pdflatex"), reason="pdflatex missing")
def test_a_table_too_tall_and_too_wide_for_one_float_compiles(tmp_path):
    """27 columns by 72 rows (the demo's social tests): its blocks stacked in one float were taller than TeX's largest
    dimension (pdflatex stopped: "Dimension too large")."""
    from cultura.evaluate import latex

    tests = [f"test {i} of the social recall" for i in range(25)]
    rows = [[f"model-{m}", f"country-{c}"] + [Cell(0.1234 + i / 100, 0.01, 0.9, n=120) for i in range(25)]
            for m in range(8) for c in range(9)]
    t = Table(["model", "country"] + tests, rows, caption="Every social test per model and country.",
              n_column=False)
    tex_dir = tmp_path / "tex"
    tex_dir.mkdir()
    (tex_dir / "tall.tex").write_text(latex.needs() + latex.from_table(t, label="tab:tall"), encoding="utf-8")
    (tex_dir / "all-tables.tex").write_text(latex.document(["tall"]), encoding="utf-8")
    compile_tables(tex_dir, tmp_path / "all")
    scales = compile_alone(tex_dir / "tall.tex", tmp_path / "alone")
    assert len(scales) > 1 and min(scales) >= 0.8, scales
    text = (tex_dir / "tall.tex").read_text(encoding="utf-8")
    assert text.count("\\begin{table*}") > 1 and text.count("\\label{tab:tall}") == 1
    assert text.count("(continued).}") == text.count("\\begin{table*}") - 1
    assert all(f"model-{m} & country-{c} &" in text for m in range(8) for c in range(9))  # no row lost
