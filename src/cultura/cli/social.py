"""``cultura social …``: labelled portrait sets and prompt inventories for the social-bias audit (seed 003).
Thin: each command calls one function of :mod:`cultura.evaluate.suites.social.data` and prints its result; the audit
itself runs with ``cultura evaluate run --suite social``."""
from __future__ import annotations

import json

import click

from ..bounds import COUNT, SEED
from ..evaluate.suites.social.data import import_portraits, inventories, portrait_sets
from ..evaluate.suites.social.sampling import sample_balanced
from ..evaluate.suites.social.synthetic import SYNTHETIC_PER_CELL, make_synthetic_portraits
from ..evaluate.suites.social.translate import export_translation_items, translate_inventory
from ..evaluate.suites.social.validation import translation_validation
from .console import bounded, emit_json, json_option, listing, out, overwrite_option, pass_ctx, summary, table


@click.group("social")
def social():
    """Portrait sets and prompt inventories of the social-bias audit (run it with 'evaluate run --suite social')."""

@social.command("import-portraits")
@click.argument("table_path", metavar="TABLE", type=click.Path(exists=True, dir_okay=False))
@click.option("--images", "images_dir", required=True, type=click.Path(exists=True, file_okay=False),
              help="Folder the table's image paths are relative to.")
@click.option("--dataset", required=True, help="Name of the portrait set (e.g. fairface-val, pata-test).")
@click.option("--layout", type=click.Choice(["fairface", "pata", "generic"]), default="fairface",
              show_default=True, help="Column layout of the table (seed 003 App. A.3); generic = any table "
                                      "with an image column and gender and/or race columns.")
@click.option("--synthetic", is_flag=True, help="Mark the set as synthetic (generated, not real people).")
@json_option
@pass_ctx
def import_cmd(ctx, table_path, images_dir, dataset, layout, synthetic, as_json):
    """Import a labelled portrait table (CSV/TSV/JSONL/Parquet) and its images; failed rows keep their reason."""

    res = import_portraits(ctx.project, table_path, images_dir, dataset, layout=layout, synthetic=synthetic)
    summary(f"Portraits: {dataset}", {**{k: v for k, v in res.items() if k != "reasons"},
                                      "reasons": json.dumps(res["reasons"], ensure_ascii=False)}, as_json)

@social.command("portraits")
@json_option
@pass_ctx
def portraits_cmd(ctx, as_json):
    """List the imported portrait sets with their counts."""

    rows = portrait_sets(ctx.project)
    listing("Portrait sets", rows, as_json, ["dataset", "layout", "synthetic", "n_ok", "n_failed", "source",
                                             "updated_at"])

@social.command("inventories")
@json_option
@pass_ctx
def inventories_cmd(ctx, as_json):
    """List the prompt inventories per language with their axes and validation status."""

    rows = inventories(ctx.project)
    listing("Prompt inventories", rows, as_json,
            ["language", "status", "axes", "n_prompts", "n_rated", "n_accepted", "mean_score", "source"],
            shown=[{**r, "axes": ", ".join(r["axes"])} for r in rows])

@social.command("translation-items")
@click.argument("language")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="JSONL file to write (push it with 'cultura annotate push translation --from FILE').")
@overwrite_option
@json_option
@pass_ctx
def translation_items_cmd(ctx, language, out_path, overwrite, as_json):
    """Write one language's inventory prompts with their English sources for the translation campaign."""

    res = export_translation_items(ctx.project, language, out_path, overwrite=overwrite)
    if as_json:
        return emit_json(res)
    out.print(f"{res['items']} translation item(s) for {language} written to {out_path}")

@social.command("translate-inventory")
@click.argument("language")
@click.option("--model", default=None, help="LLM model to translate with (default: llm.model in cultura.toml).")
@click.option("--section", "sections", multiple=True,
              type=click.Choice(["demographic", "crime", "non_human", "communion", "agency"]),
              help="Translate only this section (repeatable; default: every section the language lacks).")
@click.option("--overwrite", is_flag=True,
              help="Translate sections the language already has too, replacing the project's copy.")
@json_option
@pass_ctx
def translate_inventory_cmd(ctx, language, model, sections, overwrite, as_json):
    """Translate the English prompt inventory into LANGUAGE with the LLM (unvalidated until rated)."""

    res = translate_inventory(ctx.project, language, model=model, sections=list(sections) or None,
                              overwrite=overwrite)
    if as_json:
        emit_json(res)
        return
    table(f"Inventory translation: {language} ({res['model']})", res["sections"],
          ["section", "status", "n_prompts", "reason", "llm_call"])
    v = res["validation"]
    out.print(f"{res['path'] if res['written'] else 'Nothing written'}; validation status: {v['status']} "
              f"(rate it with 'cultura social translation-items {language} --out FILE' and the "
              "'translation' annotation campaign)")

@social.command("synthetic-portraits")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--per-cell", type=bounded(SYNTHETIC_PER_CELL), default=2, show_default=True,
              help="Images per race × gender cell.")
@click.option("--seed", type=bounded(SEED), default=0, show_default=True, help="Random seed of the drawings.")
@click.option("--overwrite", is_flag=True, help="Replace the set's files in DIRECTORY if they exist (default: "
                                                "refuse).")
@json_option
def synthetic_cmd(directory, per_cell, seed, overwrite, as_json):
    """Draw a tiny synthetic labelled portrait set (cartoon faces, FairFace layout) to try the audit."""

    path = make_synthetic_portraits(directory, per_cell=per_cell, seed=seed, overwrite=overwrite)
    if as_json:
        return emit_json({"labels": str(path), "images": str(directory)})
    out.print(f"Wrote {path}; import it with 'cultura social import-portraits {path} --images {directory} "
              "--dataset synthetic --synthetic'")


@social.command("sample-portraits")
@click.argument("dataset")
@click.option("--into", required=True, help="Name of the new, balanced portrait set.")
@click.option("--per-cell", type=bounded(COUNT), default=None,
              help="Portraits per gender × race cell (default: the smallest cell's size).")
@click.option("--seed", type=bounded(SEED), default=0, show_default=True, help="Seed of the draw (reproducible).")
@click.option("--race", "races", multiple=True, help="Only these races (repeatable; default every race).")
@click.option("--overwrite", is_flag=True, help="Replace an existing set of that name.")
@json_option
@pass_ctx
def sample_cmd(ctx, dataset, into, per_cell, seed, races, overwrite, as_json):
    """Draw a balanced FairFace-style sample (equal cells per gender × race, seeded) as a new portrait set
    (seed 003 App. A.3: 782 per cell)."""

    res = sample_balanced(ctx.project, dataset, into, per_cell=per_cell, seed=seed, races=list(races) or None,
                          overwrite=overwrite)
    summary(f"Balanced sample: {into}", {k: (json.dumps(v) if isinstance(v, (dict, list)) else v)
                                          for k, v in res.items()}, as_json)

@social.command("translation-validation")
@click.option("--unit", type=click.Choice(["item", "rating"]), default="item", show_default=True,
              help="item: each prompt's decided rating (median of its raters); rating: every rater's score.")
@click.option("--language", "languages", multiple=True, help="Only these languages (repeatable).")
@json_option
@pass_ctx
def translation_validation_cmd(ctx, unit, languages, as_json):
    """Summaries of the translation campaign per language (seed 003 App. E Tables 12–13): rating bands, mean,
    population SD, share ≥ 4, beside the seed's own numbers."""

    rows = translation_validation(ctx.project, unit=unit, languages=list(languages) or None)
    shown = [{k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()} for r in rows]
    listing("Translation validation (seed 003 Tables 12-13)", rows, as_json, shown=shown)

COMMANDS = [social]
