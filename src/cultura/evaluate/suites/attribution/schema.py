"""Tables of the cultural attribution area (seed 004, CAIRe).

- ``kb_entities``: a user-supplied knowledge base (id, lemma, gloss, text, image paths, frequency).
- ``attribution_links``: cached visual entity linking results per (encoder, kb, image, method).
- ``culture_labels``: free-text culture labels beside the countries (:mod:`cultura.cultures`).
- ``attribution_gold``: the gold KB entity of an image (seed 004's specific set: the concept's page), for
  linking accuracy (Table 3 shape) and the gold-page upper bound (App. C.5).
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


@attribution()
def m002_score_flags(db):
    """Judge rows whose five score digits were not all among the returned alternatives (seed 004 eq. 3 needs
    all five): the absent digits, as a JSON list (NULL = all five scored)."""
    if "missing_tokens" not in {c.name for c in db["attribution_scores"].columns}:
        db.execute("ALTER TABLE attribution_scores ADD COLUMN missing_tokens TEXT")


@attribution()
def m003_culture_labels(db):
    """Free-text culture labels (seed 004 desideratum 1): a religion, an ethnic group, a state ... beside the
    countries. ``label`` is the key stored in the ``country`` columns of scores, items and ratings."""
    db.execute(
        """CREATE TABLE IF NOT EXISTS culture_labels (
            label TEXT PRIMARY KEY,
            name TEXT NOT NULL,               -- display name (judge prompt, annotation task)
            country TEXT,                     -- optional ISO country the label belongs to
            language TEXT,                    -- optional ISO 639 language
            description TEXT,
            source TEXT,                      -- manual | free-text | import:<file>
            created_at TEXT NOT NULL
        )""")


@attribution()
def m004_gold_entities(db):
    """Gold KB entities per image (seed 004 App. A.3 / C.5)."""
    db.execute(
        """CREATE TABLE IF NOT EXISTS attribution_gold (
            sha256 TEXT NOT NULL,
            entity_id TEXT NOT NULL,
            source TEXT,
            created_at TEXT NOT NULL,
            PRIMARY KEY (sha256, entity_id)
        )""")


@attribution()
def m005_kb_aliases(db):
    """Other names of a KB entity (a dump's aliases / BabelNet senses), JSON list; matched by gold imports."""
    if "aliases" not in {c.name for c in db["kb_entities"].columns}:
        db.execute("ALTER TABLE kb_entities ADD COLUMN aliases TEXT")


@attribution()
def m006_score_details(db):
    """Scorer-specific details of a score row as JSON (log-likelihood scoring: ll, base rate, debiased)."""
    if "details" not in {c.name for c in db["attribution_scores"].columns}:
        db.execute("ALTER TABLE attribution_scores ADD COLUMN details TEXT")
