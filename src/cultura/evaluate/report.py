"""The evaluation report: one self-contained HTML file (figures and images as data URIs) plus Markdown and CSV, and for
a paper: every figure as its own PNG (300 dpi), SVG and PDF file (fonts embedded; ``OUT_figures/``, named by what it
shows and the seed figure it follows) and every table as a booktabs LaTeX file (``OUT_latex/``, with
``all-tables.tex`` that compiles them all; :mod:`cultura.evaluate.latex`). Footnotes appear once per section
(one mark per meaning); figures use a font fallback list so CJK, Thai and Devanagari labels render; the HTML prints
wide tables in full.

Each suite brings its own section: the ``section`` of its registered :class:`~cultura.evaluate.suites.Suite`
(``render(results, project) -> ReportSection``, built from :mod:`cultura.evaluate.reportkit`)::

    from cultura.evaluate.reportkit import ReportSection
    from cultura.evaluate.suites import register_suite

    def render(results, project):
        return ReportSection(title="My suite", html="<p>…</p>", markdown="…", csv_tables={"mine": rows})

    register_suite("mine", my_suite, description="…", section=render)

``render`` gets the latest done result rows of its suite (self-describing dicts, see
:func:`cultura.evaluate.results.load_results`). A suite with results and no section gets a plain table of its
rows.
"""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import TYPE_CHECKING

from markupsafe import Markup

from ..annotate.team import annotator_report
from ..db import now
from ..annotate.decisions import filter_reviewed
from ..annotate.pool import exclusion_summary, image_exclusions
from ..benchmark.store import benchmark_report
from ..curate.images import image_count
from ..errors import CulturaError
from ..files import refuse_existing, write_atomic
from ..progress import Progress, task, track
from ..templates import render_template
from ..view.links import view_page
from ..models.tiny import is_random_init
from . import latex
from .reportkit import (Cell, ReportSection, Table, collect_figures, dedupe_notes, generic_section, model_label,
                        slug)
from .results import git_revision, list_runs, load_results, model_kind
from .suites import load_suites

if TYPE_CHECKING:
    from ..project import Project

LEADING_SECTIONS = ("prevalence", "association", "descriptor")


# -- the report ----------------------------------------------------------------------------------------

def _label_benchmarks(rows: list[dict]) -> list[dict]:
    """When a suite's results span several benchmarks, name each table row "model · benchmark@version" so
    rows of different benchmarks never merge."""
    benches = {(r["benchmark"], r["benchmark_version"]) for r in rows}
    if len(benches) <= 1:
        return rows
    out = []
    for r in rows:
        r = dict(r)
        ver = f"@{r['benchmark_version']}" if r["benchmark_version"] is not None else ""
        r["model_spec"] = f"{model_label(r)} · {r['benchmark']}{ver}"
        out.append(r)
    return out


def build_report(project: Project, *, results: list[dict] | None = None, progress: Progress = None) -> dict:
    """Render every section from the latest results; returns ``{"sections", "runs", "meta"}``."""
    sections_by_suite = {name: suite.section for name, suite in load_suites().items() if suite.section}
    results = load_results(project) if results is None else results
    by_suite: dict[str, list[dict]] = {}
    for r in results:
        by_suite.setdefault(r["suite"], []).append(r)
    # the seed 000 leaderboards (Tables 1-3) lead; then other registered sections, then the rest
    first = [s for s in LEADING_SECTIONS if s in by_suite]
    order = first + [s for s in sections_by_suite if s in by_suite and s not in first] + \
        [s for s in by_suite if s not in sections_by_suite and s not in first]
    sections = []
    figures: list[dict] = []
    for suite in track(order, "report: sections", progress=progress):
        rows = _label_benchmarks(by_suite[suite])
        render = sections_by_suite.get(suite)
        with collect_figures(suite, figures):
            sec = render(rows, project) if render else generic_section(suite, rows, project)
        sec.html = dedupe_notes(sec.html)
        sec.markdown = _dedupe_md_notes(sec.markdown)
        sections.append((suite, sec))
    used = {r["run_id"] for r in results}
    runs = list_runs(project)
    latest: dict[tuple, dict] = {}
    for r in runs:  # newest first
        latest.setdefault((r["model_spec"], r["suite"]), r)
    unfinished = [r for r in latest.values() if r["status"] != "done"]
    pool = pool_section(project)
    if pool is not None:
        sections.insert(0, ("image-pool", pool))
    team = annotators_section(project)
    if team is not None:
        sections.insert(1 if pool is not None else 0, ("annotators", team))
    meta = {"project": getattr(project.config.project, "name", Path(project.root).name), "generated": now(),
            "git_revision": git_revision(), "warnings": warnings(project, results)}
    return {"sections": sections, "runs": [r for r in runs if r["id"] in used],
            "unfinished": unfinished, "meta": meta, "figures": figures}


def _dedupe_md_notes(md: str) -> str:
    """Each Markdown footnote line (``† …``, ``‡ …``) once per section."""
    seen: set[str] = set()
    out = []
    for line in md.splitlines():
        key = line.strip()
        if key[:1] in "†‡§¶‖" and key:
            if key in seen:
                continue
            seen.add(key)
        out.append(line)
    return "\n".join(out) + ("\n" if md.endswith("\n") else "")


def warnings(project: Project, results: list[dict]) -> list[str]:
    """Banners for numbers that are not what they look like: results of random-init models, benchmarks whose
    distractors were chosen with tags of a random-init model."""
    out = []
    rand = sorted({r["model"] for r in results if is_random_init(r["model"]) or
                   (r.get("model_info") or {}).get("random_init")} |
                  {str(r["details"][k]) for r in results for k in ("llm", "judge", "generator")
                   if is_random_init(str((r.get("details") or {}).get(k) or ""))})
    if rand:
        out.append(f"Random-init model{'s' if len(rand) > 1 else ''} ({', '.join(rand)}): "
                   f"{'their' if len(rand) > 1 else 'its'} numbers exercise the pipeline and mean nothing about "
                   "any real model.")
    fake = sorted({r["model"] for r in results if model_kind(r.get("model_info") or {}) == "non-model"
                   or r["model"].startswith("fake")} |
                  {str(r["details"][k]) for r in results for k in ("judge",)
                   if str((r.get("details") or {}).get(k) or "").startswith("stub")})
    if fake:
        out.append(f"Non-model{'s' if len(fake) > 1 else ''} ({', '.join(fake)}): deterministic stand-ins (a hash "
                   "embedder, a stub judge) for testing the pipeline; their numbers mean nothing about any model.")
    smoke = sorted({f"{r['suite']} × {r['model']} (--limit {r['params'].get('limit')})" for r in results
                    if (r.get("params") or {}).get("limit") is not None})
    if smoke:
        out.append(f"Smoke run{'s' if len(smoke) > 1 else ''} ({', '.join(smoke)}): evaluated on the first items "
                   "only; not comparable with full runs.")
    benches = {(r["benchmark"], r["benchmark_version"]) for r in results if r.get("benchmark")}
    tagged = []
    for name, version in sorted(benches, key=str):
        rep = benchmark_report(project.db, name, version)
        srcs = (rep.get("images") or {}).get("random_tag_sources") if rep is not None else None
        if srcs:
            tagged.append(f"{name}@{version}")
    if tagged:
        out.append(f"Benchmark{'s' if len(tagged) > 1 else ''} {', '.join(tagged)} chose distractors with image "
                   "tags from a random-init model (--allow-random-tags): "
                   f"{'their' if len(tagged) > 1 else 'its'} trials are for trying the pipeline.")
    return out + degenerate_warnings(results)


def degenerate_warnings(results: list[dict]) -> list[str]:
    """One banner per reason that makes numbers trivial (``details.degenerate``: k covering the whole pool, one
    language, one class), naming the suite and metrics it affects."""
    by_reason: dict[tuple[str, str], list[str]] = {}
    for r in results:
        why = (r.get("details") or {}).get("degenerate")
        if why:
            metrics = by_reason.setdefault((r["suite"], why), [])
            if r["metric"] not in metrics:
                metrics.append(r["metric"])
    return [f"Degenerate numbers in {suite} ({', '.join(metrics)}): {why}. They are trivial by construction, "
            "not findings." for (suite, why), metrics in by_reason.items()]


def pool_section(project: Project) -> ReportSection | None:
    """What the image-pool suites and the benchmarks left out, and why (:mod:`cultura.annotate.pool`)."""
    db = project.db
    reviewed = filter_reviewed(db)
    summary = exclusion_summary(db, require_review=reviewed)
    n_images = image_count(db)
    if not n_images:
        return None
    excl = image_exclusions(db, require_review=reviewed)
    t = Table(["reason", "images", "what it means"], [[r["reason"], r["images"], r["what"]] for r in summary],
              caption=f"{n_images - len(excl)} of {n_images} stored images are in the reviewed pool that build, "
                      "export and the image-pool suites read"
                      + ("" if reviewed else " (no filter review yet: images are unreviewed)") + ".",
              n_column=False)
    listed = sorted(excl.items(), key=lambda kv: (kv[1], kv[0]))
    li = Table(["image (sha256)", "reason"], [[s[:16], r] for s, r in listed[:60]],
               caption="Excluded images" + (f" (first 60 of {len(listed)})" if len(listed) > 60 else ""),
               n_column=False)
    if not summary:
        html = f"<p>All {n_images} stored images are in the reviewed pool; none was excluded.</p>"
        md = f"All {n_images} stored images are in the reviewed pool; none was excluded.\n"
    else:
        html, md = t.html() + li.html(), t.markdown() + "\n" + li.markdown()
    html += (f'<p class="view-links">See every image with its status, each duplicate set and each culture flag in '
             f'the view (<code>cultura view</code>): <a href="{view_page("pool.html")}">'
             f'pool</a>, <a href="{view_page("dups-1.html")}">duplicate sets</a>, '
             f'<a href="{view_page("flags-1.html")}">culture flags</a>.</p>')
    return ReportSection(title="Image pool: what was excluded and why", html=html, markdown=md,
                         csv_tables={"excluded": [{"sha256": s, "reason": r} for s, r in listed]})


def annotators_section(project: Project) -> ReportSection | None:
    """The annotators behind the benchmark, per campaign (:func:`cultura.annotate.team.annotator_report`):
    tasks done, median time per task, images per hour (and the campaign's), agreement with the consensus, gold accuracy (95% Wilson CI, n), estimated
    skill, a flag for likely spammers with the reason, and what still blocks the campaign."""
    reports = [r for r in annotator_report(project) if r["annotators"]]
    if not reports:
        return None
    html, md, csv = [], [], {}
    for r in reports:
        rows = []
        for a in r["annotators"]:
            gold = (Cell(a["gold_accuracy"], a["gold_ci_low"], a["gold_ci_high"], n=a["gold_n"]) if a["gold_n"]
                    else Cell(float("nan"), reason="no gold item answered"))
            skill = ", ".join(f"{k} {v:.2f}" for k, v in sorted(a["skill"].items())) or "–"
            rows.append([a["annotator"], f"{a['done']}/{a['assigned']}",
                         "–" if a["median_seconds"] is None else f"{a['median_seconds']:.1f}",
                         "–" if a["images_per_hour"] is None else f"{a['images_per_hour']:.0f}",
                         "–" if a["consensus_agreement"] is None
                         else f"{a['consensus_agreement']:.2f} (n={a['consensus_n']})",
                         gold, skill, f"yes: {a['reason']}" if a["spammer"] else "no"])
        pace = r["progress"].get("images_per_hour")
        t = Table(["annotator", "done", "median s per task", "images per hour", "agrees with consensus", "gold accuracy (95% CI)",
                   "estimated skill", "likely spammer"], rows, n_column=False,
                  caption=f"Campaign {r['campaign']} ({r['kind']}): {r['progress']['complete']} of "
                          f"{r['progress']['items']} items complete, {r['progress']['decided']} decided"
                          + (f", {pace:.0f} images per annotator-hour over {r['progress']['annotator_hours']:.2f} h"
                             if pace else "")
                          + ("; blocked by: " + "; ".join(f"{b['blocker']} ({b['items']} items)"
                                                          for b in r["blockers"]) if r["blockers"] else "") + ".")
        html.append(t.html())
        md.append(t.markdown())
        csv[f"annotators_{slug(r['campaign'])}"] = t.csv_rows()  # the same table for a paper (LaTeX)
    return ReportSection(title="Annotators: work, agreement, gold accuracy and skill", html="".join(html),
                         markdown="\n".join(md), csv_tables=csv)


def render_html(report: dict) -> str:
    """The report as one self-contained HTML document."""
    sections = [{"id": slug(suite), "suite": suite, "title": sec.title, "html": Markup(sec.html)}
                for suite, sec in report["sections"]]
    return render_template("report/report.html.j2", meta=report["meta"], sections=sections, runs=report["runs"],
                              unfinished=report["unfinished"])


def render_markdown(report: dict) -> str:
    m = report["meta"]
    lines = [f"# Evaluation report — {m['project']}", "",
             f"Generated {m['generated']} (cultura git {m['git_revision'] or 'unknown'}).", ""]
    for w in m.get("warnings", []):
        lines += [f"> **Warning:** {w}", ""]
    for _suite, sec in report["sections"]:
        lines += [f"## {sec.title}", "", sec.markdown.strip(), ""]
    lines += ["## Runs", "", "| run | model | identity | benchmark | hash | suite | git | date | rows |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in report["runs"]:
        lines.append(f"| {r['id']} | {r['model_spec']} | {r['model']} | {r['benchmark'] or ''}"
                     f"{'@' + str(r['benchmark_version']) if r['benchmark_version'] else ''} | "
                     f"{(r['benchmark_hash'] or '')[:12]} | {r['suite']} | {(r['git_revision'] or '')[:12]} | "
                     f"{r['finished_at']} | {r['n_results']} |")
    for r in report["unfinished"]:
        lines.append(f"\n- {r['suite']} × {r['model_spec']}: {r['status']} — {r['error']}")
    return "\n".join(lines) + "\n"


def select_results(results: list[dict], *, models=None, suites=None, benchmarks=None) -> list[dict]:
    """Keep the results of the given models (identity or spec), suites and benchmarks (``NAME`` or
    ``NAME@VERSION``); ``None`` keeps all. A name that matches nothing is an error listing the names there are."""
    out = results
    for what, wanted, keys in (("model", models, lambda r: {r["model"], r["model_spec"]}),
                               ("suite", suites, lambda r: {r["suite"]}),
                               ("benchmark", benchmarks, lambda r: {r["benchmark"], f"{r['benchmark']}@"
                                                                    f"{r['benchmark_version']}"})):
        if not wanted:
            continue
        wanted = [wanted] if isinstance(wanted, str) else list(wanted)
        have = sorted({k for r in out for k in keys(r) if k})
        missing = [w for w in wanted if w not in have]
        if missing:
            raise CulturaError(f"No results for {what} {', '.join(missing)}. Results exist for: "
                               f"{', '.join(have) or 'none'}.", param=f"{what}s")
        out = [r for r in out if keys(r) & set(wanted)]
    return out


def write_report(project: Project, out: str | Path | None = None, *, models=None, suites=None,
                 benchmarks=None, overwrite: bool = False, progress: Progress = None) -> dict[str, Path]:
    """Write ``OUT.html``, ``OUT.md`` and ``OUT_csv/*.csv`` (default ``reports/evaluation.html``); returns the
    paths. ``models`` / ``suites`` / ``benchmarks``: only these (see :func:`select_results`). Raises when there
    are no results yet. A named ``out`` whose HTML or Markdown file exists is refused unless ``overwrite`` (the
    default report in ``reports/`` is the project's own and is always rewritten)."""
    named = bool(out)
    out = Path(out) if out else Path(project.root) / "reports" / "evaluation.html"
    if out.suffix.lower() not in (".html", ".htm"):
        out = out.with_suffix(".html")
    md = out.with_suffix(".md")
    if named:  # before the results are read and the report is built
        for p in (out, md):
            refuse_existing(p, overwrite=overwrite)
    results = load_results(project)
    if not results:
        raise CulturaError("No evaluation results yet. Run 'cultura evaluate run --model fake --suite all' (or "
                           "a real model) first.")
    results = select_results(results, models=models, suites=suites, benchmarks=benchmarks)
    report = build_report(project, results=results, progress=progress)
    with task("report: writing files", progress=progress):
        return _write_files(report, out, md)


def _write_files(report: dict, out: Path, md: Path) -> dict[str, Path]:
    """The report's files: HTML, Markdown, the CSV and LaTeX tables and the figures."""
    out.parent.mkdir(parents=True, exist_ok=True)
    csv_dir = out.with_name(out.stem + "_csv")
    csv_dir.mkdir(exist_ok=True)
    write_atomic(out, render_html(report))
    write_atomic(md, render_markdown(report))
    tex_dir = out.with_name(out.stem + "_latex")
    tex_dir.mkdir(exist_ok=True)
    tex_files = []
    for suite, sec in report["sections"]:
        for name, rows in sec.csv_tables.items():
            if not rows:
                continue
            cols = list(dict.fromkeys(k for r in rows for k in r))
            buf = io.StringIO()
            w = csv.DictWriter(buf, fieldnames=cols)
            w.writeheader()
            w.writerows(rows)
            stem = f"{slug(suite)}-{slug(name)}"
            write_atomic(csv_dir / f"{stem}.csv", buf.getvalue())
            write_atomic(tex_dir / f"{stem}.tex", paper_table(sec, name, rows, label=f"tab:{stem}"))
            tex_files.append(stem)
    write_atomic(tex_dir / "all-tables.tex", latex.document(tex_files))
    fig_dir = out.with_name(out.stem + "_figures")
    fig_dir.mkdir(exist_ok=True)
    count: dict[str, int] = {}
    written: set[str] = set()
    for f in report.get("figures", []):
        base = f"{slug(f['section'])}-{slug(f['name'])}" if f.get("name") else f"{slug(f['section'])}-figure"
        count[base] = count.get(base, 0) + 1
        stem = fig_dir / (base if count[base] == 1 else f"{base}-{count[base]}")
        for ext in ("png", "svg", "pdf"):
            if f.get(ext):
                write_atomic(stem.with_name(f"{stem.name}.{ext}"), f[ext])
                written.add(f"{stem.name}.{ext}")
    # files an earlier report wrote that this one did not (renamed or gone figures and tables) are removed, so
    # the folders hold exactly this report
    for folder, exts, keep in ((fig_dir, {".png", ".svg", ".pdf"}, written),
                               (tex_dir, {".tex"}, {f"{s}.tex" for s in tex_files} | {"all-tables.tex"}),
                               (csv_dir, {".csv"}, {f"{s}.csv" for s in tex_files})):
        for p in folder.iterdir():
            if p.is_file() and p.suffix in exts and p.name not in keep:
                p.unlink()
    return {"html": out, "markdown": md, "csv_dir": csv_dir, "latex_dir": tex_dir, "figures_dir": fig_dir}


def paper_table(sec: ReportSection, name: str, rows: list[dict], *, label: str = "") -> str:
    """One CSV table of a section as a booktabs LaTeX table: from its :class:`Table` when the rows remember it
    (the same texts as the HTML), else from the rows; the caption names the section and the measure."""
    t = getattr(rows, "table", None)
    if t is not None:
        cap = paper_caption(t.caption or f"{sec.title}: {name.replace('_', ' ')}.")
        return ("% cultura: the report's table, as in the HTML\n" + latex.needs()
                + latex.from_table(t, caption=cap, label=label))
    return "% cultura: the CSV's rows (not a table of the HTML)\n" + latex.needs() + latex.from_rows(
        rows, caption=f"{sec.title}: {name.replace('_', ' ')} (every row of the CSV {label.removeprefix('tab:')}.csv).",
        label=label)


def paper_caption(caption: str) -> str:
    """An HTML caption in a paper's words: what to hover or click on a page has no place on paper (the table's
    notes give every reason)."""
    return re.sub(r"(?:Hover|Click)[^.;]*[.;]\s*(\w?)", lambda m: m.group(1).upper(), caption).strip()
