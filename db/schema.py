"""The core schema: countries, concepts, terms, queries, search results, candidates, images, links,
duplicate clusters, tags, flags, LLM calls and stage runs.

Conventions (every area follows them):
- nothing is deleted by a stage: exclusion is a ``status`` with a ``reason``;
- images are keyed by ``sha256`` of their bytes; blobs live at ``blobs/ab/<sha256>.<ext>``;
- timestamps are ISO-8601 UTC strings; JSON columns hold JSON text.
"""
from __future__ import annotations

from .migrations import Migrations

core = Migrations("core")


@core()
def m001_core(db):
    db.executescript(
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);

        CREATE TABLE countries (
            code TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            native_name TEXT,
            language TEXT NOT NULL,           -- primary language (ISO 639-1)
            languages TEXT NOT NULL,          -- JSON list, primary first
            region TEXT,
            western INTEGER,
            ddg_region TEXT,
            attributes TEXT                   -- JSON: script, resource tier, income, ...
        );

        CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            stage TEXT NOT NULL,
            params TEXT,
            status TEXT NOT NULL DEFAULT 'running',   -- running | done | failed | interrupted
            started_at TEXT NOT NULL,
            finished_at TEXT,
            summary TEXT,
            error TEXT
        );

        CREATE TABLE llm_calls (
            id INTEGER PRIMARY KEY,
            run_id INTEGER REFERENCES runs(id),
            stage TEXT NOT NULL,
            model TEXT,
            request TEXT,                     -- messages and options, never credentials
            reply TEXT,                       -- raw text of the last reply
            status TEXT NOT NULL,             -- ok | invalid | error
            error TEXT,
            attempts INTEGER NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL
        );

        CREATE TABLE concepts (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            description TEXT,
            source TEXT NOT NULL,             -- preset:3xcm | llm:<model> | manual | import:<what>
            status TEXT NOT NULL DEFAULT 'active',   -- active | removed | merged
            reason TEXT,
            merged_into INTEGER REFERENCES concepts(id),
            created_at TEXT NOT NULL,
            updated_at TEXT
        );

        CREATE TABLE concept_examples (
            concept_id INTEGER NOT NULL REFERENCES concepts(id),
            country TEXT NOT NULL,
            entity TEXT NOT NULL,
            source TEXT,
            PRIMARY KEY (concept_id, country, entity)
        );

        CREATE TABLE terms (
            concept_id INTEGER NOT NULL REFERENCES concepts(id),
            country TEXT NOT NULL,
            language TEXT NOT NULL,
            term TEXT NOT NULL,
            source TEXT NOT NULL,             -- llm:<model> | manual | english
            updated_at TEXT NOT NULL,
            PRIMARY KEY (concept_id, country, language)
        );

        CREATE TABLE queries (
            id INTEGER PRIMARY KEY,
            concept_id INTEGER NOT NULL REFERENCES concepts(id),
            country TEXT NOT NULL,
            language TEXT NOT NULL,
            kind TEXT NOT NULL,               -- english | native
            text TEXT NOT NULL,
            region TEXT,
            status TEXT NOT NULL DEFAULT 'active',   -- active | stale (its term changed)
            created_at TEXT NOT NULL,
            UNIQUE (concept_id, country, language, kind, text)
        );

        CREATE TABLE searches (
            query_id INTEGER NOT NULL REFERENCES queries(id),
            provider TEXT NOT NULL,
            status TEXT NOT NULL,             -- done | failed
            n_results INTEGER,
            error TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            searched_at TEXT NOT NULL,
            PRIMARY KEY (query_id, provider)
        );

        CREATE TABLE candidates (
            id INTEGER PRIMARY KEY,
            url TEXT NOT NULL UNIQUE,
            status TEXT NOT NULL DEFAULT 'pending',  -- pending | downloaded | failed | skipped
            reason TEXT,                      -- machine-readable failure reason (http_404, too_large, ...)
            detail TEXT,                      -- human-readable detail
            http_status INTEGER,
            content_type TEXT,
            bytes INTEGER,
            sha256 TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            updated_at TEXT
        );

        CREATE TABLE search_results (
            id INTEGER PRIMARY KEY,
            query_id INTEGER NOT NULL REFERENCES queries(id),
            provider TEXT NOT NULL,
            rank INTEGER NOT NULL,
            candidate_id INTEGER NOT NULL REFERENCES candidates(id),
            url TEXT NOT NULL,
            thumbnail TEXT,
            title TEXT,
            source_page TEXT,
            width INTEGER,
            height INTEGER,
            raw TEXT,                         -- every field the provider returned, as JSON
            found_at TEXT NOT NULL,
            UNIQUE (query_id, provider, rank)
        );
        CREATE INDEX idx_search_results_candidate ON search_results(candidate_id);

        CREATE TABLE images (
            sha256 TEXT PRIMARY KEY,
            path TEXT NOT NULL,               -- relative to the project: blobs/ab/<sha256>.<ext>
            format TEXT NOT NULL,
            width INTEGER NOT NULL,
            height INTEGER NOT NULL,
            bytes INTEGER NOT NULL,
            phash TEXT,                       -- 64-bit hex
            dhash TEXT,
            status TEXT NOT NULL DEFAULT 'ok',   -- ok | excluded
            reason TEXT,
            created_at TEXT NOT NULL
        );

        -- which query (so which concept x country) found which image
        CREATE VIEW image_links AS
            SELECT i.sha256, sr.id AS search_result_id, sr.rank, sr.provider, q.id AS query_id,
                   q.concept_id, q.country, q.language, q.kind AS query_kind, sr.source_page, sr.found_at
            FROM images i
            JOIN candidates c ON c.sha256 = i.sha256
            JOIN search_results sr ON sr.candidate_id = c.id
            JOIN queries q ON q.id = sr.query_id;

        CREATE TABLE dedup_runs (
            id INTEGER PRIMARY KEY,
            method TEXT NOT NULL,             -- sha256 | phash | dhash | embedding
            scope TEXT NOT NULL,              -- within-concept | global
            params TEXT,
            created_at TEXT NOT NULL
        );

        CREATE TABLE dup_clusters (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES dedup_runs(id),
            method TEXT NOT NULL,
            scope TEXT NOT NULL,
            concept_id INTEGER,               -- set when scope is within-concept
            representative TEXT NOT NULL REFERENCES images(sha256),
            size INTEGER NOT NULL,
            status TEXT NOT NULL DEFAULT 'open',   -- open | resolved
            created_at TEXT NOT NULL
        );

        CREATE TABLE dup_members (
            cluster_id INTEGER NOT NULL REFERENCES dup_clusters(id),
            sha256 TEXT NOT NULL REFERENCES images(sha256),
            distance REAL,                    -- to the representative (Hamming bits or 1 - cosine)
            PRIMARY KEY (cluster_id, sha256)
        );

        CREATE TABLE image_flags (
            sha256 TEXT NOT NULL REFERENCES images(sha256),
            flag TEXT NOT NULL,               -- culture_conflict | ...
            details TEXT,                     -- JSON
            status TEXT NOT NULL DEFAULT 'open',  -- open | resolved
            created_at TEXT NOT NULL,
            PRIMARY KEY (sha256, flag)
        );

        CREATE TABLE image_tags (
            sha256 TEXT NOT NULL REFERENCES images(sha256),
            tag TEXT NOT NULL,                -- a concept name
            score REAL,
            source TEXT NOT NULL,             -- llm:<model> | clip:<model identity>
            created_at TEXT NOT NULL,
            PRIMARY KEY (sha256, tag, source)
        );

        CREATE TABLE image_tag_status (
            sha256 TEXT NOT NULL REFERENCES images(sha256),
            source TEXT NOT NULL,
            status TEXT NOT NULL,             -- done | failed
            error TEXT,
            raw TEXT,
            created_at TEXT NOT NULL,
            PRIMARY KEY (sha256, source)
        );

        CREATE TABLE embeddings (
            model TEXT NOT NULL,              -- model identity string
            kind TEXT NOT NULL,               -- image | text
            key TEXT NOT NULL,                -- image sha256 or sha256 of the text
            dim INTEGER NOT NULL,
            vector BLOB NOT NULL,             -- float32, L2-normalised
            created_at TEXT NOT NULL,
            PRIMARY KEY (model, kind, key)
        );
        """
    )
