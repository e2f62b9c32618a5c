"""Building blocks of report sections: :class:`ReportSection`, table :class:`Cell`/:class:`Table` (HTML,
Markdown, CSV from one definition), figures and images as data URIs, model labels. Every suite folder's
``report.py`` builds its section from these; the report engine (:mod:`cultura.evaluate.report`) assembles
the sections. Every number is shown with its CI and n; an infinite SP is printed as ∞ with the reason, an
undefined value as "n/a" with the reason.
"""
from __future__ import annotations

import base64
import html as htmlmod
import io
import math
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .. import pixels
from .figcheck import (COUNTRY_LABEL, COUNTRY_MARKERS, OKABE_ITO, country_style,  # noqa: F401 - re-exported
                       figure_problems)

if TYPE_CHECKING:
    from ..project import Project

RenderFunc = Callable[[list, object], "ReportSection"]


@dataclass
class ReportSection:
    """What a section contributes: an HTML fragment, the same content as Markdown, and CSV tables
    (name → list of row dicts)."""

    title: str
    html: str
    markdown: str
    csv_tables: dict[str, list[dict]] = field(default_factory=dict)


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

    def html(self, mark: str | None = None) -> str:
        v = htmlmod.escape(self._num(self.value))
        title = htmlmod.escape(self.reason or "", quote=True)
        cls = "v inf" if self.undefined else "v"
        out = f'<span class="{cls}" title="{title}">{v}</span>'
        if self.ci_low is not None and self.ci_high is not None and not (
                isinstance(self.ci_low, float) and math.isnan(self.ci_low)) and not self.undefined:
            out += f'<span class="ci">[{htmlmod.escape(self._num(self.ci_low))}, ' \
                   f'{htmlmod.escape(self._num(self.ci_high))}]</span>'
        elif self.undefined and self.reason:
            out += f'<sup class="note">{htmlmod.escape(mark or "†")}</sup>'
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
    #: row index → the heading of the group of rows it starts (a model, in a table transposed by
    #: :meth:`transposed`), set across the table above that row
    headings: dict[int, str] = field(default_factory=dict)

    def country_columns(self) -> tuple[int, list[int]] | None:
        """``(k, the country columns)`` when this table is one column per country: ``k`` leading label columns
        (no :class:`Cell` in them), then columns of Cells of which at least three, and at least half, are
        headed by a country (``JP`` or ``JP (n=120)``); None for any other shape."""
        def cells(j):
            return [row[j] for row in self.rows if j < len(row)]
        k = 0
        while k < len(self.columns) and not any(isinstance(c, Cell) for c in cells(k)):
            k += 1
        rest = range(k, len(self.columns))
        countries = [j for j in rest if COUNTRY_COLUMN.match(self.columns[j])]
        if not k or self.headings or len(countries) < 3 or 2 * len(countries) < len(rest):
            return None
        if not all(isinstance(c, Cell) for j in rest for c in cells(j)):
            return None
        return k, countries

    def transposed(self) -> "Table | None":
        """This table with countries as rows (None unless :meth:`country_columns`): one row per country, one
        column per value of the last label column (the measure: SP, TS, IS…), the rows of each value of the
        labels before it (the model) under one heading. What a person pastes when a column per country is wider
        than a page. None too when two rows share their labels (transposing would lose one)."""
        shape = self.country_columns()
        if shape is None:
            return None
        k, _ = shape
        groups: dict[tuple, dict[str, list]] = {}
        measures: list[str] = []
        for row in self.rows:
            key, measure = tuple(plain(x) for x in row[:k - 1]), plain(row[k - 1])
            if measure in groups.setdefault(key, {}):
                return None
            groups[key][measure] = row
            measures += [measure] if measure not in measures else []
        rows: list[list] = []
        headings: dict[int, str] = {}
        for key, by in groups.items():
            if any(key):
                headings[len(rows)] = " · ".join(x for x in key if x)
            for j in range(k, len(self.columns)):
                rows.append([self.columns[j]] + [by[m][j] if m in by and j < len(by[m]) else "" for m in measures])
        return Table(["country"] + measures, rows, caption=self.caption, n_column=self.n_column, headings=headings)

    def _shown(self) -> "Table":
        """The table as the HTML and Markdown show it: countries as rows when it has more country columns than
        a page shows side by side (:data:`HTML_COUNTRIES`)."""
        shape = self.country_columns()
        if shape and len(shape[1]) > HTML_COUNTRIES:
            return self.transposed() or self
        return self

    def reasons(self) -> list[str]:
        """The reasons of this table's undefined cells, in order of first appearance."""
        seen = []
        for row in self.rows:
            for c in row:
                if isinstance(c, Cell) and c.undefined and c.reason and c.reason not in seen:
                    seen.append(c.reason)
        return seen

    def notes(self) -> list[tuple[str, str]]:
        """(mark, note) per meaning: near-identical reasons share one note (:func:`merge_notes`); marks are
        unique within a report section (†, ‡, §, ¶, ‖, ††, …)."""
        return [(mark, text) for text, _members, mark in self._noted()]

    def _noted(self) -> list[tuple[str, list[str], str]]:
        marks = _MARKS.get()
        local: dict[str, int] = {}
        out = []
        for text, members in merge_notes(self.reasons()):
            reg = marks if marks is not None else local
            i = reg.setdefault(text, len(reg))
            out.append((text, members, note_mark(i)))
        return out

    def _mark_of(self) -> dict[str, str]:
        return {r: mark for _text, members, mark in self._noted() for r in members}

    def _n(self, row) -> str:
        ns = sorted({c.n for c in row if isinstance(c, Cell) and c.n is not None})
        return "/".join(str(n) for n in ns)

    def html(self) -> str:
        shown = self._shown()
        if shown is not self:
            return shown.html()
        marks = self._mark_of()
        head = "".join(f"<th>{htmlmod.escape(c)}</th>" for c in self.columns) + ("<th>n</th>" if self.n_column else "")
        width = len(self.columns) + bool(self.n_column)
        body = []
        for i, row in enumerate(self.rows):
            if i in self.headings:
                body.append(f'<tr class="group"><th colspan="{width}">{htmlmod.escape(self.headings[i])}</th></tr>')
            tds = "".join(f"<td>{c.html(marks.get(c.reason))}</td>" if isinstance(c, Cell)
                          else f"<td>{htmlmod.escape(plain(c))}</td>" for c in row)
            if self.n_column:
                tds += f'<td class="n">{self._n(row)}</td>'
            body.append(f"<tr>{tds}</tr>")
        cap = f"<caption>{htmlmod.escape(self.caption)}</caption>" if self.caption else ""
        notes = "".join(f'<p class="note">{htmlmod.escape(m)} {htmlmod.escape(n)}</p>' for m, n in self.notes())
        return f'<table>{cap}<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>{notes}'

    def markdown(self) -> str:
        shown = self._shown()
        if shown is not self:
            return shown.markdown()
        marks = self._mark_of()
        cols = self.columns + (["n"] if self.n_column else [])
        lines = [f"*{self.caption}*", ""] if self.caption else []
        lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for i, row in enumerate(self.rows):
            if i in self.headings:
                lines.append("| " + " | ".join([f"**{self.headings[i]}**"] + [""] * (len(cols) - 1)) + " |")
            cells = [c.text() + (marks.get(c.reason, "") if c.undefined else "") if isinstance(c, Cell)
                     else plain(c) for c in row]
            if self.n_column:
                cells.append(self._n(row))
            lines.append("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |")
        lines += [f"\n{m} {n}" for m, n in self.notes()]
        return "\n".join(lines) + "\n"

    def csv_rows(self) -> "TableRows":
        """Every column for machines: a Cell's value, ci_low, ci_high, n and reason each get a column. The list
        remembers its table (``.table``) so the report can write the same table for a paper."""
        out = TableRows()
        out.table = self
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


#: a column header naming one country: "JP", or "JP (n=120)" with the items behind its values
COUNTRY_COLUMN = re.compile(r"^([A-Z]{2})(?: \(n=[^)]*\))?$")
#: the most country columns the HTML and the Markdown show side by side (8 fill a 1,400 px screen); a table
#: with more is shown with countries as rows (:meth:`Table.transposed`)
HTML_COUNTRIES = 8


class TableRows(list):
    """CSV rows of a :class:`Table` that remember it (``.table``), for the LaTeX writer."""

    table: "Table | None" = None


def plain(x) -> str:
    """A plain (non-Cell) table value as text: a non-finite float reads n/a or ∞ like a Cell, never nan/inf."""
    if isinstance(x, float) and not math.isfinite(x):
        return Cell(x).text()
    return "" if x is None else str(x)


_NOTE_MARKS = "†‡§¶‖"


def note_mark(i: int) -> str:
    """The i-th note mark: †, ‡, §, ¶, ‖, then doubled (††, ‡‡, …)."""
    return _NOTE_MARKS[i % len(_NOTE_MARKS)] * (i // len(_NOTE_MARKS) + 1)


_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def merge_notes(reasons: list[str]) -> list[tuple[str, list[str]]]:
    """Near-identical reasons as one note: reasons that differ only in one word (say a language code, wherever
    it appears) become one note listing the words in braces — "the {es, fi, fr} inventory has no … prompts; add
    them to inventories/{es, fi, fr}.toml". Returns (note text, the reasons it stands for), in order."""
    uniq = list(dict.fromkeys(r for r in reasons if r))
    by_template: dict[str, list[tuple[str, str]]] = {}
    for r in uniq:
        for w in dict.fromkeys(_WORD.findall(r)):
            if len(w) > 24:
                continue
            tpl = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(w)}(?![A-Za-z0-9_])", "\0", r)
            by_template.setdefault(tpl, []).append((r, w))
    done: set[str] = set()
    out = []
    for r in uniq:
        if r in done:
            continue
        best = max(((tpl, [(m, w) for m, w in members if m not in done]) for tpl, members in by_template.items()
                    if any(m == r for m, _ in members)), key=lambda kv: len(kv[1]), default=None)
        if best is None or len(best[1]) < 2:
            out.append((r, [r]))
            done.add(r)
            continue
        tpl, members = best
        words = list(dict.fromkeys(w for _, w in members))
        out.append((tpl.replace("\0", "{" + ", ".join(words) + "}"), [m for m, _ in members]))
        done.update(m for m, _ in members)
    return out


#: Fonts tried in order for every figure, so CJK, Thai and Devanagari labels render (Debian: fonts-noto-cjk,
#: fonts-thai-tlwg, fonts-noto-core, installed by 'make setup'); matplotlib falls back glyph by glyph.
FONT_FALLBACK = ["DejaVu Sans", "Noto Sans", "Noto Sans CJK JP", "Noto Sans CJK SC", "Noto Sans Thai",
                 "Loma", "Garuda", "Noto Sans Devanagari", "Noto Sans Arabic", "Noto Sans Hebrew"]

#: While a report is written, figures are also collected here (section, PNG bytes, SVG bytes) so each one is
#: saved as its own file beside the HTML (set by :func:`collect_figures`).
_FIGURES: ContextVar[list | None] = ContextVar("cultura_report_figures", default=None)
_SECTION: ContextVar[str] = ContextVar("cultura_report_section", default="figure")
#: note text → mark index within the report section being written (marks unique per section)
_MARKS: ContextVar[dict | None] = ContextVar("cultura_report_marks", default=None)


def font_rc() -> dict:
    """matplotlib rc settings with the font fallback list restricted to fonts installed here."""
    from matplotlib import font_manager  # deferred: heavy optional dependency, loaded on first use

    have = {f.name for f in font_manager.fontManager.ttflist}
    fams = [f for f in FONT_FALLBACK if f in have] or ["DejaVu Sans"]
    # a list of families in font.family is what makes matplotlib (>= 3.6) fall back glyph by glyph; a list
    # in font.sans-serif only picks the first family found
    from matplotlib import cycler  # deferred: heavy optional dependency, loaded on first use

    return {"font.family": fams, "svg.fonttype": "none", "axes.prop_cycle": cycler(color=OKABE_ITO[:7])}


@contextmanager
def collect_figures(section: str | None = None, sink: list | None = None):
    """Inside this block every :func:`figure_uri` also keeps its figure (PNG and SVG) in ``sink``, named after
    ``section``; figures use the font fallback list."""
    import matplotlib  # deferred: heavy optional dependency, loaded on first use

    t1 = _FIGURES.set(sink) if sink is not None else None
    t2 = _SECTION.set(section) if section else None
    t3 = _MARKS.set({})
    try:
        with matplotlib.rc_context(font_rc()):
            yield sink
    finally:
        _MARKS.reset(t3)
        if t2 is not None:
            _SECTION.reset(t2)
        if t1 is not None:
            _FIGURES.reset(t1)


def figure_uri(fig, name: str | None = None) -> str:
    """A matplotlib figure as a PNG data URI (the figure is closed). While a report is being written the figure
    is also kept as PNG (300 dpi), SVG and PDF (fonts embedded) for the per-figure files, named ``name`` (what
    it shows and the seed figure it follows, e.g. ``self-preference-random-rounds-seed000-fig19``), and
    checked by :func:`figure_problems`."""
    import matplotlib.pyplot as plt  # deferred: heavy optional dependency, loaded on first use

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    sink = _FIGURES.get()
    if sink is not None:
        hi, svg, pdf = io.BytesIO(), io.BytesIO(), io.BytesIO()
        fig.savefig(hi, format="png", dpi=300, bbox_inches="tight")
        # SVG with glyphs as paths and PDF with TrueType (Type 42) fonts embedded: both open anywhere
        with matplotlib_rc({"svg.fonttype": "path", "pdf.fonttype": 42}):
            fig.savefig(svg, format="svg", bbox_inches="tight")
            fig.savefig(pdf, format="pdf", bbox_inches="tight")
        sink.append({"section": _SECTION.get(), "name": name, "png": hi.getvalue(), "svg": svg.getvalue(),
                     "pdf": pdf.getvalue(), "problems": figure_problems(fig)})
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def cell_text_colour(rgba) -> str:
    """Black or white, whichever reads on a cell of colour ``rgba`` (WCAG relative luminance)."""
    def lin(c):
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (lin(float(x)) for x in rgba[:3])
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.179 else "white"


def annotate_cells(ax, im, mat, fmt: str = "{:.1f}", *, fontsize: float = 6, missing: str = "n/a") -> None:
    """Write each cell's value on a heatmap, in black or white by the cell's luminance; an undefined cell
    (NaN) reads ``missing`` rather than staying blank."""
    for i in range(mat.shape[0]):
        for j in range(mat.shape[1]):
            v = mat[i, j]
            if v is None or not math.isfinite(v):
                ax.text(j, i, missing, ha="center", va="center", fontsize=fontsize, color="#555555")
                continue
            ax.text(j, i, fmt.format(v), ha="center", va="center", fontsize=fontsize,
                    color=cell_text_colour(im.cmap(im.norm(v))))


def matplotlib_rc(rc: dict):
    """``matplotlib.rc_context(rc)``."""
    import matplotlib  # deferred: heavy optional dependency, loaded on first use

    return matplotlib.rc_context(rc)


def dedupe_notes(html: str) -> str:
    """Each footnote (``<p class="note">``) once per section: repeats under later tables are dropped."""
    seen: set[str] = set()

    def keep(m):
        if m.group(0) in seen:
            return ""
        seen.add(m.group(0))
        return m.group(0)
    return re.sub(r'<p class="note">.*?</p>', keep, html)


def image_uri(path: str | Path, *, max_side: int = 160) -> str | None:
    """A stored image as a small JPEG data URI (None when it cannot be read)."""

    try:
        im = pixels.open_displayed(path, "RGB")  # the picture a browser shows
        im.thumbnail((max_side, max_side))
        buf = io.BytesIO()
        im.save(buf, format="JPEG", quality=80)
    except pixels.UNREADABLE:
        return None
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


def img_tag(uri: str, alt: str) -> str:
    return f'<img src="{uri}" alt="{htmlmod.escape(alt, quote=True)}">'


def model_label(r: dict) -> str:
    """How a model is named in tables and figures: the spec the user gave (identity when none), marked when the
    run was a smoke run (``--limit``), so the HTML, the CSV and the LaTeX say it on the row itself."""
    name = r.get("model_spec") or r["model"]
    limit = (r.get("params") or {}).get("limit")
    return name if limit is None else f"{name} {SMOKE_MARK}{limit})"


#: how a smoke run's rows are named (:func:`model_label`); averages over models leave them out
SMOKE_MARK = "(smoke run, --limit "


def is_smoke(label: str) -> bool:
    return SMOKE_MARK in str(label)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def generic_section(suite: str, rows: list[dict], project: Project) -> ReportSection:
    """Fallback for a suite without a registered section: every row with its group, value, CI and n."""
    t = Table(["model", "metric", "group", "value"],
              [[model_label(r), r["metric"], ", ".join(f"{k}={v}" for k, v in r["group"].items()), Cell.of(r)]
               for r in rows if not r["metric"].startswith("projection_")])
    return ReportSection(title=f"Suite {suite}", html=t.html(), markdown=t.markdown(),
                         csv_tables={f"{suite}": t.csv_rows()})


