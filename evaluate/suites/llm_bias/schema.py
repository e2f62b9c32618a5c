"""Tables of the LLM entity-bias (seed 001, Camellia) and image cultural-attribution (seed 004, CAIRe) areas.

- ``entities``: culture-specific entities per language, type and side (``local`` = the culture of the
  language, ``western``), with native and English forms, source and annotation status.
- ``contexts``: masked contexts (``[MASK]``) per language with kind (grounded / neutral / qa), entity type,
  sentiment label, English translation and a ``parallel_id`` tying translations of one context together.
- ``llm_scores``: cache of log P(entity | context) keyed by (model identity, mode, context, entity).
- ``kb_entities``: a user-supplied knowledge base (id, lemma, gloss, text, image paths, frequency).
- ``attribution_links``: cached visual entity linking results per (encoder, kb, image, method).
- ``attribution_scores``: the judge's 1-5 relevance per (judge, encoder, kb, context mode, image, culture),
  with the five log-probabilities, the expectation and the argmax; failures are rows with status + reason.

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

        CREATE TABLE IF NOT EXISTS llm_scores (
            model TEXT NOT NULL,              -- scorer identity (family, name, weights checksum)
            mode TEXT NOT NULL,               -- prefix | sentence
            context_key TEXT NOT NULL,        -- sha256 of the context text
            entity TEXT NOT NULL,
            logprob REAL,                     -- NULL when status = failed
            n_tokens INTEGER,
            status TEXT NOT NULL DEFAULT 'ok',
            reason TEXT,
            created_at TEXT NOT NULL,
            PRIMARY KEY (model, mode, context_key, entity)
        );
        """
    )


@llm_bias()
def m002_attribution(db):
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS kb_entities (
            kb TEXT NOT NULL,
            entity_id TEXT NOT NULL,
            lemma TEXT NOT NULL,
            gloss TEXT,
            text TEXT,
            images TEXT NOT NULL DEFAULT '[]',        -- JSON list of image paths (absolute or KB-file relative)
            frequency REAL,
            source TEXT,
            created_at TEXT NOT NULL,
            PRIMARY KEY (kb, entity_id)
        );

        CREATE TABLE IF NOT EXISTS attribution_links (
            encoder TEXT NOT NULL,
            kb TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            method TEXT NOT NULL,             -- lemma | gloss | frequency
            k INTEGER NOT NULL,
            entities TEXT NOT NULL,           -- JSON [[entity_id, score], ...] best first
            created_at TEXT NOT NULL,
            PRIMARY KEY (encoder, kb, sha256, method, k)
        );

        CREATE TABLE IF NOT EXISTS attribution_scores (
            id INTEGER PRIMARY KEY,
            judge TEXT NOT NULL,              -- judge identity (or 'baseline:<encoder>')
            encoder TEXT NOT NULL,
            kb TEXT NOT NULL,
            context TEXT NOT NULL,            -- entity (top entity text) | titles (top-k titles) | none
            sha256 TEXT NOT NULL,
            country TEXT NOT NULL,
            entity_id TEXT,
            score REAL,                       -- expectation over the five score tokens (1..5)
            argmax INTEGER,
            logprobs TEXT,                    -- JSON {"1": lp, ..., "5": lp}
            status TEXT NOT NULL,             -- ok | parsed | failed
            reason TEXT,
            created_at TEXT NOT NULL,
            UNIQUE (judge, encoder, kb, context, sha256, country)
        );
        CREATE INDEX IF NOT EXISTS idx_attribution_scores_img ON attribution_scores(sha256, country);
        """
    )


def ensure_schema(project_or_db) -> None:
    """Apply the ``llm_bias`` migrations (idempotent) until the set is listed in ``db.SCHEMA_MODULES``."""
    db = project_or_db if hasattr(project_or_db, "conn") and hasattr(project_or_db, "execute") \
        else project_or_db.db
    llm_bias.apply(db)


@llm_bias()
def m003_generations(db):
    db.executescript(
        """
        -- greedy replies of text generators (sentiment / extractive QA), cached per (model, prompt)
        CREATE TABLE IF NOT EXISTS llm_generations (
            model TEXT NOT NULL,
            prompt_key TEXT NOT NULL,         -- sha256 of the prompt
            reply TEXT,
            created_at TEXT NOT NULL,
            PRIMARY KEY (model, prompt_key)
        );
        """
    )
