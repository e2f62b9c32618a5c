"""``cultura contexts …``: masked contexts ([MASK]) for the LLM suite (seed 001): grounded, neutral and
extractive-QA."""
from __future__ import annotations

import click

from ..curate.contexts import context_counts, import_contexts, list_contexts
from .console import json_option, listing, pass_ctx, summary


@click.group("contexts")
def contexts():
    """Masked contexts ([MASK]) for the LLM suite: grounded, neutral and extractive-QA."""

@contexts.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--language", default=None, help="Language of rows that have none.")
@click.option("--kind", type=click.Choice(["grounded", "neutral", "qa"]), default=None,
              help="Kind of rows that have none.")
@click.option("--type", "type_", default=None, help="Entity type of rows that have none.")
@click.option("--status", type=click.Choice(["active", "candidate"]), default=None,
              help="Status of rows that have none (default active; candidate: annotate them first with "
                   "'cultura annotate push context').")
@json_option
@pass_ctx
def contexts_import(ctx, path, language, kind, type_, status, as_json):
    """Import (or update) masked contexts from JSONL or CSV (columns language, kind, type, text,
    sentiment, english, parallel_id, country, status)."""

    summary("Contexts imported", import_contexts(ctx.project, path, language=language, kind=kind, type=type_,
                                                 status=status), as_json)

@contexts.command("list")
@click.option("--language", default=None, help="Only this language.")
@click.option("--kind", default=None, help="Only this kind (grounded, neutral, qa).")
@click.option("--type", "type_", default=None, help="Only this entity type.")
@json_option
@pass_ctx
def contexts_list(ctx, language, kind, type_, as_json):
    """List active masked contexts."""

    rows = list_contexts(ctx.project, language=language, kind=kind, type=type_)
    listing("Contexts", rows, as_json, ["id", "language", "kind", "type", "sentiment",
                                                             "text"])

@contexts.command("counts")
@click.option("--status", default="active", show_default=True, help="active, candidate, excluded or 'any'.")
@json_option
@pass_ctx
def contexts_counts(ctx, status, as_json):
    """Contexts per language and kind, and their mean ± SD length (seed 001 Tables 3 and 5: words, characters
    for zh/ja)."""

    listing("Contexts", context_counts(ctx.project, status=None if status == "any" else status), as_json)


COMMANDS = [contexts]
