"""Tables of the cultural attribution area (seed 004, CAIRe).

- ``kb_entities``: a user-supplied knowledge base (id, lemma, gloss, text, image paths, frequency).
- ``attribution_links``: cached visual entity linking results per (encoder, kb, image, method).
- ``attribution_scores``: the judge's 1-5 relevance per (judge, encoder, kb, context mode, image, culture),
  with the five log-probabilities, the expectation and the argmax; failures are rows with status + reason.
"""
from __future__ import annotations

from ....db.migrations import Migrations

attribution = Migrations("attribution")


@attribution()
def m001_attribution(db):
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
