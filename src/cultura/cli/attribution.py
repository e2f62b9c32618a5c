"""``cultura attribution …``: the attribution runs of seed 004 (CAIRe) and their evaluation. Thin: each command
calls one library function and prints its result."""
from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..bounds import COUNT
from ..evaluate.suites.attribution.baseline import run_baseline
from ..evaluate.suites.attribution.evaluation import (THRESHOLD, evaluate_attribution, human_ratings,
                                                     upper_bound_ratios)
from ..evaluate.suites.attribution.gold import import_gold, load_gold
from ..evaluate.suites.attribution.kb import build_kb_index
from ..evaluate.suites.attribution.linking import LINKING_K, METHODS, TOP_K, linking_accuracy
from ..evaluate.suites.attribution.loglik import ALPHA, TAU, run_loglik
from ..evaluate.suites.attribution.run import project_images, run_attribution
from ..executor import use_executor
from ..models.embedders import get_embedder
from .console import bounded, emit_json, executor_option, json_option, option, pass_ctx, summary, table

if TYPE_CHECKING:
    from ..project import Project


def attribution_config(project: Project) -> dict:
    """The ``[evaluate.attribution]`` table of cultura.toml (empty when absent)."""
    return dict(project.config.evaluate.attribution)


def _executor(ctx, executor):
    """The executor of an attribution command (default ``evaluate.executor``), for the command's duration."""
    return use_executor(executor or ctx.project.config.evaluate.executor, config=ctx.project.config)


@click.group("attribution")
def attribution():
    """Cultural attribution of the project's images (CAIRe): judge scores and their evaluation."""

@attribution.command("run")
@option("--model", "encoder", old="--encoder", default=None,
              help="Vision-language embedder spec for the KB index and linking, e.g. "
                   "openclip:ViT-SO400M-16-SigLIP-i18n-256/webli (mSigLIP, the seed's); default: [evaluate.attribution] "
                   "encoder in cultura.toml. There is no built-in default.")
@click.option("--judge", required=True,
              help="Judge spec: openai:MODEL, openai-vision:MODEL (constrained 1-5), openai-cot:MODEL, "
                   "openai-vision-cot:MODEL (chain of thought, 'Score: N') or stub.")
@click.option("--kb", "kb_name", default="default", show_default=True, help="Knowledge base name.")
@click.option("--culture", "--country", "countries", multiple=True,
              help="Culture label(s): a country code, a registered label or free text such as Shinto "
                   "(repeatable; default: the project's countries).")
@option("--top-k", "k", old="--k", type=bounded(TOP_K), default=20, show_default=True, help="KB images retrieved.")
@click.option("--method", type=click.Choice(["lemma", "gloss", "frequency", "lemma-t", "gloss-t", "text-t"]),
              default="lemma", show_default=True,
              help="Entity linking: V-T re-ranking (lemma, gloss, frequency) or text keys only (*-t; App. A.3).")
@click.option("--context", type=click.Choice(["entity", "titles", "gold", "none"]), default="entity",
              show_default=True,
              help="What the judge reads: the top entity's text, the top-k titles, the gold entity's text "
                   "(upper bound, App. C.5) or nothing (VLM baseline, §5.2; no encoder needed).")
@click.option("--limit", type=bounded(COUNT), default=None, help="At most this many pairs this run.")
@click.option("--rated-only", is_flag=True,
              help="Only pairs with a human rating or gold label (e.g. the imported CAIRe specific set).")
@executor_option("evaluate")
@json_option
@pass_ctx
def attribution_run(ctx, encoder, judge, kb_name, countries, k, method, context, limit, rated_only, executor,
                    as_json):
    """Score every image x culture label with the judge (resumable)."""

    encoder = None if context == "none" else _encoder(ctx.project, encoder)
    with _executor(ctx, executor):
        res = run_attribution(ctx.project, encoder, judge, kb=kb_name, countries=list(countries) or None, k=k,
                              method=method, context=context, limit=limit, rated_only=rated_only)
    summary("Attribution", res, as_json)


def _encoder(project: Project, encoder):
    encoder = encoder or attribution_config(project).get("encoder")
    if not encoder:
        raise click.UsageError("No encoder: pass --model SPEC (e.g. --model "
                               "openclip:ViT-SO400M-16-SigLIP-i18n-256/webli, "
                               "the seed's mSigLIP) or set [evaluate.attribution] encoder = \"...\" in cultura.toml.")
    return encoder


ENCODER_HELP = ("Vision-language embedder spec (e.g. openclip:ViT-SO400M-16-SigLIP-i18n-256/webli); default: "
                "[evaluate.attribution] encoder. No built-in default.")


@attribution.command("baseline")
@option("--model", "encoder", old="--encoder", default=None, help=ENCODER_HELP)
@click.option("--culture", "--country", "countries", multiple=True,
              help="Culture label(s) (repeatable; default: the labels of rated pairs, else the project's countries).")
@executor_option("evaluate")
@json_option
@pass_ctx
def attribution_baseline(ctx, encoder, countries, executor, as_json):
    """Encoder probe baseline (seed 004 §5.1, Baseline 1): 'This image is {level} to {culture}'."""

    labels = list(countries) or sorted({c for _, c in human_ratings(ctx.project)}) or \
        [c.code for c in ctx.project.countries]
    emb = get_embedder(_encoder(ctx.project, encoder))
    with _executor(ctx, executor):
        res = run_baseline(ctx.project, emb, [s for s, _ in project_images(ctx.project)], labels)
    summary("Encoder baseline", {"encoder": emb.identity, **res}, as_json)


@attribution.command("loglik")
@option("--model", "encoder", old="--encoder", default=None, help=ENCODER_HELP)
@click.option("--scorer", required=True, help="LM scorer spec: hf:NAME_OR_PATH or openai:MODEL (completions).")
@click.option("--kb", "kb_name", default="default", show_default=True, help="Knowledge base name.")
@click.option("--culture", "--country", "countries", multiple=True,
              help="Culture label(s) (repeatable; default: the project's countries).")
@option("--top-k", "k", old="--k", type=bounded(TOP_K), default=20, show_default=True, help="KB images retrieved.")
@click.option("--context", type=click.Choice(["entity", "gold"]), default="entity", show_default=True,
              help="Condition on the retrieved top entity's text or on the gold entity's text.")
@click.option("--alpha", type=bounded(ALPHA), default=1.0, show_default=True,
              help="Weight of the base-rate correction.")
@click.option("--tau", type=bounded(TAU), default=-30.0, show_default=True,
              help="Cap (nats) on the base rate; none: no cap.")
@click.option("--limit", type=bounded(COUNT), default=None, help="At most this many images this run.")
@executor_option("evaluate")
@json_option
@pass_ctx
def attribution_loglik(ctx, encoder, scorer, kb_name, countries, k, context, alpha, tau, limit, executor, as_json):
    """Log-likelihood relevance with affine debiasing (seed 004 App. B.1), stored beside the judge scores."""

    with _executor(ctx, executor):
        res = run_loglik(ctx.project, _encoder(ctx.project, encoder), scorer, kb=kb_name,
                         labels=list(countries) or None, k=k, context=context, alpha=alpha, tau=tau, limit=limit)
    summary("Log-likelihood attribution", res, as_json)


@attribution.command("gold")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--kb", "kb_name", default="default", show_default=True,
              help="Knowledge base whose lemmas/aliases a 'lemma' or 'concept' column is matched to.")
@json_option
@pass_ctx
def attribution_gold(ctx, path, kb_name, as_json):
    """Import gold entities of images (sha256 or path; entity_id, or lemma/concept matched to the KB)."""

    summary("Gold entities", import_gold(ctx.project, path, kb=kb_name), as_json)


@attribution.command("linking")
@option("--model", "encoder", old="--encoder", default=None, help=ENCODER_HELP)
@click.option("--kb", "kb_name", default="default", show_default=True, help="Knowledge base name.")
@click.option("--method", "methods", multiple=True,
              type=click.Choice(["lemma", "gloss", "frequency", "lemma-t", "gloss-t", "text-t"]),
              help="Linking method(s) (repeatable; default: all six of App. A.3).")
@option("--top-k", "k", old="--k", type=bounded(LINKING_K), default=20, show_default=True,
              help="Candidates retrieved (KB images for V-T, text keys for T); at least 20 for Acc@20.")
@executor_option("evaluate")
@json_option
@pass_ctx
def attribution_linking(ctx, encoder, kb_name, methods, k, executor, as_json):
    """Linking accuracy Acc@1/5/10/20 against the gold entities (seed 004 App. A.3, Table 3 shape)."""

    gold = load_gold(ctx.project)
    if not gold:
        raise click.UsageError("No gold entities: import them with 'cultura attribution gold FILE'.")
    emb = get_embedder(_encoder(ctx.project, encoder))
    methods = list(methods) or list(METHODS)
    with _executor(ctx, executor):
        index = build_kb_index(ctx.project, emb, kb_name, with_text="text-t" in methods)
        rows = linking_accuracy(ctx.project, emb, index, gold, methods=methods, k=k)
    if as_json:
        emit_json(rows)
        return
    table(f"Entity linking accuracy vs gold ({len(gold)} images; seed 004 Table 3 shape)",
          [{"method": r["label"], **{f"@{kk}": round(100 * v, 2) for kk, v in r["acc"].items()}, "n": r["n"],
            "gold not in KB": r["n_gold_missing"]} for r in rows],
          ["method", "@1", "@5", "@10", "@20", "n", "gold not in KB"])

@attribution.command("evaluate")
@click.option("--ratings", type=click.Path(exists=True, dir_okay=False), default=None,
              help="CAIRe-style ratings file (sha256, country, rating) instead of the relevance campaign.")
@click.option("--threshold", type=bounded(THRESHOLD), default=3.0, show_default=True,
              help="Relevance threshold: with --rule gt relevant when score > this (seed 004 Table 1: > 3).")
@click.option("--rule", type=click.Choice(["gt", "ge"]), default="gt", show_default=True,
              help="gt: score > threshold (seed 004 §5.4, the paper's rule); ge: score >= threshold (App. C.7).")
@click.option("--aggregation", type=click.Choice(["per_concept", "pooled"]), default="per_concept",
              show_default=True, help="Pearson per concept within each country, averaged (Table 2), or pooled.")
@json_option
@pass_ctx
def attribution_evaluate(ctx, ratings, threshold, rule, aggregation, as_json):
    """Precision, recall, F1 (score > threshold) and Pearson of the stored scores against human ratings."""

    rows = evaluate_attribution(ctx.project, ratings=ratings, threshold=threshold, aggregation=aggregation,
                                rule=rule)
    ratios = upper_bound_ratios(rows)
    if as_json:
        emit_json({"results": rows, "gold_upper_bound": ratios})
        return
    if ratios:
        table("F1 with retrieved pages / F1 with gold pages, % (seed 004 App. C.5, Table 11)", ratios,
              ["judge", "encoder", "f1_retrieved", "f1_gold", "ratio"])
    rel = f"score {'>' if rule == 'gt' else '>='} {threshold:g}"
    table(f"Attribution vs human ratings (relevant: {rel}; Pearson {aggregation.replace('_', ' ')})",
          [{k: v for k, v in r.items() if k not in ("per_country", "by_threshold")} for r in rows],
          ["judge", "encoder", "context", "n", "precision", "recall", "f1", "pearson"])


COMMANDS = [attribution]
