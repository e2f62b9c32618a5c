"""Suite ``llm``: LLM entity bias (seed 001 §4; spec §5) over the project's entity and context tables.

Rows: ``cbs`` per language × entity type × context kind (mean over contexts, bootstrap CI), ``cbs_mean`` per
language × kind (mean over types; grounded vs neutral is seed 001 Figure 4), ``cbs_en`` for the parallel
English contexts (Figure 12), ``delta_fn`` / ``delta_fp`` (sentiment association, Tables 15–16),
``qa_acc_local`` / ``qa_acc_western`` / ``delta_qa_acc`` (extractive QA, Table 17, native vs English) and
``script_coverage`` per language for a local tokenizer (Figure 13).

The runner hands every suite an embedder; this suite does not use it. The LLM comes from the options
(``--option llm.llm=hf:MODEL``) or the project config (``[evaluate.llm] llm = "hf:MODEL"``). Options:
``llm`` (scorer spec, required), ``generator`` (spec for sentiment/QA; default: the scorer's spec when it
is ``hf:`` or ``openai:``; ``none`` to skip), ``mode`` (prefix|sentence), ``languages`` (list),
``english`` (score parallel English too, default true), ``n_entities`` (50), ``seeds`` ([0, 1, 2]),
``n_resamples`` (1000), ``coverage`` (default true).
"""
from __future__ import annotations

import math

from ....errors import CulturaError
from ..registry import Suite, SuiteSkipped, row
from ...reportkit import Cell, ReportSection, Table, model_label

NAME = "llm"


def _opts(project, options: dict) -> dict:
    cfg = dict(project.config.evaluate.llm)
    return {**cfg, **(options or {})}


def llm_suite(project, embedder, *, benchmark=None, options: dict) -> list[dict]:
    from .cbs import compute_cbs
    from .contexts import list_contexts
    from .entities import list_entities
    from ....models.scorers import get_scorer

    o = _opts(project, options)
    spec = o.get("llm") or o.get("model")
    if not spec:
        raise SuiteSkipped("No LLM to evaluate: pass --option llm.llm=hf:MODEL (or openai:MODEL), or set "
                           "[evaluate.llm] llm = ... in cultura.toml.")
    if not list_contexts(project) or not list_entities(project):
        raise SuiteSkipped("The project has no masked contexts or no accepted entities; import them with "
                           "'cultura contexts import FILE' and 'cultura entities import FILE'.")
    scorer = get_scorer(spec)
    n_res = int(o.get("n_resamples", 1000))
    langs = o.get("languages") or [None]
    ident = {"llm": scorer.identity, "llm_spec": spec}
    rows: list[dict] = []
    for lang in langs:
        for english in ([False, True] if o.get("english", True) else [False]):
            res = compute_cbs(project, scorer, language=lang, mode=o.get("mode", "prefix"), english=english,
                              n_resamples=n_res)
            metric = "cbs_en" if english else "cbs"
            for s in res["summary"]:
                g = {"language": s["language"], "type": s["type"], "kind": s["kind"]}
                rows.append(row(NAME, metric, s["cbs"], ci_low=s["ci_low"], ci_high=s["ci_high"],
                                n=s["n_contexts"], group=g,
                                details={**ident, "n_undefined": s["n_undefined"],
                                         **({"reason": "no context could be scored (missing entities)"}
                                            if math.isnan(s["cbs"]) else {})}))
            by: dict[tuple, list[float]] = {}
            for s in res["summary"]:
                if not math.isnan(s["cbs"]):
                    by.setdefault((s["language"], s["kind"]), []).append(s["cbs"])
            for (language, kind), vals in by.items():
                rows.append(row(NAME, metric + "_mean", sum(vals) / len(vals), n=len(vals),
                                group={"language": language, "kind": kind}, details={**ident, "over": "types"}))
    gen_spec = o.get("generator", spec if spec.split(":", 1)[0] in ("hf", "openai") else None)
    if gen_spec and gen_spec != "none":
        rows += _generation_rows(project, gen_spec, o, ident, langs)
    if o.get("coverage", True) and spec.startswith("hf:"):
        rows += _coverage_rows(project, scorer, ident)
    if not rows:
        raise SuiteSkipped("No context matched the entity tables (same language and type).")
    return rows


def _generation_rows(project, gen_spec, o, ident, langs) -> list[dict]:
    from ....models.generators import get_generator
    from .qa import extractive_qa
    from .sentiment import sentiment_association

    from .contexts import list_contexts

    gen = get_generator(gen_spec)
    n_ent, seeds = int(o.get("n_entities", 50)), list(o.get("seeds", [0, 1, 2]))
    n_res = int(o.get("n_resamples", 1000))
    rows = []
    # the parallel English runs go one source language at a time, so each native row has its English twin
    # (seed 001 Table 1); the prompts are the same as one pooled run, so the generation cache answers them
    en_langs = [x for x in langs if x] or sorted({c["language"] for c in list_contexts(project)})
    runs = [(lang, False) for lang in langs] + ([(x, True) for x in en_langs] if o.get("english", True) else [])
    for lang, english in runs:
        det = {**ident, "generator": gen.identity, "english": english}
        for s in sentiment_association(project, gen, language=lang, n_entities=n_ent, seeds=seeds,
                                       english=english, n_resamples=n_res):
            g = {"language": s["language"] if not english else lang or "*", "test_language":
                 "en" if english else s["language"]}
            for m in ("delta_fn", "delta_fp"):
                lo, hi = s[f"{m}_ci"]
                rows.append(row(NAME, m, s[m], ci_low=lo, ci_high=hi, n=s["n_contexts"], group=g,
                                details={**det, "fn_local": s["fn_local"], "fn_western": s["fn_western"],
                                         "fp_local": s["fp_local"], "fp_western": s["fp_western"],
                                         "invalid": s["invalid"], "n_sentences": s["n_sentences"],
                                         "seeds": seeds}))
        for q in extractive_qa(project, gen, language=lang, n_entities=n_ent, seed=seeds[0] if seeds else 0,
                               english=english, n_resamples=n_res):
            g = {"language": q["language"] if not english else lang or "*",
                 "test_language": "en" if english else q["language"]}
            rows.append(row(NAME, "qa_acc_local", q["acc_local"], n=q["n_local"], group=g, details=det))
            rows.append(row(NAME, "qa_acc_western", q["acc_western"], n=q["n_western"], group=g, details=det))
            lo, hi = q["delta_acc_ci"]
            rows.append(row(NAME, "delta_qa_acc", q["delta_acc"], ci_low=lo, ci_high=hi, n=q["n_contexts"],
                            group=g, details=det))
    return rows


def _coverage_rows(project, scorer, ident) -> list[dict]:
    from .contexts import list_contexts
    from .coverage import decoded_vocabulary, script_coverage, script_of

    langs = sorted({c["language"] for c in list_contexts(project)})
    vocab = decoded_vocabulary(scorer.tokenizer)
    out = []
    for lang in langs:
        try:
            script = script_of(lang)
        except CulturaError:
            continue
        out.append(row(NAME, "script_coverage", script_coverage(vocab, script), n=len(vocab),
                       group={"language": lang}, details={**ident, "script": script}))
    return out


# -- report section -------------------------------------------------------------------------------------

def render_llm(results, project):
    """Leaderboards in the shape of seed 001 Tables 14–17 (one row per LLM, one column per language, Avg),
    the grounded-vs-neutral comparison (Figure 4) and native language vs parallel English (Table 1 shape,
    :func:`native_vs_english_tables`)."""

    def model_of(r):
        return r["details"].get("llm_spec") or r["details"].get("llm") or r["model"]

    parts_html, parts_md, csvs = [], [], {}
    boards = [("cbs_mean", "grounded", "Cultural Bias Score, grounded contexts (↓; seed 001 Table 14)", True),
              ("cbs_mean", "neutral", "Cultural Bias Score, neutral contexts (↓; seed 001 Figure 4)", True),
              ("delta_fn", None, "ΔFalse Negatives, Western − local (|Δ| ↓; Table 15)", False),
              ("delta_fp", None, "ΔFalse Positives, Western − local (|Δ| ↓; Table 16)", False),
              ("delta_qa_acc", None, "ΔQA accuracy, local − Western, points (|Δ| ↓; Table 17)", False),
              ("script_coverage", None, "Tokenizer script coverage (Figure 13)", True)]
    for metric, kind, caption, pct in boards:
        rs = [r for r in results if r["metric"] == metric and (kind is None or r["group"].get("kind") == kind)
              and r["group"].get("test_language", r["group"]["language"]) == r["group"]["language"]]
        if not rs:
            continue
        langs = sorted({r["group"]["language"] for r in rs})
        models = sorted({model_of(r) for r in rs})
        table_rows = []
        for m in models:
            cells = []
            vals = []
            for lang in langs:
                hit = next((r for r in rs if model_of(r) == m and r["group"]["language"] == lang), None)
                cells.append(Cell.of(hit, pct=pct))
                if hit is not None and math.isfinite(hit["value"]):
                    vals.append(abs(hit["value"]) if metric.startswith("delta") else hit["value"])
            avg = Cell(sum(vals) / len(vals) if vals else None, pct=pct,
                       reason=None if vals else "no finite value")
            table_rows.append([m, *cells, avg])
        t = Table(["model", *langs, "Avg"], table_rows, caption=caption)
        parts_html.append(t.html())
        parts_md.append(t.markdown())
        csvs[f"llm_{metric}{'_' + kind if kind else ''}"] = t.csv_rows()
    for key, t in native_vs_english_tables(results, model_of):
        parts_html.append(t.html())
        parts_md.append(t.markdown())
        csvs[key] = t.csv_rows()
    note = ("<p>CBS: share of (local, Western) entity pairs where the LLM gives the Western entity the higher "
            "likelihood in a masked context (seed 001 eq. 1); 50% = no preference, lower is better in grounded "
            "contexts.</p>")
    return ReportSection(title="LLM entity bias (Camellia)", html=note + "".join(parts_html),
                         markdown="\n\n".join(parts_md), csv_tables=csvs)


ENGLISH_COLUMN = "English (parallel)"
DELTA_COLUMN = "Δ native − English"


def native_vs_english_tables(results, model_of) -> list[tuple[str, object]]:
    """Native language vs parallel English (seed 001 Table 1 shape): ``[(csv_key, Table)]``.

    One CBS table per entity type (rows model × context kind × language; columns ``native``,
    ``English (parallel)`` from the ``cbs_en`` rows, and ``Δ native − English``), and one table for the
    generation metrics (ΔFN, ΔFP, ΔQA accuracy) with the same three columns, where the suite ran the parallel
    English contexts. Δ is the difference of the two point estimates (no CI: the runs are not paired)."""

    def pair_row(label, nat, en, pct):
        cells = [Cell.of(nat, pct=pct), Cell.of(en, pct=pct)]
        if nat is not None and en is not None and all(math.isfinite(x["value"]) for x in (nat, en)):
            cells.append(Cell(nat["value"] - en["value"], pct=pct))
        else:
            cells.append(Cell(None, pct=pct, reason="needs both the native and the English value"))
        return [*label, *cells]

    out = []
    nat_cbs = {(model_of(r), r["group"].get("type"), r["group"].get("kind"), r["group"]["language"]): r
               for r in results if r["metric"] == "cbs"}
    en_cbs = {(model_of(r), r["group"].get("type"), r["group"].get("kind"), r["group"]["language"]): r
              for r in results if r["metric"] == "cbs_en"}
    if en_cbs:
        for typ in sorted({k[1] for k in en_cbs}, key=str):
            keys = sorted({k for k in (*nat_cbs, *en_cbs) if k[1] == typ}, key=lambda k: tuple(map(str, k)))
            rows = [pair_row([k[0], k[2], k[3]], nat_cbs.get(k), en_cbs.get(k), True) for k in keys]
            out.append((f"llm_cbs_native_vs_english_{typ}", Table(
                ["model", "kind", "language", "native", ENGLISH_COLUMN, DELTA_COLUMN], rows,
                caption=f"CBS, native language vs parallel English, {typ} (↓ grounded; seed 001 Table 1 / "
                        "Figure 12)")))
    gen_rows = []
    for metric, label in (("delta_fn", "ΔFN"), ("delta_fp", "ΔFP"), ("delta_qa_acc", "ΔQA accuracy")):
        nat, en = {}, {}
        for r in results:
            if r["metric"] != metric:
                continue
            g = r["group"]
            side = en if g.get("test_language") == "en" and g["language"] != "en" else nat
            side[(model_of(r), g["language"])] = r
        if not en:
            continue
        for k in sorted(set(nat) | set(en), key=lambda k: tuple(map(str, k))):
            gen_rows.append(pair_row([k[0], label, k[1]], nat.get(k), en.get(k), False))
    if gen_rows:
        out.append(("llm_generation_native_vs_english", Table(
            ["model", "metric", "language", "native", ENGLISH_COLUMN, DELTA_COLUMN], gen_rows,
            caption="Sentiment ΔFN / ΔFP and extractive-QA Δaccuracy, native language vs parallel English "
                    "(seed 001 Table 1)")))
    return out


SUITE = Suite(NAME, llm_suite, section=render_llm, description="LLM entity bias (seed 001): CBS per entity type / language / "
               "context kind, sentiment ΔFN/ΔFP, extractive-QA Δaccuracy, tokenizer script coverage.",
               model_kind="llm")
