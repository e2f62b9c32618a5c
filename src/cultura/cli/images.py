"""CLI commands of the image pool: ``images …`` (search, ingest, download, de-duplicate, tag, review)."""
from __future__ import annotations

import click

from ..annotate.pool import list_clusters, list_images, members_text
from ..bounds import COUNT, from_field
from ..config import DownloadSection
from ..curate.dedup import THRESHOLDS, dedup_images
from ..curate.download import CHECKS, download_candidates
from ..curate.search import PER_QUERY, ingest_img2dataset, search_images, uses_queries
from ..curate.status import HAND_FLAGS, flags, list_failures, resolve_image_flags, set_image_status
from ..curate.tagging import TOP_K, tag_images
from .console import (bounded, executor_option, json_option, listing, model_option, option, pass_ctx, stage_hint,
                      summary)


@click.group()
def images():
    """Images: search, ingest, download, de-duplicate, tag."""


@images.command("search")
@click.option("--provider", help="ddgs, urls:PATH (JSONL/CSV/Parquet) or folder:DIR (default: search.provider).")
@click.option("--per-query", type=bounded(PER_QUERY), help="Results per query (default: search.per_query, 10).")
@option("--overwrite", "refresh", old="--refresh", is_flag=True, help="Search again queries that were already searched.")
@json_option
@pass_ctx
def images_search(ctx, provider, per_query, refresh, as_json):
    """Find candidate images for every query (resumable: done queries are skipped)."""

    if stage_hint(ctx, "search", as_json, when=uses_queries(provider or ctx.project.config.search.provider)):
        return
    res = search_images(ctx.project, provider=provider, per_query=per_query, refresh=refresh,
                        progress=True)
    summary("images search", res, as_json)


@images.command("ingest")
@click.argument("directory", type=click.Path(file_okay=False))
@json_option
@pass_ctx
def images_ingest(ctx, directory, as_json):
    """Read an img2dataset output folder back in (needs additional columns concept and country)."""

    summary("images ingest", ingest_img2dataset(ctx.project, directory), as_json)


@images.command("download")
@click.option("--workers", type=bounded(from_field(DownloadSection, "workers")),
              help="Concurrent downloads (default: download.workers, 32).")
@click.option("--retry-failed", is_flag=True, help="Also retry candidates that failed before, and those skipped by the "
              "address policy (re-examined anyway after a change of download.allow_hosts).")
@click.option("--limit", type=bounded(COUNT), help="Process at most this many candidates.")
@click.option("--check", type=click.Choice(CHECKS),
              help="decode: decode every image now (default: download.check); header: check JPEG/PNG/WebP headers "
              "and ends only, a quarter of the CPU; 'images dedup' decodes them, and they stay out of the pool "
              "until then.")
@click.option("--processes", type=bounded(COUNT),
              help="Event loops, each in its own process with its share of the hosts and connections (default: "
              "from 1,000 candidates on one per CPU for --check header and one per four CPUs when decoding, "
              "else 1).")
@json_option
@pass_ctx
def images_download(ctx, workers, retry_failed, limit, check, processes, as_json):
    """Download pending candidates safely (private addresses refused, bytes and pixels capped, content
    sniffed, files stored by content hash). Resumable after Ctrl-C or kill."""

    if stage_hint(ctx, "download", as_json):
        return
    res = download_candidates(ctx.project, workers=workers, retry_failed=retry_failed, limit=limit,
                              progress=True, check=check, processes=processes)
    summary("images download", res, as_json)


@images.command("dedup")
@click.option("--method", "methods", multiple=True, type=click.Choice(["sha256", "phash", "dhash", "embedding"]),
              help="Methods to run (repeatable; default: dedup.methods).")
@click.option("--scope", type=click.Choice(["within-concept", "global"]), help="Default: dedup.scope.")
@click.option("--phash-threshold", type=bounded(THRESHOLDS["phash_threshold"]),
              help="Hamming distance (bits) for pHash.")
@click.option("--dhash-threshold", type=bounded(THRESHOLDS["dhash_threshold"]),
              help="Hamming distance (bits) for dHash.")
@model_option("Embedder spec for the embedding method, e.g. openclip:ViT-B-32/openai.", old="--embedder")
@click.option("--embedding-threshold", type=bounded(THRESHOLDS["embedding_threshold"]),
              help="Cosine similarity for the embedding method.")
@click.option("--embedding-index", type=click.Choice(["auto", "exact", "ivf"]),
              help="Pair search of the embedding method: exact, IVF (approximate recall, exact precision) or "
                   "auto (exact up to 100k images per search). Default: dedup.embedding_index.")
@executor_option("dedup")
@json_option
@pass_ctx
def images_dedup(ctx, methods, scope, phash_threshold, dhash_threshold, model, embedding_threshold,
                 embedding_index, executor, as_json):
    """Find exact, perceptual and embedding duplicates; flag culture conflicts. Nothing is deleted."""

    if stage_hint(ctx, "dedup", as_json):
        return
    res = dedup_images(ctx.project, methods=list(methods) or None, scope=scope, phash_threshold=phash_threshold,
                       dhash_threshold=dhash_threshold, embedder=model, embedding_threshold=embedding_threshold,
                       progress=True, executor=executor, embedding_index=embedding_index)
    summary("images dedup", res, as_json)


@images.command("tag")
@click.option("--method", type=click.Choice(["auto", "llm", "clip"]), help="Default: tag.method (auto).")
@model_option("The model of the method: a vision chat model for llm (default: llm.vision_model) or an "
              "embedder spec for clip (default: tag.clip_model).", old="--clip-model")
@click.option("--top-k", type=bounded(TOP_K), help="Tags kept per image with --method clip.")
@click.option("--retry-failed", is_flag=True, help="Retry images whose tagging failed.")
@click.option("--overwrite", is_flag=True, help="Tag every image again (e.g. with a new --top-k), replacing its "
              "earlier tags from the same model.")
@click.option("--limit", type=bounded(COUNT), help="Tag at most this many images.")
@executor_option("tag")
@json_option
@pass_ctx
def images_tag(ctx, method, model, top_k, retry_failed, overwrite, limit, executor, as_json):
    """Multi-label concept tags per image (seed 000 App. I), by vision LLM or CLIP zero-shot."""

    res = tag_images(ctx.project, method=method, model=model, top_k=top_k, retry_failed=retry_failed,
                     overwrite=overwrite or None, limit=limit, progress=True, executor=executor)
    summary("images tag", res, as_json)


@images.command("failures")
@click.option("--limit", type=bounded(COUNT), default=50, show_default=True, help="Rows to show.")
@json_option
@pass_ctx
def images_failures(ctx, limit, as_json):
    """Candidates that failed or were skipped, with their reason."""
    rows = list_failures(ctx.project, limit=limit)
    listing(f"{len(rows)} failed or skipped candidates", rows, as_json)


@images.command("list")
@click.option("--concept", help="Only images found for this concept.")
@click.option("--country", help="Only images found for this country.")
@click.option("--status", "status_", type=click.Choice(["ok", "excluded"]), help="Only this image status.")
@click.option("--pool", type=click.Choice(["in", "out"]), help="Only images in (or out of) the reviewed pool.")
@click.option("--limit", type=bounded(COUNT), default=200, show_default=True, help="Rows to show.")
@json_option
@pass_ctx
def images_list(ctx, concept, country, status_, pool, limit, as_json):
    """Images with the concept × country pairs that found them, tags, and whether each is in the reviewed pool
    (the images build, export and the suites use) or why not."""
    rows = list_images(ctx.project, concept=concept, country=country, status=status_, pool=pool, limit=limit)
    listing(f"{len(rows)} images", rows, as_json,
            shown=[{**{k: v for k, v in r.items() if k != "path"}, "sha256": r["sha256"][:12]} for r in rows])


@images.command("clusters")
@click.option("--status", "status_", type=click.Choice(["open", "resolved", "superseded", "all"]), default="open",
              show_default=True, help="Which clusters.")
@json_option
@pass_ctx
def images_clusters(ctx, status_, as_json):
    """Duplicate clusters, members side by side (representative first) with their distance, countries and
    review decision."""
    rows = list_clusters(ctx.project, status=None if status_ == "all" else status_)
    listing(f"{len(rows)} duplicate clusters", rows, as_json,
            shown=[{**{k: v for k, v in r.items() if k != "representative"}, "members": members_text(r["members"])}
                   for r in rows])


@images.command("flags")
@click.option("--status", "status_", type=click.Choice(["open", "resolved", "superseded", "all"]), default="open",
              show_default=True, help="Which flags to list.")
@click.option("--resolve", "resolve", multiple=True, metavar="SHA256",
              help="Resolve the culture-conflict flag of this image (sha256 prefix; repeatable) — needs --reason.")
@click.option("--reopen", multiple=True, metavar="SHA256", help="Reopen a resolved flag (repeatable).")
@click.option("--reason", help="Why the flag is resolved (stored with it).")
@click.option("--flag", "flag", type=click.Choice(list(HAND_FLAGS)), default=HAND_FLAGS[0], show_default=True,
              help="Which flag --resolve/--reopen acts on: unreadable puts an image dedup could not decode back "
                   "in the pool, and the next dedup decodes it again (after an error that has passed).")
@click.option("--cultures", metavar="CC,CC",
              help="With --resolve: the countries the image stands for (comma-separated; each one it was found "
                   "for). The build keeps only these links; without it every flagged country is kept.")
@json_option
@pass_ctx
def images_flags(ctx, status_, resolve, reopen, reason, flag, cultures, as_json):
    """List image flags (culture conflicts: an image found for several cultures, itself or through a copy;
    unreadable files; undecoded ones, stored by 'images download --check header' until 'images dedup' decodes
    them) and decide or reopen culture conflicts by hand. Relevance ratings for every flagged country decide
    them too; a dedup review decides which copy stays, never which culture. Open culture conflicts block
    'cultura build'; unreadable and undecoded images are out of the reviewed pool."""
    if cultures is not None and not resolve:
        raise click.UsageError("--cultures goes with --resolve SHA256.")
    if resolve or reopen:
        res = {}
        if resolve:
            res.update(resolve_image_flags(ctx.project, resolve, reason=reason, flag=flag,
                                           cultures=cultures.split(",") if cultures is not None else None))
        if reopen:
            res.update(resolve_image_flags(ctx.project, reopen, reason=reason, reopen=True, flag=flag))
        return summary("images flags", res, as_json)
    rows = flags(ctx.project, status=None if status_ == "all" else status_)
    listing(f"{len(rows)} flags", rows, as_json, shown=[
        {**{k: v for k, v in r.items() if k != "created_at"}, "sha256": r["sha256"][:12]} for r in rows])


@images.command("exclude")
@click.argument("sha256", nargs=-1, required=True)
@click.option("--reason", required=True, help="Why (stored with the image, shown in reports).")
@json_option
@pass_ctx
def images_exclude(ctx, sha256, reason, as_json):
    """Take images out of the reviewed pool by hand (sha256 prefixes); nothing is deleted."""
    res = set_image_status(ctx.project, sha256, exclude=True, reason=reason)
    summary("images exclude", res if as_json else {**res, "sha256": [s[:12] for s in res["sha256"]]}, as_json)


@images.command("include")
@click.argument("sha256", nargs=-1, required=True)
@json_option
@pass_ctx
def images_include(ctx, sha256, as_json):
    """Undo 'cultura images exclude' for these images (sha256 prefixes)."""
    res = set_image_status(ctx.project, sha256, exclude=False)
    summary("images include", res if as_json else {**res, "sha256": [s[:12] for s in res["sha256"]]}, as_json)


COMMANDS = [images]
