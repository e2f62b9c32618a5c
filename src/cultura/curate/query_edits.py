"""Benchmark query texts set by a person (source ``manual``, status ``ok``: never overwritten by a rebuild): one
(:func:`set_query`) or many from a CSV/JSONL/Parquet file (:func:`set_queries_from_file`: every row checked, the
good ones written in one transaction, the others reject rows with their reason). The text check an LLM's text
passes (:func:`cultura.curate.cues.validate_text`) is a warning here, never a refusal: a person's choice.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from .. import db as dbmod
from ..db import transaction
from ..db.readers import ERROR, TableReadError, read_rows
from ..errors import CulturaError, unknown
from .benchmark_queries import QueryError, native_terms
from .cues import cue_patterns, validate_text
from .search_rows import reject

if TYPE_CHECKING:
    from ..project import Project

VARIANT_RE = re.compile(r"^(short|task|casual|(task_|casual_)?mention_[A-Z]{2})$")


def set_query(project: Project, concept: str, country: str, variant: str, text: str) -> dict:
    """Set one query text by hand (source ``manual``, status ``ok``; never overwritten by a rebuild).
    The validation result is returned as ``warning`` but does not block a person's choice. Many at once:
    :func:`cultura.curate.query_edits.set_queries_from_file`."""
    row = check_manual_query(project, native_terms(project), concept, country, variant, text)
    with transaction(project.db):
        write_manual_query(project.db, row)
    return {k: v for k, v in row.items() if k in ("concept", "country", "variant", "text", "warning")}


def check_manual_query(project: Project, terms: dict, concept: str, country: str, variant: str, text: str) -> dict:
    """One hand-set query checked (unknown concept or country, a variant that is not one, an empty text: a
    :class:`QueryError` or :class:`~cultura.errors.UnknownName` naming it); ``terms`` from :func:`native_terms`. Returns
    the row to write, with the text check's ``warning`` (kept: a person's choice)."""
    db = project.db
    row = db.execute("SELECT id FROM concepts WHERE name = ?", [concept]).fetchone()
    if row is None:
        names = [r[0] for r in db.execute("SELECT name FROM concepts")]
        raise unknown("concept", concept, names, hint="See 'cultura concepts list'.")
    c = project.country(country)
    if not VARIANT_RE.match(variant or ""):
        raise QueryError(f"Variant {variant!r} is not one of short, task, casual, mention_CC, task_mention_CC, "
                         "casual_mention_CC (CC an upper-case country code).")
    if not (text or "").strip():
        raise QueryError("The query text is empty. Pass the text to store.")
    descriptor = variant.rsplit("_", 1)[1] if "mention_" in variant else None
    if descriptor:
        project.country(descriptor)
    term = terms.get((row[0], c.code))
    warning = validate_text(text, term, cue_patterns(allow=[descriptor] if descriptor else [],
                                                     language=c.language)) if term else None
    return {"concept_id": row[0], "concept": concept, "country": c.code, "language": c.language, "variant": variant,
            "descriptor": descriptor, "text": text.strip(), "warning": warning}


def write_manual_query(db, r: dict) -> None:
    """Write one row of :func:`check_manual_query` (part of the caller's transaction)."""
    db.conn.execute(
        "INSERT INTO benchmark_queries (concept_id, country, language, variant, descriptor_country, text, "
        "source, status, reason, updated_at) VALUES (?, ?, ?, ?, ?, ?, 'manual', 'ok', NULL, ?) "
        "ON CONFLICT (concept_id, country, language, variant) DO UPDATE SET text = excluded.text, "
        "descriptor_country = excluded.descriptor_country, source = 'manual', status = 'ok', reason = NULL, "
        "updated_at = excluded.updated_at", [r["concept_id"], r["country"], r["language"], r["variant"],
                                             r["descriptor"], r["text"], dbmod.now()])


#: The columns of a file of query texts.
COLUMNS = ("concept", "country", "variant", "text")


def set_queries_from_file(project: Project, path) -> dict:
    """Set many query texts by hand from a CSV, JSONL or Parquet file with the columns ``concept``, ``country``,
    ``variant``, ``text``: every row is checked like :func:`set_query`; the good rows are written in one
    transaction, every other row is an ``ingest_rejects`` row (source ``set-query:<file>``, its line) with its
    reason, also listed in the answer. Returns ``rows`` = ``set`` + ``rejected``, the ``warnings`` count (texts
    kept although the text check would refuse them) and the first rejects."""
    p = Path(path)
    if not p.is_file():
        raise CulturaError(f"No file {str(p)!r}. Give a CSV/JSONL/Parquet file with the columns "
                           f"{', '.join(COLUMNS)}.", param="path")
    try:
        rows = read_rows(p)
    except TableReadError as e:
        raise CulturaError(str(e), param="path") from None
    cols = {k for r in rows for k in r if k not in (ERROR, "__line__")}
    if rows and not set(COLUMNS) <= cols:
        raise CulturaError(f"{p.name} needs the columns {', '.join(COLUMNS)}; found "
                           f"{', '.join(sorted(cols)) or 'none'}.", param="path")
    terms = native_terms(project)
    good, rejects, warnings = [], [], 0
    for i, r in enumerate(rows, start=1):
        line = r.get("__line__", i)
        reason = r.get(ERROR)
        if not reason:
            try:
                row = check_manual_query(project, terms, str(r.get("concept") or "").strip(),
                                         str(r.get("country") or "").strip().upper(),
                                         str(r.get("variant") or "").strip(), str(r.get("text") or ""))
            except CulturaError as e:
                reason = str(e)
            else:
                good.append(row)
                warnings += bool(row["warning"])
                continue
        rejects.append({"line": line, "reason": reason, "row": r})
    source = f"set-query:{p.resolve()}"
    with transaction(project.db):  # the good rows and the reject rows land together
        for row in good:
            write_manual_query(project.db, row)
        for rej in rejects:
            reject(project.db, source, rej["line"], rej["row"], rej["reason"])
    return {"rows": len(rows), "set": len(good), "rejected": len(rejects), "warnings": warnings,
            "rejects": [{"line": r["line"], "reason": r["reason"]} for r in rejects[:20]], "file": str(p)}
