"""Suite ``llm``: LLM entity bias (seed 001 §4; spec §5) over the project's entity and context tables.

Rows: ``cbs`` per language × entity type × context kind (mean over contexts, bootstrap CI), ``cbs_mean`` per
language × kind (mean over types; grounded vs neutral is seed 001 Figure 4), ``cbs_en`` for the parallel
English contexts (Figure 12), ``delta_fn`` / ``delta_fp`` (sentiment association, Tables 15–16),
``qa_acc_local`` / ``qa_acc_western`` / ``delta_qa_acc`` (extractive QA, Table 17, native vs English) and
``script_coverage`` per language for a local tokenizer (Figure 13).

The runner hands every suite an embedder; this suite does not use it. The LLM comes from the options
(``--option llm.llm=hf:MODEL``) or the project config (``[evaluate.llm] llm = "hf:MODEL"``). Options:
``llm`` (scorer spec, required), ``generator`` (spec for sentiment/QA; default: the scorer's spec when it
is ``hf:`` or ``openai:``; ``none`` to skip), ``mode`` (``sentence``, the default: the completed context's
log-likelihood; or ``prefix``), ``languages`` (list), ``english`` (score parallel English too, default true),
``n_entities`` (50), ``seeds`` ([0, 1, 2]), ``n_resamples`` (1000), ``coverage`` (default true; the tokenizer
of an ``hf:`` model, or the ``tokenizer`` option — a folder or hub name — for a model served through
``openai:``), ``parallel`` (default: the value of ``english``; native and English runs then use the same
entities, those with an English form; false: every accepted entity in native runs).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ....bounds import N_RESAMPLES, SEED, Bound
from ....errors import CulturaError
from ....models.generators import get_generator
from ....models.scorers import DEFAULT_MODE, get_scorer
from ...reportkit import Cell, ReportSection, Table, figure_uri, img_tag
from ..registry import Suite, SuiteSkipped, row
from .cbs import compute_cbs
from ....curate.contexts import list_contexts
from .coverage import decoded_vocabulary, script_coverage, script_of
from ....curate.entities import list_entities
from .qa import extractive_qa
from .sentiment import sentiment_association

if TYPE_CHECKING:
    from ....project import Project

NAME = "llm"


def _opts(project: Project, options: dict) -> dict:
    cfg = dict(project.config.evaluate.llm)
    return {**cfg, **(options or {})}


def _parallel(o: dict) -> bool:
    """Native and English runs on the same entities: on by default whenever the English runs are."""
    return bool(o.get("parallel", o.get("english", True)))


def llm_suite(project: Project, embedder, *, benchmark=None, options: dict) -> list[dict]:

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
    ident = {"llm": scorer.identity, "llm_spec": spec, "mode": o.get("mode", DEFAULT_MODE),
             "parallel_entities": _parallel(o)}
    rows: list[dict] = []
    for lang in langs:
        for english in ([False, True] if o.get("english", True) else [False]):
            res = compute_cbs(project, scorer, language=lang, mode=o.get("mode", DEFAULT_MODE), english=english,
                              n_resamples=n_res, parallel=_parallel(o))
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
    if o.get("coverage", True) and (spec.startswith("hf:") or o.get("tokenizer")):
        rows += _coverage_rows(project, _coverage_tokenizer(scorer, o.get("tokenizer")), ident)
    if not rows:
        raise SuiteSkipped("No context matched the entity tables (same language and type).")
    return rows


def _generation_rows(project: Project, gen_spec, o, ident, langs) -> list[dict]:


    gen = get_generator(gen_spec)
    n_ent, seeds = int(o.get("n_entities", 50)), list(o.get("seeds", [0, 1, 2]))
    n_res = int(o.get("n_resamples", 1000))
    parallel = _parallel(o)
    rows = []
    # the parallel English runs go one source language at a time, so each native row has its English twin
    # (seed 001 Table 1); the prompts are the same as one pooled run, so the generation cache answers them
    en_langs = [x for x in langs if x] or sorted({c["language"] for c in list_contexts(project)})
    runs = [(lang, False) for lang in langs] + ([(x, True) for x in en_langs] if o.get("english", True) else [])
    for lang, english in runs:
        det = {**ident, "generator": gen.identity, "english": english}
        for s in sentiment_association(project, gen, language=lang, n_entities=n_ent, seeds=seeds,
                                       english=english, n_resamples=n_res, parallel=parallel):
            g = {"language": s["language"] if not english else lang or "*", "test_language":
                 "en" if english else s["language"]}
            for m in ("delta_fn", "delta_fp"):
                lo, hi = s[f"{m}_ci"]
                rows.append(row(NAME, m, s[m], ci_low=lo, ci_high=hi, n=s["n_contexts"], group=g,
                                details={**det, "fn_local": s["fn_local"], "fn_western": s["fn_western"],
                                         "fp_local": s["fp_local"], "fp_western": s["fp_western"],
                                         "invalid": s["invalid"], "invalid_reasons": s["invalid_reasons"],
                                         "invalid_replies": s["invalid_replies"][:10],
                                         **({"reason": s["reason"]} if s.get("reason") else {}),
                                         "n_sentences": s["n_sentences"],
                                         "seeds": seeds}))
        for q in extractive_qa(project, gen, language=lang, n_entities=n_ent, seed=seeds[0] if seeds else 0,
                               english=english, n_resamples=n_res, parallel=parallel):
            g = {"language": q["language"] if not english else lang or "*",
                 "test_language": "en" if english else q["language"]}
            rows.append(row(NAME, "qa_acc_local", q["acc_local"], n=q["n_local"], group=g, details=det))
            rows.append(row(NAME, "qa_acc_western", q["acc_western"], n=q["n_western"], group=g, details=det))
            lo, hi = q["delta_acc_ci"]
            rows.append(row(NAME, "delta_qa_acc", q["delta_acc"], ci_low=lo, ci_high=hi, n=q["n_contexts"],
                            group=g, details=det))
    return rows


def _coverage_tokenizer(scorer, name: str | None):
    """The tokenizer whose vocabulary coverage is measured: the ``tokenizer`` option (a local folder or hub
    name, for a model served through ``openai:``), else the HF scorer's own."""
    if not name:
        return scorer.tokenizer
    from transformers import AutoTokenizer  # deferred: heavy optional dependency

    try:
        return AutoTokenizer.from_pretrained(name)
    except OSError as e:
        raise CulturaError(f"Cannot load the tokenizer {name!r} for the coverage figure ({e}); pass a local "
                           "folder with --option llm.tokenizer=/path.") from None


def _coverage_rows(project: Project, tokenizer, ident) -> list[dict]:

    langs = sorted({c["language"] for c in list_contexts(project)})
    vocab = decoded_vocabulary(tokenizer)
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

def _parallel_english(r) -> bool:
    """A row of a parallel-English run (its group's language is the source culture's)."""
    g = r["group"]
    return r["metric"].startswith("cbs_en") or (g.get("test_language") == "en" and g["language"] != "en")


def render_llm(results, project: Project):
    """Leaderboards in the shape of seed 001 Tables 14–17 (one row per LLM, one column per language, Avg),
    the grounded-vs-neutral comparison (Figure 4) and native language vs parallel English (Table 1 shape,
    :func:`native_vs_english_tables`)."""

    def model_of(r):
        return r["details"].get("llm_spec") or r["details"].get("llm") or r["model"]

    parts_html, parts_md, csvs = [], [], {}
    boards = [("cbs_mean", "grounded", "Cultural Bias Score, grounded contexts (↓; seed 001 Table 14)", True, False),
              ("cbs_mean", "neutral", "Cultural Bias Score, neutral contexts (↓; seed 001 Figure 4)", True, False),
              ("delta_fn", None, "ΔFalse Negatives, Western − local (|Δ| ↓; Table 15)", False, False),
              ("delta_fp", None, "ΔFalse Positives, Western − local (|Δ| ↓; Table 16)", False, False),
              ("delta_qa_acc", None, "ΔQA accuracy, local − Western, points (|Δ| ↓; Table 17)", False, False),
              ("script_coverage", None, "Tokenizer script coverage (Figure 13)", True, False),
              ("cbs_en_mean", "grounded", "English leaderboard: CBS, grounded contexts in parallel English, one "
               "column per culture (its source language) (↓; seed 001 Table 18)", True, True),
              ("delta_fn", None, "English leaderboard: ΔFalse Negatives (|Δ| ↓; Table 19)", False, True),
              ("delta_fp", None, "English leaderboard: ΔFalse Positives (|Δ| ↓; Table 20)", False, True),
              ("delta_qa_acc", None, "English leaderboard: ΔQA accuracy, points (|Δ| ↓; Table 21)", False, True)]
    for metric, kind, caption, pct, english in boards:
        rs = [r for r in results if r["metric"] == metric and (kind is None or r["group"].get("kind") == kind)
              and (_parallel_english(r) if english else
                   r["group"].get("test_language", r["group"]["language"]) == r["group"]["language"])]
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
        csvs[f"llm_{metric}{'_' + kind if kind else ''}{'_english' if english and 'en_' not in metric else ''}"] = \
            t.csv_rows()
    fig = cbs_vs_coverage(results, model_of)
    if fig is not None:
        uri, points = fig
        caption = ("CBS (grounded contexts, mean over entity types) vs tokenizer script coverage, one point per "
                   "model and language; dashed lines join the models on one language (seed 001 Figure 13)")
        parts_html.append(f"<figure>{img_tag(uri, 'CBS vs tokenizer script coverage')}"
                          f"<figcaption>{caption}</figcaption></figure>")
        parts_md.append(f"*{caption}: see the HTML report; the points are in llm_cbs_vs_coverage.csv.*")
        csvs["llm_cbs_vs_coverage"] = points
    for key, t in native_vs_english_tables(results, model_of):
        parts_html.append(t.html())
        parts_md.append(t.markdown())
        csvs[key] = t.csv_rows()
    note = ("<p>CBS: share of (local, Western) entity pairs where the LLM gives the Western entity the higher "
            "likelihood in a masked context (seed 001 eq. 1); 50% = no preference, lower is better in grounded "
            "contexts.</p>")
    return ReportSection(title="LLM entity bias (Camellia)", html=note + "".join(parts_html),
                         markdown="\n\n".join(parts_md), csv_tables=csvs)


def cbs_vs_coverage(results, model_of, *, kind: str = "grounded"):
    """Seed 001 Figure 13: ``(png data URI, points)`` with one point per model × language that has both a
    ``cbs_mean`` of ``kind`` contexts (native language) and a ``script_coverage``; None without any. Points are
    ``{"model", "language", "coverage", "cbs"}`` (shares)."""
    cov = {(model_of(r), r["group"]["language"]): r["value"] for r in results if r["metric"] == "script_coverage"}
    cbs = {(model_of(r), r["group"]["language"]): r["value"] for r in results
           if r["metric"] == "cbs_mean" and r["group"].get("kind") == kind
           and r["group"].get("test_language", r["group"]["language"]) == r["group"]["language"]}
    points = [{"model": m, "language": lang, "coverage": cov[(m, lang)], "cbs": cbs[(m, lang)]}
              for m, lang in sorted(set(cov) & set(cbs), key=lambda k: tuple(map(str, k)))
              if math.isfinite(cov[(m, lang)]) and math.isfinite(cbs[(m, lang)])]
    if not points:
        return None
    import matplotlib  # deferred: heavy optional dependency

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt  # deferred: heavy optional dependency, loaded on first use

    fig, ax = plt.subplots(figsize=(6.0, 4.2))
    by_lang: dict[str, list[dict]] = {}
    for p in points:
        by_lang.setdefault(p["language"], []).append(p)
    for ps in by_lang.values():
        if len(ps) > 1:
            ax.plot([100 * p["coverage"] for p in ps], [100 * p["cbs"] for p in ps], ls="--", color="0.6", lw=0.8,
                    zorder=1)
    markers = "osD^vP*X"
    for i, m in enumerate(sorted({p["model"] for p in points})):
        ps = [p for p in points if p["model"] == m]
        ax.scatter([100 * p["coverage"] for p in ps], [100 * p["cbs"] for p in ps], marker=markers[i % 8],
                   label=m, zorder=2)
        for p in ps:
            ax.annotate(p["language"], (100 * p["coverage"], 100 * p["cbs"]), textcoords="offset points",
                        xytext=(4, 3), fontsize=8)
    ax.set_xlabel("script coverage in the tokenizer vocabulary (%)")
    ax.set_ylabel(f"CBS, {kind} contexts (%) ↓")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return figure_uri(fig, "cbs-vs-script-coverage-seed001-fig13"), points


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


#: The suite's numeric options (``seeds``: one generation run per seed).
OPTIONS = {"n_resamples": N_RESAMPLES, "n_entities": Bound(1, 1_000_000),
           "seeds": Bound(SEED.low, SEED.high, many=True)}

SUITE = Suite(NAME, llm_suite, section=render_llm, options=OPTIONS, description="LLM entity bias (seed 001): CBS per entity type / language / "
               "context kind, sentiment ΔFN/ΔFP, extractive-QA Δaccuracy, tokenizer script coverage.",
               model_kind="llm")

#: The folder's suites, read by :func:`cultura.evaluate.suites.load_suites`.
SUITES = (SUITE,)
