"""A cultura project: a folder with ``cultura.toml``, ``cultura.db``, ``blobs/`` and reports.

>>> import tempfile
>>> p = init_project(tempfile.mkdtemp() + "/demo", countries=["US", "JP"])
>>> [c.code for c in p.countries]
['US', 'JP']
"""
from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from . import db as dbmod
from .db.light import sqlite_utils
from .db.blobs import release_blob_lease
from .annotate.schema import annotate as annotate_migrations
from .config_file import known_valid, project_countries
from .countries import Country, registry
from .benchmark.schema import build as build_migrations
from .errors import CulturaError, ProjectNotFound
from .lazy import lazy
from .evaluate.schema import evaluate as evaluate_migrations
from .evaluate.suites.attribution.schema import attribution as attribution_migrations
from .evaluate.suites.llm_bias.schema import llm_bias as llm_bias_migrations
from .evaluate.suites.social.schema import social as social_migrations
from .models.schema import models as models_migrations

if TYPE_CHECKING:
    from .config import Config

config_module = lazy("cultura.config")  # the validator (pydantic): for a file not known valid, or a setting read

#: The areas' migration sets, applied in this order after the core set on every open. The project is the
#: composition root of the library: it is the one module that names every area's schema (each schema module
#: imports only :mod:`cultura.db.migrations`).
MIGRATION_SETS = (annotate_migrations, build_migrations, evaluate_migrations, social_migrations,
                  llm_bias_migrations, models_migrations, attribution_migrations)

CONFIG_NAME = "cultura.toml"
DB_NAME = "cultura.db"


class Project:
    """Handle on a project folder. Opens the database lazily (WAL, migrations applied). ``cultura.toml`` is
    checked on open — an invalid file stops every command before it starts — but a file whose bytes the
    validator accepted before (:func:`cultura.config_file.known_valid`) is parsed into :attr:`config` only when a
    setting is read: the country list alone is read without pydantic, whose import costs more than ``cultura
    status`` in all."""

    def __init__(self, root: str | Path, config: Config | None = None):
        self.root = Path(root).resolve()
        if config is not None:
            self.config = config
        elif not known_valid(self.root / CONFIG_NAME):
            self.config = config_module.load_config(self.root / CONFIG_NAME)  # names any problem

    @cached_property
    def config(self) -> Config:
        return config_module.load_config(self.root / CONFIG_NAME)

    def __repr__(self) -> str:
        return f"Project({str(self.root)!r})"

    @property
    def db_path(self) -> Path:
        return self.root / DB_NAME

    @property
    def blobs(self) -> Path:
        return self.root / "blobs"

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    @cached_property
    def db(self) -> sqlite_utils.Database:
        db = dbmod.open_db(self.db_path, sets=MIGRATION_SETS)
        sync_countries(self, db)
        return db

    @property
    def registry(self):
        return registry()

    @cached_property
    def _plain_countries(self) -> list[str] | None:
        """``project.countries`` read without the validator (None: the file needs it to say what is wrong)."""
        return project_countries(self.root / CONFIG_NAME)

    @property
    def countries(self) -> list[Country]:
        if "config" not in self.__dict__ and self._plain_countries is not None:  # no parsed config yet
            return self.registry.resolve(self._plain_countries)
        return self.registry.resolve(self.config.project.countries)  # validated: names any problem

    def country(self, code: str) -> Country:
        return self.registry.country(code)

    def blob_path(self, rel: str) -> Path:
        return self.root / rel

    def save_config(self) -> None:
        (self.root / CONFIG_NAME).write_text(config_module.dump_config(self.config), encoding="utf-8")

    def close(self) -> None:
        release_blob_lease(self.root)  # blobs stored outside a blob_writer scope: their rows are committed
        self.close_db()

    def close_db(self) -> None:
        """Close the database connection (the next use of :attr:`db` opens a new one)."""
        if "db" in self.__dict__:
            self.db.conn.close()
            del self.__dict__["db"]


def sync_countries(project: Project, db: sqlite_utils.Database | None = None) -> None:
    """Mirror the project's countries (config + registry) into the ``countries`` table, for SQL joins.
    Run on every open, so the table follows edits of ``project.countries`` in cultura.toml."""
    db = db if db is not None else project.db
    reg = project.registry
    rows = []
    for c in project.countries:
        lang = reg.languages.get(c.language)
        rows.append({
            "code": c.code, "name": c.name, "native_name": c.native_name, "language": c.language,
            "languages": dbmod.dumps(list(c.languages)), "region": c.region, "western": int(c.western),
            "ddg_region": c.ddg_region,
            "attributes": dbmod.dumps({"income": c.income, "script": lang.script if lang else "",
                                       "resource_tier": lang.resource_tier if lang else "", **c.extra}),
        })
    codes = [r["code"] for r in rows]
    current = {r["code"]: r for r in db["countries"].rows}
    if current.keys() == set(codes) and all(current[r["code"]] == r for r in rows):
        return  # already in step: no write
    with dbmod.transaction(db):
        db.execute(f"DELETE FROM countries WHERE code NOT IN ({', '.join('?' * len(codes))})", codes)
        db["countries"].upsert_all(rows, pk="code")


def init_project(directory: str | Path, *, countries=None, preset: str | None = None,
                 name: str | None = None, overwrite: bool = False) -> Project:
    """Create ``DIR/cultura.toml`` and ``DIR/cultura.db`` for the given countries (codes or a preset)."""
    root = Path(directory).resolve()
    reg = registry()
    chosen: list[Country] = []
    if preset:
        chosen = reg.preset(preset)
    if countries:
        extra = reg.resolve(countries)
        chosen += [c for c in extra if c.code not in {x.code for x in chosen}]
    if not chosen:
        raise CulturaError("No countries given: give country codes (US,JP,…) or a preset "
                           f"({'|'.join(sorted(reg.presets))}).", param="countries")
    cfg_path = root / CONFIG_NAME
    if cfg_path.exists() and not overwrite:
        raise CulturaError(f"{cfg_path} already exists. Use that project, or overwrite its configuration "
                           "(the database is kept).", param="overwrite")
    root.mkdir(parents=True, exist_ok=True)
    cfg = config_module.Config()
    cfg.project.name = name or root.name
    cfg.project.countries = [c.code for c in chosen]
    cfg.project.preset = preset
    project = Project(root, cfg)
    project.save_config()
    project.blobs.mkdir(exist_ok=True)
    project.db["meta"].upsert({"key": "created_with", "value": "cultura"}, pk="key")
    return project


def find_project(start: str | Path | None = None) -> Project:
    """The project at ``$CULTURA_PROJECT``, else the nearest folder up from ``start`` holding cultura.toml."""
    env = os.environ.get("CULTURA_PROJECT")
    if start is None and env:
        start = env
        if not (Path(env) / CONFIG_NAME).exists():
            raise ProjectNotFound(f"CULTURA_PROJECT={env} has no {CONFIG_NAME}. Run 'cultura init {env}' "
                                  "or point CULTURA_PROJECT at a project folder.")
        return Project(env)
    here = Path(start or os.getcwd()).resolve()
    for d in [here, *here.parents]:
        if (d / CONFIG_NAME).exists():
            return Project(d)
    raise ProjectNotFound(f"No {CONFIG_NAME} in {here} or any folder above it. Run 'cultura init DIR', "
                          "then run commands inside DIR or pass --project DIR.")
