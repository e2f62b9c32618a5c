"""``cultura culture …``: culture labels beside the countries (a religion, an ethnic group, a state; seed 004)."""
from __future__ import annotations

import click

from ..cultures import add_culture_label, registered_labels, resolve_culture
from .console import json_option, listing, pass_ctx, summary


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

    summary("Culture label", add_culture_label(ctx.project, label, name=name, country=country, language=language,
                                               description=description), as_json)


@culture.command("list")
@json_option
@pass_ctx
def culture_list(ctx, as_json):
    """The project's countries and registered culture labels."""

    rows = [vars(resolve_culture(ctx.project, c.code)) for c in ctx.project.countries]
    rows += [vars(lab) for lab in registered_labels(ctx.project)]
    listing("Culture labels", rows, as_json, ["key", "name", "kind", "country", "language", "description"])


COMMANDS = [culture]
