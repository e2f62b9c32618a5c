"""Suite ``attribution``: CAIRe cultural attribution of the project's images (seed 004; spec §6).

The runner's model is the vision-language encoder used for the KB index, entity linking and the encoder
baseline. The judge comes from the options (``--option attribution.judge=openai:MODEL``, ``openai-vision:MODEL``
or ``stub``) or ``[evaluate.attribution] judge = ...``. Options: ``judge`` (required), ``kb`` ("default"),
``k`` (20), ``method`` (lemma|gloss|frequency), ``context`` (entity|titles), ``labels`` / ``countries`` (culture labels: codes, registered or free-text labels; default: the
project's), ``ratings`` (a CAIRe-style ratings file instead of the relevance campaign), ``threshold`` (4:
relevant when score >= 4, i.e. Table 1's "> 3"), ``aggregation`` (per_concept | pooled),
``baseline`` (true), ``limit`` (pairs to judge per run).

Rows (group ``scorer`` = caire | baseline): ``n_scored``, ``n_failed``; per country ``mean_score``; against the
human ratings ``precision``, ``recall`` and ``f1`` (binary at score >= t, grouped by ``threshold`` for t = the
option and App. C.7's 2..5) and ``pearson`` overall and per country (per-concept averaged by default; seed 004
Tables 1–2), each with n.
"""
from __future__ import annotations

import math

from ..registry import Suite, SuiteSkipped, row
from ...reportkit import Cell, ReportSection, Table, model_label
from .evaluation import C7_THRESHOLDS, DEFAULT_THRESHOLD

NAME = "attribution"


def attribution_suite(project, embedder, *, benchmark=None, options: dict) -> list[dict]:
    from . import evaluate_attribution, get_judge, list_kb, load_scores, run_attribution, run_baseline
    from .run import project_images

    cfg = dict((getattr(project.config, "evaluate", None) or {}).get("attribution") or {})
    o = {**cfg, **(options or {})}
    if not o.get("judge"):
        raise SuiteSkipped("No relevance judge: pass --option attribution.judge=openai:MODEL (or stub), or set "
                           "[evaluate.attribution] judge = ... in cultura.toml.")
    kb = o.get("kb", "default")
    if not list_kb(project, kb):
        raise SuiteSkipped(f"Knowledge base {kb!r} is empty; import one with 'cultura kb import FILE --kb {kb}'.")
    images = project_images(project)
    if not images:
        raise SuiteSkipped("The project has no stored images; run 'cultura download' first.")
    judge = get_judge(o["judge"])
    countries = o.get("labels") or o.get("countries") or [c.code for c in project.countries]
    if isinstance(countries, str):
        countries = [c for c in countries.split(",") if c.strip()]
    context = o.get("context", "entity")
    summary = run_attribution(project, embedder, judge, kb=kb, countries=countries, k=int(o.get("k", 20)),
                              method=o.get("method", "lemma"), context=context, limit=o.get("limit"))
    configs = [("caire", dict(judge=judge.identity, encoder=embedder.identity, kb=summary["kb"], context=context))]
    if o.get("baseline", True):
        run_baseline(project, embedder, [s for s, _ in images], countries)
        configs.append(("baseline", dict(judge="baseline", encoder=embedder.identity, kb="", context="none")))
    det = {"judge": judge.identity, "kb": summary["kb"], "context": context, "method": o.get("method", "lemma")}
    rows = [row(NAME, "n_scored", summary["scored"] + summary["skipped"], group={"scorer": "caire"}, details=det),
            row(NAME, "n_failed", summary["failed"], group={"scorer": "caire"}, details=det)]
    n_inc = project.db.execute(
        "SELECT count(*) FROM attribution_scores WHERE judge = ? AND encoder = ? AND kb = ? AND context = ? "
        "AND missing_tokens IS NOT NULL", [judge.identity, embedder.identity, summary["kb"], context]).fetchone()[0]
    rows.append(row(NAME, "n_incomplete", n_inc, group={"scorer": "caire"},
                    details={**det, "meaning": "judge rows where a score digit 1-5 was not among the returned "
                                               "alternatives (probability taken as 0)"}))
    threshold = float(o.get("threshold", DEFAULT_THRESHOLD))
    aggregation = o.get("aggregation", "per_concept")
    for scorer, cfg_ in configs:
        scores = load_scores(project, **cfg_)
        by_cc: dict[str, list[float]] = {}
        for r in scores:
            by_cc.setdefault(r["country"], []).append(r["score"])
        for cc, vals in sorted(by_cc.items()):
            rows.append(row(NAME, "mean_score", sum(vals) / len(vals), n=len(vals),
                            group={"scorer": scorer, "country": cc}, details=det))
        for ev in evaluate_attribution(project, ratings=o.get("ratings"), threshold=threshold,
                                       aggregation=aggregation, **cfg_):
            g = {"scorer": scorer}
            if ev["n"] == 0:
                rows.append(row(NAME, "pearson", math.nan, n=0, group=g,
                                details={**det, "aggregation": aggregation, "reason": ev["reason"]}))
                continue
            for t, bm in ev["by_threshold"].items():
                d = {**det, "threshold": t, "rule": f"score >= {t:g}", "main": t == threshold,
                     "n_positive_pred": bm["n_positive_pred"], "n_positive_human": bm["n_positive_human"]}
                for m in ("precision", "recall", "f1"):
                    rows.append(row(NAME, m, bm[m], n=ev["n"], group={**g, "threshold": f"{t:g}"}, details=d))
            d = {**det, "aggregation": aggregation}
            lo, hi = ev["pearson_ci"]
            rows.append(row(NAME, "pearson", ev["pearson"], ci_low=lo, ci_high=hi, n=ev["n"], group=g,
                            details={**d, "p": ev["pearson_p"], **({"reason": ev["pearson_reason"]}
                                                                  if ev["pearson_reason"] else {})}))
            for cc, pc in ev["per_country"].items():
                lo, hi = pc["ci"]
                extra = {k: pc[k] for k in ("n_concepts", "n_concepts_undefined") if k in pc}
                rows.append(row(NAME, "pearson", pc["pearson"], ci_low=lo, ci_high=hi, n=pc["n"],
                                group={**g, "country": cc},
                                details={**d, **extra, "p": pc["p"],
                                         **({"reason": pc["reason"]} if pc["reason"] else {})}))
    return rows


def _agg_label(results) -> str:
    aggs = {r["details"].get("aggregation") for r in results if r["metric"] == "pearson"} - {None}
    if aggs == {"pooled"}:
        return "pooled over each country's pairs (cultura option aggregation=pooled, not the paper's)"
    return "per concept within each country, then averaged (seed 004 Table 2); 'all' = mean over countries"


def render_attribution(results, project):
    """Pearson with human ratings per country (seed 004 Table 2 shape), precision / recall / F1 at score >= t
    (Table 1 shape) and at App. C.7's thresholds."""

    def label(r):
        return f"{r['group'].get('scorer')} · {r['details'].get('judge', '') if r['group'].get('scorer') == 'caire' else 'encoder probes'} · {model_label(r)}"

    pr = [r for r in results if r["metric"] == "pearson"]
    countries = sorted({r["group"]["country"] for r in pr if "country" in r["group"]})
    labels = sorted({label(r) for r in results if r["metric"] in ("pearson", "precision", "f1", "mean_score")})
    binary = [r for r in results if r["metric"] in ("precision", "recall", "f1")]
    main_t = next((r["details"]["threshold"] for r in binary if r["details"].get("main")), DEFAULT_THRESHOLD)
    ts = sorted({float(r["details"]["threshold"]) for r in binary} or set(C7_THRESHOLDS))
    t1_rows, t2_rows, t7_rows = [], [], []
    for lab in labels:
        mine = [r for r in results if label(r) == lab]
        get = lambda m, cc=None: next((r for r in mine if r["metric"] == m and r["group"].get("country") == cc), None)  # noqa: E731

        def getb(m, t, mine=mine):
            return next((r for r in mine if r["metric"] == m and float(r["details"].get("threshold", -1)) == t), None)

        t2_rows.append([lab, *[Cell.of(get("pearson", cc)) for cc in countries], Cell.of(get("pearson"))])
        t1_rows.append([lab, Cell.of(getb("precision", main_t)), Cell.of(getb("recall", main_t)),
                        Cell.of(getb("f1", main_t))])
        t7_rows.append([lab, *[Cell.of(getb(m, t)) for t in ts for m in ("f1", "precision", "recall")]])
    t2 = Table(["scorer", *countries, "all"], t2_rows,
               caption=f"Pearson r with mean human relevance ratings, {_agg_label(results)} (seed 004 Table 2 shape)")
    t1 = Table(["scorer", "precision", "recall", "F1"], t1_rows,
               caption=f"Binary relevance: relevant when score >= {main_t:g} on both sides (seed 004 Table 1 "
                       f"= score > 3 = threshold 4 of App. C.7)")
    t7 = Table(["scorer", *[f"{m} (>= {t:g})" for t in ts for m in ("F1", "P", "R")]], t7_rows,
               caption="Binary relevance at each threshold t, relevant when score >= t (seed 004 App. C.7 shape)")
    ms = [r for r in results if r["metric"] == "mean_score"]
    t3 = Table(["scorer", *countries], [[lab, *[Cell.of(next((r for r in ms if label(r) == lab and
                                                                r["group"].get("country") == cc), None))
                                                 for cc in countries]] for lab in labels],
               caption="Mean relevance score (1-5) per culture label")
    note = ("<p>Judge scores are the expectation over the five score tokens (seed 004 eq. 3). Thresholds follow "
            "App. C.7: a pair is relevant when its score is &ge; t.</p>")
    return ReportSection(title="Cultural attribution of images (CAIRe)",
                         html=note + t2.html() + t1.html() + t7.html() + t3.html(),
                         markdown="\n\n".join([t2.markdown(), t1.markdown(), t7.markdown(), t3.markdown()]),
                         csv_tables={"attribution_pearson": t2.csv_rows(), "attribution_binary": t1.csv_rows(),
                                     "attribution_thresholds": t7.csv_rows(),
                                     "attribution_mean_score": t3.csv_rows()})


SUITE = Suite(NAME, attribution_suite, section=render_attribution, description="Cultural attribution of images (seed 004, CAIRe): KB "
               "entity linking, 1-5 judge scores per culture, encoder baseline, Pearson / F1 vs human ratings.")

