"""Figures fit for a paper: the one palette (:func:`country_style`, each country its own colour and marker in
every figure of every report) and :func:`figure_problems`, the check every report figure passes (titled axes,
labelled panels, a legend where colours must be told apart, countries in their own colours, no overlapping
text). Split from :mod:`cultura.evaluate.reportkit`, which re-exports it (suites import it from there).
"""
from __future__ import annotations

import re

from ..countries import registry

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


