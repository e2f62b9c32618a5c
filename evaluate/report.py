"""The evaluation report: one self-contained HTML file (figures and images as data URIs) plus Markdown and CSV.

Sections come from a registry keyed by suite name, so a suite added elsewhere brings its own section::

    from cultura.evaluate.report import ReportSection, register_report_section

    def render(results, project):
        return ReportSection(title="My suite", html="<p>…</p>", markdown="…", csv_tables={"mine": rows})

    register_report_section("mine", render)

``render(results, project)`` gets the latest done result rows of its suite (self-describing dicts, see
:func:`cultura.evaluate.runner.load_results`) and returns a :class:`ReportSection`. A suite with results and
no registered section gets a plain table of its rows. Every number is shown with its CI and n; an infinite SP
is printed as ∞ with the reason, an undefined value as "n/a" with the reason.
"""
from __future__ import annotations

import base64
import csv
import html as htmlmod
import importlib
import io
import math
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable

from ..db import now
from ..errors import CulturaError

RenderFunc = Callable[[list, object], "ReportSection"]
REPORT_SECTIONS: dict[str, RenderFunc] = {}
BUILTIN_SECTION_MODULES = ["cultura.evaluate.suites.retrieval.report"]
LEADING_SECTIONS = ("prevalence", "association", "descriptor")
_loaded = False


@dataclass
class ReportSection:
    """What a section contributes: an HTML fragment, the same content as Markdown, and CSV tables
    (name → list of row dicts)."""

    title: str
    html: str
    markdown: str
    csv_tables: dict[str, list[dict]] = field(default_factory=dict)


def register_report_section(suite: str, render: RenderFunc) -> None:
    """Register ``render(results, project) -> ReportSection`` for the results of ``suite``."""
    if not suite or not callable(render):
        raise ValueError("register_report_section needs a suite name and a callable render")
    REPORT_SECTIONS[suite] = render


def load_sections() -> dict[str, RenderFunc]:
    """Import the built-in section modules and the suites (whose modules may register sections)."""
    global _loaded
    if not _loaded:
        _loaded = True
        from .suites import load_suites

        load_suites()
        for name in BUILTIN_SECTION_MODULES:
            importlib.import_module(name)
    return REPORT_SECTIONS


# -- formatting helpers shared by sections -----------------------------------------------------------

@dataclass
class Cell:
    """One number with its CI, n and, when not finite, the reason. ``pct`` shows shares as percentages."""

    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    reason: str | None = None
    pct: bool = False
    digits: int = 3
    p: bool = False

    @classmethod
    def of(cls, r: dict | None, *, pct: bool = False, digits: int = 3) -> "Cell":
        if r is None:
            return cls(None, reason="not measured", pct=pct, digits=digits)
        return cls(r["value"], r.get("ci_low"), r.get("ci_high"), r.get("n"), r["details"].get("reason"), pct,
                   digits)

    def _num(self, x) -> str:
        if x is None or (isinstance(x, float) and math.isnan(x)):
            return "n/a"
        if math.isinf(x):
            return "∞" if x > 0 else "−∞"
        if self.p and x < 10 ** -self.digits:
            return f"<{10 ** -self.digits:.{self.digits}f}"
        return f"{x * 100:.{max(self.digits - 1, 1)}f}%" if self.pct else f"{x:.{self.digits}f}"

    def text(self, *, with_ci: bool = True) -> str:
        s = self._num(self.value)
        if with_ci and self.ci_low is not None and self.ci_high is not None and not (
                isinstance(self.ci_low, float) and math.isnan(self.ci_low)):
            s += f" [{self._num(self.ci_low)}, {self._num(self.ci_high)}]"
        return s

    @property
    def undefined(self) -> bool:
        return self.value is None or not math.isfinite(self.value)

    def html(self) -> str:
        v = htmlmod.escape(self._num(self.value))
        title = htmlmod.escape(self.reason or "", quote=True)
        cls = "v inf" if self.undefined else "v"
        out = f'<span class="{cls}" title="{title}">{v}</span>'
        if self.ci_low is not None and self.ci_high is not None and not (
                isinstance(self.ci_low, float) and math.isnan(self.ci_low)) and not self.undefined:
            out += f'<span class="ci">[{htmlmod.escape(self._num(self.ci_low))}, ' \
                   f'{htmlmod.escape(self._num(self.ci_high))}]</span>'
        elif self.undefined and self.reason:
            out += '<sup class="note">†</sup>'
        return out

    def csv(self) -> dict:
        return {"value": _csv_num(self.value), "ci_low": _csv_num(self.ci_low), "ci_high": _csv_num(self.ci_high),
                "n": self.n, "reason": self.reason or ""}


def _csv_num(x):
    if x is None:
        return ""
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


@dataclass
class Table:
    """A table rendered identically to HTML, Markdown and CSV. Cells are :class:`Cell` or plain values."""

    columns: list[str]
    rows: list[list]
    caption: str = ""
    n_column: bool = True

    def notes(self) -> list[str]:
        seen = []
        for row in self.rows:
            for c in row:
                if isinstance(c, Cell) and c.undefined and c.reason and c.reason not in seen:
                    seen.append(c.reason)
        return seen

    def _n(self, row) -> str:
        ns = sorted({c.n for c in row if isinstance(c, Cell) and c.n is not None})
        return "/".join(str(n) for n in ns)

    def html(self) -> str:
        head = "".join(f"<th>{htmlmod.escape(c)}</th>" for c in self.columns) + ("<th>n</th>" if self.n_column else "")
        body = []
        for row in self.rows:
            tds = "".join(f"<td>{c.html()}</td>" if isinstance(c, Cell) else f"<td>{htmlmod.escape(str(c))}</td>"
                          for c in row)
            if self.n_column:
                tds += f'<td class="n">{self._n(row)}</td>'
            body.append(f"<tr>{tds}</tr>")
        cap = f"<caption>{htmlmod.escape(self.caption)}</caption>" if self.caption else ""
        notes = "".join(f'<p class="note">† {htmlmod.escape(n)}</p>' for n in self.notes())
        return f'<table>{cap}<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>{notes}'

    def markdown(self) -> str:
        cols = self.columns + (["n"] if self.n_column else [])
        lines = [f"*{self.caption}*", ""] if self.caption else []
        lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for row in self.rows:
            cells = [c.text() if isinstance(c, Cell) else str(c) for c in row]
            if self.n_column:
                cells.append(self._n(row))
            lines.append("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |")
        lines += [f"\n† {n}" for n in self.notes()]
        return "\n".join(lines) + "\n"

    def csv_rows(self) -> list[dict]:
        out = []
        for row in self.rows:
            d = {}
            for col, c in zip(self.columns, row):
                if isinstance(c, Cell):
                    for k, v in c.csv().items():
                        d[f"{col} {k}" if k != "value" else col] = v
                else:
                    d[col] = c
            out.append(d)
        return out


def figure_uri(fig) -> str:
    """A matplotlib figure as a PNG data URI (the figure is closed)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def image_uri(path: str | Path, *, max_side: int = 160) -> str | None:
    """A stored image as a small JPEG data URI (None when it cannot be read)."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            im.thumbnail((max_side, max_side))
            buf = io.BytesIO()
            im.save(buf, format="JPEG", quality=80)
    except (OSError, ValueError):
        return None
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


def img_tag(uri: str, alt: str) -> str:
    return f'<img src="{uri}" alt="{htmlmod.escape(alt, quote=True)}">'


def model_label(r: dict) -> str:
    """How a model is named in tables: the spec the user gave (identity when none)."""
    return r.get("model_spec") or r["model"]


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


# -- the report ----------------------------------------------------------------------------------------

def generic_section(suite: str, rows: list[dict], project) -> ReportSection:
    """Fallback for a suite without a registered section: every row with its group, value, CI and n."""
    t = Table(["model", "metric", "group", "value"],
              [[model_label(r), r["metric"], ", ".join(f"{k}={v}" for k, v in r["group"].items()), Cell.of(r)]
               for r in rows if not r["metric"].startswith("projection_")])
    return ReportSection(title=f"Suite {suite}", html=t.html(), markdown=t.markdown(),
                         csv_tables={f"{suite}": t.csv_rows()})


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


def build_report(project, *, results: list[dict] | None = None) -> dict:
    """Render every section from the latest results; returns ``{"sections", "runs", "meta"}``."""
    from .runner import git_revision, list_runs, load_results

    load_sections()
    results = load_results(project) if results is None else results
    by_suite: dict[str, list[dict]] = {}
    for r in results:
        by_suite.setdefault(r["suite"], []).append(r)
    # the seed 000 leaderboards (Tables 1-3) lead; then other registered sections, then the rest
    first = [s for s in LEADING_SECTIONS if s in by_suite]
    order = first + [s for s in REPORT_SECTIONS if s in by_suite and s not in first] + \
        [s for s in by_suite if s not in REPORT_SECTIONS and s not in first]
    sections = []
    for suite in order:
        rows = _label_benchmarks(by_suite[suite])
        render = REPORT_SECTIONS.get(suite)
        sec = render(rows, project) if render else generic_section(suite, rows, project)
        sections.append((suite, sec))
    used = {r["run_id"] for r in results}
    runs = list_runs(project)
    latest: dict[tuple, dict] = {}
    for r in runs:  # newest first
        latest.setdefault((r["model_spec"], r["suite"]), r)
    unfinished = [r for r in latest.values() if r["status"] != "done"]
    meta = {"project": getattr(project.config.project, "name", Path(project.root).name), "generated": now(),
            "git_revision": git_revision()}
    return {"sections": sections, "runs": [r for r in runs if r["id"] in used],
            "unfinished": unfinished, "meta": meta}


def _template():
    import jinja2

    text = resources.files("cultura.templates").joinpath("report/report.html.j2").read_text("utf-8")
    env = jinja2.Environment(autoescape=jinja2.select_autoescape(default=True), trim_blocks=True, lstrip_blocks=True)
    return env.from_string(text)


def render_html(report: dict) -> str:
    """The report as one self-contained HTML document."""
    from markupsafe import Markup

    sections = [{"id": slug(suite), "suite": suite, "title": sec.title, "html": Markup(sec.html)}
                for suite, sec in report["sections"]]
    return _template().render(meta=report["meta"], sections=sections, runs=report["runs"],
                              unfinished=report["unfinished"])


def render_markdown(report: dict) -> str:
    m = report["meta"]
    lines = [f"# Evaluation report — {m['project']}", "",
             f"Generated {m['generated']} (cultura git {m['git_revision'] or 'unknown'}).", ""]
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


def write_report(project, out: str | Path | None = None) -> dict[str, Path]:
    """Write ``OUT.html``, ``OUT.md`` and ``OUT_csv/*.csv`` (default ``reports/evaluation.html``); returns the
    paths. Raises when there are no results yet."""
    from .runner import load_results

    results = load_results(project)
    if not results:
        raise CulturaError("No evaluation results yet. Run 'cultura evaluate run --model fake --suite all' (or "
                           "a real model) first.")
    report = build_report(project, results=results)
    out = Path(out) if out else Path(project.root) / "reports" / "evaluation.html"
    if out.suffix.lower() not in (".html", ".htm"):
        out = out.with_suffix(".html")
    out.parent.mkdir(parents=True, exist_ok=True)
    md = out.with_suffix(".md")
    csv_dir = out.with_name(out.stem + "_csv")
    csv_dir.mkdir(exist_ok=True)
    _atomic_write(out, render_html(report))
    _atomic_write(md, render_markdown(report))
    for suite, sec in report["sections"]:
        for name, rows in sec.csv_tables.items():
            if not rows:
                continue
            cols = list(dict.fromkeys(k for r in rows for k in r))
            buf = io.StringIO()
            w = csv.DictWriter(buf, fieldnames=cols)
            w.writeheader()
            w.writerows(rows)
            _atomic_write(csv_dir / f"{slug(suite)}-{slug(name)}.csv", buf.getvalue())
    return {"html": out, "markdown": md, "csv_dir": csv_dir}


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
