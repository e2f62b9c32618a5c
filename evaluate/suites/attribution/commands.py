"""``cultura kb|attribution …``: the knowledge base and the attribution runs (seed 004, CAIRe). Thin: each
command calls one library function and prints its result."""
from __future__ import annotations

import click

from ....console import emit_json, json_option, listing, pass_ctx, summary, table


def attribution_config(project) -> dict:
    """The ``[evaluate.attribution]`` table of cultura.toml (empty when absent)."""
    return dict((getattr(project.config, "evaluate", None) or {}).get("attribution") or {})


@click.group("kb")
def kb():
    """The knowledge base used to link images to entities (seed 004)."""

@kb.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--kb", "kb_name", default="default", show_default=True, help="Name of the knowledge base.")
@json_option
@pass_ctx
def kb_import(ctx, path, kb_name, as_json):
    """Import KB entities from JSONL or CSV (columns id, lemma, gloss, text, images, frequency)."""
    from .kb import import_kb

    summary("Knowledge base", import_kb(ctx.project, path, kb=kb_name), as_json)

@click.group("attribution")
def attribution():
    """Cultural attribution of the project's images (CAIRe): judge scores and their evaluation."""

@attribution.command("run")
@click.option("--encoder", default=None,
              help="Vision-language embedder spec for the KB index and linking, e.g. "
                   "openclip:ViT-B-16-SigLIP-i18n-256/webli (mSigLIP, the seed's); default: [evaluate.attribution] "
                   "encoder in cultura.toml. There is no built-in default.")
@click.option("--judge", required=True, help="Judge spec: openai:MODEL, openai-vision:MODEL or stub.")
@click.option("--kb", "kb_name", default="default", show_default=True, help="Knowledge base name.")
@click.option("--culture", "--country", "countries", multiple=True,
              help="Culture label(s): a country code, a registered label or free text such as Shinto "
                   "(repeatable; default: the project's countries).")
@click.option("--k", type=click.IntRange(1), default=20, show_default=True, help="KB images retrieved.")
@click.option("--method", type=click.Choice(["lemma", "gloss", "frequency"]), default="lemma",
              show_default=True, help="Re-ranking of the linked entities.")
@click.option("--context", type=click.Choice(["entity", "titles"]), default="entity", show_default=True,
              help="Give the judge the top entity's text or the top-k titles.")
@click.option("--limit", type=click.IntRange(1), default=None, help="At most this many pairs this run.")
@json_option
@pass_ctx
def attribution_run(ctx, encoder, judge, kb_name, countries, k, method, context, limit, as_json):
    """Score every image x culture label with the judge (resumable)."""
    from .run import run_attribution

    encoder = encoder or attribution_config(ctx.project).get("encoder")
    if not encoder:
        raise click.UsageError("No encoder: pass --encoder SPEC (e.g. --encoder openclip:ViT-B-16-SigLIP-i18n-256/webli, "
                               "the seed's mSigLIP) or set [evaluate.attribution] encoder = \"...\" in cultura.toml.")
    summary("Attribution", run_attribution(ctx.project, encoder, judge, kb=kb_name,
                                           countries=list(countries) or None, k=k, method=method,
                                           context=context, limit=limit), as_json)

@attribution.command("evaluate")
@click.option("--ratings", type=click.Path(exists=True, dir_okay=False), default=None,
              help="CAIRe-style ratings file (sha256, country, rating) instead of the relevance campaign.")
@click.option("--threshold", type=float, default=4.0, show_default=True,
              help="Relevant when score >= this (seed 004 App. C.7; 4 = Table 1's 'greater than 3').")
@click.option("--aggregation", type=click.Choice(["per_concept", "pooled"]), default="per_concept",
              show_default=True, help="Pearson per concept within each country, averaged (Table 2), or pooled.")
@json_option
@pass_ctx
def attribution_evaluate(ctx, ratings, threshold, aggregation, as_json):
    """Precision, recall, F1 (score >= threshold) and Pearson of the stored scores against human ratings."""
    from .evaluation import evaluate_attribution

    rows = evaluate_attribution(ctx.project, ratings=ratings, threshold=threshold, aggregation=aggregation)
    if as_json:
        emit_json(rows)
        return
    table(f"Attribution vs human ratings (relevant: score >= {threshold:g}; Pearson {aggregation.replace('_', ' ')})",
          [{k: v for k, v in r.items() if k not in ("per_country", "by_threshold")} for r in rows],
          ["judge", "encoder", "context", "n", "precision", "recall", "f1", "pearson"])


@click.group("culture")
def culture():
    """Culture labels beside the countries (a religion, an ethnic group, a state...; seed 004)."""


@culture.command("add")
@click.argument("label")
@click.option("--name", default=None, help="Display name (default: the label).")
@click.option("--country", default=None, help="ISO country code the label belongs to, if any.")
@click.option("--language", default=None, help="ISO 639 language code, if any.")
@click.option("--description", default=None, help="A short description, given to the judge with the name.")
@json_option
@pass_ctx
def culture_add(ctx, label, name, country, language, description, as_json):
    """Register (or update) a culture label."""
    from ....cultures import add_culture_label

    summary("Culture label", add_culture_label(ctx.project, label, name=name, country=country, language=language,
                                               description=description), as_json)


@culture.command("list")
@json_option
@pass_ctx
def culture_list(ctx, as_json):
    """The project's countries and registered culture labels."""
    from ....cultures import registered_labels, resolve_culture

    rows = [vars(resolve_culture(ctx.project, c.code)) for c in ctx.project.countries]
    rows += [vars(lab) for lab in registered_labels(ctx.project)]
    listing("Culture labels", rows, as_json, ["key", "name", "kind", "country", "language", "description"])


COMMANDS = [kb, attribution, culture]
