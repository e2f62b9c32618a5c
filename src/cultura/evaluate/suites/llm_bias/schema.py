"""Tables of the LLM entity-bias area (seed 001, Camellia).

- ``entities``: culture-specific entities per language, type and side (``local`` = the culture of the
  language, ``western``), with native and English forms, source and annotation status.
- ``contexts``: masked contexts (``[MASK]``) per language with kind (grounded / neutral / qa), entity type,
  sentiment label, English translation and a ``parallel_id`` tying translations of one context together.

The model caches (``llm_scores``, ``llm_generations``) live in :mod:`cultura.models.schema`, the attribution
tables in :mod:`cultura.evaluate.suites.attribution.schema`. (Projects created before the split recorded
``llm_bias`` steps m002/m003 for those tables; every definition is ``IF NOT EXISTS``, so nothing changes.)

Nothing is deleted: exclusion is a status, a rerun skips what is done.
"""
from __future__ import annotations

from ....db.migrations import Migrations

llm_bias = Migrations("llm_bias")


@llm_bias()
def m001_entities_contexts(db):
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS entities (
            id INTEGER PRIMARY KEY,
            language TEXT NOT NULL,           -- ISO 639-1 of the native form
            country TEXT,                     -- culture of the entity (local: the language's country)
            side TEXT NOT NULL,               -- local | western
            type TEXT NOT NULL,               -- food, beverage, authors, location, names_female, ...
            native TEXT NOT NULL,             -- the form that fills [MASK] in this language
            english TEXT,                     -- English form (for the parallel English contexts)
            source TEXT NOT NULL,             -- import:<file> | wikidata:<QID> | pattern:<name> | llm | demo
            qid TEXT,
            status TEXT NOT NULL DEFAULT 'accepted',   -- candidate | accepted | rejected
            reason TEXT,
            details TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            updated_at TEXT,
            UNIQUE (language, side, type, native)
        );
        CREATE INDEX IF NOT EXISTS idx_entities_lookup ON entities(language, type, side, status);

        CREATE TABLE IF NOT EXISTS contexts (
            id INTEGER PRIMARY KEY,
            language TEXT NOT NULL,
            country TEXT,                     -- the culture the context is about / grounded in
            kind TEXT NOT NULL,               -- grounded | neutral | qa
            type TEXT NOT NULL,               -- entity type expected at [MASK]
            text TEXT NOT NULL,               -- contains [MASK] exactly once
            sentiment TEXT,                   -- positive | negative | neutral | NULL
            english TEXT,                     -- English translation (with [MASK])
            parallel_id TEXT,                 -- same value for translations of one context across languages
            source TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'active',     -- active | excluded
            reason TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT,
            UNIQUE (language, kind, type, text)
        );

        """
    )
