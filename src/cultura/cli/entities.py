"""``cultura entities …``: culture-specific entities per language and type (local vs Western) for the LLM suite
(seed 001): imported, collected from Wikidata, extracted from a corpus, listed and counted."""
from __future__ import annotations

import click

from ..bounds import COUNT
from ..curate.entities import entity_counts, import_entities, list_entities
from ..evaluate.suites.llm_bias.patterns import extract_entities, llm_extract_entities
from ..evaluate.suites.llm_bias.wikidata import (DEFAULT_ENDPOINT, LIMIT, MIN_LANGUAGES, collect_western_wikidata,
                                                collect_wikidata)
from .console import bounded, json_option, listing, pass_ctx, summary


@click.group("entities")
def entities():
    """Culture-specific entities per language and type (local vs Western) for the LLM suite."""

@entities.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--language", default=None, help="Language of rows that have none (ISO 639-1).")
@click.option("--type", "type_", default=None, help="Entity type of rows that have none (food, authors, ...).")
@click.option("--side", type=click.Choice(["local", "western"]), default=None,
              help="Side of rows that have none.")
@click.option("--status", type=click.Choice(["candidate", "accepted", "rejected"]), default=None,
              help="Status of rows that have none (default accepted).")
@json_option
@pass_ctx
def entities_import(ctx, path, language, type_, side, status, as_json):
    """Import entities from a JSONL or CSV file (columns language, type, side, native, english, country)."""

    summary("Entities imported", import_entities(ctx.project, path, language=language, type=type_, side=side,
                                                 status=status), as_json)

@entities.command("collect-wikidata")
@click.option("--country", default=None, help="Country code whose entities to collect (e.g. JP); not with --western.")
@click.option("--western", is_flag=True, help="Collect Western entities of every Western country in one pass, "
              "labelled in all the study's languages (seed 001 §3.1; countries and languages: "
              "data/wikidata_classes.toml [western]).")
@click.option("--language", "languages", multiple=True,
              help="Label language (default: the country's language; with --western: the 9 Camellia languages).")
@click.option("--min-languages", type=bounded(MIN_LANGUAGES), default=None,
              help="With --western: keep entities written in at least this many of the languages (default 6 "
                   "for authors, location, sports_clubs as in the paper; 1 otherwise).")
@click.option("--type", "types", multiple=True, help="Entity type(s) from data/wikidata_classes.toml "
              "(default: all).")
@click.option("--side", type=click.Choice(["local", "western"]), default="local", show_default=True,
              help="Record the entities of --country as local or Western.")
@click.option("--limit", type=bounded(LIMIT), default=500, show_default=True, help="Entities per type.")
@click.option("--endpoint", default=None, help="SPARQL endpoint (default: the public Wikidata endpoint).")
@json_option
@pass_ctx
def entities_wikidata(ctx, country, western, languages, min_languages, types, side, limit, endpoint, as_json):
    """Collect candidate entities from Wikidata by class (seed 001 Table 4): one country's entities, or with
    --western the parallel Western set across all Western countries."""

    if western == bool(country):
        raise click.UsageError("Give either --country CODE or --western.")
    if western:
        out = collect_western_wikidata(ctx.project, types=list(types) or None, languages=list(languages) or None,
                                       min_languages=min_languages, limit=limit,
                                       endpoint=endpoint or DEFAULT_ENDPOINT)
        summary("Wikidata collection (Western)", {t: v["inserted"] for t, v in out.items()}, as_json)
        return
    if len(languages) > 1:
        raise click.UsageError("--country takes one --language.")
    summary("Wikidata collection", collect_wikidata(ctx.project, country, language=languages[0] if languages
                                                    else None, types=list(types) or None, side=side,
                                                    limit=limit, endpoint=endpoint or DEFAULT_ENDPOINT), as_json)

@entities.command("extract")
@click.argument("corpus", type=click.Path(exists=True))
@click.option("--language", required=True, help="Language of the corpus; patterns come from "
              "data/patterns/<language>.toml.")
@click.option("--min-count", type=bounded(COUNT), default=1, show_default=True,
              help="Keep entities seen at least this often.")
@json_option
@pass_ctx
def entities_extract(ctx, corpus, language, min_count, as_json):
    """Extract candidate entities from a local text corpus (JSONL with 'text', or .txt files) by
    per-language patterns."""

    summary("Pattern extraction", extract_entities(ctx.project, corpus, language, min_count=min_count),
            as_json)

@entities.command("extract-llm")
@click.argument("corpus", type=click.Path(exists=True))
@click.option("--language", required=True, help="Language of the corpus (ISO 639-1).")
@click.option("--country", required=True, help="Country of the language's culture (e.g. JP): its entities are "
              "stored as local, Western ones as western.")
@click.option("--type", "type_", default=None, help="Entity type of the corpus texts (food, authors, ...); with "
              "--patterns, only windows of this type.")
@click.option("--patterns", "from_patterns", is_flag=True, help="Send the windows of the language's window "
              "patterns (data/patterns/<language>.toml) instead of whole lines, as the paper did for zh/ja.")
@click.option("--model", default=None, help="Chat model (default: the project's [llm] model).")
@click.option("--max-texts", type=bounded(COUNT), default=None, help="Stop after this many texts.")
@json_option
@pass_ctx
def entities_extract_llm(ctx, corpus, language, country, type_, from_patterns, model, max_texts, as_json):
    """Extract candidate entities of both sides (local culture and Western) from a corpus with an LLM
    (seed 001 §3.1); every call is logged in llm_calls."""

    summary("LLM extraction", llm_extract_entities(ctx.project, corpus, language, country=country, type=type_,
                                                   from_patterns=from_patterns, model=model,
                                                   max_texts=max_texts), as_json)

@entities.command("list")
@click.option("--language", default=None, help="Only this language.")
@click.option("--type", "type_", default=None, help="Only this entity type.")
@click.option("--side", type=click.Choice(["local", "western"]), default=None, help="Only this side.")
@click.option("--status", default="accepted", show_default=True,
              help="candidate, accepted, rejected or 'any'.")
@json_option
@pass_ctx
def entities_list(ctx, language, type_, side, status, as_json):
    """List entities."""

    rows = list_entities(ctx.project, language=language, type=type_, side=side,
                         status=None if status == "any" else status)
    cols = ["id", "language", "type", "side", "native", "english", "status", "source"]
    listing("Entities", rows, as_json, cols)

@entities.command("counts")
@click.option("--by", default="language,type,side", show_default=True,
              help="Comma-separated columns to group by: language, type, side, country, status, source "
                   "(seed 001 Table 2: language,type,side; Figure 7: --by type,country on Western entities).")
@click.option("--side", type=click.Choice(["local", "western"]), default=None, help="Only this side.")
@click.option("--status", default="accepted", show_default=True, help="candidate, accepted, rejected or 'any'.")
@json_option
@pass_ctx
def entities_counts(ctx, by, side, status, as_json):
    """Count entities per group (the shape of seed 001 Table 2 and Figure 7)."""

    cols = [c.strip() for c in by.split(",") if c.strip()]
    rows = entity_counts(ctx.project, by=cols + (["side"] if side and "side" not in cols else []),
                         status=None if status == "any" else status)
    if side:
        rows = [r for r in rows if r["side"] == side]
    listing("Entities", rows, as_json)


COMMANDS = [entities]
