"""CLI commands of the curation stage: init, status, config get/set, concepts …, images …"""
from __future__ import annotations

import json

import click
from rich.markup import escape

from ..config import get_config_value, set_config_file_value
from ..console import (emit_json, executor_option, json_option, listing, model_option, option, out, pass_ctx,
                       summary, table)
from ..project import CONFIG_NAME, init_project
from .concepts import (
    add_concepts,
    build_queries,
    dedup_concepts,
    generate_concepts,
    list_concepts,
    list_terms,
    load_preset,
    remove_concept,
    set_term,
    set_terms_from_file,
    translate_concepts,
)
from .dedup import dedup_images
from .download import download_candidates
from .search import ingest_img2dataset, search_images
from .status import (
    flags,
    list_clusters,
    list_images,
    members_text,
    nothing_to_do,
    project_status,
    resolve_image_flags,
    set_image_status,
)
from .tagging import tag_images


def _nothing_to_do(ctx, stage: str, as_json: bool, when: bool = True) -> bool:
    """Print what to do first (JSON: ``{"nothing_to_do": …}``) when ``stage`` has nothing to work on."""

    hint = nothing_to_do(ctx.project, stage) if when else None
    if hint:
        if as_json:
            emit_json({"stage": stage, "nothing_to_do": hint})
        else:
            out.print(f"[yellow]{escape(hint)}[/yellow]")
    return bool(hint)


@click.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--countries", help="Comma-separated ISO 3166-1 codes, e.g. US,JP,TH.")
@click.option("--preset", help="A seed's country set: 3xcm, globalrg, caire (countries are added to it).")
@click.option("--name", help="Project name (default: the folder name).")
@option("--overwrite", "overwrite", old="--force", is_flag=True,
        help="Rewrite an existing cultura.toml (the database is kept).")
@json_option
def init(directory, countries, preset, name, overwrite, as_json):
    """Create a project: DIRECTORY/cultura.toml and DIRECTORY/cultura.db."""

    p = init_project(directory, countries=countries, preset=preset, name=name, overwrite=overwrite)
    info = {"project": str(p.root), "countries": [c.code for c in p.countries], "database": str(p.db_path)}
    if as_json:
        return emit_json(info)
    out.print(f"Created project [bold]{p.root}[/bold] with {len(info['countries'])} countries: "
              f"{', '.join(info['countries'])}")
    out.print("Next: cultura concepts load --preset 3xcm  (or: cultura concepts generate)")


@click.command()
@json_option
@pass_ctx
def status(ctx, as_json):
    """Counts per stage, per country and per concept, and failures by reason."""

    s = project_status(ctx.project)
    if as_json:
        return emit_json(s)
    rows = []
    for stage, v in s["stages"].items():
        if isinstance(v, dict):
            rows.append({"stage": stage, "counts": ", ".join(f"{k}: {n}" for k, n in v.items()) or "0"})
        else:
            rows.append({"stage": stage, "counts": v})
    table(f"Project {s['project']}", rows)
    table("Per country", s["per_country"])
    if s["per_concept"]:
        codes = s["countries"]
        grid: dict[str, dict] = {}
        for r in s["per_concept"]:
            grid.setdefault(r["concept"], {"concept": r["concept"], **{c: 0 for c in codes}})[r["country"]] = r["images"]
        table("Images per concept x country", list(grid.values()), ["concept", *codes])
    fails = [{"where": w, "reason": r, "count": n} for w, d in s["failures"].items() for r, n in d.items()]
    table("Failures by reason", fails)


# ------------------------------------------------------------------------------------------ concepts

@click.group()
def concepts():
    """Concepts: generate, load presets, curate, de-duplicate, translate."""


@concepts.command("generate")
@option("--count", "n", old="--n", type=click.IntRange(1), default=100, show_default=True, help="How many concepts.")
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
@click.argument("name")
@click.option("--reason", default="removed by hand", show_default=True, help="Why (stored).")
@json_option
@pass_ctx
def concepts_remove(ctx, name, reason, as_json):
    """Mark a concept removed (nothing is deleted)."""

    summary("concepts remove", remove_concept(ctx.project, name, reason=reason), as_json)


@concepts.command("dedup")
@click.option("--threshold", type=float, help="Cosine similarity at or above which concepts merge "
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

    if _nothing_to_do(ctx, "translate", as_json):
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


# ------------------------------------------------------------------------------------------ images

@click.group()
def images():
    """Images: search, ingest, download, de-duplicate, tag."""


@images.command("search")
@click.option("--provider", help="ddgs, urls:PATH (JSONL/CSV/Parquet) or folder:DIR (default: search.provider).")
@click.option("--per-query", type=click.IntRange(1), help="Results per query (default: search.per_query, 10).")
@option("--overwrite", "refresh", old="--refresh", is_flag=True, help="Search again queries that were already searched.")
@json_option
@pass_ctx
def images_search(ctx, provider, per_query, refresh, as_json):
    """Find candidate images for every query (resumable: done queries are skipped)."""

    web = (provider or ctx.project.config.search.provider).split(":")[0] == "ddgs"
    if _nothing_to_do(ctx, "search", as_json, when=web):
        return
    if (provider or ctx.project.config.search.provider).split(":")[0] == "ddgs":
        build_queries(ctx.project)
    res = search_images(ctx.project, provider=provider, per_query=per_query, refresh=refresh,
                        progress=not as_json)
    summary("images search", res, as_json)


@images.command("ingest")
@click.argument("directory", type=click.Path(file_okay=False))
@json_option
@pass_ctx
def images_ingest(ctx, directory, as_json):
    """Read an img2dataset output folder back in (needs additional columns concept and country)."""

    summary("images ingest", ingest_img2dataset(ctx.project, directory), as_json)


@images.command("download")
@click.option("--workers", type=click.IntRange(1, 1024), help="Concurrent downloads (default: download.workers, 32).")
@click.option("--retry-failed", is_flag=True, help="Also retry candidates that failed before, and those skipped by the "
              "address policy (re-examined anyway after a change of download.allow_hosts).")
@click.option("--limit", type=click.IntRange(1), help="Process at most this many candidates.")
@json_option
@pass_ctx
def images_download(ctx, workers, retry_failed, limit, as_json):
    """Download pending candidates safely (private addresses refused, bytes and pixels capped, content
    sniffed, files stored by content hash). Resumable after Ctrl-C or kill."""

    if _nothing_to_do(ctx, "download", as_json):
        return
    res = download_candidates(ctx.project, workers=workers, retry_failed=retry_failed, limit=limit,
                              progress=not as_json)
    summary("images download", res, as_json)


@images.command("dedup")
@click.option("--method", "methods", multiple=True, type=click.Choice(["sha256", "phash", "dhash", "embedding"]),
              help="Methods to run (repeatable; default: dedup.methods).")
@click.option("--scope", type=click.Choice(["within-concept", "global"]), help="Default: dedup.scope.")
@click.option("--phash-threshold", type=click.IntRange(0, 64), help="Hamming distance (bits) for pHash.")
@click.option("--dhash-threshold", type=click.IntRange(0, 64), help="Hamming distance (bits) for dHash.")
@model_option("Embedder spec for the embedding method, e.g. openclip:ViT-B-32/openai.", old="--embedder")
@click.option("--embedding-threshold", type=float, help="Cosine similarity for the embedding method.")
@click.option("--embedding-index", type=click.Choice(["auto", "exact", "ivf"]),
              help="Pair search of the embedding method: exact, IVF (approximate recall, exact precision) or "
                   "auto (exact up to 100k images per search). Default: dedup.embedding_index.")
@executor_option("dedup")
@json_option
@pass_ctx
def images_dedup(ctx, methods, scope, phash_threshold, dhash_threshold, model, embedding_threshold,
                 embedding_index, executor, as_json):
    """Find exact, perceptual and embedding duplicates; flag culture conflicts. Nothing is deleted."""

    if _nothing_to_do(ctx, "dedup", as_json):
        return
    res = dedup_images(ctx.project, methods=list(methods) or None, scope=scope, phash_threshold=phash_threshold,
                       dhash_threshold=dhash_threshold, embedder=model, embedding_threshold=embedding_threshold,
                       progress=not as_json, executor=executor, embedding_index=embedding_index)
    summary("images dedup", res, as_json)


@images.command("tag")
@click.option("--method", type=click.Choice(["auto", "llm", "clip"]), help="Default: tag.method (auto).")
@model_option("The model of the method: a vision chat model for llm (default: llm.vision_model) or an "
              "embedder spec for clip (default: tag.clip_model).", old="--clip-model")
@click.option("--top-k", type=click.IntRange(1), help="Tags kept per image with --method clip.")
@click.option("--retry-failed", is_flag=True, help="Retry images whose tagging failed.")
@click.option("--overwrite", is_flag=True, help="Tag every image again (e.g. with a new --top-k), replacing its "
              "earlier tags from the same model.")
@click.option("--limit", type=click.IntRange(1), help="Tag at most this many images.")
@executor_option("tag")
@json_option
@pass_ctx
def images_tag(ctx, method, model, top_k, retry_failed, overwrite, limit, executor, as_json):
    """Multi-label concept tags per image (seed 000 App. I), by vision LLM or CLIP zero-shot."""

    res = tag_images(ctx.project, method=method, model=model, top_k=top_k, retry_failed=retry_failed,
                     overwrite=overwrite or None, limit=limit, progress=not as_json, executor=executor)
    summary("images tag", res, as_json)


@images.command("failures")
@click.option("--limit", type=click.IntRange(1), default=50, show_default=True, help="Rows to show.")
@json_option
@pass_ctx
def images_failures(ctx, limit, as_json):
    """Candidates that failed or were skipped, with their reason."""
    rows = [dict(r) for r in ctx.project.db.query(
        "SELECT id, url, status, reason, detail, http_status FROM candidates WHERE status IN ('failed','skipped') "
        "ORDER BY reason, id LIMIT ?", [limit])]
    listing(f"{len(rows)} failed or skipped candidates", rows, as_json)


@images.command("list")
@click.option("--concept", help="Only images found for this concept.")
@click.option("--country", help="Only images found for this country.")
@click.option("--status", "status_", type=click.Choice(["ok", "excluded"]), help="Only this image status.")
@click.option("--pool", type=click.Choice(["in", "out"]), help="Only images in (or out of) the reviewed pool.")
@click.option("--limit", type=click.IntRange(1), default=200, show_default=True, help="Rows to show.")
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
@click.option("--cultures", metavar="CC,CC",
              help="With --resolve: the countries the image stands for (comma-separated; each one it was found "
                   "for). The build keeps only these links; without it every flagged country is kept.")
@json_option
@pass_ctx
def images_flags(ctx, status_, resolve, reopen, reason, cultures, as_json):
    """List image flags (culture conflicts: an image found for several cultures, itself or through a copy;
    unreadable files) and decide or reopen them by hand. Relevance ratings for every flagged country decide
    them too; a dedup review decides which copy stays, never which culture. Open ones block 'cultura build'."""
    if cultures is not None and not resolve:
        raise click.UsageError("--cultures goes with --resolve SHA256.")
    if resolve or reopen:
        res = {}
        if resolve:
            res.update(resolve_image_flags(ctx.project, resolve, reason=reason,
                                           cultures=cultures.split(",") if cultures is not None else None))
        if reopen:
            res.update(resolve_image_flags(ctx.project, reopen, reason=reason, reopen=True))
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


@click.group("config")
def config_group():
    """Read or change cultura.toml from the command line, validated exactly like the file."""


@config_group.command("get")
@click.argument("key", required=False)
@json_option
@pass_ctx
def config_get(ctx, key, as_json):
    """The value of KEY (SECTION.KEY, e.g. download.allow_hosts), a whole SECTION, or everything (defaults
    filled in)."""
    value = get_config_value(ctx.project.config, key)
    if as_json:
        return emit_json({"key": key, "value": value} if key else value)
    click.echo(value if isinstance(value, str) else json.dumps(value, indent=2 if isinstance(value, dict) else None,
                                                                ensure_ascii=False))


@config_group.command("set")
@click.argument("key")
@click.argument("value")
@click.option("--add", is_flag=True, help="Append VALUE to a list key (e.g. one more download.allow_hosts entry).")
@json_option
@pass_ctx
def config_set(ctx, key, value, add, as_json):
    """Set KEY (SECTION.KEY) to VALUE in cultura.toml, read as TOML (8, true, 0.5, ["a", "b"]) or else as plain
    text; one item for a list key is a list of one. Checked like the file (nothing written on an error);
    comments and the other lines are kept."""
    res = set_config_file_value(ctx.project.root / CONFIG_NAME, key, value, add=add)
    summary("config set", res, as_json)


COMMANDS = [init, status, config_group, concepts, images]
