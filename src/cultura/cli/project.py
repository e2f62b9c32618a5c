"""CLI commands of the project itself: ``init``, ``status`` and ``config get/set``."""
from __future__ import annotations

import json

import click

from ..benchmark.status import project_status
from ..project import CONFIG_NAME, init_project
from ..lazy import lazy
from .console import emit_json, json_option, option, out, pass_ctx, summary, table

config_edit = lazy("cultura.config_edit")  # the validator (pydantic): for 'config get/set' only, not 'status'


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
    value = config_edit.get_config_value(ctx.project.config, key)
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
    res = config_edit.set_config_file_value(ctx.project.root / CONFIG_NAME, key, value, add=add)
    summary("config set", res, as_json)


COMMANDS = [init, status, config_group]
