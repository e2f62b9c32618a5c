"""Masked contexts (seed 001 §3.2): sentences with one ``[MASK]`` where an entity of a given type fits.

Columns: ``language``, ``country`` (the culture the context is grounded in), ``kind`` (``grounded`` — only a
local entity fits; ``neutral`` — any entity fits; ``qa`` — a longer paragraph for extractive QA), ``type``
(entity type at the mask), ``text``, ``sentiment`` (positive / negative / neutral, for the sentiment
experiment), ``english`` (the parallel English translation, also with ``[MASK]``) and ``parallel_id`` (one value
shared by the translations of one context across languages, so parallel sets are recorded). Editing is a
re-import (same language/kind/type/text updates sentiment, English and parallel id) or
:func:`set_context_status` (exclusion is a status; nothing is deleted).

Candidate contexts (status ``candidate``) are annotation's ``context`` items (:func:`context_item_rows`), and
adjudication writes the decided kind and sentiment back (:func:`apply_context_labels`); the LLM-bias suite
evaluates the active ones. Curation owns the table (the ``llm_bias`` migration set created it).

>>> split_mask("I ate [MASK] yesterday.")
('I ate ', ' yesterday.')
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING

from ..db import now, transaction
from ..db.readers import read_rows
from ..errors import CulturaError
from ..models.scorers import MASK, split_mask  # noqa: F401 - re-exported: the mask is the scorers' convention

if TYPE_CHECKING:
    from ..project import Project

KINDS = ("grounded", "neutral", "qa")
STATUSES = ("active", "candidate", "excluded")
SENTIMENTS = ("positive", "negative", "neutral")
_SENTIMENT_ALIASES = {"0": "neutral", "1": "positive", "2": "negative", "pos": "positive", "neg": "negative"}


def fill(text: str, entity: str) -> str:
    """The context with its ``[MASK]`` replaced by ``entity``."""
    before, after = split_mask(text)
    return before + entity + after


def normalise_context(raw: dict, *, where: str = "context", defaults: dict | None = None) -> dict:
    """One validated context row from a loose dict."""
    r = {**(defaults or {}), **{k: v for k, v in raw.items() if v not in (None, "")}}
    text = str(r.get("text") or r.get("context") or "").strip()
    if not text:
        raise CulturaError(f"{where}: no 'text' column with the masked context.")
    try:
        split_mask(text)
    except CulturaError as e:
        raise CulturaError(f"{where}: {e}") from None
    for key in ("language", "type"):
        if not r.get(key):
            raise CulturaError(f"{where}: missing '{key}'; add the column or pass --{key}.")
    kind = str(r.get("kind") or "").strip().lower()
    if kind not in KINDS:
        raise CulturaError(f"{where}: kind {kind or None!r} is not one of {', '.join(KINDS)}; set the 'kind' "
                           "column (or pass --kind).")
    sentiment = r.get("sentiment")
    if sentiment is not None:
        sentiment = _SENTIMENT_ALIASES.get(str(sentiment).strip().lower(), str(sentiment).strip().lower())
        if sentiment not in SENTIMENTS:
            raise CulturaError(f"{where}: sentiment {r.get('sentiment')!r} is not one of "
                               f"{', '.join(SENTIMENTS)} (or 0/1/2 as in seed 001 Table 8).")
    status = str(r.get("status") or "active").strip().lower()
    if status not in STATUSES:
        raise CulturaError(f"{where}: status {status!r} is not one of {', '.join(STATUSES)} (candidate: to be "
                           "annotated with 'cultura annotate push context').")
    english = str(r["english"]).strip() if r.get("english") else None
    if english is not None and english.count(MASK) != 1:
        raise CulturaError(f"{where}: the English translation needs exactly one {MASK}.")
    return {"language": str(r["language"]).strip(), "kind": kind, "type": str(r["type"]).strip(), "text": text,
            "country": str(r["country"]).strip().upper() if r.get("country") else None,
            "sentiment": sentiment, "english": english,
            "parallel_id": str(r["parallel_id"]) if r.get("parallel_id") not in (None, "") else None,
            "source": r.get("source"), "status": status}


def add_contexts(project: Project, rows, *, source: str) -> dict:
    """Insert contexts; an existing (language, kind, type, text) gets its sentiment, English, country and
    parallel id updated when the new row gives them. Returns ``{"rows", "inserted", "updated"}``."""
    db = project.db
    rows = list(rows)
    ts = now()
    inserted = updated = 0
    with transaction(db):
        for r in rows:
            row = {**r, "source": r.get("source") or source}
            existing = db.execute("SELECT id FROM contexts WHERE language = ? AND kind = ? AND type = ? AND text = ?",
                                  [row["language"], row["kind"], row["type"], row["text"]]).fetchone()
            if existing is None:
                db["contexts"].insert({**row, "created_at": ts})
                inserted += 1
            else:
                upd = {k: row[k] for k in ("sentiment", "english", "country", "parallel_id") if row.get(k)}
                if upd:
                    db["contexts"].update(existing[0], {**upd, "updated_at": ts})
                    updated += 1
    return {"rows": len(rows), "inserted": inserted, "updated": updated}


def import_contexts(project: Project, path: str | Path, *, language: str | None = None, kind: str | None = None,
                    type: str | None = None, source: str | None = None, status: str | None = None) -> dict:
    """Import masked contexts from JSONL or CSV (columns as in the module docstring). Idempotent. ``status``
    ``candidate`` (for rows without one) holds new contexts back from evaluation until annotation (the
    ``context`` kind) accepts them; the status of an existing context is not changed by a re-import."""
    defaults = {k: v for k, v in (("language", language), ("kind", kind), ("type", type), ("status", status))
                if v}
    rows = [normalise_context(r, where=f"{path} row {n}", defaults=defaults)
            for n, r in enumerate(read_rows(path, strict=True), 1)]
    if not rows:
        raise CulturaError(f"{path} holds no context rows; add one JSON object (or CSV row) per context.")
    return add_contexts(project, rows, source=source or f"import:{Path(path).name}")


def list_contexts(project: Project, *, language: str | None = None, kind: str | None = None, type: str | None = None,
                  status: str | None = "active") -> list[dict]:
    """Context rows filtered by language, kind, type and status (None = any), ordered by id."""
    where, args = [], []
    for col, val in (("language", language), ("kind", kind), ("type", type), ("status", status)):
        if val is not None:
            where.append(f"{col} = ?")
            args.append(val)
    sql = "SELECT * FROM contexts" + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY id"
    return [dict(r) for r in project.db.query(sql, args)]


#: languages written without spaces: context length in characters (seed 001 Table 5), else in words
CHARACTER_LANGUAGES = ("zh", "ja", "th")


def context_counts(project: Project, *, status: str | None = "active") -> list[dict]:
    """Per language: the number of contexts of each kind (seed 001 Table 3) and the mean ± SD length of the
    adaptation contexts (grounded + neutral) and of the QA contexts (Table 5: words, characters for zh/ja;
    SD with ddof 1). Rows ``{"language", "grounded", "neutral", "qa", "unit", "length_adaptation",
    "sd_adaptation", "length_qa", "sd_qa"}``."""

    out = []
    by: dict[str, list[dict]] = {}
    for c in list_contexts(project, status=status):
        by.setdefault(c["language"], []).append(c)
    for lang, cs in sorted(by.items()):
        chars = lang in CHARACTER_LANGUAGES
        length = (lambda t: len(t.replace(MASK, "X"))) if chars else (lambda t: len(t.split()))
        row = {"language": lang, **{k: sum(c["kind"] == k for c in cs) for k in KINDS},
               "unit": "characters" if chars else "words"}
        for name, kinds in (("adaptation", ("grounded", "neutral")), ("qa", ("qa",))):
            ls = [length(c["text"]) for c in cs if c["kind"] in kinds]
            row[f"length_{name}"] = round(statistics.fmean(ls), 2) if ls else None
            row[f"sd_{name}"] = round(statistics.stdev(ls), 2) if len(ls) > 1 else None
        out.append(row)
    return out


def set_context_status(project: Project, context_id: int, status: str, *, reason: str | None = None) -> None:
    """Exclude (``excluded``) or restore (``active``) one context; nothing is deleted."""
    if status not in ("active", "excluded"):
        raise CulturaError(f"status must be 'active' or 'excluded', got {status!r}.")
    with transaction(project.db):
        project.db["contexts"].update(int(context_id), {"status": status, "reason": reason, "updated_at": now()})


def context_item_rows(project: Project) -> list[dict]:
    """Candidate contexts as ``context`` annotation rows (keys ``ctx-<id>``), by id."""
    return [{"key": f"ctx-{r['id']}", "text": r["text"], "language": r["language"], "type": r["type"],
             "english": r["english"], "kind": r["kind"], "country": r["country"]}
            for r in list_contexts(project, status="candidate")]


def apply_context_labels(db, decisions: list[tuple[str, str | None]]) -> dict:
    """Write adjudicated ``context`` decisions (``(item key, label)``, oldest first; keys ``context:ctx-<id>``)
    back to the contexts, atomically: ``grounded/<sentiment>``, ``neutral/<sentiment>`` and ``qa`` make the
    context ``active`` with that kind and sentiment; ``reject`` excludes it (reason "annotated reject"). A kind
    change that would duplicate an existing context of that kind excludes the candidate with the reason.
    Returns counts."""
    n = {"active": 0, "excluded": 0, "unknown": 0}
    ts = now()
    with transaction(db):
        for key, label in decisions:
            try:
                cid = int(key.rsplit("ctx-", 1)[1])
            except ValueError:
                n["unknown"] += 1
                continue
            cur = db.execute("SELECT language, type, text FROM contexts WHERE id = ?", [cid]).fetchone()
            if cur is None:
                n["unknown"] += 1
                continue
            kind, _, sentiment = (label or "").partition("/")
            if kind not in ("grounded", "neutral", "qa"):
                db.execute("UPDATE contexts SET status = 'excluded', reason = ?, updated_at = ? WHERE id = ?",
                           [f"annotated {label or 'without label'}", ts, cid])
                n["excluded"] += 1
                continue
            clash = db.execute("SELECT id FROM contexts WHERE language = ? AND type = ? AND text = ? AND kind = ? "
                               "AND id != ?", [cur[0], cur[1], cur[2], kind, cid]).fetchone()
            if clash is not None:
                db.execute("UPDATE contexts SET status = 'excluded', reason = ?, updated_at = ? WHERE id = ?",
                           [f"annotated {kind}: duplicate of context {clash[0]}", ts, cid])
                n["excluded"] += 1
                continue
            db.execute("UPDATE contexts SET kind = ?, sentiment = ?, status = 'active', reason = NULL, "
                       "updated_at = ? WHERE id = ?", [kind, sentiment or None, ts, cid])
            n["active"] += 1
    return n


def by_language(contexts: list[dict], *, english: bool = False) -> dict[str, list[dict]]:
    """Contexts grouped by language, in language order; with ``english`` their parallel English versions
    (contexts without one are left out)."""
    if english:
        contexts = [v for v in (english_view(c) for c in contexts) if v]
    groups: dict[str, list[dict]] = {}
    for c in contexts:
        groups.setdefault(c["language"], []).append(c)
    return dict(sorted(groups.items()))


def english_view(row: dict) -> dict | None:
    """The parallel English version of a context row (language 'en', same kind/type/sentiment), or None."""
    if not row.get("english"):
        return None
    return {**row, "language": "en", "text": row["english"], "source_language": row["language"]}
