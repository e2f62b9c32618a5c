"""Tables of the annotation area: campaigns, their Label Studio projects, annotators, items, assignments and
the append-only annotation log. Final decisions go to the core ``decisions`` table (``db/schema.py``).

Nothing here holds a password or a token: Label Studio credentials live in ``.secrets/labelstudio.json``
(mode 0600) beside the project, never in the database.
"""
from __future__ import annotations

from cultura.db.migrations import Migrations

annotate = Migrations("annotate")


@annotate()
def m001_annotation_tables(db):
    db.executescript(
        """
        -- A campaign = one KIND pushed under one name (the --batch NAME, default the kind).
        CREATE TABLE campaigns (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL,               -- filter | dedup-review | relevance | entity | translation
            overlap INTEGER NOT NULL,         -- K annotators per item
            params TEXT,                      -- JSON (gold, other countries, source file, ...)
            status TEXT NOT NULL DEFAULT 'active',
            created_at TEXT NOT NULL,
            updated_at TEXT
        );

        CREATE TABLE annotators (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            email TEXT NOT NULL UNIQUE,
            ls_user_id INTEGER,               -- Label Studio user id (no password, no token)
            ls_url TEXT,                      -- server the user was created on
            country TEXT,                     -- ISO code of the culture they rate (seed 004: own country)
            languages TEXT NOT NULL DEFAULT '[]',   -- JSON list of ISO 639-1 codes they speak
            role TEXT NOT NULL DEFAULT 'annotator', -- annotator | adjudicator
            active INTEGER NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL,
            updated_at TEXT
        );

        -- One Label Studio project per annotator per campaign (Community has no task assignment), split in
        -- parts before Label Studio's recommended 100k tasks. purpose 'adjudicate' = adjudication project.
        CREATE TABLE campaign_projects (
            id INTEGER PRIMARY KEY,
            campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
            annotator_id INTEGER NOT NULL REFERENCES annotators(id),
            purpose TEXT NOT NULL DEFAULT 'annotate',   -- annotate | adjudicate
            part INTEGER NOT NULL DEFAULT 1,
            ls_project_id INTEGER,
            ls_url TEXT,
            title TEXT,
            n_tasks INTEGER NOT NULL DEFAULT 0,
            status TEXT NOT NULL DEFAULT 'active',      -- active | missing (deleted in Label Studio)
            reason TEXT,
            created_at TEXT NOT NULL,
            checked_at TEXT,
            UNIQUE (campaign_id, annotator_id, purpose, part)
        );

        CREATE TABLE annotation_items (
            id INTEGER PRIMARY KEY,
            campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
            item_key TEXT NOT NULL,           -- stable: 'filter:<sha256>', 'relevance:<sha256>:<CC>', ...
            kind TEXT NOT NULL,
            payload TEXT NOT NULL,            -- JSON: what the task shows (urls, texts, concept, ...)
            sha256 TEXT,
            country TEXT,
            language TEXT,
            cluster_id INTEGER,
            gold TEXT,                        -- JSON known answer {"label": ...} / {"value": ...}; NULL if none
            created_at TEXT NOT NULL,
            UNIQUE (campaign_id, item_key)
        );

        CREATE TABLE assignments (
            id INTEGER PRIMARY KEY,
            item_id INTEGER NOT NULL REFERENCES annotation_items(id),
            annotator_id INTEGER NOT NULL REFERENCES annotators(id),
            project_id INTEGER NOT NULL REFERENCES campaign_projects(id),
            purpose TEXT NOT NULL DEFAULT 'annotate',   -- annotate | adjudicate
            ls_task_id INTEGER,               -- NULL until Label Studio confirmed the import
            status TEXT NOT NULL DEFAULT 'pending',     -- pending | pushed
            created_at TEXT NOT NULL,
            pushed_at TEXT,
            UNIQUE (item_id, annotator_id, purpose)
        );
        CREATE INDEX idx_assignments_project ON assignments(project_id, ls_task_id);

        -- Append-only: an annotation edited in Label Studio becomes a new version; old rows are kept with
        -- is_current = 0.
        CREATE TABLE annotations (
            id INTEGER PRIMARY KEY,
            assignment_id INTEGER REFERENCES assignments(id),
            item_id INTEGER NOT NULL REFERENCES annotation_items(id),
            annotator_id INTEGER REFERENCES annotators(id),
            purpose TEXT NOT NULL DEFAULT 'annotate',
            ls_project_id INTEGER NOT NULL,
            ls_task_id INTEGER NOT NULL,
            ls_annotation_id INTEGER NOT NULL,
            version INTEGER NOT NULL,
            result TEXT NOT NULL,             -- JSON result list as exported by Label Studio
            label TEXT,                       -- parsed nominal label
            value REAL,                       -- parsed Likert value
            details TEXT,                     -- JSON: reason, kept members, ...
            was_cancelled INTEGER NOT NULL DEFAULT 0,
            completed_by INTEGER,             -- Label Studio user id
            lead_time REAL,                   -- seconds
            ls_created_at TEXT,
            ls_updated_at TEXT,
            is_current INTEGER NOT NULL DEFAULT 1,
            pulled_at TEXT NOT NULL,
            UNIQUE (ls_project_id, ls_annotation_id, version)
        );
        CREATE INDEX idx_annotations_item ON annotations(item_id, is_current);

        CREATE TABLE annotation_pulls (
            id INTEGER PRIMARY KEY,
            project_id INTEGER NOT NULL REFERENCES campaign_projects(id),
            status TEXT NOT NULL,             -- ok | missing | failed
            n_new INTEGER NOT NULL DEFAULT 0,
            n_versions INTEGER NOT NULL DEFAULT 0,
            error TEXT,
            pulled_at TEXT NOT NULL
        );
        """
    )


@annotate()
def m002_annotation_deleted(db):
    """``annotations.deleted_at``: an annotation deleted in Label Studio becomes a new version with this set
    (never current); the versions pulled before it are kept."""
    db.execute("ALTER TABLE annotations ADD COLUMN deleted_at TEXT")


@annotate()
def m003_aggregation(db):
    """Aggregation by estimated skill: ``decisions.rule_params`` (JSON: library, version, model, parameters,
    whether gold answers were fed) and ``annotator_skills`` (each annotator's estimate per campaign and rule).
    Blind accounts: ``campaign_projects.ls_as`` = 'annotator' for a project made with the annotator's own token
    (in their organization); NULL = made with the admin's (projects from before blind accounts)."""
    db.executescript(
        """
        ALTER TABLE decisions ADD COLUMN rule_params TEXT;
        ALTER TABLE campaign_projects ADD COLUMN ls_as TEXT;
        CREATE TABLE annotator_skills (
            campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
            annotator_id INTEGER NOT NULL REFERENCES annotators(id),
            rule TEXT NOT NULL,               -- dawid-skene | glad | mace | wawa | ... | severity
            skill REAL,                       -- see 'meaning' (accuracy, expertise, competence, severity)
            n_labels INTEGER NOT NULL DEFAULT 0,
            meaning TEXT,
            params TEXT,                      -- JSON: the rule's parameters
            computed_at TEXT NOT NULL,
            PRIMARY KEY (campaign_id, annotator_id, rule)
        );
        """
    )


@annotate()
def m004_annotator_servers(db):
    """A Label Studio server per annotator (and adjudicator): ``annotator_servers`` records where each one keeps
    its data and answers and the annotator's user id there (no credential: those live in
    ``.secrets/servers.json``). ``status``: ``active``, or ``revoked`` once the annotator was deactivated (their
    account locked and their server stopped). ``campaign_projects.ls_as`` = 'server' marks a project on the
    annotator's own server. Ids are per server, so pulled annotations are found by their assignment's project
    (indexed here), not by the Label Studio project id alone."""
    db.executescript(
        """
        CREATE TABLE annotator_servers (
            annotator_id INTEGER PRIMARY KEY REFERENCES annotators(id),
            data_dir TEXT NOT NULL,           -- relative to the project root
            port INTEGER NOT NULL,            -- kept across restarts: the image server's CORS origin stays valid
            url TEXT NOT NULL,
            ls_user_id INTEGER,               -- the annotator's user on THIS server
            status TEXT NOT NULL DEFAULT 'active',   -- active | revoked
            created_at TEXT NOT NULL,
            revoked_at TEXT
        );
        -- Label Studio numbers projects and annotations per server: the key of a pulled annotation names its
        -- server too ('' = the shared one and imports; 'a<ID>' = annotator ID's own server)
        CREATE TABLE annotations_m004 (
            id INTEGER PRIMARY KEY,
            assignment_id INTEGER REFERENCES assignments(id),
            item_id INTEGER NOT NULL REFERENCES annotation_items(id),
            annotator_id INTEGER REFERENCES annotators(id),
            purpose TEXT NOT NULL DEFAULT 'annotate',
            ls_project_id INTEGER NOT NULL,
            ls_task_id INTEGER NOT NULL,
            ls_annotation_id INTEGER NOT NULL,
            version INTEGER NOT NULL,
            result TEXT NOT NULL,
            label TEXT,
            value REAL,
            details TEXT,
            was_cancelled INTEGER NOT NULL DEFAULT 0,
            completed_by INTEGER,
            lead_time REAL,
            ls_created_at TEXT,
            ls_updated_at TEXT,
            is_current INTEGER NOT NULL DEFAULT 1,
            pulled_at TEXT NOT NULL,
            deleted_at TEXT,
            ls_server TEXT NOT NULL DEFAULT '',
            UNIQUE (ls_server, ls_project_id, ls_annotation_id, version)
        );
        INSERT INTO annotations_m004 (id, assignment_id, item_id, annotator_id, purpose, ls_project_id, ls_task_id,
            ls_annotation_id, version, result, label, value, details, was_cancelled, completed_by, lead_time,
            ls_created_at, ls_updated_at, is_current, pulled_at, deleted_at)
          SELECT id, assignment_id, item_id, annotator_id, purpose, ls_project_id, ls_task_id, ls_annotation_id,
            version, result, label, value, details, was_cancelled, completed_by, lead_time, ls_created_at,
            ls_updated_at, is_current, pulled_at, deleted_at FROM annotations;
        DROP TABLE annotations;
        ALTER TABLE annotations_m004 RENAME TO annotations;
        CREATE INDEX idx_annotations_item ON annotations(item_id, is_current);
        CREATE INDEX idx_annotations_assignment ON annotations(assignment_id, ls_annotation_id, version);
        """
    )


@annotate()
def m006_grid_tasks(db):
    """Grid tasks: one Label Studio task showing several items of a campaign project. Each member's assignment
    keeps its own row; its ``ls_task_id`` is then ``-assignment id`` (a per-item stand-in: the grid's real task id
    is ``grid_tasks.ls_task_id``), so pulled grid answers become one annotation row per item as before."""
    db.executescript(
        """
        CREATE TABLE grid_tasks (
            id INTEGER PRIMARY KEY,
            project_id INTEGER NOT NULL REFERENCES campaign_projects(id),
            grid_key TEXT NOT NULL,           -- 'grid:<kind>:<hash of the members' item keys>'
            size INTEGER NOT NULL,            -- cells of the config (a short grid leaves some blank)
            item_keys TEXT NOT NULL,          -- JSON list, cell order
            ls_task_id INTEGER,               -- NULL until Label Studio confirmed the import
            created_at TEXT NOT NULL,
            UNIQUE (project_id, grid_key)
        );
        """
    )


@annotate()
def m007_pull_watermark(db):
    """What an incremental pull starts from: the latest Label Studio ``updated_at`` of the project's tasks seen
    (``watermark``), how many tasks the project held (``ls_tasks``: fewer next time means tasks were deleted,
    so that pull re-exports everything), how many annotation bodies came back (``n_fetched``) and whether the
    pull re-exported the whole project (``full``)."""
    for col, typ in (("watermark", "TEXT"), ("ls_tasks", "INTEGER"), ("n_fetched", "INTEGER"), ("full", "INTEGER")):
        db.execute(f"ALTER TABLE annotation_pulls ADD COLUMN {col} {typ}")
