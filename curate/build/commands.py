"""CLI commands of benchmark assembly: ``build …``, ``export`` and ``import …`` (thin wrappers)."""
from __future__ import annotations

import click
from rich.markup import escape

from ...console import emit_json, json_option, listing, out, pass_ctx, summary, table
from ..importers import import_captions, import_globalrg, import_ratings
from ..releases import import_3xcm_benchmark, import_3xcm_images, import_globalrg_release
from .build import build_benchmark, build_stats, list_benchmarks
from .export import export_benchmark
from .hub import push_to_hub
from .queries import build_mention_queries, build_queries, list_queries, set_query


def _csv(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


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
        click.option("--version", "version", type=int,
                     help="Version number (default: the next one); an existing name+version is an error."),
        click.option("--seed", type=int, default=0, show_default=True, help="Random seed (an integer)."),
        click.option("--per-pair", type=click.IntRange(min=1), default=1, show_default=True,
                     help="Trials per concept × query country (× descriptor) cell."),
        click.option("--concepts", help="Comma-separated concept names (default: every active concept)."),
        click.option("--countries", help="Comma-separated query countries (default: the project's)."),
        click.option("--allow-unreviewed", is_flag=True,
                     help="Build even though no filter decision exists (images are then unreviewed)."),
        click.option("--min-relevance", type=float, default=4.0, show_default=True,
                     help="When relevance ratings exist, drop image cultures rated below this mean score."),
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
                        concepts=_csv(concepts), countries=_csv(countries), allow_unreviewed=allow_unreviewed,
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
                        concepts=_csv(concepts), countries=_csv(countries), descriptors=_csv(descriptors),
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
                        model=model, concepts=_csv(concepts), overwrite=overwrite)
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

    res = build_mention_queries(ctx.project, method=method, model=model, concepts=_csv(concepts),
                                countries=_csv(countries), descriptors=_csv(descriptors), overwrite=overwrite)
    if as_json:
        return emit_json(res)
    summary("Queries: mention", res)


@build.command("set-query")
@click.argument("concept")
@click.argument("country")
@click.argument("variant")
@click.argument("text")
@json_option
@pass_ctx
def set_query_cmd(ctx, concept, country, variant, text, as_json):
    """Set the TEXT of one query VARIANT (short, task, casual, task_mention_CC …) for CONCEPT × COUNTRY by
    hand; it is never overwritten by 'build queries'."""

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
@click.option("--min-images", type=click.IntRange(min=1), default=3, show_default=True,
              help="A concept × country cell with fewer images is a coverage hole.")
@click.option("--benchmark", help="Count the images of this benchmark (NAME or NAME@VERSION) instead of the "
                                  "eligible pool.")
@json_option
@pass_ctx
def build_stats_cmd(ctx, min_images, benchmark, as_json):
    """Images per country and per concept (seed 000 Tables 9 and 10) and coverage holes."""

    s = build_stats(ctx.project, min_images=min_images, benchmark=benchmark)
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


@click.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--benchmark", "benchmarks", multiple=True,
              help="NAME or NAME@VERSION (repeatable; default: the latest version of every benchmark).")
@click.option("--format", "fmt", type=click.Choice(["parquet", "jsonl", "webdataset"]), default="parquet",
              show_default=True, help="Table format (webdataset: JSON Lines tables + images.tar).")
@click.option("--no-images", is_flag=True, help="Do not copy the image files (metadata only).")
@click.option("--embed-images", is_flag=True,
              help="Store the image bytes inside the Parquet files (one self-contained file per config) instead "
                   "of an images/ folder whose paths the datasets loader resolves.")
@click.option("--push-to-hub", "repo", metavar="OWNER/NAME",
              help="After exporting, upload the folder to this Hugging Face Hub dataset repository (token from "
                   "the HF_TOKEN environment variable; endpoint HF_ENDPOINT).")
@click.option("--private", is_flag=True, help="With --push-to-hub: create the repository as private.")
@json_option
@pass_ctx
def export(ctx, directory, benchmarks, fmt, no_images, embed_images, repo, private, as_json):
    """Export benchmarks to DIRECTORY (new or empty) as a Hugging Face dataset: ready-to-evaluate configs
    (datasets.load_dataset(DIRECTORY) loads the default one, split test), the normalised tables, images, a
    validated README.md dataset card and croissant.json."""

    r = export_benchmark(ctx.project, directory, benchmarks=list(benchmarks) or None, fmt=fmt,
                         images=not no_images, embed_images=embed_images)
    if repo:
        r["hub"] = push_to_hub(r["dir"], repo, private=private)
    if as_json:
        return emit_json(r)
    out.print(f"Exported {', '.join(r['benchmarks'])} to [bold]{r['dir']}[/bold]: {r['items']} trials, "
              f"{r['images']} images, {r['queries']} queries ({r['format']}); configs: {', '.join(r['configs'])}.")
    if repo:
        out.print(f"Pushed to [bold]{r['hub']['repo']}[/bold] ({r['hub']['url']}).")


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
@click.option("--version", type=int, help="With --trials: the benchmark version (default: the next one).")
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


COMMANDS = [build, export, import_]
