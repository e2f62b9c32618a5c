"""Suite ``attribution``: CAIRe cultural attribution of the project's images (seed 004; spec §6).

The runner's model is the vision-language encoder used for the KB index, entity linking and the encoder
baseline. The judge comes from the options (``--option attribution.judge=openai:MODEL``, ``openai-vision:MODEL``
or ``stub``) or ``[evaluate.attribution] judge = ...``. Options: ``judge`` (required), ``kb`` ("default"),
``k`` (20), ``method`` (lemma|gloss|frequency), ``context`` (entity|titles), ``countries`` (default: the
project's), ``ratings`` (a CAIRe-style ratings file instead of the relevance campaign), ``threshold`` (3),
``baseline`` (true), ``limit`` (pairs to judge per run).

Rows (group ``scorer`` = caire | baseline): ``n_scored``, ``n_failed``; per country ``mean_score``; against the
human ratings ``precision`` and ``f1`` (binary at > threshold) and ``pearson`` overall and per country (seed
004 Tables 1–2), each with n.
"""
from __future__ import annotations

import math

from ..registry import Suite, SuiteSkipped, row
from ...reportkit import Cell, ReportSection, Table, model_label

NAME = "attribution"


def attribution_suite(project, embedder, *, benchmark=None, options: dict) -> list[dict]:
    from . import evaluate_attribution, get_judge, list_kb, load_scores, run_attribution, run_baseline
    from .run import project_images

    cfg = dict(project.config.evaluate.attribution)
    o = {**cfg, **(options or {})}
    if not o.get("judge"):
        raise SuiteSkipped("No relevance judge: pass --option attribution.judge=openai:MODEL (or stub), or set "
                           "[evaluate.attribution] judge = ... in cultura.toml.")
    kb = o.get("kb", "default")
    if not list_kb(project, kb):
        raise SuiteSkipped(f"Knowledge base {kb!r} is empty; import one with 'cultura kb import FILE --kb {kb}'.")
    images = project_images(project)
    if not images:
        raise SuiteSkipped("The project has no stored images; run 'cultura images download' first.")
    judge = get_judge(o["judge"])
    countries = o.get("countries") or [c.code for c in project.countries]
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
    threshold = float(o.get("threshold", 3.0))
    for scorer, cfg_ in configs:
        scores = load_scores(project, **cfg_)
        by_cc: dict[str, list[float]] = {}
        for r in scores:
            by_cc.setdefault(r["country"], []).append(r["score"])
        for cc, vals in sorted(by_cc.items()):
            rows.append(row(NAME, "mean_score", sum(vals) / len(vals), n=len(vals),
                            group={"scorer": scorer, "country": cc}, details=det))
        for ev in evaluate_attribution(project, ratings=o.get("ratings"), threshold=threshold, **cfg_):
            g = {"scorer": scorer}
            if ev["n"] == 0:
                rows.append(row(NAME, "pearson", math.nan, n=0, group=g, details={**det, "reason": ev["reason"]}))
                continue
            d = {**det, "threshold": threshold}
            rows.append(row(NAME, "precision", ev["precision"], n=ev["n"], group=g,
                            details={**d, "n_positive_pred": ev["n_positive_pred"]}))
            rows.append(row(NAME, "f1", ev["f1"], n=ev["n"], group=g,
                            details={**d, "n_positive_human": ev["n_positive_human"]}))
            lo, hi = ev["pearson_ci"]
            rows.append(row(NAME, "pearson", ev["pearson"], ci_low=lo, ci_high=hi, n=ev["n"], group=g,
                            details={**d, "p": ev["pearson_p"], **({"reason": ev["pearson_reason"]}
                                                                  if ev["pearson_reason"] else {})}))
            for cc, pc in ev["per_country"].items():
                lo, hi = pc["ci"]
                rows.append(row(NAME, "pearson", pc["pearson"], ci_low=lo, ci_high=hi, n=pc["n"],
                                group={**g, "country": cc},
                                details={**d, "p": pc["p"], **({"reason": pc["reason"]} if pc["reason"] else {})}))
    return rows


def render_attribution(results, project):
    """Pearson with human ratings per country (seed 004 Table 2 shape) and precision / F1 (Table 1 shape)."""

    def label(r):
        return f"{r['group'].get('scorer')} · {r['details'].get('judge', '') if r['group'].get('scorer') == 'caire' else 'encoder probes'} · {model_label(r)}"

    pr = [r for r in results if r["metric"] == "pearson"]
    countries = sorted({r["group"]["country"] for r in pr if "country" in r["group"]})
    labels = sorted({label(r) for r in results if r["metric"] in ("pearson", "precision", "f1", "mean_score")})
    t1_rows, t2_rows = [], []
    for lab in labels:
        mine = [r for r in results if label(r) == lab]
        get = lambda m, cc=None: next((r for r in mine if r["metric"] == m and r["group"].get("country") == cc), None)  # noqa: E731
        t2_rows.append([lab, *[Cell.of(get("pearson", cc)) for cc in countries], Cell.of(get("pearson"))])
        t1_rows.append([lab, Cell.of(get("precision")), Cell.of(get("f1"))])
    t2 = Table(["scorer", *countries, "all"], t2_rows,
               caption="Pearson r with mean human relevance ratings (seed 004 Table 2 shape)")
    t1 = Table(["scorer", "precision", "F1"], t1_rows, caption="Binary relevance at > 3 (seed 004 Table 1 shape)")
    ms = [r for r in results if r["metric"] == "mean_score"]
    t3 = Table(["scorer", *countries], [[lab, *[Cell.of(next((r for r in ms if label(r) == lab and
                                                                r["group"].get("country") == cc), None))
                                                 for cc in countries]] for lab in labels],
               caption="Mean relevance score (1-5) per culture label")
    note = "<p>Judge scores are the expectation over the five score tokens (seed 004 eq. 3).</p>"
    return ReportSection(title="Cultural attribution of images (CAIRe)",
                         html=note + t2.html() + t1.html() + t3.html(),
                         markdown="\n\n".join([t2.markdown(), t1.markdown(), t3.markdown()]),
                         csv_tables={"attribution_pearson": t2.csv_rows(), "attribution_binary": t1.csv_rows(),
                                     "attribution_mean_score": t3.csv_rows()})


SUITE = Suite(NAME, attribution_suite, section=render_attribution, description="Cultural attribution of images (seed 004, CAIRe): KB "
               "entity linking, 1-5 judge scores per culture, encoder baseline, Pearson / F1 vs human ratings.")

