"""Report sections of the built-in suites, in the shapes of seed 000's tables and figures.

- prevalence: Table 1 (Acc@5, LBKL@10, DLBKL@10, NDCG@10), Table 8 (LBKL/DLBKL at 5/25/50/99), Figures 9–10
  (retrieval share by resource tier, overall and by rank);
- association: Table 2 (M_cr, M_lb, M_ti, SP with the random baseline), Table 12 (per-country SP, text and
  image silhouette), Table 11 (Pearson correlations), verbose variants (App. S.1), Figure 5 (per-country
  stacked bars), Figure 6 (2-D projections of text and image embeddings);
- descriptor: Table 3 (six win rates), Figure 7 (per-country stacked bars), Tables 15–17 (paired χ²),
  Tables 18–19 (similarity drift ×100 by query culture and by concept) with heatmaps.
"""
from __future__ import annotations

import html as htmlmod
import math
import re
from typing import TYPE_CHECKING

import numpy as np

from ....benchmark import store
from ....curate.benchmark_queries import query_text
from ....curate.concepts import concept_names
from ....curate.images import image_paths
from ....lazy import lazy
from ....view.links import view_href
from ...reportkit import (COUNTRY_LABEL, COUNTRY_MARKERS, Cell, ReportSection, Table, annotate_cells,
                          country_style, figure_uri, image_uri, img_tag, is_smoke, model_label)

if TYPE_CHECKING:
    from ....project import Project

sps = lazy("scipy.stats")  # imported on first use (start-up)

ASSOC_ROLES = ("cr", "lb", "ti")
DESC_ROLES = ("cr", "orlb", "or", "cdr", "lb", "ti")
ROLE_NAMES = {"cr": "Correct", "orlb": "Object relevant, language-biased", "or": "Object relevant",
              "cdr": "Cultural descriptor relevant", "lb": "Language-biased", "ti": "Totally irrelevant"}
#: the paper's hues (green correct, purple, blue, yellow, pink → vermilion, grey) in Okabe-Ito's colour-blind safe versions
ROLE_COLORS = {"cr": "#009E73", "orlb": "#CC79A7", "or": "#0072B2", "cdr": "#F0E442", "lb": "#D55E00",
               "ti": "#999999"}
TIER_ORDER = ("high", "medium", "low", "unknown")
#: The paired χ² tests in the paper's orientation (Diff = A − B; seed 000 Tables 15–17).
CHI2_COLUMNS = (("chi2_or_vs_orlb", ("or", "orlb"), "QL association (Blue − Purple)"),
                ("chi2_cdr_vs_lb", ("cdr", "lb"), "CD vs QL (Yellow − Vermilion)"))


def _plt():
    import matplotlib  # deferred: heavy optional dependency, loaded on first use

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt  # deferred: heavy optional dependency, loaded on first use

    return plt


def _models(rows) -> list[str]:
    return list(dict.fromkeys(model_label(r) for r in rows))


def _pick(rows, model, metric, **group):
    for r in rows:
        if model_label(r) == model and r["metric"] == metric and r["group"] == group:
            return r
    return None


def model_average(cells: list[Cell], models: list[str], *, pct: bool = False, digits: int = 3) -> Cell:
    """The unweighted mean over models of one column (seed 000 App. N's "Average" row), n = models. Undefined,
    with the reason, when a model's value is missing or not finite (an average over fewer models, or over an
    infinite SP, would be a different number than the paper's)."""
    bad = [m for m, c in zip(models, cells) if c.value is None or not math.isfinite(c.value)]
    if not cells:
        return Cell(None, reason="no models", pct=pct, digits=digits)
    if bad:
        return Cell(None, n=len(cells), reason=f"not finite or not measured for {', '.join(bad)}", pct=pct,
                    digits=digits)
    return Cell(float(np.mean([c.value for c in cells])), n=len(cells), pct=pct, digits=digits)


def _average_rows(lines: list[list], rows, *, label_cols: int = 1, pct_cols=()) -> list[list]:
    """"Average (k models)" lines under ``lines`` (one per model, Cells after ``label_cols`` labels): one per
    benchmark (models evaluated on different benchmarks or versions are never averaged together), for every
    benchmark with at least two models; smoke runs (:func:`~cultura.evaluate.reportkit.is_smoke`) are left out."""
    bench = {}
    for r in rows:
        bench.setdefault(model_label(r), f"{r.get('benchmark')}@{r.get('benchmark_version')}")
    groups: dict[str, list] = {}
    for line in lines:  # a smoke run (--limit) is shown, marked, and never averaged in
        if not is_smoke(line[0]):
            groups.setdefault(bench.get(line[0], ""), []).append(line)
    out = []
    for b, mine in groups.items():
        if len(mine) < 2:
            continue
        label = f"Average ({len(mine)} models)" + (f" · {b}" if len(groups) > 1 else "")
        avg = [label] + [""] * (label_cols - 1)
        for j in range(label_cols, len(mine[0])):
            cells = [line[j] for line in mine]
            if not all(isinstance(c, Cell) for c in cells):
                avg.append("")
                continue
            avg.append(model_average(cells, [line[0] for line in mine], pct=j in pct_cols, digits=cells[0].digits))
        out.append(avg)
    return out


def _parts(*items) -> tuple[str, str]:
    """Join (html, markdown) pieces."""
    return "\n".join(h for h, _ in items), "\n\n".join(m for _, m in items)


def _table(t: Table) -> tuple[str, str]:
    return t.html(), t.markdown()


def _text(html: str, md: str | None = None) -> tuple[str, str]:
    return html, md if md is not None else html


def _figure(uri: str, caption: str) -> tuple[str, str]:
    return (f'<figure>{img_tag(uri, caption)}<figcaption>{htmlmod.escape(caption)}</figcaption></figure>',
            f"*Figure: {caption}* (see the HTML report)")


def _provenance_line(rows) -> tuple[str, str]:
    benches = sorted({f"{r['benchmark']}@{r['benchmark_version']} (hash {str(r['benchmark_hash'])[:12]})"
                      if r["benchmark_version"] is not None else f"{r['benchmark']} (hash {str(r['benchmark_hash'])[:12]})"
                      for r in rows})
    s = "Data: " + "; ".join(benches) + ". Intervals are 95% percentile bootstrap CIs over items; n = items."
    return f'<p class="prov">{htmlmod.escape(s)}</p>', f"_{s}_"


def _with_n(rows, countries, metric, **group) -> list[str]:
    """Column headers "JP (n=…)" with the items behind each country's values (per model when they differ)."""
    out = []
    for c in countries:
        ns = sorted({r["n"] for r in rows if r["metric"] == metric and r["group"] == {**group, "country": c}
                     and r["n"] is not None})
        out.append(f"{c} (n={'/'.join(str(n) for n in ns)})" if ns else c)
    return out


def _country_win_rates(rows, models, countries, roles, n_metric: str, caption: str) -> Table:
    """Win rates M_<role> (%) per model × query country (seed 000 Tables 13–14 shape); the column headers carry
    the n behind ``n_metric``."""
    return Table(["model", "metric"] + _with_n(rows, countries, n_metric),
                 [[m, f"M_{x} (%)"] + [Cell.of(_pick(rows, m, f"M_{x}", country=c), pct=True) for c in countries]
                  for m in models for x in roles], n_column=False, caption=caption)


def _countries(rows, metric) -> list[str]:
    return sorted({r["group"]["country"] for r in rows if r["metric"] == metric and set(r["group"]) == {"country"}})


def _stacked(rows, models, roles, countries, title, name: str = "win-rates-by-country") -> str:
    plt = _plt()
    fig, axes = plt.subplots(len(models), 1, figsize=(max(6.5, 0.55 * len(countries) + 3.5), 2.3 * len(models)),
                             squeeze=False)
    for ax, model in zip(axes[:, 0], models):
        bottom = np.zeros(len(countries))
        for role in roles:
            vals = np.array([(_pick(rows, model, f"M_{role}", country=c) or {"value": 0})["value"] for c in countries],
                            dtype=float) * 100
            ax.bar(countries, vals, bottom=bottom, color=ROLE_COLORS[role], label=ROLE_NAMES[role], width=0.7)
            bottom += np.nan_to_num(vals)
        for j, c in enumerate(countries):  # a country without trials for this model is marked, not drawn as 0
            if all(_pick(rows, model, f"M_{role}", country=c) is None for role in roles):
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


# -- prevalence ------------------------------------------------------------------------------------------

def _no_relevant_note(rows) -> str:
    """How many query images had no relevant caption (left out of Acc@k and NDCG@k, or scored 0)."""
    n = max((int(r["details"].get("n_no_relevant") or 0) for r in rows if r["metric"].startswith("acc@")), default=0)
    if not n:
        return ""
    zero = any(r["details"].get("no_relevant") == "zero" for r in rows if r["metric"].startswith("acc@"))
    return (f" {n} query image{'s' if n > 1 else ''} had no relevant caption in the pool: "
            + ("scored 0 and averaged in (no_relevant=zero, sklearn's reading)." if zero else
               "Acc@k and NDCG@k are undefined for them, so they are left out (n counts the rest)."))


def render_prevalence(rows, project: Project) -> ReportSection:
    models = _models(rows)
    t1_lines = [[m, Cell.of(_pick(rows, m, "acc@5")), Cell.of(_pick(rows, m, "lbkl@10")),
                 Cell.of(_pick(rows, m, "dlbkl@10")), Cell.of(_pick(rows, m, "ndcg@10"))] for m in models]
    avg = _average_rows(t1_lines, rows)
    t1 = Table(["model", "Acc@5 ↑", "LBKL@10 ↓", "DLBKL@10 ↓", "NDCG@10 ↑"], t1_lines + avg,
               caption="Image→text retrieval: accuracy and language-wise prevalence bias (seed 000 Table 1 shape)."
                       + (" Average: unweighted mean over the models evaluated on one benchmark (n = models; smoke runs left out)." if avg else "")
                       + _no_relevant_note(rows))
    ks = sorted({int(r["metric"].split("@")[1]) for r in rows if r["metric"].startswith("lbkl@")})
    cols, body = ["model"], []
    for k in ks:
        cols += [f"LBKL@{k}", f"DLBKL@{k}"]
    for m in models:
        line = [m]
        for k in ks:
            line += [Cell.of(_pick(rows, m, f"lbkl@{k}")), Cell.of(_pick(rows, m, f"dlbkl@{k}"))]
        body.append(line)
    t8 = Table(cols, body, caption="LBKL and DLBKL at every depth k (seed 000 Table 8 shape).")
    ex = next((r for r in rows if r["metric"].startswith("acc@")), None)
    pool = ex["details"] if ex else {}
    intro = _text(f'<p>Pool: {htmlmod.escape(str(pool.get("pool")))} — {pool.get("n_captions")} captions in '
                  f'{pool.get("n_languages")} languages; prior {htmlmod.escape(str(pool.get("prior")))}, '
                  f'eps = {pool.get("eps")}. LBKL/DLBKL measure distributional bias, not relevance: read them '
                  'with Acc/NDCG.</p>',
                  f"Pool: {pool.get('pool')} — {pool.get('n_captions')} captions in {pool.get('n_languages')} "
                  f"languages; prior {pool.get('prior')}.")
    tiers = [t for t in TIER_ORDER if any(r["metric"] == "tier_share" and r["group"].get("tier") == t for r in rows)]
    tier_rows = []
    for m in models:
        for t in tiers:
            r = _pick(rows, m, "tier_share", tier=t)
            if r:
                tier_rows.append([m, t, Cell.of(r, pct=True), Cell(r["details"].get("pool_share"), pct=True)])
    tt = Table(["model", "tier", "share of top-k", "share of pool"], tier_rows,
               caption="Retrieval frequency by language resource tier (seed 000 App. G, Figure 9).")
    lang_rows = [[model_label(r), r["group"]["language"], r["group"]["tier"], Cell.of(r, pct=True),
                  Cell(r["details"].get("pool_share"), pct=True)] for r in rows if r["metric"] == "retrieval_share"]
    tl = Table(["model", "language", "tier", "share of top-k", "share of pool"], lang_rows,
               caption="Retrieval frequency per language.")
    parts = [intro, _table(t1), _table(t8), _table(tt)]
    if tiers:
        parts.append(_figure(_tier_figure(rows, models, tiers), "Share of the top-k by resource tier (bars) "
                                                                 "against the pool's share (marks), and by rank."))
    parts += [_table(tl), _provenance_line(rows)]
    h, md = _parts(*parts)
    return ReportSection("Prevalence bias (image→text)", h, md,
                         {"table1": t1.csv_rows(), "table8": t8.csv_rows(), "tiers": tt.csv_rows(),
                          "languages": tl.csv_rows()})


def _tier_figure(rows, models, tiers) -> str:
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.4))
    width = 0.8 / max(1, len(models))
    colors = {"high": "#0072B2", "medium": "#E69F00", "low": "#D55E00", "unknown": "#999999"}  # Okabe-Ito
    x = np.arange(len(tiers))
    for i, m in enumerate(models):
        vals = [(_pick(rows, m, "tier_share", tier=t) or {"value": 0})["value"] * 100 for t in tiers]
        a1.bar(x + i * width, vals, width, label=m)
    pool = [(_pick(rows, models[0], "tier_share", tier=t) or {"details": {}})["details"].get("pool_share", 0) * 100
            for t in tiers]
    a1.scatter(x + width * (len(models) - 1) / 2, pool, marker="_", s=900, color="black", label="pool share")
    a1.set_xticks(x + width * (len(models) - 1) / 2, tiers)
    a1.set_ylabel("% of top-k slots")
    a1.set_xlabel("language resource tier")
    a1.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, markerscale=0.3)
    a1.set_title("Retrieval frequency by tier", fontsize=10)
    m0 = models[0]
    for t in tiers:
        r = _pick(rows, m0, "tier_share", tier=t)
        if r:
            by = np.array(r["details"].get("by_rank", []), dtype=float) * 100
            a2.plot(np.arange(1, len(by) + 1), by, marker="o", color=colors.get(t), label=t)
    a2.set_xlabel("rank")
    a2.set_ylabel("% of queries")
    a2.set_title(f"Tier share by rank — {m0}", fontsize=10)
    a2.legend(fontsize=7)
    fig.tight_layout()
    return figure_uri(fig, "retrieval-share-by-language-tier-seed000-fig9")


# -- association --------------------------------------------------------------------------------------------

def render_association(rows, project: Project) -> ReportSection:
    models = _models(rows)
    head = ["model", "M_cr ↑", "M_lb ↓", "M_ti ↓", "SP ↓"]
    base = next((r for r in rows if r["metric"] == "random_SP" and not r["group"]), None)
    body = []
    if base:
        m0 = model_label(base)
        body.append(["Random baseline"] + [Cell.of(_pick(rows, m0, f"random_M_{x}"), pct=True) for x in ASSOC_ROLES]
                    + [Cell.of(base, digits=2)])
    mlines = [[m] + [Cell.of(_pick(rows, m, f"M_{x}"), pct=True) for x in ASSOC_ROLES]
              + [Cell.of(_pick(rows, m, "SP"), digits=2)] for m in models]
    avg2 = _average_rows(mlines, rows, pct_cols=(1, 2, 3))
    body += mlines + avg2
    t2 = Table(head, body, caption="Self-preference cultural bias on three-candidate trials (seed 000 Table 2 "
                                   "shape). SP = M_lb / M_cr; the random baseline's interval is min–max over 10 rounds."
                                   + (" Average: unweighted mean over the models evaluated on one benchmark (n = models; smoke runs left out)." if avg2 else ""))
    countries = _countries(rows, "SP")
    t12_rows = []
    for m in models:
        for metric, label, digits in (("SP", "SP ↓", 2), ("text_silhouette", "TS", 2), ("image_silhouette", "IS", 2)):
            t12_rows.append([m, label] + [Cell.of(_pick(rows, m, metric, country=c), digits=digits)
                                          for c in countries])
    t12 = Table(["model", "metric"] + _with_n(rows, countries, "SP"), t12_rows, n_column=False,
                caption="Per query country: SP with its CI, text silhouette (TS, by the country's query language: "
                        "countries sharing a language share its value) and image silhouette (IS, by culture) (seed "
                        "000 Table 12 shape); n = trials per country. Hover ∞ or n/a for the reason; the CSV has every "
                        "CI and n (silhouettes: n = texts or images of the country).")
    t11_lines = [[m, Cell.of(_pick(rows, m, "pearson_text_silhouette_SP"), digits=2),
                  Cell.of(_pick(rows, m, "pearson_image_silhouette_SP"), digits=2)] for m in models]
    avg11 = _average_rows(t11_lines, rows)
    t11 = Table(["model", "TSC (text silhouette vs SP)", "ISC (image silhouette vs SP)"], t11_lines + avg11,
                caption="Pearson correlation of per-country silhouette with per-country SP (seed 000 Table 11 "
                        "shape); n = countries. Text silhouettes are by query language (countries sharing a "
                        "language share its value, as in Table 12). Average: the unweighted mean of the models' "
                        "correlations (seed 000 App. N), n = models.")
    variants = sorted({r["group"]["variant"] for r in rows if set(r["group"]) == {"variant"}})
    vrows = []
    for m in models:
        for v in ["short"] + variants:
            g = {} if v == "short" else {"variant": v}
            vrows.append([m, v] + [Cell.of(_pick(rows, m, f"M_{x}", **g), pct=True) for x in ASSOC_ROLES]
                         + [Cell.of(_pick(rows, m, "SP", **g), digits=2)])
    tv = Table(["model", "query"] + head[1:], vrows,
               caption="Short vs verbose queries (seed 000 App. S.1, Figure 20 shape).")
    parts = [_table(t2)]
    if countries:
        parts.append(_figure(_stacked(rows, models, ASSOC_ROLES, countries, "Win rates by query country",
                                     "win-rates-by-country-seed000-fig5"),
                             "Association bias per query country (seed 000 Figure 5 shape): correct (green), "
                             "language-biased (vermilion), irrelevant (grey)."))
    t13 = _country_win_rates(rows, models, countries, ASSOC_ROLES, "SP",
                             "Win rates per query country (seed 000 Table 13 shape).")
    parts += [_table(t12), _table(t13), _table(t11)]
    fig18 = _silhouette_figure(rows, models, countries)
    if fig18:
        parts.append(_figure(fig18, "Per-country SP against text silhouette (by language) and image silhouette, "
                                    "with the Pearson r of Table 11 (seed 000 Figure 18 shape). Each country "
                                    "keeps its colour and marker in every panel and figure (the legend names "
                                    "them); a hollow mark at the top is a country whose SP is ∞ (M_cr = 0)."))
    fig19 = _random_baseline_figure(base)
    if fig19:
        parts.append(_figure(fig19, "SP of the random baseline in each of its rounds (seed 000 App. R, Figure 19 "
                                    "shape): uniformly random candidates give SP ≈ 1."))
    tlink = _prevalence_association_link(project, rows, models)
    if tlink is not None:
        parts.append(_table(tlink))
    if variants:
        parts.append(_table(tv))
    proj = _projection_figure(rows, models)
    if proj:
        parts.append(_figure(proj, "Text embeddings labelled by query language (query country) and image "
                                   "embeddings by culture (seed 000 Figure 6 shape; UMAP, or PCA for few points). "
                                   "Each country keeps its colour and marker in both panels and in Figure 18; a "
                                   "query text asked in several countries is drawn in each of them."))
    ex = _example_trial(project, rows)
    if ex:
        parts.append(ex)
    parts.append(_provenance_line(rows))
    h, md = _parts(*parts)
    return ReportSection("Association bias (text→image, 3 candidates)", h, md,
                         {"table2": t2.csv_rows(), "table12": _with_rows(t12.csv_rows(), _country_ci_rows(rows, countries)),
                          "table13": t13.csv_rows(),
                          "table11": t11.csv_rows(), "variants": tv.csv_rows(),
                          **({"prevalence_link": tlink.csv_rows()} if tlink is not None else {})})


def _prevalence_association_link(project: Project, rows, models) -> Table | None:
    """Seed 000 §6: "high DLBKL models tend toward high SP" — across the models with both a prevalence run
    and this SP, the Pearson and Spearman correlation of DLBKL@10 (and LBKL@10) with SP (n = models).
    None when no model has a prevalence run."""
    if project is None:
        return None
    # read from the result tables (areas talk through tables): each model's newest done prevalence run
    prev: dict[tuple[str, str], float] = {}
    for r in project.db.query(
            "SELECT r.model, e.metric, e.value FROM eval_results e JOIN eval_runs r ON r.id = e.run_id "
            "WHERE r.status = 'done' AND r.suite = 'prevalence' AND e.metric IN ('dlbkl@10', 'lbkl@10') "
            "AND e.\"group\" = '{}' ORDER BY r.id"):
        prev[(r["model"], r["metric"])] = float("nan") if r["value"] is None else float(r["value"])
    if not prev:
        return None
    lines = []
    for metric in ("dlbkl@10", "lbkl@10"):
        pairs = []
        for m in models:
            b = _pick(rows, m, "SP")
            a = prev.get((b["model"], metric)) if b else None
            if a is not None and math.isfinite(a) and math.isfinite(b["value"]):
                pairs.append((m, a, b["value"]))
        used = ", ".join(m for m, _, _ in pairs)
        if len(pairs) < 3:
            reason = f"needs at least 3 models with a finite {metric.upper()} and SP (have {len(pairs)})"
            lines.append([metric.upper(), Cell(None, n=len(pairs), reason=reason, digits=2),
                          Cell(None, reason=reason, digits=3, p=True), Cell(None, n=len(pairs), reason=reason, digits=2),
                          Cell(None, reason=reason, digits=3, p=True), used])
            continue
        x, y = [p[1] for p in pairs], [p[2] for p in pairs]
        if np.std(x) == 0 or np.std(y) == 0:
            reason = "constant across models"
            lines.append([metric.upper(), Cell(None, n=len(pairs), reason=reason), Cell(None, reason=reason),
                          Cell(None, n=len(pairs), reason=reason), Cell(None, reason=reason), used])
            continue
        pr, sr = sps.pearsonr(x, y), sps.spearmanr(x, y)
        lines.append([metric.upper(), Cell(float(pr.statistic), n=len(pairs), digits=2),
                      Cell(float(pr.pvalue), digits=3, p=True), Cell(float(sr.statistic), n=len(pairs), digits=2),
                      Cell(float(sr.pvalue), digits=3, p=True), used])
    return Table(["prevalence metric", "Pearson r with SP", "p", "Spearman ρ with SP", "p", "models"], lines,
                 caption="Prevalence ↔ association across models (seed 000 §6: high-DLBKL models tend toward high "
                         "SP): correlation over models of each model's DLBKL@10 / LBKL@10 (its newest prevalence run) "
                         "with its SP; n = models.")


def _silhouette_figure(rows, models, countries) -> str | None:
    pts, inf_pts = [], {}
    for m in models:
        for kind in ("text", "image"):
            xy = [((_pick(rows, m, f"{kind}_silhouette", country=c) or {}).get("value"),
                   (_pick(rows, m, "SP", country=c) or {}).get("value"), c) for c in countries]
            inf_pts[(m, kind)] = [(a, b, c) for a, b, c in xy if a is not None and b is not None
                                  and math.isfinite(a) and math.isinf(b) and b > 0]
            xy = [(a, b, c) for a, b, c in xy if a is not None and b is not None and math.isfinite(a)
                  and math.isfinite(b)]
            if xy:
                pts.append((m, kind, xy))
    if not pts:
        return None
    plt = _plt()
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
        r = _pick(rows, m, f"pearson_{kind}_silhouette_SP")
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


def _random_baseline_figure(base) -> str | None:
    """Seed 000 Figure 19: SP per random-baseline round. A round whose SP is ∞ (no correct pick, so M_cr = 0) or
    undefined is drawn as a hatched bar to the top of the axis, marked "∞" or "n/a", never dropped."""
    rounds = (base or {}).get("details", {}).get("sp_rounds") if base else None
    # an infinite round (no correct win in a round of a tiny --limit run) cannot be drawn as a bar
    rounds = [x for x in rounds or [] if isinstance(x, (int, float)) and math.isfinite(x)]
    if not rounds:
        return None
    vals = [_float(v) for v in rounds]
    finite = [v for v in vals if math.isfinite(v)]
    top = max(1.5, max(finite, default=1.0) * 1.15)
    plt = _plt()
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


def _float(v) -> float:
    """A stored number as float: JSON keeps ∞ as "inf" (or "Infinity"), missing as None (→ nan)."""
    if v is None:
        return float("nan")
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _with_rows(table_rows, extra: list[dict]):
    """The CSV rows of a table plus long-format rows for machines; the paper's LaTeX table stays the table."""
    table_rows.extend(extra)
    return table_rows


def _country_ci_rows(rows, countries) -> list[dict]:
    out = []
    for r in rows:
        if set(r["group"]) == {"country"} and r["group"]["country"] in countries:
            out.append({"model": model_label(r), "metric": r["metric"], "country": r["group"]["country"],
                        **Cell.of(r).csv()})
    return out


def _country_series(points) -> dict[str, "np.ndarray"]:
    """The points of a projection per series label, one series per country: a query text asked in several
    countries ("en (AU, GB, US)") is drawn in each of them ("en (AU)", "en (GB)", "en (US)"), so countries that
    share a language keep their own colour and legend entry."""
    out: dict[str, list] = {}
    for x, y, lab in points:
        m = re.fullmatch(r"(.*?) ?\(([A-Z]{2}(?:, [A-Z]{2})+)\)", str(lab))
        for one in ([f"{m.group(1)} ({c})".strip() for c in m.group(2).split(", ")] if m else [str(lab)]):
            out.setdefault(one, []).append([x, y])
    return {lab: np.array(out[lab], dtype=float) for lab in sorted(out)}


def _projection_figure(rows, models) -> str | None:
    have = [(m, k, _pick(rows, m, f"projection_{k}")) for m in models for k in ("text", "image")]
    have = [(m, k, r) for m, k, r in have if r and r["details"].get("points")]
    if not have:
        return None
    plt = _plt()
    ncols = 2
    nrows = math.ceil(len(have) / ncols)
    wide = max(len(_country_series(r["details"]["points"])) for _, _, r in have) > 12
    fig, axes = plt.subplots(nrows, ncols, figsize=(15 if wide else 12, 4 * nrows), squeeze=False)
    for ax in axes.ravel():
        ax.axis("off")
    for ax, (m, k, r) in zip(axes.ravel(), have):
        ax.axis("on")
        series = _country_series(r["details"]["points"])
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


def _example_trial(project: Project, rows) -> tuple[str, str] | None:
    """One trial of the benchmark with its query and candidate images, embedded as data URIs."""

    r = next((x for x in rows if x["metric"] == "SP" and not x["group"]), None)
    if r is None or project is None:
        return None
    db = project.db
    bid = store.benchmark_id(db, r["benchmark"], r["benchmark_version"])
    names = concept_names(db)
    item = next((it for it in (store.items(db, bid) if bid is not None else []) if it["concept_id"] in names), None)
    if item is None:
        return None
    item["name"] = names[item["concept_id"]]
    qtext = query_text(db, item["concept_id"], item["query_country"], item["query_language"], "short")
    cands = store.item_candidates(db, item["id"])
    paths = image_paths(db, [c["sha256"] for c in cands])
    cells = []
    for c in cands:
        if c["sha256"] not in paths:
            continue
        uri = image_uri(project.blob_path(paths[c["sha256"]]))
        if uri:
            cells.append(f'<div class="cand">{img_tag(uri, c["role"])}<div>{htmlmod.escape(c["role"])} · '
                         f'{htmlmod.escape(c["country"])}</div></div>')
    if not cells:
        return None
    qtext = htmlmod.escape(qtext or "")
    return (f'<div class="example"><p>Example trial — concept <b>{htmlmod.escape(item["name"])}</b>, query '
            f'country {htmlmod.escape(item["query_country"])}: “{qtext}” (<a href="'
            f'{htmlmod.escape(view_href("trial", r["benchmark"], r["benchmark_version"], item["item_key"]))}">'
            f'trial {htmlmod.escape(item["item_key"])} in the view</a>)</p>{"".join(cells)}</div>',
            f"Example trial: concept {item['name']}, query country {item['query_country']} (images in the HTML).")


# -- descriptor ---------------------------------------------------------------------------------------------

def render_descriptor(rows, project: Project) -> ReportSection:
    models = _models(rows)
    t3_lines = [[m] + [Cell.of(_pick(rows, m, f"M_{x}"), pct=True) for x in DESC_ROLES] for m in models]
    avg3 = _average_rows(t3_lines, rows, pct_cols=tuple(range(1, len(DESC_ROLES) + 1)))
    t3 = Table(["model"] + [f"M_{x} (%)" for x in DESC_ROLES], t3_lines + avg3,
               caption="Six-category win rates with a cultural descriptor (seed 000 Table 3 shape), short "
                       "descriptor query mention_<CC> (\"Train of Japan\" in the query language): correct, "
                       "object relevant language-biased, object relevant, descriptor relevant, language-biased, "
                       "totally irrelevant." + (" Average: unweighted mean over the models evaluated on one benchmark (n = models; smoke runs left out)."
                                                if avg3 else ""))
    warnings = sorted({r["details"].get("warning") or r["details"].get("reason") for r in rows
                       if r["metric"] == "M_cr" and not r["group"]
                       and "mention_<CC>" in str(r["details"].get("warning") or r["details"].get("reason") or "")})
    dvariants = sorted({r["group"]["variant"] for r in rows if set(r["group"]) == {"variant"}})
    tdv = Table(["model", "query"] + [f"M_{x} (%)" for x in DESC_ROLES],
                [[m, v] + [Cell.of(_pick(rows, m, f"M_{x}", **({} if v == "mention" else {"variant": v})), pct=True)
                           for x in DESC_ROLES] for m in models for v in ["mention"] + dvariants],
                caption="Short vs verbose descriptor queries (seed 000 App. S.2 shape).")
    countries = _countries(rows, "M_cr")
    chi_rows = []
    for m in models:
        for test, (a, b), label in CHI2_COLUMNS:
            r = _pick(rows, m, test)
            if r:
                d = r["details"]
                chi_rows.append([m, label, Cell(d.get(f"M_{a}"), digits=3), Cell(d.get(f"M_{b}"), digits=3),
                                 Cell.of(r, digits=3), Cell(d.get("statistic"), digits=2),
                                 Cell(d.get("p"), digits=3, p=True),
                                 "yes" if d.get("significant") else ("n/a" if d.get("significant") is None
                                                                     else "no")])
    t15 = Table(["model", "test", "A", "B", "Diff = A − B", "χ²", "p", "Sig. (p < 0.05)"], chi_rows,
                caption="Paired χ² goodness-of-fit tests (1 dof; seed 000 App. P, Table 15 shape), in the paper's "
                        "orientation: QL association A = Object relevant (blue, or), B = Object relevant "
                        "language-biased (purple, orlb), Diff < 0 = the query language's culture wins; CD vs QL "
                        "A = Cultural-descriptor relevant (yellow, cdr), B = Language-biased (vermilion, lb), Diff < 0 = "
                        "the language prior beats the descriptor. A and B are win rates.")
    p_rows = []
    for m in models:
        for test, _ab, label in CHI2_COLUMNS:
            diff_line, p_line = [m, f"{label}: Diff"], [m, f"{label}: p"]
            for c in countries:
                r = _pick(rows, m, test, country=c)
                reason = (r or {"details": {}})["details"].get("reason")
                diff_line.append(Cell(r["value"] if r else None, n=r["n"] if r else None, digits=2,
                                      reason=reason))
                p_line.append(Cell(r["details"].get("p") if r else None, n=r["n"] if r else None, digits=2, p=True,
                                   reason=reason))
            p_rows += [diff_line, p_line]
    t16 = Table(["model", "test"] + _with_n(rows, countries, "M_cr"), p_rows, n_column=False,
                caption="Diff (= A − B as in the table above) and p per query country (seed 000 Tables 16–17 "
                        "shape).")
    drift_c = []
    for m in models:
        for role in DESC_ROLES:
            drift_c.append([m, role] + [Cell.of(_pick(rows, m, "drift_x100", role=role, country=c), digits=2)
                                        for c in countries] + [Cell.of(_pick(rows, m, "drift_x100", role=role),
                                                                       digits=2)])
    t18 = Table(["model", "category"] + _with_n(rows, countries, "drift_x100", role="cr") + ["all"], drift_c,
                n_column=False,
                caption="Mean similarity drift Δsim ×100 by query-language culture (seed 000 Table 18 shape). "
                        "Positive: the descriptor pulled the query towards that category.")
    concepts = sorted({r["group"]["concept"] for r in rows if "concept" in r["group"]})
    t19_rows = []
    for m in models:
        for c in concepts:
            t19_rows.append([m, c] + [Cell.of(_pick(rows, m, "drift_x100", role=role, concept=c), digits=2)
                                      for role in DESC_ROLES])
    t19 = Table(["model", "concept"] + [f"Δ{x}" for x in DESC_ROLES], t19_rows,
                caption="Mean similarity drift ×100 by concept (seed 000 Table 19 shape).")
    t19_short = Table(t19.columns, _extremes(t19_rows, per_side=5),
                      caption="Similarity drift ×100 by concept: per model the 5 concepts where the descriptor "
                              "helps most and the 5 where it helps least (by Δcr; all concepts in the CSV, seed 000 "
                              "Table 19 shape).")
    parts = [_table(t3)]
    for w in warnings:
        parts.append(_text(f'<p class="warning">{htmlmod.escape(w)}</p>', f"**Warning:** {w}"))
    if dvariants:
        parts.append(_table(tdv))
    if countries:
        parts.append(_figure(_stacked(rows, models, DESC_ROLES, countries, "Six-category win rates by query country",
                                     "win-rates-by-country-seed000-fig7"),
                             "Win rates per query country (seed 000 Figure 7 shape)."))
    t14 = _country_win_rates(rows, models, countries, DESC_ROLES, "M_cr",
                             "Six-category win rates per query country (seed 000 Table 14 shape).")
    parts += [_table(t14), _table(t15), _table(t16)]
    if countries:
        parts.append(_figure(_drift_heatmap(rows, models, countries), "Similarity drift ×100 per category and "
                                                                       "query country."))
    parts += [_table(t18), _table(t19_short if len(t19_rows) > 12 * len(models) else t19), _provenance_line(rows)]
    h, md = _parts(*parts)
    return ReportSection("Cultural-descriptor compliance (text→image, 6 candidates)", h, md,
                         {"table3": t3.csv_rows(), "table14": t14.csv_rows(), "variants": tdv.csv_rows(), "chi2": t15.csv_rows(), "chi2_by_country": t16.csv_rows(),
                          "drift_by_country": t18.csv_rows(), "drift_by_concept": t19.csv_rows()})


def _extremes(lines, per_side: int) -> list[list]:
    """Per model (first column), the ``per_side`` lines with the highest and lowest Δcr (third column)."""
    out = []
    for m in dict.fromkeys(line[0] for line in lines):
        mine = [line for line in lines if line[0] == m and line[2].value is not None and math.isfinite(line[2].value)]
        mine.sort(key=lambda line: -line[2].value)
        out += mine if len(mine) <= 2 * per_side else mine[:per_side] + mine[-per_side:]
    return out


def _drift_heatmap(rows, models, countries) -> str:
    plt = _plt()
    fig, axes = plt.subplots(1, len(models), figsize=(max(5, 0.5 * len(countries) + 2) * len(models), 3.2),
                             squeeze=False)
    mats = []
    for m in models:
        mats.append(np.array([[(_pick(rows, m, "drift_x100", role=role, country=c) or {"value": np.nan})["value"]
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


