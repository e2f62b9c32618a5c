"""Suite ``attribution``: CAIRe cultural attribution of the project's images (seed 004; spec §6).

The runner's model is the vision-language encoder used for the KB index, entity linking and the encoder
baseline. The judge comes from the options (``--option attribution.judge=openai:MODEL``, ``openai-vision:MODEL``
or ``stub``) or ``[evaluate.attribution] judge = ...``. Options: ``judge`` (required), ``kb`` ("default"),
``k`` (20), ``method`` (lemma|gloss|frequency), ``context`` (entity|titles), ``labels`` / ``countries`` (culture labels: codes, registered or free-text labels; default: the
project's), ``ratings`` (a CAIRe-style ratings file instead of the relevance campaign), ``threshold`` (3) and
``rule`` (gt: relevant when score > threshold, seed 004 §5.4's "scores greater than 3"; ge: score >=
threshold), ``aggregation`` (per_concept | pooled),
``baseline`` (true: the encoder-probe baseline), ``vlm_baseline`` (a judge spec such as
``openai-vision-cot:MODEL``: Baseline 2 without retrieval), ``loglik`` (an LM scorer spec: App. B.1 with
``alpha`` / ``tau``), ``gold_upper_bound`` and ``linking_accuracy`` (true; used when gold entities exist),
``limit`` (pairs to judge per run).

Rows (group ``scorer`` = caire | baseline): ``n_scored``, ``n_failed``; per country ``mean_score``; against the
human ratings ``precision``, ``recall`` and ``f1`` (the main rule grouped by ``threshold`` "> 3",
and App. C.7's score >= t for t = 2..5 grouped by "2".."5")
and ``pearson`` overall and per country (per-concept averaged by default; seed 004
Tables 1–2), each with n.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ....bounds import COUNT
from ....errors import CulturaError
from ....models.judges import get_judge
from ...reportkit import Cell, ReportSection, Table, model_label
from ..registry import Suite, SuiteSkipped, log_samples, logging_samples, row, sample_limit
from .baseline import run_baseline
from .evaluation import (C7_THRESHOLDS, DEFAULT_RULE, DEFAULT_THRESHOLD, RULES, THRESHOLD, evaluate_attribution,
                         human_ratings, load_scores)
from .gold import load_gold
from .kb import build_kb_index, list_kb
from .linking import TOP_K, linking_accuracy
from .loglik import ALPHA, DEFAULT_ALPHA, DEFAULT_TAU, TAU, run_loglik
from .run import project_images, run_attribution

if TYPE_CHECKING:
    from ....project import Project

NAME = "attribution"


def _undefined(metric: str, bm: dict) -> str:
    """Why precision, recall or F1 is undefined at a threshold (``bm["rule"]``: "score > 3"), in words."""
    if metric == "precision":
        return f"the scorer gave no pair a {bm['rule']} (no positive prediction), so precision is undefined"
    if metric == "recall":
        return f"people gave no pair a {bm['rule']} (no relevant pair), so recall is undefined"
    return (f"neither the scorer nor people gave any pair a {bm['rule']}, so F1 is undefined"
            if not bm["n_positive_pred"] and not bm["n_positive_human"] else "F1 is undefined here")


def attribution_suite(project: Project, embedder, *, benchmark=None, options: dict) -> list[dict]:

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
    countries = o.get("labels") or o.get("countries") or [c.code for c in project.countries]
    if isinstance(countries, str):
        countries = [c for c in countries.split(",") if c.strip()]
    context = o.get("context", "entity")
    if sample_limit() is not None:  # a smoke run: at most that many pairs judged
        o["limit"] = min(int(o["limit"]), sample_limit()) if o.get("limit") else sample_limit()
    summary = run_attribution(project, embedder, judge, kb=kb, countries=countries, k=int(o.get("k", 20)),
                              method=o.get("method", "lemma"), context=context, limit=o.get("limit"))
    configs = [("caire", dict(judge=judge.identity, encoder=embedder.identity, kb=summary["kb"], context=context))]
    if o.get("baseline", True):
        run_baseline(project, embedder, [s for s, _ in images], countries)
        configs.append(("baseline", dict(judge="baseline", encoder=embedder.identity, kb="", context="none")))
    k, method = int(o.get("k", 20)), o.get("method", "lemma")
    gold = load_gold(project)
    if gold and _flag(o.get("gold_upper_bound", True)) and context == "entity":
        g = run_attribution(project, embedder, judge, kb=kb, countries=countries, k=k, method=method,
                            context="gold", limit=o.get("limit"))
        configs.append(("caire-gold", dict(judge=judge.identity, encoder=embedder.identity, kb=g["kb"],
                                           context="gold")))
    if o.get("vlm_baseline"):
        vj = get_judge(o["vlm_baseline"])
        run_attribution(project, None, vj, countries=countries, context="none", limit=o.get("limit"))
        configs.append(("vlm-baseline", dict(judge=vj.identity, encoder="", kb="", context="none")))
    if o.get("loglik"):
        ll = run_loglik(project, embedder, o["loglik"], kb=kb, labels=countries, k=k, method=method,
                        alpha=float(o.get("alpha", DEFAULT_ALPHA)),
                        tau=None if str(o.get("tau", "")).lower() == "none" else float(o.get("tau", DEFAULT_TAU)))
        configs.append(("loglik", dict(judge=ll["judge"], encoder=embedder.identity, kb=ll["kb"], context="entity")))
    det = {"judge": judge.identity, "kb": summary["kb"], "context": context, "method": method}
    rows = [row(NAME, "n_scored", summary["scored"] + summary["skipped"], group={"scorer": "caire"}, details=det),
            row(NAME, "n_failed", summary["failed"], group={"scorer": "caire"}, details=det)]
    n_inc = project.db.execute(
        "SELECT count(*) FROM attribution_scores WHERE judge = ? AND encoder = ? AND kb = ? AND context = ? "
        "AND missing_tokens IS NOT NULL", [judge.identity, embedder.identity, summary["kb"], context]).fetchone()[0]
    rows.append(row(NAME, "n_incomplete", n_inc, group={"scorer": "caire"},
                    details={**det, "meaning": "judge rows where a score digit 1-5 was not among the returned "
                                               "alternatives (probability taken as 0)"}))
    threshold = float(o.get("threshold", DEFAULT_THRESHOLD))
    rule = str(o.get("rule", DEFAULT_RULE))
    if rule not in RULES:
        raise CulturaError(f"rule must be one of {', '.join(sorted(RULES))} (gt: relevant when score > threshold, "
                           f"seed 004 Table 1; ge: score >= threshold), got {rule!r}.", param="rule")
    aggregation = o.get("aggregation", "per_concept")
    if gold and _flag(o.get("linking_accuracy", True)):
        index = build_kb_index(project, embedder, kb, with_text=True)
        for acc in linking_accuracy(project, embedder, index, gold, k=max(k, 20)):
            for kk, v in acc["acc"].items():
                rows.append(row(NAME, "linking_acc", v, n=acc["n"], group={"method": acc["label"], "k": str(kk)},
                                details={"kb": index.key, "method": acc["method"], "retrieved": max(k, 20),
                                         "n_gold_missing": acc["n_gold_missing"]}))
    main_f1 = {}
    for scorer, cfg_ in configs:
        det = {**det, "judge": cfg_["judge"], "context": cfg_["context"]}
        scores = load_scores(project, **cfg_)
        if logging_samples():  # every judge score with the token log-probabilities it was computed from, and
            # the human target it is evaluated against (mean rating and count; null where nobody rated the pair)
            human = human_ratings(project, source=o.get("ratings"))
            log_samples("judge_score", [{"scorer": scorer, **cfg_, "sha256": r["sha256"], "country": r["country"],
                                         "score": r["score"], "argmax": r.get("argmax"),
                                         "logprobs": r["logprobs"],
                                         "human_mean": (human.get((r["sha256"], r["country"])) or (None, 0))[0],
                                         "human_n": (human.get((r["sha256"], r["country"])) or (None, 0))[1]}
                                        for r in scores])
        by_cc: dict[str, list[float]] = {}
        for r in scores:
            by_cc.setdefault(r["country"], []).append(r["score"])
        for cc, vals in sorted(by_cc.items()):
            rows.append(row(NAME, "mean_score", sum(vals) / len(vals), n=len(vals),
                            group={"scorer": scorer, "country": cc}, details=det))
        for ev in evaluate_attribution(project, ratings=o.get("ratings"), threshold=threshold,
                                       aggregation=aggregation, rule=rule, **cfg_):
            g = {"scorer": scorer}
            if ev["n"] == 0:
                rows.append(row(NAME, "pearson", math.nan, n=0, group=g,
                                details={**det, "aggregation": aggregation, "reason": ev["reason"]}))
                continue
            # the main rule (seed 004 Table 1: score > 3) and App. C.7's columns (score >= t), told apart by
            # the group's threshold label ("> 3" vs "3") and details["main"]
            levels = [(ev, True, f"{RULES[rule]} {ev['threshold']:g}")] + \
                [(bm, False, f"{t:g}") for t, bm in ev["by_threshold"].items()]
            for bm, is_main, tag in levels:
                d = {**det, "threshold": bm["threshold"], "rule": bm["rule"], "main": is_main,
                     "n_positive_pred": bm["n_positive_pred"], "n_positive_human": bm["n_positive_human"]}
                for m in ("precision", "recall", "f1"):
                    why = _undefined(m, bm) if not math.isfinite(bm[m]) else None
                    rows.append(row(NAME, m, bm[m], n=ev["n"], group={**g, "threshold": tag},
                                    details={**d, **({"reason": why} if why else {})}))
            main_f1[scorer] = (ev["f1"], ev["n"])
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
    if "caire" in main_f1 and "caire-gold" in main_f1:
        f1, n = main_f1["caire"]
        f1g, _ = main_f1["caire-gold"]
        ratio = 100.0 * f1 / f1g if f1g and not math.isnan(f1g) else math.nan
        rows.append(row(NAME, "f1_ratio_to_gold", ratio, n=n, group={"scorer": "caire"},
                        details={"judge": judge.identity, "threshold": threshold, "f1_retrieved": f1, "f1_gold": f1g,
                                 "meaning": "F1 with retrieved pages / F1 with gold pages, % (seed 004 Table 11)"}))
    return rows


def _flag(v) -> bool:
    return str(v).strip().lower() not in ("0", "false", "no", "off", "")


def _agg_label(results) -> str:
    aggs = {r["details"].get("aggregation") for r in results if r["metric"] == "pearson"} - {None}
    if aggs == {"pooled"}:
        return "pooled over each country's pairs (cultura option aggregation=pooled, not the paper's)"
    return "per concept within each country, then averaged (seed 004 Table 2); 'all' = mean over countries"


def render_attribution(results, project: Project):
    """Pearson with human ratings per country (seed 004 Table 2 shape), precision / recall / F1 at score >= t
    (Table 1 shape) and at App. C.7's thresholds."""

    def label(r):
        sc = r["group"].get("scorer")
        return f"{sc} · {'encoder probes' if sc == 'baseline' else r['details'].get('judge', '')} · {model_label(r)}"

    pr = [r for r in results if r["metric"] == "pearson"]
    countries = sorted({r["group"]["country"] for r in pr if "country" in r["group"]})
    labels = sorted({label(r) for r in results if r["metric"] in ("pearson", "precision", "f1", "mean_score")})
    binary = [r for r in results if r["metric"] in ("precision", "recall", "f1")]
    main_rule = next((r["details"].get("rule") for r in binary if r["details"].get("main")),
                     f"score > {DEFAULT_THRESHOLD:g}")
    ts = sorted({float(r["details"]["threshold"]) for r in binary if not r["details"].get("main")}
                or set(C7_THRESHOLDS))
    t1_rows, t2_rows, t7_rows = [], [], []
    for lab in labels:
        mine = [r for r in results if label(r) == lab]
        get = lambda m, cc=None: next((r for r in mine if r["metric"] == m and r["group"].get("country") == cc), None)  # noqa: E731

        def getb(m, t, mine=mine):
            """the main rule's row (t None) or App. C.7's row at t"""
            return next((r for r in mine if r["metric"] == m and bool(r["details"].get("main")) == (t is None)
                         and (t is None or float(r["details"].get("threshold", -1)) == t)), None)

        t2_rows.append([lab, *[Cell.of(get("pearson", cc)) for cc in countries], Cell.of(get("pearson"))])
        t1_rows.append([lab, Cell.of(getb("precision", None)), Cell.of(getb("recall", None)),
                        Cell.of(getb("f1", None))])
        t7_rows.append([lab, *[Cell.of(getb(m, t)) for t in ts for m in ("f1", "precision", "recall")]])
    t2 = Table(["scorer", *countries, "all"], t2_rows,
               caption=f"Pearson r with mean human relevance ratings, {_agg_label(results)} (seed 004 Table 2 shape)")
    t1 = Table(["scorer", "precision", "recall", "F1"], t1_rows,
               caption=f"Binary relevance: relevant when {main_rule} on both sides (seed 004 Table 1 / §5.4: "
                       "\"scores greater than 3 ... to positive label 1\")")
    t7 = Table(["scorer", *[f"{m} (>= {t:g})" for t in ts for m in ("F1", "P", "R")]], t7_rows,
               caption="Binary relevance at each threshold t, relevant when score >= t (seed 004 App. C.7 shape)")
    extra = []
    la = [r for r in results if r["metric"] == "linking_acc"]
    if la:
        methods = list(dict.fromkeys(r["group"]["method"] for r in la))
        ks = sorted({int(r["group"]["k"]) for r in la})
        t_link = Table(["method", *[f"@{kk}" for kk in ks]],
                       [[m, *[Cell.of(next((r for r in la if r["group"]["method"] == m and int(r["group"]["k"]) == kk),
                                           None)) for kk in ks]] for m in methods],
                       caption="Entity linking accuracy against gold entities, Acc@k (seed 004 App. A.3 Table 3 shape)")
        extra.append(t_link)
    ub = [r for r in results if r["metric"] == "f1_ratio_to_gold"]
    if ub:
        extra.append(Table(["scorer", "F1 retrieved / F1 gold (%)"], [[label(r), Cell.of(r)] for r in ub],
                           caption="Retrieval-induced loss: F1 with retrieved pages over F1 with gold pages "
                                   "(seed 004 App. C.5, Table 11)"))
    ms = [r for r in results if r["metric"] == "mean_score"]
    t3 = Table(["scorer", *countries], [[lab, *[Cell.of(next((r for r in ms if label(r) == lab and
                                                                r["group"].get("country") == cc), None))
                                                 for cc in countries]] for lab in labels],
               caption="Mean relevance score (1-5) per culture label")
    note = ("<p>Judge scores are the expectation over the five score tokens (seed 004 eq. 3). Binary relevance "
            "follows §5.4 (a pair is relevant when its score is greater than 3); the threshold table follows "
            "App. C.7 (relevant when the score is &ge; t).</p>")
    return ReportSection(title="Cultural attribution of images (CAIRe)",
                         html=note + t2.html() + t1.html() + t7.html() + "".join(t.html() for t in extra) + t3.html(),
                         markdown="\n\n".join([t2.markdown(), t1.markdown(), t7.markdown(),
                                                *[t.markdown() for t in extra], t3.markdown()]),
                         csv_tables={"attribution_pearson": t2.csv_rows(), "attribution_binary": t1.csv_rows(),
                                     "attribution_thresholds": t7.csv_rows(),
                                     **({"attribution_linking": extra[0].csv_rows()} if la else {}),
                                     "attribution_mean_score": t3.csv_rows()})


#: The suite's numeric options: the same ranges as the 'cultura attribution' commands' options.
OPTIONS = {"k": TOP_K, "limit": COUNT, "alpha": ALPHA, "tau": TAU, "threshold": THRESHOLD}

SUITE = Suite(NAME, attribution_suite, section=render_attribution, options=OPTIONS, description="Cultural attribution of images (seed 004, CAIRe): KB "
               "entity linking, 1-5 judge scores per culture, encoder baseline, Pearson / F1 vs human ratings.")

#: The folder's suites, read by :func:`cultura.evaluate.suites.load_suites`.
SUITES = (SUITE,)
