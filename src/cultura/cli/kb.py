"""``cultura kb …``: the knowledge base that images are linked to (seed 004, CAIRe)."""
from __future__ import annotations

import click

from ..evaluate.suites.attribution.kb import import_kb
from .console import json_option, pass_ctx, summary


@click.group("kb")
def kb():
    """The knowledge base used to link images to entities (seed 004)."""

@kb.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--kb", "kb_name", default="default", show_default=True, help="Name of the knowledge base.")
@click.option("--images-root", type=click.Path(exists=True, file_okay=False), default=None,
              help="Folder that relative image paths are relative to (default: the dump's folder).")
@json_option
@pass_ctx
def kb_import(ctx, path, kb_name, images_root, as_json):
    """Import a KB dump (JSONL, JSON, CSV/TSV or Parquet; fields id, lemma, gloss, text, aliases, images,
    frequency — see docs/reproducing.md (seed 004))."""

    summary("Knowledge base", import_kb(ctx.project, path, kb=kb_name, images_root=images_root), as_json)


COMMANDS = [kb]
