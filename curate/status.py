"""``cultura status``: counts per stage, per country and per concept, and failures by reason."""
from __future__ import annotations


def _scalar(db, sql, params=()):
    return db.execute(sql, params).fetchone()[0]


def _group(db, sql, params=()):
    return {r[0] if r[0] is not None else "(none)": r[1] for r in db.execute(sql, params).fetchall()}


def project_status(project) -> dict:
    """Everything a person needs to see where the pipeline stands. JSON-serialisable."""
    db = project.db
    stages = {
        "concepts": _group(db, "SELECT status, count(*) FROM concepts GROUP BY status"),
        "terms": _scalar(db, "SELECT count(*) FROM terms"),
        "queries": _group(db, "SELECT kind || ':' || status, count(*) FROM queries GROUP BY kind, status"),
        "searches": _group(db, "SELECT provider || ':' || status, count(*) FROM searches GROUP BY provider, status"),
        "search_results": _scalar(db, "SELECT count(*) FROM search_results"),
        "candidates": _group(db, "SELECT status, count(*) FROM candidates GROUP BY status"),
        "images": _group(db, "SELECT status, count(*) FROM images GROUP BY status"),
        "hashed_images": _scalar(db, "SELECT count(*) FROM images WHERE phash IS NOT NULL"),
        "duplicate_clusters": _group(db, "SELECT method || ':' || status, count(*) FROM dup_clusters "
                                         "GROUP BY method, status"),
        "flags": _group(db, "SELECT flag || ':' || status, count(*) FROM image_flags GROUP BY flag, status"),
        "tagged_images": _group(db, "SELECT source, count(*) FROM image_tag_status WHERE status='done' "
                                    "GROUP BY source"),
        "ingest_rejects": _scalar(db, "SELECT count(*) FROM ingest_rejects"),
        "llm_calls": _group(db, "SELECT status, count(*) FROM llm_calls GROUP BY status"),
    }
    stages["decisions"] = _group(db, "SELECT kind, count(*) FROM decisions WHERE superseded = 0 GROUP BY kind")
    stages["benchmarks"] = _group(db, "SELECT kind || ':' || status, count(*) FROM benchmarks GROUP BY kind, status")
    failures = {
        "downloads": _group(db, "SELECT reason, count(*) FROM candidates WHERE status IN ('failed','skipped') "
                                "GROUP BY reason ORDER BY 2 DESC"),
        "searches": _group(db, "SELECT substr(error, 1, instr(error || ':', ':') - 1), count(*) FROM searches "
                               "WHERE status = 'failed' GROUP BY 1"),
        "ingest": _group(db, "SELECT reason, count(*) FROM ingest_rejects GROUP BY reason"),
        "llm": _group(db, "SELECT stage, count(*) FROM llm_calls WHERE status != 'ok' GROUP BY stage"),
        "tagging": _group(db, "SELECT source, count(*) FROM image_tag_status WHERE status = 'failed' GROUP BY source"),
    }
    per_country = []
    for c in project.countries:
        per_country.append({
            "country": c.code, "name": c.name,
            "queries": _scalar(db, "SELECT count(*) FROM queries WHERE country = ?", [c.code]),
            "searched": _scalar(db, "SELECT count(*) FROM searches s JOIN queries q ON q.id = s.query_id "
                                    "WHERE q.country = ? AND s.status = 'done'", [c.code]),
            "results": _scalar(db, "SELECT count(*) FROM search_results sr JOIN queries q ON q.id = sr.query_id "
                                   "WHERE q.country = ?", [c.code]),
            "downloaded": _scalar(db, "SELECT count(DISTINCT c.id) FROM candidates c JOIN search_results sr ON "
                                      "sr.candidate_id = c.id JOIN queries q ON q.id = sr.query_id WHERE q.country = ? "
                                      "AND c.status = 'downloaded'", [c.code]),
            "images": _scalar(db, "SELECT count(DISTINCT sha256) FROM image_links WHERE country = ?", [c.code]),
        })
    per_concept = [dict(r) for r in db.query(
        """SELECT c.name AS concept, l.country, count(DISTINCT l.sha256) AS images FROM image_links l
           JOIN concepts c ON c.id = l.concept_id JOIN images i ON i.sha256 = l.sha256 AND i.status = 'ok'
           WHERE c.status = 'active' GROUP BY c.name, l.country ORDER BY c.name, l.country""")]
    last_runs = [dict(r) for r in db.query(
        "SELECT stage, status, started_at, finished_at FROM runs WHERE id IN (SELECT max(id) FROM runs GROUP BY stage) "
        "ORDER BY stage")]
    return {"project": str(project.root), "countries": [c.code for c in project.countries], "stages": stages,
            "failures": failures, "per_country": per_country, "per_concept": per_concept, "last_runs": last_runs}
