"""Tables of the social-bias audit (seed 003): labelled portrait sets and prompt-inventory validation status.

- ``portraits``: one row per (dataset, image): the image's sha256 (the blob lives in ``images`` like any other
  image), its gender and race labels (canonical spellings, see :mod:`cultura.evaluate.suites.social.data`), every other
  column of the imported table as JSON ``attributes``, the source row key and a ``status`` (ok | failed) with
  the ``reason``; a failed row keeps its reason and never stops the import.
- ``portrait_sets``: one row per imported dataset (layout, source table, image folder, whether it is
  synthetic, counts).
- ``inventory_status``: the last computed validation status of each language's prompt inventory (source,
  seed-validated, validated, partial, unvalidated) with its counts; results carry the status of the inventory
  they used, this table is the cache that ``cultura social inventories`` shows.

Apply with ``social.apply(db)`` (idempotent) until the set is listed in ``cultura.db.SCHEMA_MODULES``.
"""
from __future__ import annotations

from ....db.migrations import Migrations

social = Migrations("social")


@social()
def m001_portraits(db):
    db.executescript(
        """
        CREATE TABLE portrait_sets (
            dataset TEXT PRIMARY KEY,
            layout TEXT NOT NULL,             -- fairface | pata | generic
            source TEXT,                      -- the imported table
            images_dir TEXT,
            synthetic INTEGER NOT NULL DEFAULT 0,   -- 1 for generated test/demo sets (never real faces)
            n_ok INTEGER NOT NULL DEFAULT 0,
            n_failed INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );

        CREATE TABLE portraits (
            dataset TEXT NOT NULL,
            source_key TEXT NOT NULL,         -- the table's image column value (stable within the dataset)
            sha256 TEXT,                      -- NULL when the row failed
            gender TEXT,                      -- Male | Female (canonical)
            race TEXT,                        -- canonical race key (White, Black, East_Asian, ...)
            attributes TEXT NOT NULL DEFAULT '{}',   -- JSON: every other column of the row
            status TEXT NOT NULL,             -- ok | failed
            reason TEXT,
            created_at TEXT NOT NULL,
            PRIMARY KEY (dataset, source_key)
        );
        CREATE INDEX idx_portraits_sha ON portraits(sha256);

        CREATE TABLE inventory_status (
            language TEXT PRIMARY KEY,
            status TEXT NOT NULL,             -- source | seed-validated | validated | partial | unvalidated
            source TEXT,                      -- where the prompts come from (seed 003 App. F, a project file...)
            axes TEXT NOT NULL DEFAULT '[]',  -- JSON list of the axes the inventory covers
            n_prompts INTEGER,
            n_rated INTEGER,
            n_accepted INTEGER,
            mean_score REAL,
            details TEXT NOT NULL DEFAULT '{}',
            updated_at TEXT NOT NULL
        );
        """
    )
