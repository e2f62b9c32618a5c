"""CLI commands that bring existing datasets into the project: ``import …`` (GlobalRG, captions, ratings, 3XCM)."""
from __future__ import annotations

import click

from ..benchmark.releases import import_3xcm_benchmark, import_3xcm_images, import_globalrg_release
from ..annotate.ratings import import_ratings
from ..bounds import VERSION
from ..curate.importers import import_captions, import_globalrg
from .console import bounded, emit_json, json_option, pass_ctx, summary, table


@click.group("import")
def import_():
    """Bring existing datasets (GlobalRG, Crossmodal-3600 captions, CAIRe ratings) into the project."""


def _import_result(r: dict, title: str, as_json: bool) -> None:
    if as_json:
        return emit_json(r)
    summary(title, {k: v for k, v in r.items() if k != "failures"})
    if r.get("failures"):
        table("Failed rows (first 20)", r["failures"])


@import_.command("globalrg")
@click.argument("table_path", metavar="TABLE", type=click.Path(exists=True, dir_okay=False))
@click.option("--images", "images_dir", required=True, type=click.Path(exists=True, file_okay=False),
              help="Folder holding the images named in TABLE.")
@click.option("--image-column", help="Column with the image file name (default: guessed).")
@click.option("--country-column", help="Column with the country or region (default: guessed).")
@click.option("--concept-column", help="Column with the universal concept (default: guessed).")
@json_option
@pass_ctx
def import_globalrg_cmd(ctx, table_path, images_dir, image_column, country_column, concept_column, as_json):
    """Import a GlobalRG-style TABLE (CSV/TSV/JSONL/Parquet: image, country, concept) and its images."""

    r = import_globalrg(ctx.project, table_path, images_dir, image_column=image_column,
                        country_column=country_column, concept_column=concept_column)
    _import_result(r, "GlobalRG import", as_json)


@import_.command("captions")
@click.argument("captions_path", metavar="CAPTIONS", type=click.Path(exists=True, dir_okay=False))
@click.option("--images", "images_dir", required=True, type=click.Path(exists=True, file_okay=False),
              help="Folder holding the images (named by image id).")
@json_option
@pass_ctx
def import_captions_cmd(ctx, captions_path, images_dir, as_json):
    """Import a Crossmodal-3600-style captions.jsonl (image id → captions per language) and its images."""

    _import_result(import_captions(ctx.project, captions_path, images_dir), "Captions import", as_json)


@import_.command("ratings")
@click.argument("path", metavar="FILE", type=click.Path(exists=True, dir_okay=False))
@click.option("--image-column", help="Column with the image sha256 or import key (default: guessed).")
@click.option("--country-column", help="Column with the rated country (default: guessed).")
@click.option("--score-column", help="Column with the 1–5 score (default: guessed).")
@json_option
@pass_ctx
def import_ratings_cmd(ctx, path, image_column, country_column, score_column, as_json):
    """Import CAIRe-style per-image culture ratings (image, country, 1–5 score) as relevance decisions."""

    r = import_ratings(ctx.project, path, image_column=image_column, country_column=country_column,
                       score_column=score_column)
    _import_result(r, "Ratings import", as_json)


def _column_map(pairs) -> dict:
    out = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k.strip() or not v.strip():
            raise click.BadParameter(f"{p!r} must look like FIELD=COLUMN (e.g. query=text).", param_hint="--column")
        out[k.strip()] = v.strip()
    return out


_column_option = click.option("--column", "column_map", multiple=True, metavar="FIELD=COLUMN",
                              help="Name the column of a FIELD when the guess is wrong (repeatable): image, "
                                   "concept, country; for trials also query, query_country, query_language, "
                                   "descriptor_country, a role (cr, lb, ti, orlb, or, cdr), ROLE_country, "
                                   "ROLE_concept.")


@import_.command("3xcm")
@click.argument("table_path", metavar="TABLE", type=click.Path(exists=True, dir_okay=False))
@click.option("--trials", is_flag=True, help="TABLE holds trials (one image column per role): import them as a "
                                             "ready benchmark instead of images with their concept and country.")
@click.option("--kind", type=click.Choice(["association", "descriptor"]),
              help="With --trials: the benchmark kind (default: descriptor when an orlb column exists).")
@click.option("--name", default="3xcm", show_default=True, help="With --trials: the benchmark name.")
@click.option("--version", type=bounded(VERSION), help="With --trials: the benchmark version (default: the next one).")
@click.option("--images", "images_dir", type=click.Path(exists=True, file_okay=False),
              help="Folder the table's image paths are relative to (default: the table's folder). Not needed "
                   "when the images are embedded as bytes.")
@_column_option
@json_option
@pass_ctx
def import_3xcm_cmd(ctx, table_path, trials, kind, name, version, images_dir, column_map, as_json):
    """Import the 3XCM release (seed 000) from a local Parquet/CSV/JSONL TABLE as published on the Hugging
    Face hub (images embedded as bytes or named by path): its image table, or with --trials its RQ2/RQ3
    trials as a benchmark the association/descriptor suites evaluate directly."""

    cols = _column_map(column_map)
    if trials:
        r = import_3xcm_benchmark(ctx.project, table_path, name=name, version=version, kind=kind,
                                  images_dir=images_dir, columns=cols)
    else:
        r = import_3xcm_images(ctx.project, table_path, images_dir=images_dir, columns=cols)
    _import_result(r, "3XCM import", as_json)


@import_.command("globalrg-parquet")
@click.argument("table_path", metavar="TABLE", type=click.Path(exists=True, dir_okay=False))
@click.option("--images", "images_dir", type=click.Path(exists=True, file_okay=False),
              help="Folder for image paths (default: the table's folder); not needed for embedded bytes.")
@_column_option
@json_option
@pass_ctx
def import_globalrg_parquet_cmd(ctx, table_path, images_dir, column_map, as_json):
    """Import GlobalRG-Retrieval as released (Parquet with the image bytes embedded, country/region,
    concept)."""

    r = import_globalrg_release(ctx.project, table_path, images_dir=images_dir, columns=_column_map(column_map))
    _import_result(r, "GlobalRG import", as_json)


COMMANDS = [import_]
