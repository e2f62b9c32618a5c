"""Entity tables (seed 001 §3.1): culture-specific entities per language, type and side.

A row is one surface form that can fill ``[MASK]``: ``language`` (of the native form), ``type`` (food,
beverage, authors, location, names_female, names_male, sports_clubs — the seed's Table 4 types, any string is
accepted), ``side`` (``local`` = the culture of the language, ``western``), ``native``, ``english``,
``country``, ``source`` and ``status`` (``candidate`` from automatic collection, ``accepted`` / ``rejected``
after annotation; imported rows are ``accepted`` unless the file says otherwise).

Import files are JSONL or CSV with those columns (``entity``/``name`` are accepted for ``native``; ``asian`` /
``native`` / ``local`` for the side):

>>> # doctest: +SKIP
>>> import_entities(project, "entities.jsonl")
{'rows': 40, 'inserted': 40, 'existing': 0}

Annotation goes through the ``entity`` campaign: :func:`entity_item_rows` are its items (or
:func:`export_entity_items` writes them for ``cultura annotate push entity --from FILE``; item keys
``entity:ent-<id>``), and adjudication copies the final decisions back onto the entities
(:func:`apply_entity_labels`: local / western → accepted with that side; neither / noise → rejected).

The entities are curated data, like the concepts and their terms: collected (imported, from Wikidata, by
patterns), reviewed by annotation, then evaluated by the LLM-bias suite (:mod:`cultura.evaluate.suites.llm_bias`);
curation owns the table (the ``llm_bias`` migration set created it), so both read it through this module.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from ..db import dumps, now, transaction
from ..db.readers import read_rows
from ..errors import CulturaError

if TYPE_CHECKING:
    from ..project import Project

SIDES = ("local", "western")
STATUSES = ("candidate", "accepted", "rejected")
_SIDE_ALIASES = {"local": "local", "asian": "local", "native": "local", "culture": "local",
                 "western": "western", "west": "western"}
_NATIVE_KEYS = ("native", "entity", "name", "text")


def _side(value, where: str) -> str:
    side = _SIDE_ALIASES.get(str(value or "").strip().lower())
    if side is None:
        raise CulturaError(f"{where}: side {value!r} is not one of local, western; set the 'side' column "
                           "(or pass --side).")
    return side


def normalise_entity(raw: dict, *, where: str = "entity", defaults: dict | None = None) -> dict:
    """One validated entity row from a loose dict (file row, collector output)."""
    r = {**(defaults or {}), **{k: v for k, v in raw.items() if v not in (None, "")}}
    native = next((str(r[k]).strip() for k in _NATIVE_KEYS if r.get(k)), "")
    if not native:
        raise CulturaError(f"{where}: no entity text; give a 'native' (or 'entity') column.")
    for key in ("language", "type"):
        if not r.get(key):
            raise CulturaError(f"{where}: missing '{key}'; add the column or pass --{key}.")
    status = str(r.get("status") or "accepted").strip().lower()
    if status not in STATUSES:
        raise CulturaError(f"{where}: status {status!r} is not one of {', '.join(STATUSES)}.")
    known = {"language", "type", "side", "country", "english", "qid", "status", "source", *_NATIVE_KEYS}
    details = {k: v for k, v in r.items() if k not in known}
    return {"language": str(r["language"]).strip(), "type": str(r["type"]).strip(),
            "side": _side(r.get("side"), where), "native": native,
            "english": (str(r["english"]).strip() if r.get("english") else None),
            "country": (str(r["country"]).strip().upper() if r.get("country") else None),
            "qid": r.get("qid") or None, "status": status, "source": r.get("source"),
            "details": dumps(details)}


def add_entities(project: Project, rows, *, source: str) -> dict:
    """Insert entity rows (dicts as :func:`normalise_entity` returns); an existing (language, side, type,
    native) is kept as it is. Returns ``{"rows", "inserted", "existing"}``."""
    db = project.db
    rows = list(rows)
    ts = now()
    before = db.execute("SELECT count(*) FROM entities").fetchone()[0]
    with transaction(db):
        db["entities"].insert_all(
            [{**r, "source": r.get("source") or source, "created_at": ts} for r in rows], ignore=True)
    inserted = db.execute("SELECT count(*) FROM entities").fetchone()[0] - before
    return {"rows": len(rows), "inserted": inserted, "existing": len(rows) - inserted}


def import_entities(project: Project, path: str | Path, *, language: str | None = None, type: str | None = None,
                    side: str | None = None, status: str | None = None, source: str | None = None) -> dict:
    """Import entities from a JSONL or CSV file; options fill columns the file lacks. Idempotent."""
    defaults = {k: v for k, v in (("language", language), ("type", type), ("side", side),
                                  ("status", status)) if v}
    rows = [normalise_entity(r, where=f"{path} row {n}", defaults=defaults)
            for n, r in enumerate(read_rows(path, strict=True), 1)]
    if not rows:
        raise CulturaError(f"{path} holds no entity rows; add one JSON object (or CSV row) per entity.")
    return add_entities(project, rows, source=source or f"import:{Path(path).name}")


def list_entities(project: Project, *, language: str | None = None, type: str | None = None, side: str | None = None,
                  status: str | None = "accepted") -> list[dict]:
    """Entity rows (dicts) filtered by language, type, side and status (None = any), ordered by id."""
    where, args = [], []
    for col, val in (("language", language), ("type", type), ("side", side), ("status", status)):
        if val is not None:
            where.append(f"{col} = ?")
            args.append(val)
    sql = "SELECT * FROM entities" + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY id"
    return [dict(r) for r in project.db.query(sql, args)]


def entity_sets(project: Project, language: str, type: str, *, field: str = "native") -> tuple[list[str], list[str]]:
    """The accepted local and Western surface forms (``field`` = native or english) of one type in one
    language, each list de-duplicated in id order."""
    if field not in ("native", "english"):
        raise CulturaError(f"field must be 'native' or 'english', got {field!r}.")
    out = {}
    for side in SIDES:
        vals = [r[field] for r in list_entities(project, language=language, type=type, side=side) if r[field]]
        out[side] = list(dict.fromkeys(vals))
    return out["local"], out["western"]


def entity_counts(project: Project, *, by=("language", "type", "side"), status: str | None = "accepted") -> list[dict]:
    """Entity counts grouped by ``by`` columns (seed 001 Table 2: language × type × side; Figure 7: the Western
    entities by ``country``), ``status`` None for every status. Rows ``{**group, "n"}``, sorted."""
    cols = [c for c in by]
    bad = [c for c in cols if c not in ("language", "type", "side", "country", "status", "source")]
    if bad:
        raise CulturaError(f"Cannot group entities by {bad}; use language, type, side, country, status, source.")
    where, args = ("WHERE status = ?", [status]) if status else ("", [])
    sql = (f"SELECT {', '.join(cols)}, COUNT(*) AS n FROM entities {where} GROUP BY {', '.join(cols)} "
           f"ORDER BY {', '.join(cols)}")
    return [dict(r) for r in project.db.query(sql, args)]


def entity_pool(project: Project, language: str, type: str, *, parallel: bool = True) -> tuple[list[dict], list[dict]]:
    """The accepted local and Western entities of one type in one language as rows ``{id, native, english}``
    (id order, one row per native form). With ``parallel`` only entities that have an English form: the pool
    that native and parallel-English runs sample from alike, so both test the same entities (seed 001 Table 1;
    each Camellia entity has an English translation)."""
    out = {}
    for side in SIDES:
        seen, rows = set(), []
        for r in list_entities(project, language=language, type=type, side=side):
            if r["native"] in seen or (parallel and not r["english"]):
                continue
            seen.add(r["native"])
            rows.append({"id": r["id"], "native": r["native"], "english": r["english"]})
        out[side] = rows
    return out["local"], out["western"]


def export_entity_items(project: Project, path: str | Path, *, status: str = "candidate", language: str | None = None
                        ) -> int:
    """Write entities with ``status`` as JSONL rows for ``cultura annotate push entity --from PATH``
    (keys ``ent-<id>``, so decisions come back as ``entity:ent-<id>``). Returns the number of rows."""
    rows = entity_item_rows(project, status=status, language=language)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return len(rows)


def entity_item_rows(project: Project, *, status: str = "candidate", language: str | None = None) -> list[dict]:
    """Entities with ``status`` as ``entity`` annotation rows (keys ``ent-<id>``): what ``cultura annotate push
    entity`` reads from the entity table when no --from file is given."""
    out = []
    for r in list_entities(project, status=status, language=language):
        country = r["country"] or _language_country(project, r["language"])
        out.append({"key": f"ent-{r['id']}", "entity": r["native"], "country": country, "category": r["type"],
                    "language": r["language"]})
    return out


def _language_country(project: Project, language: str) -> str:
    for c in project.countries:
        if c.language == language:
            return c.code
    for c in project.registry.countries.values() if hasattr(project.registry, "countries") else []:
        if getattr(c, "language", None) == language:
            return c.code
    raise CulturaError(f"No country in the project speaks {language!r}; set the entity's country column.")


def apply_entity_labels(db, decisions: list[tuple[str, str | None]]) -> dict:
    """Write adjudicated ``entity`` decisions (``(item key, label)``, oldest first; keys ``entity:ent-<id>``)
    back to the entities, atomically (seed 001 Figure 8): ``local`` / ``western`` → ``accepted`` with that side;
    ``neither`` / ``noise`` → ``rejected`` (reason: the label). A side change that would duplicate an entity
    already on that side rejects the candidate with the reason. Returns counts."""
    n = {"accepted": 0, "rejected": 0, "unknown": 0}
    ts = now()
    with transaction(db):
        for key, label in decisions:
            try:
                eid = int(key.rsplit("ent-", 1)[1])
            except ValueError:
                n["unknown"] += 1
                continue
            cur = db.execute("SELECT language, type, native FROM entities WHERE id = ?", [eid]).fetchone()
            if cur is None:
                n["unknown"] += 1
                continue
            label = (label or "").strip().lower()
            if label not in ("local", "western"):
                db.execute("UPDATE entities SET status = 'rejected', reason = ?, updated_at = ? WHERE id = ?",
                           [f"annotated {label or 'without label'}", ts, eid])
                n["rejected"] += 1
                continue
            clash = db.execute("SELECT id FROM entities WHERE language = ? AND type = ? AND native = ? AND side = ? "
                               "AND id != ?", [cur[0], cur[1], cur[2], label, eid]).fetchone()
            if clash is not None:
                db.execute("UPDATE entities SET status = 'rejected', reason = ?, updated_at = ? WHERE id = ?",
                           [f"annotated {label}: duplicate of entity {clash[0]}", ts, eid])
                n["rejected"] += 1
                continue
            db.execute("UPDATE entities SET status = 'accepted', side = ?, reason = NULL, updated_at = ? "
                       "WHERE id = ?", [label, ts, eid])
            n["accepted"] += 1
    return n
