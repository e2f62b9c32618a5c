"""The figures of the retrieval suites' report sections (seed 000): per-country stacked win rates (Figures 5 and
7), retrieval share by resource tier (Figures 9–10), silhouette against SP per country (Figure 18), the random
baseline's rounds (Figure 19), the 2-D projections of text and image embeddings (Figure 6) and the similarity
drift heatmap (Table 18). Every country-keyed series is drawn in its country's colour and marker
(:func:`~cultura.evaluate.reportkit.country_style`), the same in every panel and figure.
"""
from __future__ import annotations

import math
import re

import numpy as np

from ...reportkit import COUNTRY_LABEL, COUNTRY_MARKERS, annotate_cells, country_style, figure_uri, model_label

ASSOC_ROLES = ("cr", "lb", "ti")
DESC_ROLES = ("cr", "orlb", "or", "cdr", "lb", "ti")
ROLE_NAMES = {"cr": "Correct", "orlb": "Object relevant, language-biased", "or": "Object relevant",
              "cdr": "Cultural descriptor relevant", "lb": "Language-biased", "ti": "Totally irrelevant"}
#: the paper's hues (green correct, purple, blue, yellow, pink → vermilion, grey) in Okabe-Ito's colour-blind safe versions
ROLE_COLORS = {"cr": "#009E73", "orlb": "#CC79A7", "or": "#0072B2", "cdr": "#F0E442", "lb": "#D55E00",
               "ti": "#999999"}
TIER_ORDER = ("high", "medium", "low", "unknown")


def pyplot():
    import matplotlib  # deferred: heavy optional dependency, loaded on first use

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt  # deferred: heavy optional dependency, loaded on first use

    return plt


def pick(rows, model, metric, **group):
    for r in rows:
        if model_label(r) == model and r["metric"] == metric and r["group"] == group:
            return r
    return None


def win_rate_bars(rows, models, roles, countries, title, name: str = "win-rates-by-country") -> str:
    plt = pyplot()
    fig, axes = plt.subplots(len(models), 1, figsize=(max(6.5, 0.55 * len(countries) + 3.5), 2.3 * len(models)),
                             squeeze=False)
    for ax, model in zip(axes[:, 0], models):
        bottom = np.zeros(len(countries))
        for role in roles:
            vals = np.array([(pick(rows, model, f"M_{role}", country=c) or {"value": 0})["value"] for c in countries],
                            dtype=float) * 100
            ax.bar(countries, vals, bottom=bottom, color=ROLE_COLORS[role], label=ROLE_NAMES[role], width=0.7)
            bottom += np.nan_to_num(vals)
        for j, c in enumerate(countries):  # a country without trials for this model is marked, not drawn as 0
            if all(pick(rows, model, f"M_{role}", country=c) is None for role in roles):
                ax.text(j, 50, "n/a", ha="center", va="center", fontsize=8, color="#555555")
        ax.set_ylim(0, 100)
        ax.set_ylabel("win %")
        ax.set_xlabel("query country")
        ax.set_title(model, fontsize=9, loc="left")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    axes[0, 0].set_title(f"{title}\n{models[0]}", fontsize=9, loc="left")
    fig.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 0.98), frameon=False)
    fig.tight_layout()
    return figure_uri(fig, name)


def tier_figure(rows, models, tiers) -> str:
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.4))
    width = 0.8 / max(1, len(models))
    colors = {"high": "#0072B2", "medium": "#E69F00", "low": "#D55E00", "unknown": "#999999"}  # Okabe-Ito
    x = np.arange(len(tiers))
    for i, m in enumerate(models):
        vals = [(pick(rows, m, "tier_share", tier=t) or {"value": 0})["value"] * 100 for t in tiers]
        a1.bar(x + i * width, vals, width, label=m)
    pool = [(pick(rows, models[0], "tier_share", tier=t) or {"details": {}})["details"].get("pool_share", 0) * 100
            for t in tiers]
    a1.scatter(x + width * (len(models) - 1) / 2, pool, marker="_", s=900, color="black", label="pool share")
    a1.set_xticks(x + width * (len(models) - 1) / 2, tiers)
    a1.set_ylabel("% of top-k slots")
    a1.set_xlabel("language resource tier")
    a1.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, markerscale=0.3)
    a1.set_title("Retrieval frequency by tier", fontsize=10)
    m0 = models[0]
    for t in tiers:
        r = pick(rows, m0, "tier_share", tier=t)
        if r:
            by = np.array(r["details"].get("by_rank", []), dtype=float) * 100
            a2.plot(np.arange(1, len(by) + 1), by, marker="o", color=colors.get(t), label=t)
    a2.set_xlabel("rank")
    a2.set_ylabel("% of queries")
    a2.set_title(f"Tier share by rank — {m0}", fontsize=10)
    a2.legend(fontsize=7)
    fig.tight_layout()
    return figure_uri(fig, "retrieval-share-by-language-tier-seed000-fig9")


def silhouette_figure(rows, models, countries) -> str | None:
    pts, inf_pts = [], {}
    for m in models:
        for kind in ("text", "image"):
            xy = [((pick(rows, m, f"{kind}_silhouette", country=c) or {}).get("value"),
                   (pick(rows, m, "SP", country=c) or {}).get("value"), c) for c in countries]
            inf_pts[(m, kind)] = [(a, b, c) for a, b, c in xy if a is not None and b is not None
                                  and math.isfinite(a) and math.isinf(b) and b > 0]
            xy = [(a, b, c) for a, b, c in xy if a is not None and b is not None and math.isfinite(a)
                  and math.isfinite(b)]
            if xy:
                pts.append((m, kind, xy))
    if not pts:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(len(models), 2, figsize=(9, 3.2 * len(models)), squeeze=False, sharey="row")
    for ax in axes.ravel():
        ax.axis("off")
    drawn: dict[str, object] = {}
    for m, kind, xy in pts:
        ax = axes[models.index(m), 0 if kind == "text" else 1]
        ax.axis("on")
        for a, b, c in xy:  # each country in its own colour and marker (country_style), the same in every figure
            colour, marker = country_style(c)
            drawn[c] = ax.scatter([a], [b], s=22, color=colour, marker=marker, label=c)
            ax.annotate(c, (a, b), fontsize=7, xytext=(2, 2), textcoords="offset points")
        # a country whose SP is ∞ (M_cr = 0) is marked at the top, not dropped: a hollow mark in its colour
        top = [(a, c) for a, b, c in inf_pts.get((m, kind), [])]
        if top:
            y_top = max([p[1] for p in xy] + [1.0]) * 1.15
            for a, c in top:
                colour, marker = country_style(c)
                ax.scatter([a], [y_top], marker=marker, s=26, facecolors="none", edgecolors=colour)
                ax.annotate(f"{c} (SP = ∞)", (a, y_top), fontsize=7, xytext=(2, -9), textcoords="offset points")
        from matplotlib.ticker import MaxNLocator  # deferred: heavy optional dependency, loaded on first use

        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
        r = pick(rows, m, f"pearson_{kind}_silhouette_SP")
        rv = r["value"] if r and r["value"] is not None and math.isfinite(r["value"]) else None
        ax.set_title(f"{m} — {kind} silhouette (r = {rv:.2f})" if rv is not None else f"{m} — {kind} silhouette",
                     fontsize=8)
        ax.set_xlabel(f"{kind} silhouette")
        ax.set_ylabel("SP")
    # one legend for the figure: a country is the same colour and marker in every panel
    codes = sorted(drawn)
    fig.legend([drawn[c] for c in codes], codes, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 0.98),
               frameon=False, title="query country", title_fontsize=7, ncol=1 if len(codes) <= 12 else 2)
    fig.tight_layout()
    return figure_uri(fig, "silhouette-vs-sp-by-country-seed000-fig18")


def random_baseline_figure(base) -> str | None:
    """Seed 000 Figure 19: SP per random-baseline round. A round whose SP is ∞ (no correct pick, so M_cr = 0) or
    undefined is drawn as a hatched bar to the top of the axis, marked "∞" or "n/a", never dropped."""
    rounds = (base or {}).get("details", {}).get("sp_rounds") if base else None
    # an infinite round (no correct win in a round of a tiny --limit run) cannot be drawn as a bar
    rounds = [x for x in rounds or [] if isinstance(x, (int, float)) and math.isfinite(x)]
    if not rounds:
        return None
    vals = [stored_float(v) for v in rounds]
    finite = [v for v in vals if math.isfinite(v)]
    top = max(1.5, max(finite, default=1.0) * 1.15)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 2.8))
    xs = range(1, len(vals) + 1)
    ax.bar([x for x, v in zip(xs, vals) if math.isfinite(v)], finite, color="#999999", label="SP of the round")
    odd = [(x, v) for x, v in zip(xs, vals) if not math.isfinite(v)]
    if odd:
        ax.bar([x for x, _ in odd], [top * 0.92] * len(odd), color="white", edgecolor="#555555", hatch="//",
               label="SP undefined or ∞ (M_cr = 0)")
        for x, v in odd:
            ax.text(x, top * 0.93, "∞" if v > 0 else "n/a", ha="center", va="bottom", fontsize=8)
    ax.axhline(1.0, color="black", lw=0.8, ls="--", label="SP = 1 (no preference)")
    ax.set_xlabel("random-baseline round")
    ax.set_ylabel("self-preference SP")
    ax.set_ylim(0, top * 1.08)
    ax.set_xticks(list(xs))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return figure_uri(fig, "random-baseline-sp-per-round-seed000-fig19")


def stored_float(v) -> float:
    """A stored number as float: JSON keeps ∞ as "inf" (or "Infinity"), missing as None (→ nan)."""
    if v is None:
        return float("nan")
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def country_series(points) -> dict[str, "np.ndarray"]:
    """The points of a projection per series label, one series per country: a query text asked in several
    countries ("en (AU, GB, US)") is drawn in each of them ("en (AU)", "en (GB)", "en (US)"), so countries that
    share a language keep their own colour and legend entry."""
    out: dict[str, list] = {}
    for x, y, lab in points:
        m = re.fullmatch(r"(.*?) ?\(([A-Z]{2}(?:, [A-Z]{2})+)\)", str(lab))
        for one in ([f"{m.group(1)} ({c})".strip() for c in m.group(2).split(", ")] if m else [str(lab)]):
            out.setdefault(one, []).append([x, y])
    return {lab: np.array(out[lab], dtype=float) for lab in sorted(out)}


def projection_figure(rows, models) -> str | None:
    have = [(m, k, pick(rows, m, f"projection_{k}")) for m in models for k in ("text", "image")]
    have = [(m, k, r) for m, k, r in have if r and r["details"].get("points")]
    if not have:
        return None
    plt = pyplot()
    ncols = 2
    nrows = math.ceil(len(have) / ncols)
    wide = max(len(country_series(r["details"]["points"])) for _, _, r in have) > 12
    fig, axes = plt.subplots(nrows, ncols, figsize=(15 if wide else 12, 4 * nrows), squeeze=False)
    for ax in axes.ravel():
        ax.axis("off")
    for ax, (m, k, r) in zip(axes.ravel(), have):
        ax.axis("on")
        series = country_series(r["details"]["points"])
        for i, (lab, xy) in enumerate(series.items()):  # a country's own colour and marker in every panel
            one = COUNTRY_LABEL.search(lab)
            colour, marker = (country_style(one.group(1) or one.group(2)) if one
                              else ("#555555", COUNTRY_MARKERS[i % len(COUNTRY_MARKERS)]))  # no country named
            ax.scatter(xy[:, 0], xy[:, 1], s=14, color=colour, marker=marker, label=lab, alpha=0.85)
        ax.set_title(f"{m} — {k} ({r['details'].get('method')}, n={len(r['details']['points'])})", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel(f"{r['details'].get('method', 'projection')} 1", fontsize=8)
        ax.set_ylabel(f"{r['details'].get('method', 'projection')} 2", fontsize=8)
        # every series named, beside its panel (two columns past 12: 16 countries of 3XCM)
        ax.legend(fontsize=6, markerscale=0.8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
                  ncol=1 if len(series) <= 12 else 2)
    fig.tight_layout()
    return figure_uri(fig, "embeddings-by-language-and-culture-seed000-fig6")


def drift_heatmap(rows, models, countries) -> str:
    plt = pyplot()
    fig, axes = plt.subplots(1, len(models), figsize=(max(5, 0.5 * len(countries) + 2) * len(models), 3.2),
                             squeeze=False)
    mats = []
    for m in models:
        mats.append(np.array([[(pick(rows, m, "drift_x100", role=role, country=c) or {"value": np.nan})["value"]
                               for c in countries] for role in DESC_ROLES], dtype=float))
    lim = max(1e-6, np.nanmax(np.abs(np.concatenate([x.ravel() for x in mats]))) if mats else 1.0)
    for ax, m, mat in zip(axes[0], models, mats):
        im = ax.imshow(mat, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto")
        ax.set_xticks(range(len(countries)), countries, fontsize=8, rotation=90 if len(countries) > 8 else 0)
        ax.set_yticks(range(len(DESC_ROLES)), DESC_ROLES, fontsize=8)
        ax.set_xlabel("query country", fontsize=8)
        ax.set_ylabel("candidate category", fontsize=8)
        ax.set_title(m, fontsize=9)
        annotate_cells(ax, im, mat, "{:.1f}")
        cb = fig.colorbar(im, ax=ax, shrink=0.8)
        cb.set_label("Δsim ×100 (with − without descriptor)", fontsize=7)
    fig.tight_layout()
    return figure_uri(fig, "similarity-drift-by-country-seed000-table18")

