"""Report section of the ``latent`` suite, in the shapes of seed 002's tables and figures.

- Table 3: WW vs WN image similarity per concept (n, means, t, p, Bonferroni and Holm p, permutation p, Sig);
- Figure 1: country × country mean-similarity heatmaps (in-group countries first);
- Table 4: C-ASC per concept and caption template with its bootstrap CI and effect-size band;
- Figure 4: countries by average caption–image alignment rank, as a world **tile-grid map** (one square per
  country placed at its approximate centroid, ``data/country_centroids.csv``, darker = closer alignment; no
  installed package ships country outlines, so this stands in for the paper's choropleth) and as a ranked bar
  chart, with the Mann–Whitney test of in-group vs other ranks;
- Figure 3: UMAP/PCA projections of a concept's images and caption with k-means regions.

The latent suite's ``section`` (see :mod:`cultura.evaluate.suites.latent`).
"""
from __future__ import annotations

import csv
import html as htmlmod
import math
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np

from ...reportkit import Cell, ReportSection, Table, cell_text_colour, figure_uri, img_tag, model_label

if TYPE_CHECKING:
    from ....project import Project

MAX_FIGURE_CONCEPTS = 4
IN_COLOR, OUT_COLOR = "#0072B2", "#E69F00"  # Okabe-Ito blue / orange: colour-blind safe


def _plt():
    import matplotlib  # deferred: heavy optional dependency, loaded on first use

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt  # deferred: heavy optional dependency, loaded on first use

    return plt


def _models(rows) -> list[str]:
    return list(dict.fromkeys(model_label(r) for r in rows))


def _figure(uri: str, caption: str) -> tuple[str, str]:
    return (f'<figure>{img_tag(uri, caption)}<figcaption>{htmlmod.escape(caption)}</figcaption></figure>',
            f"*Figure: {caption}* (see the HTML report)")


class _Parts:
    """The HTML and Markdown of a section, built side by side."""

    def __init__(self):
        self.html, self.md = [], []

    def text(self, s: str) -> None:
        self.html.append(f"<p>{htmlmod.escape(s)}</p>")
        self.md.append(s)

    def table(self, t, *, scroll: bool = False) -> None:
        self.html.append(f'<div class="overflow">{t.html()}</div>' if scroll else t.html())
        self.md.append(t.markdown())

    def figure(self, uri: str | None, caption: str) -> None:
        if uri:
            h, m = _figure(uri, caption)
            self.html.append(h)
            self.md.append(m)


def _of(rows, model, metric):
    return [r for r in rows if model_label(r) == model and r["metric"] == metric]


def _num(x, digits=3):
    return Cell(x if x is not None else None, digits=digits)


def _p(x):
    """A p-value cell: scientific notation below 0.001 (as seed 002 Table 3), "—" when absent."""
    if x is None:
        return "—"
    if isinstance(x, float) and math.isfinite(x) and x < 1e-3:
        return f"{x:.2e}"
    return Cell(x, digits=3)


def table3(rows, model) -> Table:
    """Seed 002 Table 3 shape for one model (concepts sorted by one-sided p)."""
    tests = _of(rows, model, "ww_vs_wn")
    tests.sort(key=lambda r: (r["details"].get("p") if r["details"].get("p") is not None else 2))
    body = []
    for r in tests:
        d = r["details"]
        if d.get("status") != "ok":
            body.append([r["group"]["concept"], d.get("n_ww", ""), d.get("n_wn", ""), "", "", "", "", "", "", "",
                         f"skipped: {d.get('reason', '')}"])
            continue
        sig = ("✓" if d.get("significant_bonf") else "") + (" (Holm ✓)" if d.get("significant_holm") and
                                                            not d.get("significant_bonf") else "")
        body.append([r["group"]["concept"], d["n_ww"], d["n_wn"], _num(d["mean_ww"]), _num(d["mean_wn"]),
                     _num(d["t"], 2), _p(d["p"]), _p(d.get("p_bonf")), _p(d.get("p_holm")),
                     _p(d.get("p_perm")), sig])
    unit = tests[0]["details"].get("unit", "image") if tests else "image"
    unit = tests[0]["details"].get("unit_label", f"{unit} pairs") if tests else unit
    pairs = tests[0]["details"].get("pairs", "") if tests else ""
    pairs = {"cross-country": "same-country pairs left out of WW", "all": "same-country pairs kept in WW"}.get(
        pairs, pairs)
    grp = tests[0]["details"].get("in_group", "western") if tests else "western"
    return Table(["Concept", "n_WW", "n_WN", "Mean WW", "Mean WN", "t", "p", "p-bonf", "p-holm", "p-perm", "Sig"],
                 body, n_column=False,
                 caption=f"{model}: image–image similarity, Welch's t (one-sided WW > WN) per concept; G = {grp}; "
                         f"unit = {unit}; {pairs}; Bonferroni and Holm over the concepts tested; p-perm "
                         "permutes the group labels of whole countries (seed 002 Table 3 shape).")


def table4(rows, model) -> Table:
    """Seed 002 Table 4 shape: C-ASC per concept (and template), sorted high to low."""
    body = []
    cas = _of(rows, model, "c_asc")
    cas.sort(key=lambda r: (r["group"].get("template", ""), -(r["value"] if math.isfinite(r["value"]) else -9e9)))
    multi = len({(r["group"].get("template"), r["group"].get("language")) for r in cas}) > 1
    for r in cas:
        d = r["details"]
        name = r["group"]["concept"] + (f" — {d.get('caption', '')}" if multi else "")
        body.append([name, _num(d.get("mean_in")), _num(d.get("mean_out")), Cell.of(r, digits=2),
                     d.get("band", "undefined")])
    cap = cas[0]["group"].get("template", "") if cas else ""
    return Table(["Concept", "Mean_G", "Mean_not-G", "C-ASC", "band"], body,
                 caption=f"{model}: Caption Association Scores (caption '{cap}'; positive = closer to G; 95% "
                         "bootstrap CI resampling images within each group; bands small < 0.2 ≤ medium < 0.8 ≤ "
                         "large) (seed 002 Table 4 shape).")


def heatmap_figure(rows, model) -> str | None:
    """Seed 002 Figure 1: heatmaps of the most significant concepts (up to ``MAX_FIGURE_CONCEPTS``)."""
    tests = {r["group"]["concept"]: r["details"].get("p", 2) or 2 for r in _of(rows, model, "ww_vs_wn")}
    heat = sorted(_of(rows, model, "heatmap"), key=lambda r: tests.get(r["group"]["concept"], 2))
    heat = heat[:MAX_FIGURE_CONCEPTS]
    if not heat:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, len(heat), figsize=(4.2 * len(heat), 4.0), squeeze=False)
    for ax, r in zip(axes[0], heat):
        d = r["details"]
        m = np.array([[np.nan if v is None else v for v in line] for line in d["matrix"]], dtype=float)
        im = ax.imshow(m, cmap="viridis")
        ax.set_xticks(range(len(d["countries"])), d["countries"], rotation=90, fontsize=7)
        ax.set_yticks(range(len(d["countries"])), d["countries"], fontsize=7)
        for lab, flag in zip(ax.get_yticklabels(), d["in_group"]):
            lab.set_color(IN_COLOR if flag else OUT_COLOR)
        k = sum(d["in_group"])
        ax.axhline(k - 0.5, color="white", lw=1)
        ax.axvline(k - 0.5, color="white", lw=1)
        ax.set_title(r["group"]["concept"], fontsize=10)
        ax.set_xlabel("country (G first)", fontsize=8)
        ax.set_ylabel("country (G first)", fontsize=8)
        cb = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
        cb.set_label("mean image–image cosine similarity", fontsize=7)
    fig.tight_layout()
    return figure_uri(fig, f"image-similarity-by-country-{model}-seed002-fig1")


def alignment_figure(rows, model) -> tuple[str | None, Table]:
    """Seed 002 Figure 4 as a ranked bar chart, plus its table (first template only)."""
    ranks = _of(rows, model, "alignment_rank")
    tpls = list(dict.fromkeys(r["group"].get("template") for r in ranks))
    ranks = [r for r in ranks if r["group"].get("template") == (tpls[0] if tpls else None)]
    ranks.sort(key=lambda r: r["value"])
    test = next((r for r in _of(rows, model, "alignment_rank_group_test")
                 if r["group"].get("template") == (tpls[0] if tpls else None)), None)
    body = [[r["group"]["country"], "G" if r["details"].get("in_group") else "not G", Cell.of(r, digits=2),
             _num(r["details"].get("mean_similarity"))] for r in ranks]
    cap = f"{model}: average alignment rank per country (1 = caption closest), over concepts; n = concepts."
    if test and math.isfinite(test["value"]):
        d = test["details"]
        cap += (f" Mann–Whitney of G vs not-G ranks: U = {d['U']:.1f}, p = {d['p']:.3g}, A12 = {test['value']:.2f} "
                f"(n = {d['n_in']} + {d['n_out']}).")
    elif test:
        cap += f" Group test not run: {test['details'].get('reason', '')}"
    t = Table(["Country", "group", "mean rank", "mean similarity"], body, caption=cap)
    if not ranks:
        return None, t
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(5.0, 0.45 * len(ranks) + 2), 3.2))
    colors = [IN_COLOR if r["details"].get("in_group") else OUT_COLOR for r in ranks]
    ax.bar([r["group"]["country"] for r in ranks], [r["value"] for r in ranks], color=colors)
    ax.set_ylabel("average rank (lower = closer)")
    ax.set_xlabel("country")
    ax.set_title(f"Text–image alignment rank by country — {model}", fontsize=10)
    ax.tick_params(axis="x", rotation=90, labelsize=8)
    from matplotlib.patches import Patch  # deferred: heavy optional dependency, loaded on first use

    ax.legend(handles=[Patch(color=IN_COLOR, label="G"), Patch(color=OUT_COLOR, label="not G")], fontsize=8)
    fig.tight_layout()
    return figure_uri(fig, f"alignment-rank-bars-{model}-seed002-fig4"), t


TILE_DEG = 7.0  # grid step of the tile map, in degrees


@lru_cache(maxsize=1)
def country_centroids() -> dict[str, tuple[float, float]]:
    """ISO code → (lat, lon) approximate centroid (bundled ``data/country_centroids.csv``)."""
    text = resources.files("cultura.data").joinpath("country_centroids.csv").read_text("utf-8")
    return {r["code"]: (float(r["lat"]), float(r["lon"])) for r in csv.DictReader(text.splitlines())}


def tile_positions(codes) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """Grid cell (column, row) per country: its centroid snapped to a ``TILE_DEG`` grid, a taken cell moving
    to the nearest free one (countries placed west to east, north to south, so the result is stable)."""
    cents = country_centroids()
    placed: dict[str, tuple[int, int]] = {}
    taken: set[tuple[int, int]] = set()
    missing = sorted(c for c in codes if c not in cents)
    for c in sorted((c for c in codes if c in cents), key=lambda c: (-cents[c][0], cents[c][1], c)):
        lat, lon = cents[c]
        want = (round(lon / TILE_DEG), round(lat / TILE_DEG))
        best = want
        if want in taken:
            ring = [(want[0] + dx, want[1] + dy) for r in range(1, 6) for dx in range(-r, r + 1)
                    for dy in range(-r, r + 1) if max(abs(dx), abs(dy)) == r]
            best = min((p for p in ring if p not in taken),
                       key=lambda p: ((p[0] * TILE_DEG - lon) ** 2 + (p[1] * TILE_DEG - lat) ** 2, p))
        placed[c] = best
        taken.add(best)
    return placed, missing


def alignment_map(rows, model) -> tuple[str | None, list[str]]:
    """Seed 002 Figure 4 as a world tile-grid map: one square per country, darker = lower (closer) average
    alignment rank. Returns (figure URI, countries without a centroid)."""
    ranks = _of(rows, model, "alignment_rank")
    tpls = list(dict.fromkeys(r["group"].get("template") for r in ranks))
    vals = {r["group"]["country"]: r["value"] for r in ranks
            if r["group"].get("template") == (tpls[0] if tpls else None) and math.isfinite(r["value"])}
    if not vals:
        return None, []
    pos, missing = tile_positions(vals)
    if not pos:
        return None, missing
    plt = _plt()
    from matplotlib import colors as mcolors  # deferred: heavy optional dependency, loaded on first use
    from matplotlib.patches import Rectangle  # deferred: heavy optional dependency, loaded on first use

    lo, hi = min(vals.values()), max(vals.values())
    norm = mcolors.Normalize(vmin=lo, vmax=hi if hi > lo else lo + 1)
    cmap = plt.get_cmap("Blues_r")
    xs, ys = [p[0] for p in pos.values()], [p[1] for p in pos.values()]
    fig, ax = plt.subplots(figsize=(10, 5.2))
    for lon in range(-180, 181, 30):
        ax.axvline(lon / TILE_DEG, color="#eeeeee", lw=0.6, zorder=0)
    for lat in range(-60, 91, 30):
        ax.axhline(lat / TILE_DEG, color="#eeeeee", lw=0.6, zorder=0)
    ax.axhline(0, color="#dddddd", lw=1.0, zorder=0)
    for c, (x, y) in pos.items():
        col = cmap(norm(vals[c]))
        ax.add_patch(Rectangle((x - 0.46, y - 0.46), 0.92, 0.92, facecolor=col, edgecolor="#555555", lw=0.5))
        ink = cell_text_colour(col)
        ax.text(x, y + 0.17, c, ha="center", va="center", fontsize=6, color=ink)
        ax.text(x, y - 0.25, f"{vals[c]:.1f}", ha="center", va="center", fontsize=4.5, color=ink)
    ax.set_xlim(min(min(xs), -170 / TILE_DEG) - 1, max(max(xs), 180 / TILE_DEG) + 1)
    ax.set_ylim(min(min(ys), -55 / TILE_DEG) - 1, max(max(ys), 75 / TILE_DEG) + 1)
    ax.set_aspect("equal")
    ax.set_xticks([lon / TILE_DEG for lon in range(-150, 181, 50)], [f"{lon}°" for lon in range(-150, 181, 50)],
                  fontsize=7)
    ax.set_yticks([lat / TILE_DEG for lat in range(-60, 91, 30)], [f"{lat}°" for lat in range(-60, 91, 30)],
                  fontsize=7)
    sm = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
    cb = fig.colorbar(sm, ax=ax, fraction=0.025, pad=0.02)
    cb.set_label("average alignment rank (darker = closer)", fontsize=8)
    cb.ax.invert_yaxis()
    ax.set_title(f"Average text–image alignment rank by country — {model}", fontsize=10)
    ax.set_xlabel("longitude (tile grid)", fontsize=8)
    ax.set_ylabel("latitude (tile grid)", fontsize=8)
    fig.tight_layout()
    return figure_uri(fig, f"alignment-rank-map-{model}-seed002-fig4"), missing


def projection_figure(rows, model) -> str | None:
    """Seed 002 Figure 3: points by group (circle = G, triangle = not G), the caption as a black star and the
    k-means regions (nearest centroid) shaded."""
    proj = _of(rows, model, "projection")[:MAX_FIGURE_CONCEPTS]
    if not proj:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, len(proj), figsize=(4.2 * len(proj), 3.8), squeeze=False)
    for ax, r in zip(axes[0], proj):
        d = r["details"]
        pts = d["points"]
        xy = np.array([[p[0], p[1]] for p in pts], dtype=float)
        cents = np.array(d["centroids"], dtype=float)
        pad = 0.1 * (xy.max(axis=0) - xy.min(axis=0) + 1e-9)
        gx, gy = np.meshgrid(np.linspace(xy[:, 0].min() - pad[0], xy[:, 0].max() + pad[0], 200),
                             np.linspace(xy[:, 1].min() - pad[1], xy[:, 1].max() + pad[1], 200))
        grid = np.c_[gx.ravel(), gy.ravel()]
        lab = np.argmin(((grid[:, None, :] - cents[None]) ** 2).sum(-1), axis=1).reshape(gx.shape)
        ax.contourf(gx, gy, lab, alpha=0.12, cmap="Pastel1", levels=np.arange(len(cents) + 1) - 0.5)
        for p in pts:
            if p[2] == "caption":
                ax.scatter(p[0], p[1], marker="*", s=220, color="black", zorder=5)
            else:
                ax.scatter(p[0], p[1], marker="o" if p[4] else "^", s=22, color=IN_COLOR if p[4] else OUT_COLOR,
                           alpha=0.8)
        ax.set_title(f"{r['group']['concept']} ({d['method']}, k = {d['k']})", fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel(f"{d['method']} 1", fontsize=8)
        ax.set_ylabel(f"{d['method']} 2", fontsize=8)
    from matplotlib.lines import Line2D  # deferred: heavy optional dependency, loaded on first use

    # what each mark is, once for the figure (the same in every panel)
    fig.legend(handles=[Line2D([], [], ls="", marker="o", color=IN_COLOR, label="image of a country in G"),
                        Line2D([], [], ls="", marker="^", color=OUT_COLOR, label="image of a country not in G"),
                        Line2D([], [], ls="", marker="*", color="black", markersize=10, label="the caption")],
               fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 0.95), frameon=False)
    fig.tight_layout()
    return figure_uri(fig, f"images-and-caption-2d-{model}-seed002-fig3")


def left_out(excluded) -> str:
    """What the image sets left out, in words ("left out: 2 duplicates dropped, 1 multi-country")."""
    if not isinstance(excluded, dict):
        return "left out: not recorded"
    parts = [f"{n} {k.replace('_', ' ')}" for k, n in excluded.items() if n]
    return "left out: " + (", ".join(parts) if parts else "none")


def stacked(tables: list[tuple[str, Table]]) -> Table:
    """One table of several models' tables (a leading model column), for the CSV and the paper table."""
    if not tables:
        return Table(["model"], [])
    first = tables[0][1]
    caps = {t.caption.split(": ", 1)[-1] for _, t in tables}
    return Table(["model", *first.columns], [[m, *row] for m, t in tables for row in t.rows],
                 caption=caps.pop() if len(caps) == 1 else first.caption, n_column=first.n_column)


def render_latent(rows, project: Project) -> ReportSection:
    """The latent suite's report section (see the module docstring)."""
    out = _Parts()
    meta = next((r for r in rows if r["metric"] == "n_images"), None)
    if meta:
        d = meta["details"]
        out.text(f"Images: {int(meta['value'])} in {meta['n']} concepts; grouping {d.get('grouping')} "
                 f"(G = {d.get('in_group')}); {left_out(d.get('excluded'))}.")
    t3_all, t4_all, al_all = [], [], []
    for model in _models(rows):
        t3, t4 = table3(rows, model), table4(rows, model)
        summ = next(iter(_of(rows, model, "ww_vs_wn_significant")), None)
        if summ and math.isfinite(summ["value"]):
            out.text(f"{model}: {summ['details']['n_significant_bonf']} of {summ['n']} concepts significant after "
                     f"Bonferroni ({summ['details']['n_significant_holm']} after Holm), "
                     f"α = {summ['details']['alpha']}.")
        out.table(t3, scroll=True)
        out.figure(heatmap_figure(rows, model), f"{model}: country × country mean image similarity, G first "
                                                "(seed 002 Figure 1 shape); the most significant concepts.")
        out.table(t4)
        uri, tal = alignment_figure(rows, model)
        map_uri, unplaced = alignment_map(rows, model)
        out.figure(map_uri, f"{model}: average caption–image alignment rank by country (seed 002 Figure 4) as a "
                            "world tile-grid map: one square per country near its centroid, darker = closer; "
                            "a stand-in for the paper's choropleth (no country outlines ship offline)"
                            + (f"; not placed (no centroid): {', '.join(unplaced)}" if unplaced else "") + ".")
        out.figure(uri, f"{model}: countries ranked by average caption–image alignment (seed 002 Figure 4, as "
                        "bars).")
        out.table(tal)
        out.figure(projection_figure(rows, model), f"{model}: images (circle = G, triangle = not G) and the "
                                                   "caption (star) in 2-D, with k-means regions (seed 002 Figure 3 "
                                                   "shape).")
        t3_all.append((model, t3))
        t4_all.append((model, t4))
        al_all.append((model, tal))
    csv = {"table3": stacked(t3_all).csv_rows(), "table4": stacked(t4_all).csv_rows(),
           "alignment": stacked(al_all).csv_rows()}
    parts_h, parts_md = out.html, out.md
    return ReportSection("Latent-space probes (seed 002)", "\n".join(parts_h), "\n\n".join(parts_md), csv)
