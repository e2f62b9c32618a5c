"""``cultura caire …``: import seed 004's (CAIRe) test sets from local files. Thin: each command calls one
library function of :mod:`cultura.evaluate.suites.attribution.caire` and prints its result."""
from __future__ import annotations

import click

from ..evaluate.suites.attribution.caire import import_caire_specific, import_caire_universal
from .console import json_option, pass_ctx, summary


@click.group("caire")
def caire():
    """Import seed 004's (CAIRe) specific and universal test sets from local files."""


@caire.command("import-specific")
@click.argument("table", type=click.Path(exists=True, dir_okay=False))
@click.option("--images", type=click.Path(exists=True, file_okay=False), default=None,
              help="Folder of the image files when the table holds paths (default: the table's folder).")
@click.option("--kb", "kb_name", default="default", show_default=True,
              help="Knowledge base whose lemmas/aliases the concepts are matched to for gold entities.")
@json_option
@pass_ctx
def caire_import_specific(ctx, table, images, kb_name, as_json):
    """Import the specific set: images, gold culture labels (binary), gold KB entities."""
    summary("CAIRe specific set", import_caire_specific(ctx.project, table, images=images, kb=kb_name), as_json)


@caire.command("import-universal")
@click.argument("table", type=click.Path(exists=True, dir_okay=False))
@click.option("--images", type=click.Path(exists=True, file_okay=False), default=None,
              help="Folder of the image files when the table holds paths (default: the table's folder).")
@click.option("--split", type=click.Choice(["generated", "natural"]), default=None,
              help="Import one split only (Table 2 reports natural (N) and generated (G) apart).")
@json_option
@pass_ctx
def caire_import_universal(ctx, table, images, split, as_json):
    """Import the universal set: images linked to concept x country, mean ratings per rater country."""
    summary("CAIRe universal set", import_caire_universal(ctx.project, table, images=images, split=split), as_json)


COMMANDS = [caire]
