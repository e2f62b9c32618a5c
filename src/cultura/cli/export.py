"""The ``export`` command: benchmarks to a folder as a Hugging Face dataset, optionally pushed to the Hub."""
from __future__ import annotations

import click
from rich.markup import escape

from ..benchmark.export import export_benchmark
from ..benchmark.hub import dataset_url, push_to_hub
from .console import emit_json, json_option, out, pass_ctx


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
@click.option("--as-built", is_flag=True,
              help="Export (and push) a version the current state no longer supports as it was built (see 'cultura "
                   "build check'); the dataset card then says what changed since. By default such a version is "
                   "refused.")
@json_option
@pass_ctx
def export(ctx, directory, benchmarks, fmt, no_images, embed_images, repo, private, as_built, as_json):
    """Export benchmarks to DIRECTORY (new or empty) as a Hugging Face dataset: ready-to-evaluate configs
    (datasets.load_dataset(DIRECTORY) loads the default one, split test), the normalised tables, images, a
    validated README.md dataset card and croissant.json."""

    r = export_benchmark(ctx.project, directory, benchmarks=list(benchmarks) or None, fmt=fmt,
                         images=not no_images, embed_images=embed_images, as_built=as_built,
                         url=dataset_url(repo) if repo else None)
    if repo:
        r["hub"] = push_to_hub(r["dir"], repo, private=private)
    if as_json:
        return emit_json(r)
    out.print(f"Exported {', '.join(r['benchmarks'])} to [bold]{r['dir']}[/bold]: {r['items']} trials, "
              f"{r['images']} images, {r['queries']} queries ({r['format']}); configs: {', '.join(r['configs'])}.")
    for ref, changes in r["changed_since_build"].items():
        out.print(f"[yellow]{ref} exported as built; changed since: {'; '.join(changes)} (the card says so).[/yellow]")
    for w in r["warnings"]:  # with --json they are in the data (``warnings``)
        out.print(f"[yellow]Warning: {escape(w)}[/yellow]")
    if repo:
        out.print(f"Pushed to [bold]{r['hub']['repo']}[/bold] ({r['hub']['url']}).")


COMMANDS = [export]
