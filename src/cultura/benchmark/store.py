"""The built benchmarks read back: ``benchmarks``, their items and candidates, and the query texts each was built
with (``benchmark_query_snapshot``). Evaluation, the report and the view read benchmarks through these
functions; :mod:`cultura.benchmark.build` and :mod:`cultura.benchmark.releases` write them.
"""
from __future__ import annotations

import json

ITEM_COLUMNS = ("id", "item_key", "concept_id", "query_country", "query_language", "descriptor_country")
CANDIDATE_COLUMNS = ("item_id", "role", "position", "sha256", "concept_id", "country")
SNAPSHOT_COLUMNS = ("concept_id", "country", "language", "variant", "descriptor_country", "text", "source")


def latest_ready(db, *, name: str | None = None, version: int | None = None, kind: str | None = None) -> dict | None:
    """The newest ready benchmark row (of ``name``, ``version``, ``kind`` when given), or None."""
    where, args = ["status = 'ready'"], []
    for col, val in (("name", name), ("version", version), ("kind", kind)):
        if val is not None:
            where.append(f"{col} = ?")
            args.append(val)
    rows = list(db.query(f"SELECT * FROM benchmarks WHERE {' AND '.join(where)} ORDER BY version DESC, id DESC "
                         "LIMIT 1", args))
    return rows[0] if rows else None


def ready_names(db) -> list[str]:
    """The names of the ready benchmarks, sorted."""
    return sorted({r["name"] for r in db.query("SELECT name FROM benchmarks WHERE status = 'ready'")})


def benchmark_rows(db) -> list[dict]:
    """Every benchmark: id, name, version, kind, n_items, status, content_hash (by name, then version)."""
    return [dict(r) for r in db.query("SELECT id, name, version, kind, n_items, status, content_hash FROM benchmarks "
                                      "ORDER BY name, version")]


def benchmark_id(db, name: str, version: int) -> int | None:
    """The id of benchmark ``name@version`` (whatever its status), or None."""
    row = db.execute("SELECT id FROM benchmarks WHERE name = ? AND version = ?", [name, version]).fetchone()
    return row[0] if row else None


def benchmark_report(db, name: str, version: int) -> dict | None:
    """The report a build stored with ``name@version`` (decoded), or None when there is no such benchmark."""
    row = db.execute("SELECT report FROM benchmarks WHERE name = ? AND version = ?", [name, version]).fetchone()
    return json.loads(row[0] or "{}") if row else None


def items(db, benchmark_id: int, *, order: str = "id") -> list[dict]:
    """A benchmark's items as dicts of :data:`ITEM_COLUMNS`, by ``order`` (``id`` or ``item_key``)."""
    if order not in ("id", "item_key"):
        raise ValueError(f"order must be 'id' or 'item_key', not {order!r}")
    return [dict(zip(ITEM_COLUMNS, r)) for r in db.execute(
        f"SELECT {', '.join(ITEM_COLUMNS)} FROM benchmark_items WHERE benchmark_id = ? ORDER BY {order}",
        [benchmark_id])]


def candidates(db, benchmark_id: int) -> list[dict]:
    """A benchmark's candidates as dicts of :data:`CANDIDATE_COLUMNS`, by item and position."""
    return [dict(zip(CANDIDATE_COLUMNS, r)) for r in db.execute(
        "SELECT bc.item_id, bc.role, bc.position, bc.sha256, bc.concept_id, bc.country FROM benchmark_candidates bc "
        "JOIN benchmark_items bi ON bi.id = bc.item_id WHERE bi.benchmark_id = ? ORDER BY bc.item_id, bc.position",
        [benchmark_id])]


def item_candidates(db, item_id: int) -> list[dict]:
    """One item's candidates as dicts of :data:`CANDIDATE_COLUMNS`, by position."""
    return [dict(zip(CANDIDATE_COLUMNS, r)) for r in db.execute(
        f"SELECT {', '.join(CANDIDATE_COLUMNS)} FROM benchmark_candidates WHERE item_id = ? ORDER BY position",
        [item_id])]


def images(db, benchmark_id: int) -> list[tuple[str, int, str]]:
    """``(sha256, concept_id, country)`` of a benchmark's candidates, once each, by sha256."""
    return db.execute("SELECT DISTINCT bc.sha256, bc.concept_id, bc.country FROM benchmark_candidates bc "
                      "JOIN benchmark_items bi ON bi.id = bc.item_id WHERE bi.benchmark_id = ? ORDER BY bc.sha256",
                      [benchmark_id]).fetchall()


def snapshot(db, benchmark_id: int) -> list[dict]:
    """The query texts a benchmark was built with, as dicts of :data:`SNAPSHOT_COLUMNS` (empty for a
    benchmark built before snapshots were kept)."""
    if "benchmark_query_snapshot" not in db.table_names():
        return []
    return [dict(zip(SNAPSHOT_COLUMNS, r)) for r in db.execute(
        f"SELECT {', '.join(SNAPSHOT_COLUMNS)} FROM benchmark_query_snapshot WHERE benchmark_id = ?",
        [benchmark_id])]
