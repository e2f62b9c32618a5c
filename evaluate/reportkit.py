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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

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


def generic_section(suite: str, rows: list[dict], project) -> ReportSection:
    """Fallback for a suite without a registered section: every row with its group, value, CI and n."""
    t = Table(["model", "metric", "group", "value"],
              [[model_label(r), r["metric"], ", ".join(f"{k}={v}" for k, v in r["group"].items()), Cell.of(r)]
               for r in rows if not r["metric"].startswith("projection_")])
    return ReportSection(title=f"Suite {suite}", html=t.html(), markdown=t.markdown(),
                         csv_tables={f"{suite}": t.csv_rows()})


