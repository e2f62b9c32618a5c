"""Evaluation tables: one ``eval_runs`` row per (model, suite, benchmark) run and its ``eval_results`` rows.

A run row carries everything needed to interpret its results without the code that produced them: the model
identity and info, the benchmark name/version/content hash, the suite, its parameters, the git revision and
the date. A run is complete only once its status is ``done`` (written last); failed runs keep their reason.
Nothing is deleted: a rerun adds a new run row, and reports read the latest done run per model × suite ×
benchmark.
"""
from __future__ import annotations

from ..db.migrations import Migrations

evaluate = Migrations("evaluate")


@evaluate()
def m001_eval_runs(db):
    db.executescript(
        """
        CREATE TABLE eval_runs (
            id INTEGER PRIMARY KEY,
            model TEXT NOT NULL,              -- the embedder's identity string
            model_spec TEXT,                  -- the spec the user gave (openclip:ViT-B-32/openai, fake, ...)
            model_info TEXT,                  -- JSON: family, architecture, pretrained tag, checksum, ...
            benchmark TEXT,                   -- benchmark name (or the caption pool for prevalence)
            benchmark_version INTEGER,
            benchmark_hash TEXT,
            suite TEXT NOT NULL,
            params TEXT,                      -- JSON: the suite's options
            git_revision TEXT,
            cultura_version TEXT,
            status TEXT NOT NULL DEFAULT 'running',   -- running | done | failed
            error TEXT,
            n_results INTEGER,
            n_embedded INTEGER,               -- embeddings computed (not read from the cache) during the run
            started_at TEXT NOT NULL,
            finished_at TEXT
        );
        CREATE INDEX idx_eval_runs_lookup ON eval_runs(suite, model, benchmark);

        CREATE TABLE eval_results (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES eval_runs(id),
            suite TEXT NOT NULL,
            metric TEXT NOT NULL,
            value REAL,                       -- inf is stored as inf; NULL means NaN (undefined, see details.reason)
            ci_low REAL,
            ci_high REAL,
            n INTEGER,
            "group" TEXT NOT NULL DEFAULT '{}',   -- JSON, e.g. {"country": "JP"}
            details TEXT NOT NULL DEFAULT '{}'    -- JSON
        );
        CREATE INDEX idx_eval_results_run ON eval_results(run_id);
        """
    )


@evaluate()
def m002_eval_run_owner(db):
    """``eval_runs.owner``: the process lease token of the run's writer (:mod:`cultura.db.leases`); a run left
    ``running`` by a dead process becomes ``interrupted`` on the next evaluation."""
    db.execute("ALTER TABLE eval_runs ADD COLUMN owner TEXT")


@evaluate()
def m003_eval_samples(db):
    """Per-sample logs (``evaluate run --log-samples``): one row per scored unit of a run — a trial's candidate
    scores and winner, an image query's top-k captions with their languages, a masked context's candidate
    log-likelihoods, a judge score with its token log-probabilities — so anyone can re-score, slice or audit
    a stored number. ``eval_runs.n_samples``: how many were stored (NULL: not logged)."""
    db.executescript(
        """
        CREATE TABLE eval_samples (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES eval_runs(id),
            idx INTEGER NOT NULL,             -- order within the run
            kind TEXT NOT NULL,               -- trial | image_query | masked_context | judge_score | ...
            data TEXT NOT NULL                -- JSON
        );
        CREATE UNIQUE INDEX idx_eval_samples_run ON eval_samples(run_id, idx);
        ALTER TABLE eval_runs ADD COLUMN n_samples INTEGER;
        """
    )
