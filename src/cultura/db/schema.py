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
            status TEXT NOT NULL DEFAULT 'open',   -- open | resolved | superseded (a later run replaced it)
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
            flag TEXT NOT NULL,               -- culture_conflict | unreadable
            details TEXT,                     -- JSON
            status TEXT NOT NULL DEFAULT 'open',  -- open | resolved | superseded
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


@core()
def m002_decisions_and_benchmarks(db):
    """Tables shared between areas: final annotation decisions (written by annotate, read by build and
    evaluate) and versioned benchmarks (written by build, read by export and evaluate)."""
    db.executescript(
        """
        -- One row per final decision. A newer decision for the same (kind, item_key) supersedes the old
        -- one (superseded = 1); nothing is deleted.
        CREATE TABLE decisions (
            id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,               -- filter | dedup | relevance | entity | translation
            item_key TEXT NOT NULL,           -- stable key of the item (e.g. 'filter:<sha256>')
            campaign TEXT,
            sha256 TEXT,                      -- the image, when the item is about one
            country TEXT,                     -- the culture label (relevance) or language country
            cluster_id INTEGER,               -- dedup review
            label TEXT,                       -- keep | remove | drop | local | western | ... (nominal)
            value REAL,                       -- Likert score (relevance, translation)
            rule TEXT NOT NULL,               -- majority | unanimity | mean | median | adjudicated | gold | manual
            n_annotations INTEGER,
            agreement REAL,
            details TEXT,                     -- JSON (reason, annotators, ...)
            superseded INTEGER NOT NULL DEFAULT 0,
            decided_at TEXT NOT NULL
        );
        CREATE INDEX idx_decisions_item ON decisions(kind, item_key);
        CREATE INDEX idx_decisions_sha ON decisions(sha256);

        CREATE TABLE benchmarks (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            version INTEGER NOT NULL,
            kind TEXT NOT NULL,               -- association | descriptor | imported
            seed INTEGER,
            params TEXT,                      -- JSON
            content_hash TEXT,                -- sha256 over items, candidates, queries and image hashes
            n_items INTEGER,
            report TEXT,                      -- JSON exclusion report
            status TEXT NOT NULL DEFAULT 'building',   -- building | ready | failed
            created_at TEXT NOT NULL,
            UNIQUE (name, version)
        );

        CREATE TABLE benchmark_items (
            id INTEGER PRIMARY KEY,
            benchmark_id INTEGER NOT NULL REFERENCES benchmarks(id),
            item_key TEXT NOT NULL,           -- stable within the benchmark
            concept_id INTEGER NOT NULL REFERENCES concepts(id),
            query_country TEXT NOT NULL,      -- L: whose language the query is in
            query_language TEXT NOT NULL,
            descriptor_country TEXT,          -- D (descriptor benchmarks)
            UNIQUE (benchmark_id, item_key)
        );

        CREATE TABLE benchmark_candidates (
            item_id INTEGER NOT NULL REFERENCES benchmark_items(id),
            role TEXT NOT NULL,               -- cr | lb | ti | orlb | or | cdr
            position INTEGER NOT NULL,        -- column order in the trial
            sha256 TEXT NOT NULL REFERENCES images(sha256),
            concept_id INTEGER NOT NULL,
            country TEXT NOT NULL,            -- the image's culture
            PRIMARY KEY (item_id, role)
        );

        -- Query texts per concept x country(language) and variant, parallel across languages.
        CREATE TABLE benchmark_queries (
            id INTEGER PRIMARY KEY,
            concept_id INTEGER NOT NULL REFERENCES concepts(id),
            country TEXT NOT NULL,
            language TEXT NOT NULL,
            variant TEXT NOT NULL,            -- short | task | casual | mention_<CC> | task_mention_<CC> ...
            descriptor_country TEXT,
            text TEXT NOT NULL,
            source TEXT NOT NULL,             -- term | llm:<model> | manual | import
            status TEXT NOT NULL DEFAULT 'ok',   -- ok | invalid (with reason)
            reason TEXT,
            updated_at TEXT NOT NULL,
            UNIQUE (concept_id, country, language, variant)
        );
        """
    )


@core()
def m003_ingest_rejects(db):
    """Input rows that could not be used (bad URL, unknown country…): kept with their reason, never dropped."""
    db.executescript(
        """
        CREATE TABLE ingest_rejects (
            id INTEGER PRIMARY KEY,
            source TEXT NOT NULL,             -- urls:<path> | folder:<dir> | img2dataset:<dir>
            line INTEGER,
            raw TEXT,
            reason TEXT NOT NULL,
            created_at TEXT NOT NULL,
            UNIQUE (source, line, reason)
        );
        """
    )


#: Tables whose changes can change a dedup run's result (inputs) or its stored output; every row written to
#: them bumps ``change_counters.dedup`` so a rerun on an unchanged project is one lookup (curate/dedup.py).
#: (Since m008, dedup's own bulk inserts of clusters and culture_conflict flags bump it once per transaction.)
_DEDUP_WATCHED = {
    "images": ("INSERT", "DELETE", "UPDATE OF status, phash, dhash, width, height, bytes, path"),
    "candidates": ("INSERT", "DELETE", "UPDATE OF sha256"),
    "search_results": ("INSERT", "DELETE", "UPDATE OF query_id, candidate_id"),
    "queries": ("INSERT", "DELETE", "UPDATE OF concept_id, country"),
    "concepts": ("INSERT", "DELETE", "UPDATE OF name, status, merged_into"),
    "image_flags": ("INSERT", "DELETE", "UPDATE"),
    "dedup_runs": ("INSERT", "DELETE", "UPDATE"),
    "dup_clusters": ("INSERT", "DELETE", "UPDATE"),
    "dup_members": ("DELETE", "UPDATE"),  # members are inserted only with their cluster (counted there)
}


@core()
def m004_dedup_change_counter(db):
    """A change counter for dedup's no-op rerun check, and the fingerprints of finished dedup calls."""
    sql = ["CREATE TABLE IF NOT EXISTS change_counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);",
           "INSERT OR IGNORE INTO change_counters VALUES ('dedup', 0);",
           """CREATE TABLE IF NOT EXISTS dedup_state (
                  key TEXT PRIMARY KEY,         -- JSON of the call's methods, scope and parameters
                  counter INTEGER NOT NULL,     -- change_counters.dedup when the call finished
                  summary TEXT NOT NULL,        -- JSON summary the call returned
                  updated_at TEXT NOT NULL
              );"""]
    for table, events in _DEDUP_WATCHED.items():
        for k, event in enumerate(events):
            sql.append(f"CREATE TRIGGER IF NOT EXISTS trg_dedup_{table}_{k} AFTER {event} ON {table} BEGIN "
                       "UPDATE change_counters SET value = value + 1 WHERE name = 'dedup'; END;")
    db.executescript("\n".join(sql))


@core()
def m005_centre_phash(db):
    """The centre pHash (curate/hashing.py CENTRE_CROP): dedup's crop-robust pHash matching."""
    if "phash_centre" not in {c.name for c in db["images"].columns}:
        db.execute("ALTER TABLE images ADD COLUMN phash_centre TEXT")
    db.execute("CREATE TRIGGER IF NOT EXISTS trg_dedup_images_centre AFTER UPDATE OF phash_centre ON images "
               "BEGIN UPDATE change_counters SET value = value + 1 WHERE name = 'dedup'; END;")


@core()
def m006_run_owner(db):
    """``runs.owner``: the process lease token of the run's writer (see :mod:`cultura.db.leases`), so a run left
    ``running`` by a dead process can be told from one another live process is still doing."""
    db.execute("ALTER TABLE runs ADD COLUMN owner TEXT")


@core()
def m007_blob_checks(db):
    """What :func:`cultura.db.blobs.check_blobs` last verified: each blob folder's modification time when its
    listing was read, and the largest ``images`` rowid checked. A later check lists again only the folders
    whose time changed (a file removed or added changes it) and the rows added since."""
    db.execute("""CREATE TABLE IF NOT EXISTS blob_checks (
                      folder TEXT PRIMARY KEY,      -- relative to the project root, e.g. blobs/ab
                      mtime_ns INTEGER NOT NULL,    -- st_mtime_ns of the folder before it was listed
                      max_rowid INTEGER NOT NULL,   -- images rows up to this rowid were checked
                      checked_at TEXT NOT NULL
                  )""")
    # a row that becomes 'ok' again (an excluded image included, a re-import) may name a file deleted while it
    # was not 'ok' in a folder checked since: such rows are queued for the next check whatever their rowid
    db.execute("CREATE TABLE IF NOT EXISTS blob_recheck (image_rowid INTEGER PRIMARY KEY)")
    # a missing file sends its candidates back to pending by sha256: without an index, one scan each
    db.execute("CREATE INDEX IF NOT EXISTS idx_candidates_sha256 ON candidates(sha256)")
    db.execute("CREATE TRIGGER IF NOT EXISTS trg_blob_recheck AFTER UPDATE OF status, path ON images "
               "WHEN NEW.status = 'ok' BEGIN INSERT OR IGNORE INTO blob_recheck VALUES (NEW.rowid); END;")


@core()
def m008_dedup_bulk_counter(db):
    """Dedup's own bulk inserts bump ``change_counters.dedup`` once per transaction instead of once per row
    (a row trigger doubled the cost of its 200k inserts at 1M images): new clusters and ``culture_conflict``
    flags are written only by dedup (curate/dedup.py), which bumps the counter itself; every other flag
    still bumps it through the trigger."""
    db.executescript("""
        DROP TRIGGER IF EXISTS trg_dedup_dup_clusters_0;
        DROP TRIGGER IF EXISTS trg_dedup_image_flags_0;
        CREATE TRIGGER trg_dedup_image_flags_0 AFTER INSERT ON image_flags WHEN NEW.flag != 'culture_conflict'
        BEGIN UPDATE change_counters SET value = value + 1 WHERE name = 'dedup'; END;
    """)


@core()
def m009_phash_variants(db):
    """``images.phash_variants``: the mirror and 10 % centre pHashes (curate/invariance.py), 16 hex each. Rows
    hashed before have it NULL, so the next dedup hashes them again from one decode (all their hashes, now of
    the content box with uniform borders trimmed), chunk by chunk: an interrupted run resumes."""
    if "phash_variants" not in {c.name for c in db["images"].columns}:
        db.execute("ALTER TABLE images ADD COLUMN phash_variants TEXT")
    db.execute("CREATE TRIGGER IF NOT EXISTS trg_dedup_images_variants AFTER UPDATE OF phash_variants ON images "
               "BEGIN UPDATE change_counters SET value = value + 1 WHERE name = 'dedup'; END;")


@core()
def m010_candidate_url_sources(db):
    """Where the exact URL of a candidate stored without its secret is read again (curate/exact_urls.py): the
    candidate's ``url`` is its display form (no ``user:password@``, no ``token=``/``key=``… value), and the
    downloader requests the URL as given, read again from the row of the ``urls:`` file it came from."""
    db.executescript("""
        CREATE TABLE IF NOT EXISTS candidate_url_sources (
            candidate_id INTEGER PRIMARY KEY REFERENCES candidates(id),
            source TEXT NOT NULL,             -- the absolute path of the urls: file
            line INTEGER NOT NULL,            -- its row (1: the first row, as ingest_rejects counts them)
            updated_at TEXT NOT NULL
        );
    """)


@core()
def m011_hashes_of_the_displayed_picture(db):
    """The perceptual hashes became those of the picture a browser shows (cultura/pixels.py: EXIF orientation
    applied, 16-bit grey scaled to 8 bits instead of clipped white, transparency over white). Hashes stored
    before are cleared, so the next dedup hashes every image again (chunk by chunk: an interrupted run
    resumes) and stores its displayed width x height with them; old and new hashes are never compared."""
    db.execute("UPDATE images SET phash = NULL, dhash = NULL, phash_centre = NULL, phash_variants = NULL "
               "WHERE phash IS NOT NULL OR dhash IS NOT NULL OR phash_centre IS NOT NULL "
               "OR phash_variants IS NOT NULL")


@core()
def m012_fine_hashes(db):
    """``images.phash_fine``: the fine hashes a candidate duplicate pair is confirmed with
    (curate/confirm.py), 32 hex per pHash view. Rows hashed before have it NULL, so the next dedup hashes them
    again from one decode (all their hashes), chunk by chunk: an interrupted run resumes."""
    if "phash_fine" not in {c.name for c in db["images"].columns}:
        db.execute("ALTER TABLE images ADD COLUMN phash_fine TEXT")
    db.execute("CREATE TRIGGER IF NOT EXISTS trg_dedup_images_fine AFTER UPDATE OF phash_fine ON images "
               "BEGIN UPDATE change_counters SET value = value + 1 WHERE name = 'dedup'; END;")
