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
from ..countries import registry

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
        marks = self._mark_of()
        head = "".join(f"<th>{htmlmod.escape(c)}</th>" for c in self.columns) + ("<th>n</th>" if self.n_column else "")
        body = []
        for row in self.rows:
            tds = "".join(f"<td>{c.html(marks.get(c.reason))}</td>" if isinstance(c, Cell)
                          else f"<td>{htmlmod.escape(plain(c))}</td>" for c in row)
            if self.n_column:
                tds += f'<td class="n">{self._n(row)}</td>'
            body.append(f"<tr>{tds}</tr>")
        cap = f"<caption>{htmlmod.escape(self.caption)}</caption>" if self.caption else ""
        notes = "".join(f'<p class="note">{htmlmod.escape(m)} {htmlmod.escape(n)}</p>' for m, n in self.notes())
        return f'<table>{cap}<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>{notes}'

    def markdown(self) -> str:
        marks = self._mark_of()
        cols = self.columns + (["n"] if self.n_column else [])
        lines = [f"*{self.caption}*", ""] if self.caption else []
        lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for row in self.rows:
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


#: Okabe & Ito's colour-blind safe palette (black first left out: it is kept for reference lines and text).
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
#: the marker cycle that tells apart two countries sharing one of the seven colours
COUNTRY_MARKERS = "osD^vP*Xh<>p"
COUNTRY_LABEL = re.compile(r"^([A-Z]{2})$|\(([A-Z]{2})\)$")


def country_style(code: str) -> tuple[str, str]:
    """The colour and marker of a country in every figure of every report (one palette, keyed by the country:
    its place in the country registry), so a country keeps its colour across panels and figures."""
    codes = sorted(registry().countries)
    i = codes.index(code) if code in codes else len(codes) + sum(map(ord, code))
    return OKABE_ITO[i % 7], COUNTRY_MARKERS[(i // 7) % len(COUNTRY_MARKERS)]


def _handle_colour(h) -> str | None:
    from matplotlib.colors import to_hex  # deferred: heavy optional dependency, loaded on first use

    for get in ("get_facecolor", "get_color"):
        if hasattr(h, get):
            c = getattr(h, get)()
            if hasattr(c, "ndim") and c.ndim == 2:
                c = c[0] if len(c) else None
            try:
                return to_hex(c) if c is not None else None
            except (ValueError, TypeError):
                return None
    return None


def _legend_problems(fig) -> list[str]:
    """Series that cannot be told apart (several colours, no legend) and countries drawn off their colour."""
    from matplotlib.collections import PathCollection  # deferred: heavy optional dependency

    out = []
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or getattr(ax, "_colorbar", None) is not None:
            continue
        colours = {_handle_colour(c) for c in ax.collections if isinstance(c, PathCollection)}
        # reference lines (axhline/axvline, drawn in the axes' grid transforms) are not series of data
        refs = (ax.get_xaxis_transform(which="grid"), ax.get_yaxis_transform(which="grid"))
        colours |= {_handle_colour(ln) for ln in ax.get_lines()
                    if len(ln.get_xdata()) > 1 and ln.get_transform() not in refs}
        colours.discard(None)
        if len(colours) > 1 and not legends:
            out.append(f"axes {i}: {len(colours)} colours of points or lines and no legend to tell them apart")
        has_data = bool(ax.collections or ax.patches or ax.get_lines() or ax.images)
        if ax.axison and has_data and not (ax.get_xlabel().strip() or ax.get_ylabel().strip()):
            out.append(f"axes {i}: no axis label")
    for lg in legends:
        for h, t in zip(lg.legend_handles, lg.get_texts()):
            m = COUNTRY_LABEL.search(t.get_text().strip())
            if not m:
                continue
            want, got = country_style(m.group(1) or m.group(2))[0].lower(), _handle_colour(h)
            if got is not None and got.lower() != want:
                out.append(f"legend entry {t.get_text()!r} drawn in {got}, not its country's colour {want}")
    return out


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


def figure_problems(fig) -> list[str]:
    """What would make ``fig`` unfit for a paper: an axis with tick labels but no title, a panel with data and
    no axis label, a colour bar without a label, several colours of points or lines and no legend, a country
    drawn in another colour than its own (:func:`country_style`), texts (tick labels, labels, legends,
    annotations) whose boxes overlap. Empty when fit."""
    from matplotlib.text import Text  # deferred: heavy optional dependency, loaded on first use

    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    out = []
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or not ax.axison:
            continue
        cbar = getattr(ax, "_colorbar", None)
        for name, axis, label in (("x", ax.xaxis, ax.get_xlabel()), ("y", ax.yaxis, ax.get_ylabel())):
            ticks = [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text().strip()]
            if ticks and not label.strip() and axis.get_visible():
                out.append(f"axes {i}{' (colour bar)' if cbar is not None else ''}: the {name} axis has no title")
    out += _legend_problems(fig)
    texts, ids = [], set()
    for ax in fig.axes:  # tick labels of ticks outside the view are not drawn: leave them out
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            tol = (hi - lo) * 1e-6
            for locs, labs in ((axis.get_majorticklocs(), axis.get_majorticklabels()),
                               (axis.get_minorticklocs(), axis.get_minorticklabels())):
                ids.update(id(lab) for loc, lab in zip(locs, labs) if not lo - tol <= loc <= hi + tol)
    for t in fig.findobj(Text):
        if id(t) in ids:
            continue
        ids.add(id(t))
        try:
            if not t.get_visible() or not t.get_text().strip() or (t.get_alpha() is not None and t.get_alpha() == 0):
                continue
            if t.axes is not None and not t.axes.get_visible():
                continue
            bb = t.get_window_extent(r)
        except (RuntimeError, ValueError, AttributeError, TypeError):
            continue
        if bb.width > 0 and bb.height > 0:
            texts.append((t.get_text(), bb))
    for a in range(len(texts)):
        for b in range(a + 1, len(texts)):
            (ta, ba), (tb, bb) = texts[a], texts[b]
            w = min(ba.x1, bb.x1) - max(ba.x0, bb.x0)
            h = min(ba.y1, bb.y1) - max(ba.y0, bb.y0)
            if w > 1.0 and h > 1.0:
                out.append(f"texts overlap: {ta!r} and {tb!r}")
    return out


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


