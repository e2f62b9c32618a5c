"""CLI commands of the concept list: ``concepts …`` (generate, load, curate, de-duplicate, translate)."""
from __future__ import annotations

import click

from ..curate.concepts import (
    DEDUP_THRESHOLD,
    N_CONCEPTS,
    add_concepts,
    build_queries,
    dedup_concepts,
    generate_concepts,
    list_concepts,
    list_terms,
    load_preset,
    remove_concept,
    remove_concepts,
    set_term,
    set_terms_from_file,
    translate_concepts,
)
from .console import (bounded, emit_json, json_option, listing, model_option, option, pass_ctx, stage_hint, summary,
                      table)


@click.group()
def concepts():
    """Concepts: generate, load presets, curate, de-duplicate, translate."""


@concepts.command("generate")
@option("--count", "n", old="--n", type=bounded(N_CONCEPTS), default=100, show_default=True, help="How many concepts.")
@model_option("LLM model (default: llm.model in cultura.toml).")
@json_option
@pass_ctx
def concepts_generate(ctx, n, model, as_json):
    """Ask the LLM for culturally-varying universal concepts, with one example entity per country
    (seed 000 App. H prompt). Needs OPENAI_API_KEY (and OPENAI_BASE_URL for other servers)."""

    summary("concepts generate", generate_concepts(ctx.project, n=n, model=model), as_json)


@concepts.command("load")
@click.option("--preset", required=True, help="3xcm (seed 000 Table 10) or globalrg (20 universals).")
@json_option
@pass_ctx
def concepts_load(ctx, preset, as_json):
    """Load a seed's own concept list (offline)."""

    res = load_preset(ctx.project, preset)
    res.pop("names")
    summary(f"concepts load --preset {preset}", res, as_json)


@concepts.command("add")
@click.argument("names", nargs=-1, required=True)
@click.option("--description", help="A short description stored with the concept(s).")
@json_option
@pass_ctx
def concepts_add(ctx, names, description, as_json):
    """Add concepts by hand."""

    summary("concepts add", add_concepts(ctx.project, names, description=description), as_json)


@concepts.command("list")
@click.option("--status", "status_", default="active", show_default=True,
              type=click.Choice(["active", "removed", "merged", "all"]), help="Which concepts to list.")
@json_option
@pass_ctx
def concepts_list(ctx, status_, as_json):
    """List concepts with their numbers of terms, queries and images."""

    rows = list_concepts(ctx.project, status=None if status_ == "all" else status_)
    listing(f"{len(rows)} concepts", rows, as_json, ["id", "name", "status", "source", "terms", "queries", "images"])


@concepts.command("remove")
@click.argument("names", nargs=-1)
@click.option("--from", "source", type=click.Path(dir_okay=False),
              help="A text file with one concept name a line (blank lines and # comments skipped).")
@click.option("--reason", default="removed by hand", show_default=True, help="Why (stored).")
@json_option
@pass_ctx
def concepts_remove(ctx, names, source, reason, as_json):
    """Mark concepts removed (nothing is deleted): NAME…, and/or those of --from FILE. Every name is checked
    first; an unknown one removes nothing."""

    if len(names) == 1 and not source:
        return summary("concepts remove", remove_concept(ctx.project, names[0], reason=reason), as_json)
    if not names and not source:
        raise click.UsageError("Give one or more concept names, or --from FILE.")
    summary("concepts remove", remove_concepts(ctx.project, names, path=source, reason=reason), as_json)


@concepts.command("dedup")
@click.option("--threshold", type=bounded(DEDUP_THRESHOLD), help="Cosine similarity at or above which concepts merge "
                                              "(default: concepts.dedup_threshold, 0.92).")
@model_option("sentence-transformers model or embedder spec (default: BAAI/bge-m3).", old="--embedder")
@click.option("--dry-run", is_flag=True, help="Only show the clusters; record no merge.")
@click.option("--apply", is_flag=True, hidden=True, help="Record the merges (the default now; kept for one release).")
@json_option
@pass_ctx
def concepts_dedup(ctx, threshold, model, dry_run, apply, as_json):
    """Find near-duplicate concepts by embedding similarity and record the merges (--dry-run: only show
    them)."""

    apply = not dry_run
    clusters = dedup_concepts(ctx.project, threshold=threshold, embedder=model, apply=apply)
    rows = [{"keep": c.keep, "merge": ", ".join(c.merge), "min_cosine": round(c.similarity, 4)} for c in clusters]
    if as_json:
        return emit_json({"applied": apply, "clusters": rows})
    table(f"{len(rows)} clusters" + (" (merged)" if apply else " (dry run: rerun without --dry-run to merge)"), rows)


@concepts.command("translate")
@model_option("LLM model (default: llm.model).")
@click.option("--overwrite", is_flag=True, help="Re-translate terms that came from the LLM (manual ones are kept).")
@json_option
@pass_ctx
def concepts_translate(ctx, model, overwrite, as_json):
    """The native term of every concept for each country's language (by LLM), then the search queries."""

    if stage_hint(ctx, "translate", as_json):
        return
    res = translate_concepts(ctx.project, model=model, overwrite=overwrite)
    res["queries"] = build_queries(ctx.project)["total"]
    summary("concepts translate", res, as_json)


@concepts.command("set-term")
@click.argument("concept", required=False)
@click.argument("country", required=False)
@click.argument("term", required=False)
@click.option("--language", help="Language code (default: the country's primary language).")
@click.option("--from", "source", type=click.Path(dir_okay=False),
              help="CSV or TSV file with columns concept, country, term[, language]: set many terms at once "
                   "(checked first, written together).")
@json_option
@pass_ctx
def concepts_set_term(ctx, concept, country, term, language, source, as_json):
    """Set or correct a native term by hand (never overwritten by translation): CONCEPT COUNTRY TERM, or many
    from a file with --from."""

    if source:
        if concept or country or term:
            raise click.UsageError("Give either CONCEPT COUNTRY TERM or --from FILE, not both.")
        res = set_terms_from_file(ctx.project, source)
    elif concept and country and term:
        res = set_term(ctx.project, concept, country, term, language=language)
    else:
        raise click.UsageError("Give CONCEPT COUNTRY TERM, or --from FILE (CSV/TSV: concept, country, term).")
    res["queries"] = build_queries(ctx.project)["total"]
    summary("concepts set-term", res, as_json)


@concepts.command("terms")
@click.option("--country", help="Only this country.")
@json_option
@pass_ctx
def concepts_terms(ctx, country, as_json):
    """List native terms with their source."""

    rows = list_terms(ctx.project, country=country)
    listing(f"{len(rows)} terms", rows, as_json)


@concepts.command("queries")
@json_option
@pass_ctx
def concepts_queries(ctx, as_json):
    """(Re)build the search queries: English "{concept} {Country}" and native "{term} {native name}"."""

    summary("queries", build_queries(ctx.project), as_json)


COMMANDS = [concepts]
