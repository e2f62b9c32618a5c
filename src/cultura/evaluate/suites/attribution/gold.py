"""Gold KB entities of images (seed 004's specific set: each image shows one concept, whose Wikipedia /
BabelNet page is its gold entity). Used by linking accuracy (App. A.3, Table 3 shape) and by the gold-page
upper bound (App. C.5: the judge reads the gold page instead of the retrieved one).

A gold file (CSV / JSONL) has ``sha256`` (or ``path``: an image file, hashed) and ``entity_id``, or instead
of the id a ``lemma`` / ``concept`` matched case-insensitively to the lemmas (and aliases) of a KB.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ....db import now, transaction
from ....errors import CulturaError
from ....db.readers import read_rows

if TYPE_CHECKING:
    from ....project import Project


def _lemma_map(project: Project, kb: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for eid, lemma, aliases in project.db.execute(
            "SELECT entity_id, lemma, aliases FROM kb_entities WHERE kb = ?", [kb]).fetchall():
        for name in [lemma, *json.loads(aliases or "[]")]:
            out.setdefault(str(name).casefold().strip(), set()).add(eid)
    return out


def set_gold(project: Project, gold: dict, *, source: str = "manual") -> int:
    """Store ``{sha256: entity_id or [ids]}`` (replacing each image's previous gold); returns rows written."""
    rows = []
    for sha, ids in gold.items():
        for eid in ([ids] if isinstance(ids, str) else list(ids)):
            rows.append({"sha256": sha, "entity_id": str(eid), "source": source, "created_at": now()})
    with transaction(project.db):
        for sha in gold:
            project.db.execute("DELETE FROM attribution_gold WHERE sha256 = ?", [sha])
        if rows:
            project.db["attribution_gold"].insert_all(rows, pk=("sha256", "entity_id"), replace=True)
    return len(rows)


def import_gold(project: Project, path: str | Path, *, kb: str = "default") -> dict:
    """Import gold entities from a file (see the module doc); returns ``{"images", "unmatched"}`` where
    ``unmatched`` lists the lemmas found in no KB entity (those rows are not stored)."""
    p = Path(path)
    lemmas = None
    gold: dict[str, set[str]] = {}
    unmatched = []
    for n, r in enumerate(read_rows(p, strict=True), 1):
        sha = str(r.get("sha256") or "").strip()
        if not sha and r.get("path"):
            img = Path(str(r["path"])).expanduser()
            img = img if img.is_absolute() else p.parent / img
            if not img.exists():
                raise CulturaError(f"{p} row {n}: image {str(img)!r} does not exist.")
            sha = hashlib.sha256(img.read_bytes()).hexdigest()
        if not sha:
            raise CulturaError(f"{p} row {n}: a gold row needs 'sha256' or 'path'.")
        eid = str(r.get("entity_id") or "").strip()
        if eid:
            gold.setdefault(sha, set()).add(eid)
            continue
        name = str(r.get("lemma") or r.get("concept") or "").strip()
        if not name:
            raise CulturaError(f"{p} row {n}: a gold row needs 'entity_id', or a 'lemma'/'concept' to match.")
        if lemmas is None:
            lemmas = _lemma_map(project, kb)
        ids = lemmas.get(name.casefold())
        if ids:
            gold.setdefault(sha, set()).update(ids)
        else:
            unmatched.append(name)
    set_gold(project, gold, source=f"import:{p.name}")
    return {"images": len(gold), "unmatched": sorted(set(unmatched))}


def load_gold(project: Project) -> dict[str, set[str]]:
    """``{sha256: {entity_id, ...}}``."""
    out: dict[str, set[str]] = {}
    for sha, eid in project.db.execute("SELECT sha256, entity_id FROM attribution_gold ORDER BY sha256"):
        out.setdefault(sha, set()).add(eid)
    return out
