"""Tables of the build area (benchmark assembly, export, import).

- ``benchmark_query_snapshot``: the query texts a benchmark was built with, frozen at build time so an export
  of a benchmark is byte-identical however ``benchmark_queries`` is edited later.
- ``captions``: per-image captions per language (Crossmodal-3600-style imports).
- ``import_rows``: one row per input row of every import (``status`` ok | skipped | failed + ``reason``), so an
  import is resumable and its failures are data.

Imported images are linked to concept × country through the core tables (a ``queries`` row with status
``imported``, a ``candidates`` row with url ``import:<kind>:<key>`` and a ``search_results`` row with provider
``import:<kind>``), so ``image_links`` — and every build and evaluation reading it — sees them unchanged.
"""
from __future__ import annotations

from ..db.migrations import Migrations

build = Migrations("build")


@build()
def m001_build_tables(db):
    db.executescript(
        """
        CREATE TABLE benchmark_query_snapshot (
            benchmark_id INTEGER NOT NULL REFERENCES benchmarks(id),
            concept_id INTEGER NOT NULL,
            country TEXT NOT NULL,
            language TEXT NOT NULL,
            variant TEXT NOT NULL,
            descriptor_country TEXT,
            text TEXT NOT NULL,
            source TEXT NOT NULL,
            PRIMARY KEY (benchmark_id, concept_id, country, language, variant)
        );

        CREATE TABLE captions (
            image_sha256 TEXT NOT NULL REFERENCES images(sha256),
            language TEXT NOT NULL,
            idx INTEGER NOT NULL,             -- position among this image's captions in this language
            text TEXT NOT NULL,
            source TEXT NOT NULL,             -- import:xm3600 | ...
            created_at TEXT NOT NULL,
            PRIMARY KEY (image_sha256, language, idx, source)
        );

        CREATE TABLE import_rows (
            kind TEXT NOT NULL,               -- globalrg | captions | ratings
            source TEXT NOT NULL,             -- the input file name
            key TEXT NOT NULL,                -- the row's image key (path or id)
            status TEXT NOT NULL,             -- ok | failed
            reason TEXT,
            sha256 TEXT,
            created_at TEXT NOT NULL,
            PRIMARY KEY (kind, source, key)
        );
        """
    )
