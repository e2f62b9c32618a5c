"""Report section of the ``social`` suite, in the shapes of seed 003's tables and figures.

- Table 1: English bias per dataset × model (max s_G and max s_R for crime, communion, agency);
- Tables 2, 3, 4: gender max-skew, symmetric KL and race mean max-skew per model × dataset × axis, one column
  per language;
- Table 6: %NA / %NC / %C / %NH harm breakdown per language (and the harm rate over all probes);
- Table 7: KL(F‖M), KL(M‖F) and SKL per trait and language;
- Figures 1–4 (and 7–10 on PATA): gender max-skew and race mean max-skew by language partition (resource
  level, grammatical gender), bars per model and axis; Figures 5–6: the gender symmetric KL the same way;
- the inventories' validation status, and the App. D tests (Table 11 shape) with Holm and BH p-values;
- the accuracy check beside fairness: text→image and image→text recall@k per language on the imported caption
  set (seed 003 App. A.1's Crossmodal-3600 / XTD-11 R@k), and R@k next to the crime skews per model × language
  (the fairness–accuracy trade-off of seed 003 §5).

The social suite's ``section`` (see :mod:`cultura.evaluate.suites.social`).
"""
from __future__ import annotations

import html as htmlmod
import math
from typing import TYPE_CHECKING

import numpy as np

from ...reportkit import Cell, ReportSection, Table, figure_uri, img_tag, model_label
from .data import language_partitions, portrait_sets
from .stats import social_statistics
from .validation import translation_validation

if TYPE_CHECKING:
    from ....project import Project

AXES = ("crime", "communion", "agency")
AX_SHORT = {"crime": "c", "communion": "com", "agency": "ag"}
AX_COLORS = {"crime": "#D55E00", "communion": "#56B4E9", "agency": "#009E73"}  # Okabe-Ito: colour-blind safe


def _plt():
    import matplotlib  # deferred: heavy optional dependency, loaded on first use

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt  # deferred: heavy optional dependency, loaded on first use

    return plt


def _index(rows) -> dict:
    """(model, metric, dataset, language, axis) → row, for rows without a gender/race sub-group."""
    out = {}
    for r in rows:
        g = r["group"]
        if set(g) == {"dataset", "language", "axis"}:
            out[(model_label(r), r["metric"], g["dataset"], g["language"], g["axis"])] = r
    return out


def _cell(idx, key, **kw) -> Cell:
    r = idx.get(key)
    if r is None:
        miss = idx.get((key[0], "probe_missing", *key[2:]))
        return Cell(None, reason=miss["details"].get("reason") if miss else "not measured", **kw)
    return Cell.of(r, **kw)


def _figure(uri: str, caption: str) -> tuple[str, str]:
    return (f'<figure>{img_tag(uri, caption)}<figcaption>{htmlmod.escape(caption)}</figcaption></figure>',
            f"*Figure: {caption}* (see the HTML report)")


def language_table(idx, models, datasets, languages, metrics, caption, *, pct=False) -> Table:
    """Rows model × dataset × metric-label, one column per language (Tables 2, 3, 4, 6, 7)."""
    body = []
    for m in models:
        for ds in datasets:
            for label, metric, axis in metrics:
                body.append([m, ds, label] + [_cell(idx, (m, metric, ds, lang, axis), pct=pct, digits=2)
                                              for lang in languages])
    return Table(["Model", "Data", "Metric"] + list(languages), body, caption=caption, n_column=False)


def recall_tables(rows) -> tuple[Table, Table] | None:
    """Recall@k per model × direction × k (columns: languages), and the trade-off table: R@k beside the crime
    skews of the same language."""
    rec = [r for r in rows if r["metric"] in ("recall_t2i", "recall_i2t")]
    if not rec:
        return None
    models = list(dict.fromkeys(model_label(r) for r in rec))
    langs = sorted({r["group"]["language"] for r in rec}, key=lambda x: (x != "en", x))
    ks = sorted({int(r["group"]["k"]) for r in rec})
    at = {(model_label(r), r["metric"], r["group"]["language"], int(r["group"]["k"])): r for r in rec}
    body = []
    for m in models:
        for metric, label in (("recall_t2i", "text→image"), ("recall_i2t", "image→text")):
            for k in ks:
                body.append([m, label, f"R@{k}"] + [Cell.of(at[(m, metric, lang, k)], pct=True, digits=1)
                                                    if (m, metric, lang, k) in at else Cell(None, reason="no captions")
                                                    for lang in langs])
    n_caps = {r["group"]["language"]: (r["details"].get("n_images"), r["details"].get("n_captions")) for r in rec}
    t = Table(["Model", "Direction", "k"] + langs, body, n_column=False,
              caption="Retrieval accuracy beside fairness: recall@k per language on the imported caption set "
                      "(seed 003 App. A.1 reports R@10 on Crossmodal-3600 and R@1 on XTD-11); images / captions "
                      "per language: " + ", ".join(f"{lang} {a}/{b}" for lang, (a, b) in sorted(n_caps.items()))
                      + ". 95% bootstrap CI over queries."
                      + (" A k at or above the number of candidates is 100 % by construction: "
                         + ", ".join(sorted({f"{r['group']['language']} R@{r['group']['k']}" for r in rec
                                             if r["details"].get("trivial")})) + "."
                         if any(r["details"].get("trivial") for r in rec) else ""))
    idx = _index(rows)
    kk = 10 if 10 in ks else ks[-1]
    trade = []
    datasets = sorted({key[2] for key in idx}) or [None]
    for m in models:
        for lang in langs:
            for ds in datasets:
                trade.append([m, lang, ds or "—",
                              Cell.of(at[(m, "recall_t2i", lang, kk)], pct=True, digits=1)
                              if (m, "recall_t2i", lang, kk) in at else Cell(None),
                              Cell.of(at[(m, "recall_i2t", lang, kk)], pct=True, digits=1)
                              if (m, "recall_i2t", lang, kk) in at else Cell(None),
                              _cell(idx, (m, "gender_max_skew", ds, lang, "crime"), digits=2),
                              _cell(idx, (m, "race_mean_max_skew", ds, lang, "crime"), digits=2)])
    t2 = Table(["Model", "Language", "Portraits", f"T→I R@{kk}", f"I→T R@{kk}", "max s_G c", "max s_R c"], trade,
               n_column=False, caption="Fairness–accuracy trade-off (seed 003 §5): recall beside the crime skews "
                                       "of the same model and language.")
    return t, t2


def validation_table(project: Project) -> Table | None:
    """Seed 003 App. E Tables 12–13 from this project's translation campaign (None when nothing is rated)."""

    vals = translation_validation(project) if project is not None else []
    if not vals:
        return None
    body = [[v["language"], v["n"], Cell(v["pct_1"], digits=1), Cell(v["pct_2"], digits=1),
             Cell(v["pct_3"], digits=1), Cell(v["pct_4–5"], digits=1), Cell(v["mean"], digits=2),
             Cell(v["sd"], digits=2), Cell(v["pct_ge4"], digits=1),
             "—" if v["seed_pct_ge4"] is None else f"{v['seed_pct_ge4']:.1f}"] for v in vals]
    return Table(["language", "n", "1 (%)", "2 (%)", "3 (%)", "4–5 (%)", "mean", "SD (σ)", "≥ 4 (%)",
                  "seed ≥ 4 (%)"], body, n_column=False,
                 caption="Translation validation (seed 003 App. E Tables 12–13 shape): share of prompts per "
                         "rating band, mean, population SD and share ≥ 4 of each prompt's decided rating in the "
                         "'translation' campaign; 'all' pools every language (seed: 88.5 % over its nine).")


def status_table(rows) -> Table:
    seen = {}
    for r in rows:
        lang = r["group"].get("language")
        if lang and lang not in seen:
            d = r["details"]
            seen[lang] = [lang, d.get("inventory_status", "?"), d.get("inventory_source", ""),
                          "" if d.get("inventory_mean_score") is None else f"{d['inventory_mean_score']:.2f}"]
    return Table(["language", "validation status", "source", "mean rating (1–5)"], [seen[k] for k in sorted(seen)],
                 caption="Prompt inventories used, with their validation status (seed 003 App. E: seed-validated "
                         "= rated by bilingual speakers in the seed; validated/partial = rated in this project's "
                         "'translation' campaign; unvalidated = machine translation not yet checked).",
                 n_column=False)


def partition_figure(idx, models, dataset, metric, partition: dict, title: str,
                     fig_name: str | None = None) -> str | None:
    """Seed 003 Figures 1–4: one panel per stratum, bars per language for every model × axis."""
    strata = [(name, langs) for name, langs in partition.items()]
    have = {k[3] for k in idx if k[1] == metric and k[2] == dataset}
    strata = [(n, [lang for lang in langs if lang in have]) for n, langs in strata]
    strata = [(n, langs) for n, langs in strata if langs]
    if not strata:
        return None
    plt = _plt()
    # panels are compared with each other: one y-scale for all of them
    fig, axes = plt.subplots(1, len(strata), figsize=(5.5 * len(strata), 3.4), squeeze=False, sharey=True)
    combos = [(m, a) for m in models for a in AXES]
    width = 0.8 / len(combos)
    hatches = ["", "//", "..", "xx", "\\\\", "oo"]
    for ax, (name, langs) in zip(axes[0], strata):
        x = np.arange(len(langs))
        top = 0.0
        for i, (m, a) in enumerate(combos):
            vals, lo, hi = [], [], []
            for lang in langs:
                r = idx.get((m, metric, dataset, lang, a))
                ok = r is not None and r["value"] is not None and math.isfinite(r["value"])
                v = r["value"] if ok else np.nan
                vals.append(v)
                cl, ch = (r.get("ci_low"), r.get("ci_high")) if ok else (None, None)
                good = cl is not None and ch is not None and math.isfinite(cl) and math.isfinite(ch)
                lo.append(max(v - cl, 0.0) if good else 0.0)
                hi.append(max(ch - v, 0.0) if good else 0.0)
                top = max(top, ch if good else (v if ok else 0.0))
            xs = x + i * width
            ax.bar(xs, vals, width, color=AX_COLORS[a], hatch=hatches[models.index(m) % len(hatches)],
                   edgecolor="white", label=f"{m} · {AX_SHORT[a]}", yerr=[lo, hi], ecolor="#333333",
                   error_kw={"elinewidth": 0.6, "capsize": 1.5})
            for xx, v in zip(xs, vals):  # an undefined value is marked (upright, legible), never drawn as 0
                if not math.isfinite(v):
                    ax.text(xx, 0, "×", ha="center", va="bottom", fontsize=8, color="#555555")
        ax.set_xticks(x + width * (len(combos) - 1) / 2, langs)
        ax.set_xlabel("language", fontsize=8)
        ax.set_ylabel(metric.replace("_", " "), fontsize=8)
        ax.set_title(f"{name}", fontsize=10)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if any(not math.isfinite(v) for v in _drawn(axes)):
        from matplotlib.lines import Line2D  # deferred: heavy optional dependency, loaded on first use

        handles.append(Line2D([], [], ls="", marker="$×$", color="#555555"))
        labels.append("× n/a (undefined; the table gives the reason)")
    fig.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 0.95), frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return figure_uri(fig, fig_name)


def _drawn(axes) -> list[float]:
    """The heights of every bar drawn (NaN for an undefined one)."""
    return [p.get_height() for ax in axes.ravel() for p in ax.patches]


def stats_table(tests: list[dict], *, only_ok: bool = True) -> Table:
    body = []
    for t in tests:
        if only_ok and t.get("status") != "ok":
            continue
        body.append([t.get("table") or "", t["dataset"], AX_SHORT.get(t["axis"], t["axis"]), t["comparison"],
                     t.get("n", ""), t.get("test", ""), Cell(t.get("statistic"), digits=2), Cell(t.get("p"), digits=4),
                     Cell(t.get("p_holm"), digits=4), Cell(t.get("p_fdr_bh"), digits=4),
                     f"{t.get('effect_name', '')} = {t['effect']:.2f}" if t.get("effect") is not None and
                     math.isfinite(t["effect"]) else "", t.get("direction", ""), t["family"]])
    return Table(["Table", "DS", "Axis", "Comparison", "n", "Test", "Stat", "p", "p (Holm)", "p (BH)", "effect",
                  "direction", "family"], body, n_column=False,
                 caption="Significance tests over languages (seed 003 App. D, Table 11 shape): paired Wilcoxon "
                         "(r = Z/√n with Z of W = min(W+, W−), so r ≤ 0 as Tables 8–11 print it; which side is "
                         "larger is the direction column) and sign tests between models, low vs high resource and gendered vs "
                         "genderless languages (Shapiro/Levene screening → t with Cohen's d, else Mann–Whitney "
                         "with A12), Kruskal–Wallis (ε²). Holm and BH are applied within each family.")


def render_social(rows, project: Project) -> ReportSection:
    """The social suite's report section (see the module docstring)."""

    idx = _index(rows)
    models = list(dict.fromkeys(model_label(r) for r in rows))
    datasets = sorted({k[2] for k in idx})
    languages = sorted({k[3] for k in idx}, key=lambda x: (x != "en", x))
    parts: list[tuple[str, str]] = []

    def add_table(t: Table):
        parts.append((f'<div class="overflow">{t.html()}</div>', t.markdown()))

    syn = [s["dataset"] for s in _sets(project) if s.get("synthetic")]
    if syn:
        s = f"Synthetic portrait sets (cartoon faces for tests/demos, not people): {', '.join(syn)}."
        parts.append((f'<p class="note">{htmlmod.escape(s)}</p>', f"_{s}_"))
    t1_body = []
    for ds in datasets:
        for m in models:
            t1_body.append([ds, m] + [_cell(idx, (m, "gender_max_skew", ds, "en", a), digits=2) for a in AXES]
                           + [_cell(idx, (m, "race_mean_max_skew", ds, "en", a), digits=2) for a in AXES])
    t1 = Table(["DS", "Model", "max s_G c", "max s_G com", "max s_G ag", "max s_R c", "max s_R com", "max s_R ag"],
               t1_body, n_column=False,
               caption="English bias per model (seed 003 Table 1 shape): gender max-skew and race mean max-skew "
                       "for crime (c), communion (com) and agency (ag).")
    add_table(t1)
    t2 = language_table(idx, models, datasets, languages,
                        [(f"max s_G^{AX_SHORT[a]}", "gender_max_skew", a) for a in AXES],
                        "Cross-lingual gender bias, max-skew (seed 003 Table 2 shape).")
    t3 = language_table(idx, models, datasets, languages,
                        [(f"SKL_{AX_SHORT[a]}", "skl", a) for a in AXES],
                        "Cross-lingual gender bias, symmetric KL of negative-attribution rates (seed 003 Table 3).")
    t4 = language_table(idx, models, datasets, languages,
                        [(f"max s_R^{AX_SHORT[a]}", "race_mean_max_skew", a) for a in AXES],
                        "Cross-lingual race bias, mean pairwise max-skew (seed 003 Table 4 shape).")
    t6 = language_table(idx, models, datasets, languages,
                        [("%NA", "pct_NA", "agency"), ("%NC", "pct_NC", "communion"), ("%C", "pct_C", "crime"),
                         ("%NH", "pct_NH", "crime"), ("harm (all probes)", "harm_rate", "all")],
                        "Corpus-level harm (seed 003 Table 6 shape): negative agency (%NA), negative communion "
                        "(%NC), crime (%C), non-human (%NH) top-1 shares, and the harm rate with every probe's "
                        "labels at once.", pct=True)
    t7 = language_table(idx, models, datasets, languages,
                        [(f"{lab}_{AX_SHORT[a]}", metric, a) for a in AXES
                         for lab, metric in (("KL(F‖M)", "kl_fm"), ("KL(M‖F)", "kl_mf"), ("SKL", "skl"))],
                        "Gender-conditioned KL divergence per trait (seed 003 Table 7 shape).")
    for t in (t2, t3, t4, t6, t7):
        add_table(t)
    parts_fig = []
    partitions = language_partitions()
    for ds in datasets:
        for metric, what in (("gender_max_skew", "Gender max-skew"), ("race_mean_max_skew", "Race mean max-skew"),
                             ("skl", "Gender symmetric KL")):
            for pname, label in (("resource", "resource level"), ("grammatical_gender", "grammatical system")):
                uri = partition_figure(idx, models, ds, metric, partitions.get(pname, {}),
                                       f"{what} on {ds} by {label}",
                                       f"{metric}-{ds}-by-{pname}-seed003-fig{'5-6' if metric == 'skl' else '1-4'}")
                if uri:
                    figs = "5–6" if metric == "skl" else "1–4, 7–10 (PATA)"
                    parts_fig.append(_figure(uri, f"{what} on {ds} by {label} (seed 003 Figures {figs} shape); "
                                                  "bars: model × axis (c vermillion, com sky blue, ag green) with 95% CIs; "
                                                  "n/a marks a language without a value."))
    parts += parts_fig
    add_table(status_table(rows))
    vt = validation_table(project)
    if vt is not None:
        add_table(vt)
    recall = recall_tables(rows)
    if recall:
        for t in recall:
            add_table(t)
    tests = social_statistics(rows)
    st = stats_table(tests)
    add_table(st)
    n_skip = sum(t.get("status") != "ok" for t in tests)
    if n_skip:
        s = (f"{n_skip} of {len(tests)} planned tests were not run (too few languages with values, or all ties); "
             "the CSV 'tests' lists each with its reason.")
        parts.append((f"<p>{htmlmod.escape(s)}</p>", s))
    html = "\n".join(h for h, _ in parts)
    md = "\n\n".join(m for _, m in parts)
    return ReportSection("Social-bias audit (seed 003)", html, md, {
        "table1": t1.csv_rows(), "table2": t2.csv_rows(), "table3": t3.csv_rows(), "table4": t4.csv_rows(),
        "table6": t6.csv_rows(), "table7": t7.csv_rows(), "tests": [_flat(t) for t in tests],
        **({"recall": recall[0].csv_rows(), "recall_vs_bias": recall[1].csv_rows()} if recall else {}),
        **({"translation_validation": vt.csv_rows()} if vt is not None else {})})


def _flat(t: dict) -> dict:
    return {k: (", ".join(v) if isinstance(v, list) else v) for k, v in t.items()}


def _sets(project: Project) -> list[dict]:

    return portrait_sets(project)
