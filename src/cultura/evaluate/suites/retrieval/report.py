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
from typing import TYPE_CHECKING

import numpy as np

from ....benchmark import store
from ....curate.benchmark_queries import query_text
from ....curate.concepts import concept_names
from ....curate.images import image_paths
from ....lazy import lazy
from ....view.links import view_href
from ...reportkit import Cell, ReportSection, Table, image_uri, img_tag, is_smoke, model_label
from .figures import (ASSOC_ROLES, DESC_ROLES, TIER_ORDER, drift_heatmap, pick, projection_figure,
                      random_baseline_figure, silhouette_figure, tier_figure, win_rate_bars)

if TYPE_CHECKING:
    from ....project import Project

sps = lazy("scipy.stats")  # imported on first use (start-up)

#: The paired χ² tests in the paper's orientation (Diff = A − B; seed 000 Tables 15–17).
CHI2_COLUMNS = (("chi2_or_vs_orlb", ("or", "orlb"), "QL association (Blue − Purple)"),
                ("chi2_cdr_vs_lb", ("cdr", "lb"), "CD vs QL (Yellow − Vermilion)"))


def _models(rows) -> list[str]:
    return list(dict.fromkeys(model_label(r) for r in rows))


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
                 [[m, f"M_{x} (%)"] + [Cell.of(pick(rows, m, f"M_{x}", country=c), pct=True) for c in countries]
                  for m in models for x in roles], n_column=False, caption=caption)


def _countries(rows, metric) -> list[str]:
    return sorted({r["group"]["country"] for r in rows if r["metric"] == metric and set(r["group"]) == {"country"}})


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
    t1_lines = [[m, Cell.of(pick(rows, m, "acc@5")), Cell.of(pick(rows, m, "lbkl@10")),
                 Cell.of(pick(rows, m, "dlbkl@10")), Cell.of(pick(rows, m, "ndcg@10"))] for m in models]
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
            line += [Cell.of(pick(rows, m, f"lbkl@{k}")), Cell.of(pick(rows, m, f"dlbkl@{k}"))]
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
            r = pick(rows, m, "tier_share", tier=t)
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
        parts.append(_figure(tier_figure(rows, models, tiers), "Share of the top-k by resource tier (bars) "
                                                                 "against the pool's share (marks), and by rank."))
    parts += [_table(tl), _provenance_line(rows)]
    h, md = _parts(*parts)
    return ReportSection("Prevalence bias (image→text)", h, md,
                         {"table1": t1.csv_rows(), "table8": t8.csv_rows(), "tiers": tt.csv_rows(),
                          "languages": tl.csv_rows()})


# -- association --------------------------------------------------------------------------------------------

def render_association(rows, project: Project) -> ReportSection:
    models = _models(rows)
    head = ["model", "M_cr ↑", "M_lb ↓", "M_ti ↓", "SP ↓"]
    base = next((r for r in rows if r["metric"] == "random_SP" and not r["group"]), None)
    body = []
    if base:
        m0 = model_label(base)
        body.append(["Random baseline"] + [Cell.of(pick(rows, m0, f"random_M_{x}"), pct=True) for x in ASSOC_ROLES]
                    + [Cell.of(base, digits=2)])
    mlines = [[m] + [Cell.of(pick(rows, m, f"M_{x}"), pct=True) for x in ASSOC_ROLES]
              + [Cell.of(pick(rows, m, "SP"), digits=2)] for m in models]
    avg2 = _average_rows(mlines, rows, pct_cols=(1, 2, 3))
    body += mlines + avg2
    t2 = Table(head, body, caption="Self-preference cultural bias on three-candidate trials (seed 000 Table 2 "
                                   "shape). SP = M_lb / M_cr; the random baseline's interval is min–max over 10 rounds."
                                   + (" Average: unweighted mean over the models evaluated on one benchmark (n = models; smoke runs left out)." if avg2 else ""))
    countries = _countries(rows, "SP")
    t12_rows = []
    for m in models:
        for metric, label, digits in (("SP", "SP ↓", 2), ("text_silhouette", "TS", 2), ("image_silhouette", "IS", 2)):
            t12_rows.append([m, label] + [Cell.of(pick(rows, m, metric, country=c), digits=digits)
                                          for c in countries])
    t12 = Table(["model", "metric"] + _with_n(rows, countries, "SP"), t12_rows, n_column=False,
                caption="Per query country: SP with its CI, text silhouette (TS, by the country's query language: "
                        "countries sharing a language share its value) and image silhouette (IS, by culture) (seed "
                        "000 Table 12 shape); n = trials per country. Hover ∞ or n/a for the reason; the CSV has every "
                        "CI and n (silhouettes: n = texts or images of the country).")
    t11_lines = [[m, Cell.of(pick(rows, m, "pearson_text_silhouette_SP"), digits=2),
                  Cell.of(pick(rows, m, "pearson_image_silhouette_SP"), digits=2)] for m in models]
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
            vrows.append([m, v] + [Cell.of(pick(rows, m, f"M_{x}", **g), pct=True) for x in ASSOC_ROLES]
                         + [Cell.of(pick(rows, m, "SP", **g), digits=2)])
    tv = Table(["model", "query"] + head[1:], vrows,
               caption="Short vs verbose queries (seed 000 App. S.1, Figure 20 shape).")
    parts = [_table(t2)]
    if countries:
        parts.append(_figure(win_rate_bars(rows, models, ASSOC_ROLES, countries, "Win rates by query country",
                                     "win-rates-by-country-seed000-fig5"),
                             "Association bias per query country (seed 000 Figure 5 shape): correct (green), "
                             "language-biased (vermilion), irrelevant (grey)."))
    t13 = _country_win_rates(rows, models, countries, ASSOC_ROLES, "SP",
                             "Win rates per query country (seed 000 Table 13 shape).")
    parts += [_table(t12), _table(t13), _table(t11)]
    fig18 = silhouette_figure(rows, models, countries)
    if fig18:
        parts.append(_figure(fig18, "Per-country SP against text silhouette (by language) and image silhouette, "
                                    "with the Pearson r of Table 11 (seed 000 Figure 18 shape). Each country "
                                    "keeps its colour and marker in every panel and figure (the legend names "
                                    "them); a hollow mark at the top is a country whose SP is ∞ (M_cr = 0)."))
    fig19 = random_baseline_figure(base)
    if fig19:
        parts.append(_figure(fig19, "SP of the random baseline in each of its rounds (seed 000 App. R, Figure 19 "
                                    "shape): uniformly random candidates give SP ≈ 1."))
    tlink = _prevalence_association_link(project, rows, models)
    if tlink is not None:
        parts.append(_table(tlink))
    if variants:
        parts.append(_table(tv))
    proj = projection_figure(rows, models)
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
            b = pick(rows, m, "SP")
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
    t3_lines = [[m] + [Cell.of(pick(rows, m, f"M_{x}"), pct=True) for x in DESC_ROLES] for m in models]
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
                [[m, v] + [Cell.of(pick(rows, m, f"M_{x}", **({} if v == "mention" else {"variant": v})), pct=True)
                           for x in DESC_ROLES] for m in models for v in ["mention"] + dvariants],
                caption="Short vs verbose descriptor queries (seed 000 App. S.2 shape).")
    countries = _countries(rows, "M_cr")
    chi_rows = []
    for m in models:
        for test, (a, b), label in CHI2_COLUMNS:
            r = pick(rows, m, test)
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
                r = pick(rows, m, test, country=c)
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
            drift_c.append([m, role] + [Cell.of(pick(rows, m, "drift_x100", role=role, country=c), digits=2)
                                        for c in countries] + [Cell.of(pick(rows, m, "drift_x100", role=role),
                                                                       digits=2)])
    t18 = Table(["model", "category"] + _with_n(rows, countries, "drift_x100", role="cr") + ["all"], drift_c,
                n_column=False,
                caption="Mean similarity drift Δsim ×100 by query-language culture (seed 000 Table 18 shape). "
                        "Positive: the descriptor pulled the query towards that category.")
    concepts = sorted({r["group"]["concept"] for r in rows if "concept" in r["group"]})
    t19_rows = []
    for m in models:
        for c in concepts:
            t19_rows.append([m, c] + [Cell.of(pick(rows, m, "drift_x100", role=role, concept=c), digits=2)
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
        parts.append(_figure(win_rate_bars(rows, models, DESC_ROLES, countries, "Six-category win rates by query country",
                                     "win-rates-by-country-seed000-fig7"),
                             "Win rates per query country (seed 000 Figure 7 shape)."))
    t14 = _country_win_rates(rows, models, countries, DESC_ROLES, "M_cr",
                             "Six-category win rates per query country (seed 000 Table 14 shape).")
    parts += [_table(t14), _table(t15), _table(t16)]
    if countries:
        parts.append(_figure(drift_heatmap(rows, models, countries), "Similarity drift ×100 per category and "
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


