"""``cultura status``: where the pipeline stands, every area's counts in one summary.

Each area counts its own tables (curation, the LLM call log, the decisions, the benchmarks); the summary sits
here, in the highest area it reads.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..annotate.decisions import decision_counts
from ..curate.status import curation_counts
from ..models.llm import call_counts, failed_calls_by_stage

if TYPE_CHECKING:
    from ..project import Project


def benchmark_counts(db) -> dict[str, int]:
    """Benchmarks per ``kind:status``."""
    return {r[0] if r[0] is not None else "(none)": r[1] for r in db.execute(
        "SELECT kind || ':' || status, count(*) FROM benchmarks GROUP BY kind, status").fetchall()}


def project_status(project: Project) -> dict:
    """Everything a person needs to see where the pipeline stands. JSON-serialisable."""
    db = project.db
    cur = curation_counts(project)
    stages = {**cur["stages"], "llm_calls": call_counts(db), "decisions": decision_counts(db),
              "benchmarks": benchmark_counts(db)}
    failures = dict(cur["failures"])
    failures = {**{k: failures[k] for k in ("downloads", "searches", "ingest")}, "llm": failed_calls_by_stage(db),
                "tagging": failures["tagging"]}
    last_runs = [dict(r) for r in db.query(
        "SELECT stage, status, started_at, finished_at FROM runs WHERE id IN (SELECT max(id) FROM runs GROUP BY stage) "
        "ORDER BY stage")]
    return {"project": str(project.root), "countries": [c.code for c in project.countries], "stages": stages,
            "failures": failures, "per_country": cur["per_country"], "per_concept": cur["per_concept"],
            "last_runs": last_runs}
