"""CLI commands of benchmark assembly: ``build …`` (association, descriptor, their queries, stats, list)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import click
from rich.markup import escape

from ..benchmark.build import PER_PAIR, build_benchmark, build_stats, get_benchmark, list_benchmarks
from ..benchmark.verify import check_benchmark, check_versions, read_warning
from ..benchmark.eligible import MIN_RELEVANCE
from ..bounds import COUNT, SEED, VERSION
from ..errors import CulturaError
from ..curate.benchmark_queries import build_mention_queries, build_queries, list_queries
from ..curate.query_edits import set_queries_from_file, set_query
if TYPE_CHECKING:
    from ..project import Project
from .console import bounded, console, csv_list, emit_json, json_option, listing, out, pass_ctx, summary, table


def _print_report(b: dict, as_json: bool) -> None:
    if as_json:
        return emit_json(b)
    rep = b["report"]
    img, smp = rep["images"], rep["sampling"]
    verb = "Reused" if b.get("reused") else "Built"
    out.print(f"{verb} [bold]{b['name']}@{b['version']}[/bold] ({b['kind']}, seed {b['seed']}): "
              f"{b['n_items']} trials, content hash {b['content_hash'][:16]}…")
    if b.get("message"):
        out.print(escape(f"{b['name']}: {b['message']}"))
    eng = rep.get("english_terms") or {}
    if eng.get("count"):
        out.print(escape(f"Note: {eng['count']} query term(s) of English-speaking countries are the concept's "
                         f"English name, as none was set ({', '.join(eng['examples'])}"
                         f"{', …' if eng['count'] > len(eng['examples']) else ''}); set another with "
                         "'cultura concepts set-term CONCEPT COUNTRY TERM'."))
    rel = rep.get("relevance") or {}
    if rel.get("unrated_links"):
        per = ", ".join(f"{k}: {v}" for k, v in rel["unrated_by_country"].items())
        out.print(f"[yellow]{rel['unrated_links']} image × culture links are kept unrated ({escape(per)}; "
                  "--allow-unrated); the dataset card says so.[/yellow]")
    if not img["reviewed"]:
        out.print(f"[yellow]No filter decisions exist: {img['unreviewed_used']} unreviewed images were used "
                  "(--allow-unreviewed).[/yellow]")
    if img.get("random_tag_sources"):
        out.print(f"[yellow]Tags from random-init models were used (--allow-random-tags): "
                  f"{escape(', '.join(img['random_tag_sources']))}.[/yellow]")
    summary("Excluded images", {"linked images": img["total"], "eligible": img["eligible"],
                                **img["excluded"], "links below min relevance": img["low_relevance_links"]})
    summary("Trials", {"cells": smp["cells"], "requested": smp["requested_trials"],
                       "built": smp["built_trials"], "missing": smp["missing_trials"],
                       "duplicate conflicts": smp["duplicate_conflicts"],
                       "tag-conflict images": sum(smp["tag_conflicts"].values())})
    holes = smp["too_few_images"]
    if holes:
        table(f"Cells with too few images ({len(holes)})", holes[:30])


def _build_options(f):
    opts = [
        click.option("--name", help="Benchmark name (default: the kind)."),
        click.option("--version", "version", type=bounded(VERSION),
                     help="Version number (default: the next one); an existing name+version is an error."),
        click.option("--seed", type=bounded(SEED), default=0, show_default=True, help="Random seed."),
        click.option("--per-pair", type=bounded(PER_PAIR), default=1, show_default=True,
                     help="Trials per concept × query country (× descriptor) cell."),
        click.option("--concepts", help="Comma-separated concept names (default: every active concept)."),
        click.option("--countries", help="Comma-separated query countries (default: the project's)."),
        click.option("--allow-unreviewed", is_flag=True,
                     help="Build even though no filter decision exists (images are then unreviewed)."),
        click.option("--min-relevance", type=bounded(MIN_RELEVANCE), default=4.0, show_default=True,
                     help="When relevance ratings exist, drop image cultures rated below this mean score "
                          "(1-5; none: ratings are not used)."),
        click.option("--allow-random-tags", is_flag=True,
                     help="Use image tags from a random-init model (e.g. openclip:cultura-tiny): for demos and "
                          "tests only; the benchmark report records it."),
        click.option("--allow-unrated", is_flag=True,
                     help="When relevance ratings are used, keep image × culture links nobody rated (by default "
                          "they refuse the build); the report and the dataset card record it."),
        json_option,
    ]
    for o in reversed(opts):
        f = o(f)
    return f


@click.group()
def build():
    """Assemble versioned benchmarks (association, descriptor) and their query texts."""


@build.command("association")
@_build_options
@pass_ctx
def build_association(ctx, name, version, seed, per_pair, concepts, countries, allow_unreviewed,
                      min_relevance, allow_random_tags, allow_unrated, as_json):
    """Three-candidate trials (cr, lb, ti) per concept × query country (seed 000 RQ2)."""

    b = build_benchmark(ctx.project, "association", name=name, version=version, seed=seed, per_pair=per_pair,
                        concepts=csv_list(concepts), countries=csv_list(countries), allow_unreviewed=allow_unreviewed,
                        min_relevance=min_relevance, allow_random_tags=allow_random_tags,
                        allow_unrated=allow_unrated)
    _print_report(b, as_json)


@build.command("descriptor")
@_build_options
@click.option("--descriptors", help="Comma-separated descriptor countries D (default: the query countries).")
@pass_ctx
def build_descriptor(ctx, name, version, seed, per_pair, concepts, countries, allow_unreviewed, min_relevance,
                     allow_random_tags, allow_unrated, as_json, descriptors):
    """Six-candidate trials (cr, orlb, or, cdr, lb, ti) per concept × query country × descriptor country
    (seed 000 RQ3)."""

    b = build_benchmark(ctx.project, "descriptor", name=name, version=version, seed=seed, per_pair=per_pair,
                        concepts=csv_list(concepts), countries=csv_list(countries), descriptors=csv_list(descriptors),
                        allow_unreviewed=allow_unreviewed, min_relevance=min_relevance,
                        allow_random_tags=allow_random_tags, allow_unrated=allow_unrated)
    _print_report(b, as_json)


@build.command("queries")
@click.option("--short-only", is_flag=True, help="Only the short queries (native terms); no LLM calls.")
@click.option("--no-descriptors", is_flag=True, help="Skip the descriptor variants (mention_<CC>, "
                                                    "task_mention_<CC>, casual_mention_<CC>).")
@click.option("--model", help="LLM model (default: llm.model in cultura.toml).")
@click.option("--concepts", help="Comma-separated concept names (default: every active concept).")
@click.option("--overwrite", is_flag=True, help="Regenerate LLM texts that are already valid (manual kept).")
@json_option
@pass_ctx
def build_queries_cmd(ctx, short_only, no_descriptors, model, concepts, overwrite, as_json):
    """Short, verbose (task, casual) and descriptor query variants per concept × country, parallel across
    languages; LLM texts are validated (native term present, no culture cue)."""

    res = build_queries(ctx.project, verbose=not short_only, descriptors=not (short_only or no_descriptors),
                        model=model, concepts=csv_list(concepts), overwrite=overwrite)
    if as_json:
        return emit_json(res)
    for k, v in res.items():
        summary(f"Queries: {k}", v)


@build.command("mention-queries")
@click.option("--method", type=click.Choice(["llm", "pattern"]), default="llm", show_default=True,
              help="llm: one validated LLM call per concept × query country; pattern: the query language's "
                   "pattern from data/mention_patterns.toml (languages without one are counted, not guessed).")
@click.option("--model", help="LLM model (default: llm.model in cultura.toml).")
@click.option("--concepts", help="Comma-separated concept names (default: every active concept).")
@click.option("--countries", help="Comma-separated query countries (default: the project's).")
@click.option("--descriptors", help="Comma-separated descriptor countries (default: the query countries).")
@click.option("--overwrite", is_flag=True, help="Regenerate texts that are already valid (manual kept).")
@json_option
@pass_ctx
def build_mention_queries_cmd(ctx, method, model, concepts, countries, descriptors, overwrite, as_json):
    """Short descriptor queries mention_<CC> (seed 000 RQ3: "Train of Japan" written in Thai) per concept ×
    query country × descriptor country, validated (descriptor named in the query language, no other culture
    cue). Fix or add one by hand with 'cultura build set-query CONCEPT COUNTRY mention_CC TEXT'."""

    res = build_mention_queries(ctx.project, method=method, model=model, concepts=csv_list(concepts),
                                countries=csv_list(countries), descriptors=csv_list(descriptors), overwrite=overwrite)
    if as_json:
        return emit_json(res)
    summary("Queries: mention", res)


@build.command("set-query")
@click.argument("concept", required=False)
@click.argument("country", required=False)
@click.argument("variant", required=False)
@click.argument("text", required=False)
@click.option("--from", "source", type=click.Path(dir_okay=False),
              help="CSV, JSONL or Parquet file with columns concept, country, variant, text: set many at once "
                   "(one transaction; a bad row is a reject row with its reason, the others are set).")
@json_option
@pass_ctx
def set_query_cmd(ctx, concept, country, variant, text, source, as_json):
    """Set the TEXT of one query VARIANT (short, task, casual, mention_CC, task_mention_CC …) for CONCEPT ×
    COUNTRY by hand, or many with --from FILE; they are never overwritten by 'build queries'."""

    if source:
        if concept or country or variant or text:
            raise click.UsageError("Give either CONCEPT COUNTRY VARIANT TEXT or --from FILE, not both.")
        r = set_queries_from_file(ctx.project, source)
        if as_json:
            return emit_json(r)
        summary("build set-query", {k: v for k, v in r.items() if k != "rejects"})
        for rej in r["rejects"]:
            out.print(escape(f"  line {rej['line']}: {rej['reason']}"))
        if r["rejected"] > len(r["rejects"]):
            out.print(f"  … {r['rejected'] - len(r['rejects'])} more (the ingest_rejects rows of this file)")
        return
    if not (concept and country and variant and text):
        raise click.UsageError("Give CONCEPT COUNTRY VARIANT TEXT, or --from FILE (columns concept, country, "
                               "variant, text).")
    r = set_query(ctx.project, concept, country, variant, text)
    if as_json:
        return emit_json(r)
    out.print(f"Stored {r['variant']} for {r['concept']} × {r['country']}: {r['text']}")
    if r["warning"]:
        out.print(f"[yellow]Note: {r['warning']} (kept, as set by hand).[/yellow]")


@build.command("list-queries")
@click.option("--concept", help="Only this concept.")
@click.option("--country", help="Only this country.")
@click.option("--status", type=click.Choice(["ok", "invalid"]), help="Only this status.")
@json_option
@pass_ctx
def list_queries_cmd(ctx, concept, country, status, as_json):
    """Stored query texts with their source and status (invalid ones with the reason)."""

    rows = list_queries(ctx.project, concept=concept, country=country, status=status)
    listing("Queries", rows, as_json)


@build.command("stats")
@click.option("--min-images", type=bounded(COUNT), default=3, show_default=True,
              help="A concept × country cell with fewer images is a coverage hole.")
@click.option("--benchmark", help="Count the images of this benchmark (NAME or NAME@VERSION) instead of the "
                                  "eligible pool.")
@json_option
@pass_ctx
def build_stats_cmd(ctx, min_images, benchmark, as_json):
    """Images per country and per concept (seed 000 Tables 9 and 10) and coverage holes."""

    s = build_stats(ctx.project, min_images=min_images, benchmark=benchmark)
    if benchmark:
        warn_unsupported(ctx.project, [benchmark])
    if as_json:
        return emit_json(s)
    table("Images per country (Table 9)", s["countries"])
    out.print(f"Average per country: {s['average_per_country']}")
    table("Images per concept (Table 10)", s["concepts"])
    table(f"Coverage holes (< {min_images} images)", s["holes"][:50])
    if len(s["holes"]) > 50:
        out.print(f"… {len(s['holes']) - 50} more holes (use --json for all)")


@build.command("list")
@json_option
@pass_ctx
def build_list(ctx, as_json):
    """Every built benchmark: name, version, kind, seed, trials, content hash."""

    rows = list_benchmarks(ctx.project)
    listing("Benchmarks", rows, as_json)


@build.command("check")
@click.argument("benchmark", metavar="NAME[@VERSION]")
@json_option
@pass_ctx
def build_check(ctx, benchmark, as_json):
    """Check one benchmark version against the current state (pool, exclusions, filter and dedup decisions,
    culture decisions and questions, relevance ratings, duplicate sets, queries): what no longer holds, in
    words. Exits 1 when the state no longer supports it (export then refuses it without --as-built)."""

    res = check_benchmark(ctx.project, get_benchmark(ctx.project, benchmark))
    if as_json:
        emit_json(res)
    elif res["supported"]:
        out.print(f"{res['benchmark']} still holds: the current state supports every trial.")
    else:
        out.print(escape(res["message"]))
        if res["changes"]:
            table(f"What changed since {res['benchmark']} was built",
                  [{"change": c["what"], "count": c["count"], "what": c["text"],
                    "images": ", ".join(s[:12] for s in c["images"][:5]) + (" …" if len(c["images"]) > 5 else "")}
                   for c in res["changes"]])
    if not res["supported"]:
        click.get_current_context().exit(1)


def warn_unsupported(project: Project, specs) -> None:
    """On stderr, the warning of a command that only reads these benchmark versions, for each the current state
    no longer supports (``specs``: NAME@VERSION)."""
    benches = []
    for spec in dict.fromkeys(specs):
        try:
            benches.append(get_benchmark(project, spec))
        except CulturaError:  # not a stored version (a suite that reads the pool): nothing to check
            continue
    warn_versions(check_versions(project, benches))


def warn_versions(checks: list[dict]) -> None:
    """On stderr, the warning of each version a reading command showed that the state no longer supports."""
    for check in checks:
        text = read_warning(check)
        if text:
            console.print(f"[yellow]Warning: {escape(text)}[/yellow]")


COMMANDS = [build]
