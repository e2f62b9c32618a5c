"""``cultura evaluate …``: run suites over models, list results, write the report, manage the embedding cache.
Thin: each command calls one library function and prints its result."""
from __future__ import annotations

import json
import math
import sys

import click

from ..bounds import BATCH_SIZE, COUNT, ROW_ID
from ..errors import unknown
from ..lazy import lazy
from ..evaluate.runner import load_results, records_table, results_json, run_evaluation
from ..evaluate.suites import load_suites
from ..models.embedders import cache_size, clear_cache
from ..models.embedders.presets import preset_table
from .build import warn_unsupported
from .console import (bounded, emit_json, end_command_line, executor_option, json_option, listing, out,
                      overwrite_option, pass_ctx, summary, table)

# the report's engine (figures, annotation statistics) and the sample export: imported by their commands only
report_engine = lazy("cultura.evaluate.report")
result_store = lazy("cultura.evaluate.results")


def _parse_options(pairs) -> dict:
    """``--option association.n_resamples=200`` / ``--option seed=1`` → nested options dict."""

    out: dict = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} must look like KEY=VALUE or SUITE.KEY=VALUE "
                                     "(e.g. association.n_resamples=200).", param_hint="--option")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        suite, dot, name = key.partition(".")
        if dot:
            out.setdefault(suite, {})[name] = value
        else:
            out.setdefault("*", {})[key] = value
    return out


def _options_for_runner(parsed: dict) -> dict | None:
    if not parsed:
        return None

    shared = parsed.pop("*", {})
    suites = load_suites()
    for name in parsed:
        if name not in suites:
            raise unknown("suite", name, suites, hint="Options look like SUITE.KEY=VALUE or KEY=VALUE.")
    if not parsed:
        return shared
    return {name: {**shared, **parsed.get(name, {})} for name in suites}


@click.group("evaluate")
def evaluate():
    """Evaluate embedding models on the project's benchmarks (seed 000 suites) and report the results."""

@evaluate.command("run")
@click.option("--model", "models", multiple=True, required=True, metavar="SPEC",
              help="Embedder spec, repeatable: openclip:ViT-B-32/openai, st:MODEL, hf:MODEL, openai:MODEL; for "
                   "tests only, openclip:cultura-tiny (random-init) and fake (a hash embedder, not a model). For a "
                   "suite of language models named with --suite (llm), the LLM spec: hf:MODEL_OR_PATH or "
                   "openai:MODEL.")
@click.option("--suite", "suites", default="all", show_default=True,
              help="Suite(s) to run, comma-separated: prevalence, association, descriptor (or any registered "
                   "suite), or 'all'.")
@click.option("--benchmark", default=None, metavar="NAME[@VERSION]",
              help="Benchmark to evaluate (default: the latest ready benchmark of each suite's kind).")
@click.option("--batch-size", type=bounded(BATCH_SIZE), default=None, help="Inputs per model call.")
@click.option("--device", default=None, help="cpu, cuda, cuda:1 … (default: CUDA when available).")
@click.option("--option", "options", multiple=True, metavar="[SUITE.]KEY=VALUE",
              help="Suite option, repeatable, e.g. n_resamples=200 or prevalence.ks=[5,10] (JSON values).")
@click.option("--log-samples/--no-log-samples", "log_samples", default=None,
              help="Store every scored unit (trial scores and winner, top-k captions, context log-likelihoods, "
                   "judge token probabilities) for re-scoring; default: stored when a run has at most "
                   "200,000 samples.")
@click.option("--limit", type=bounded(COUNT), default=None, metavar="N",
              help="Smoke run: score only the first N trials / query images / contexts / pairs of each suite "
                   "(results are marked as a smoke run everywhere).")
@click.option("--output-path", type=click.Path(), default=None, metavar="PATH",
              help="Also write the results JSON of this run (versions, options, model and benchmark identity, "
                   "results) and the sample logs to PATH (a folder, or a .json file).")
@click.option("--overwrite", is_flag=True,
              help="Replace the files of --output-path if they exist (default: refuse, before anything runs).")
@executor_option("evaluate")
@json_option
@pass_ctx
def run_cmd(ctx, models, suites, benchmark, batch_size, device, options, log_samples, limit, output_path,
            overwrite, executor, as_json):
    """Run suites over one or more models and store self-describing results (DB and JSON)."""

    recs = run_evaluation(ctx.project, list(models), suites, benchmark=benchmark, batch_size=batch_size,
                          device=device, options=_options_for_runner(_parse_options(options)),
                          executor=executor, log_samples=log_samples, limit=limit, output_path=output_path,
                          overwrite=overwrite)
    rows = records_table(recs)
    # evaluating reads a version as built: say so when the current state no longer supports it
    warn_unsupported(ctx.project, [f"{r['benchmark']}@{r['benchmark_version']}" for r in rows
                                   if r.get("benchmark") and r.get("benchmark_version") is not None])
    for r, rec in zip(rows, recs):
        r["n_samples"] = rec.extra.get("n_samples")
    listing("Evaluation runs", rows, as_json, ["run_id", "spec", "suite", "status", "benchmark",
                                               "benchmark_version", "n_results", "n_samples", "n_embedded",
                                               "reason"])
    if output_path and recs and not as_json:
        out.print(f"Results JSON: {recs[0].extra.get('results_json')}")
    if limit and not as_json:
        out.print(f"[yellow]Smoke run (--limit {limit}): not comparable with full runs.[/yellow]")
    failed = [r for r in recs if r.status == "failed"]
    if failed:
        raise click.ClickException(f"{len(failed)} of {len(recs)} run(s) failed; first: {failed[0].suite} × "
                                   f"{failed[0].spec}: {failed[0].reason}")

@evaluate.command("results")
@click.option("--suite", default=None, help="Only this suite.")
@click.option("--model", default=None, help="Only this model identity.")
@click.option("--all-runs", is_flag=True, help="Every done run, not only the latest per model × suite × "
                                                 "benchmark.")
@json_option
@pass_ctx
def results_cmd(ctx, suite, model, all_runs, as_json):
    """List stored results (latest run per model × suite × benchmark)."""

    rows = load_results(ctx.project, suite=suite, model=model, latest=not all_runs)
    if as_json:
        emit_json(results_json(rows))
        return
    shown = [{"run": r["run_id"], "model": r["model_spec"] + (" (smoke run)" if r["params"].get("limit") else ""),
              "suite": r["suite"], "metric": r["metric"],
              "group": ",".join(f"{k}={v}" for k, v in r["group"].items()),
              "value": _fmt(r["value"]), "ci": f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]", "n": r["n"]}
             for r in rows if not r["metric"].startswith("projection_")]
    table("Results", shown)

@evaluate.command("report")
@click.argument("out_html", required=False, type=click.Path(dir_okay=False))
@click.option("--model", "models", multiple=True, metavar="SPEC",
              help="Only this model (identity or spec as run); repeatable. Default: every model.")
@click.option("--suite", "suites", multiple=True, help="Only this suite; repeatable. Default: every suite.")
@click.option("--benchmark", "benchmarks", multiple=True, metavar="NAME[@VERSION]",
              help="Only results on this benchmark; repeatable. Default: every benchmark.")
@click.option("--overwrite", is_flag=True, help="Replace OUT_HTML (and OUT.md) if they exist (default: refuse; "
                                                "the default report in reports/ is always rewritten).")
@json_option
@pass_ctx
def report_cmd(ctx, out_html, models, suites, benchmarks, overwrite, as_json):
    """Write the HTML report (self-contained) plus Markdown and CSV tables; default reports/evaluation.html."""

    paths = report_engine.write_report(ctx.project, out_html, models=list(models) or None, suites=list(suites) or None,
                         benchmarks=list(benchmarks) or None, overwrite=overwrite)
    warn_unsupported(ctx.project, benchmarks)  # the report reads the results of these versions as built
    summary("Report written", {k: str(v) for k, v in paths.items()}, as_json)

@evaluate.command("samples")
@click.argument("run_id", type=bounded(ROW_ID))
@click.argument("output", type=click.Path(dir_okay=False))
@overwrite_option
@json_option
@pass_ctx
def samples_cmd(ctx, run_id, output, overwrite, as_json):
    """Export the per-sample log of run RUN_ID to OUTPUT (.jsonl or .parquet) for re-scoring."""

    path = result_store.export_samples(ctx.project, run_id, output, overwrite=overwrite)
    summary("Samples written", {"run": run_id, "path": str(path)}, as_json)


@evaluate.command("suites")
@json_option
def suites_cmd(as_json):
    """List the registered suites."""

    rows = [{"suite": s.name, "benchmark kind": s.benchmark_kind or "-", "in all": s.in_all,
             "description": s.description} for s in load_suites().values()]
    listing("Suites", rows, as_json)

@evaluate.command("models")
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False),
              help="Hugging Face cache to check (default: the hub's own, HF_HUB_CACHE).")
@json_option
def models_cmd(cache_dir, as_json):
    """List the named model presets (the seed papers' models) with what each needs; run one with
    --model preset:NAME (or its spec)."""

    rows = preset_table(cache_dir)
    listing("Model presets (--model preset:NAME; --json for packages, hub repositories and notes)", rows, as_json,
            ["name", "seeds", "ready_offline", "spec", "download"])

@evaluate.group("cache")
def cache():
    """The embedding cache (per model identity and image sha256 / text hash)."""

@cache.command("size")
@json_option
@pass_ctx
def cache_size_cmd(ctx, as_json):
    """Show how many embeddings are cached, per model."""

    info = cache_size(ctx.project)
    if as_json:
        emit_json(info)
        return
    rows = [{"model": m, "images": d["image"], "texts": d["text"], "MB": round(d["bytes"] / 1e6, 2)}
            for m, d in info["models"].items()]
    table(f"Embedding cache: {info['rows']} vectors, {info['bytes'] / 1e6:.2f} MB", rows)

@cache.command("clear")
@click.option("--model", default=None, help="Only this model identity (see 'cache size'); default all.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (needed without a terminal).")
@click.option("--dry-run", is_flag=True, help="Only count what would be removed.")
@json_option
@pass_ctx
def cache_clear_cmd(ctx, model, yes, dry_run, as_json):
    """Delete cached embeddings (they are recomputed on the next run)."""

    if dry_run:
        models = cache_size(ctx.project)["models"]
        n = sum(d["image"] + d["text"] for m, d in models.items() if model is None or m == model)
        return summary("evaluate cache clear (dry run)", {"model": model or "all", "would_remove": n}, as_json)
    if not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("Clearing the cache needs a confirmation: add --yes (or --dry-run to count).")
        end_command_line()  # a question must not sit under the command's live progress row
        click.confirm(f"Delete cached embeddings of {model or 'every model'}?", abort=True)
    n = clear_cache(ctx.project, model)
    if as_json:
        return emit_json({"model": model or "all", "removed": n})
    out.print(f"Removed {n} cached embedding(s).")


COMMANDS = [evaluate]

def _fmt(x) -> str:

    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if isinstance(x, float) and math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return f"{x:.4g}"
