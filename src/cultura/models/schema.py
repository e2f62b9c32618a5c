"""Cache tables of the models (:mod:`cultura.models`): what a model said, keyed by its identity, so a rerun
calls nothing. (``embeddings`` and ``llm_calls`` are core tables, :mod:`cultura.db.schema`.)

- ``llm_scores``: log P(entity | context) per (scorer identity, mode, context, entity); failures are rows
  with status + reason.
- ``llm_generations``: greedy replies of text generators, per (model, prompt).
"""
from __future__ import annotations

from ..db.migrations import Migrations

models = Migrations("models")


@models()
def m001_scores_generations(db):
    db.executescript(
        """
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
