"""The raw labels in and out: ``export-labels`` writes the (task, worker, label, time) table every aggregation
tool reads, in crowd-kit's column names, as CSV or Parquet; ``import-labels`` reads a Label Studio JSON export
made elsewhere.

Import: each task is matched to an item by the ``item_key`` cultura put in every task's data (the export of a
project cultura pushed, made on another server or by hand); an annotator by the e-mail in ``completed_by``
(an unknown one becomes an inactive annotator with role ``external``, as pull does). Every task and
annotation is recorded in ``import_rows`` (kind ``labelstudio-labels``): ``ok``, or ``failed`` with the reason
(no item_key, no such item, an annotation with no usable answer). Annotations are stored like pulled ones
(append-only versions) under a negative ``ls_project_id`` derived from ``source`` and the exported project, so
importing the same source again changes nothing and an edited export adds versions.

Columns written: ``task`` (the item's stable key), ``worker`` (annotator name), ``label`` (for 1–5 ratings the
rating as text), ``value`` (the rating as a number, empty for labels), ``time`` (Label Studio lead time,
seconds), ``gold`` (the item's known answer, else empty), ``campaign``. Load it with
``pd.read_csv(path, dtype={"label": str, "gold": str})`` and give ``df[["task", "worker", "label"]]`` to any
crowd-kit model.
"""
from __future__ import annotations

import csv
import json
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

from cultura.db import dumps, now, transaction
from cultura.errors import CulturaError
from cultura.files import refuse_existing, write_atomic

from .aggregate import labels_table
from .kinds import get_kind
from .pull import _set_current, _user_id
from .report import campaigns

if TYPE_CHECKING:
    from ..project import Project

IMPORT_KIND = "labelstudio-labels"

COLUMNS = ["task", "worker", "label", "value", "time", "gold", "campaign"]


def export_labels(project: Project, out: str | Path, *, campaign: str | None = None,
                  overwrite: bool = False) -> dict:
    """Write the raw labels of ``campaign`` (default: all) to ``out`` (``.csv`` or ``.parquet``), through a
    temporary file renamed at the end; an existing ``out`` is refused unless ``overwrite``."""
    out = Path(out)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in ("csv", "parquet"):
        raise CulturaError(f"Cannot write {out.name!r}: give a file ending in .csv or .parquet.", param="out")
    refuse_existing(out, overwrite=overwrite)
    rows = [r for c in campaigns(project.db, campaign) for r in labels_table(project.db, c)]

    def write(tmp: Path) -> None:
        if fmt == "csv":
            with open(tmp, "w", newline="", encoding="utf-8") as f:
                w = csv.DictWriter(f, fieldnames=COLUMNS)
                w.writeheader()
                w.writerows({k: r.get(k) for k in COLUMNS} for r in rows)
        else:
            import pandas as pd  # deferred: heavy optional dependency (Parquet through pyarrow)
            pd.DataFrame(rows, columns=COLUMNS).to_parquet(tmp, index=False)

    write_atomic(out, writer=write, overwrite=overwrite)
    return {"path": str(out), "format": fmt, "rows": len(rows), "tasks": len({r["task"] for r in rows}),
            "workers": len({r["worker"] for r in rows})}


def _source_project(source: str, project_id) -> int:
    return -(zlib.crc32(f"{source}:{project_id}".encode()) & 0x7FFFFFFF) - 1


def _worker(db, a: dict, cache: dict) -> int | None:
    by = a.get("completed_by")
    email = (by.get("email") if isinstance(by, dict) else None) or a.get("completed_by_email")
    uid = _user_id(a)
    k = (email or "").lower() or f"id:{uid}"
    if k in cache:
        return cache[k]
    row = db.execute("SELECT id FROM annotators WHERE lower(email) = ?", [email.lower()]).fetchone() if email else None
    if row is None:
        if email is None and uid is None:
            return None
        name = f"import-{email.split('@')[0] if email else f'user-{uid}'}"
        email = email or f"{name}@label-studio.invalid"
        row = db.execute("SELECT id FROM annotators WHERE name = ? OR lower(email) = ?", [name, email.lower()]).fetchone()
        if row is None:
            row = (db["annotators"].insert({"name": name, "email": email, "role": "external", "active": 0,
                                            "languages": "[]", "created_at": now()}).last_pk,)
    cache[k] = row[0]
    return row[0]


def import_labels(project: Project, path: str | Path, *, source: str | None = None,
                  campaign: str | None = None) -> dict:
    """Read a Label Studio JSON export (a list of tasks with their annotations) made elsewhere; see the module
    docstring. Returns counts of tasks and annotations imported, unchanged and rejected."""
    path = Path(path)
    if not path.is_file():
        raise CulturaError(f"No file {str(path)!r}; give the JSON file Label Studio's Export (JSON) wrote.",
                           param="path")
    try:
        tasks = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise CulturaError(f"{path.name} is not JSON ({e}); give the file of Label Studio's Export > JSON.",
                           param="path") from None
    if isinstance(tasks, dict):
        tasks = [tasks]
    if not isinstance(tasks, list) or not all(isinstance(t, dict) for t in tasks):
        raise CulturaError(f"{path.name} is not a Label Studio JSON export (a list of tasks); use Export > JSON.",
                           param="path")
    db = project.db
    source = source or path.name
    where, params = "1 = 1", []
    if campaign:
        where, params = "campaign_id = ?", [campaigns(db, campaign)[0]["id"]]
    items = {k: (i, kind) for i, k, kind in db.execute(
        f"SELECT id, item_key, kind FROM annotation_items WHERE {where} ORDER BY id", params).fetchall()}
    t = now()
    n = {"tasks": len(tasks), "annotations": 0, "new": 0, "versions": 0, "unchanged": 0, "rejected": 0}
    log, rows, touched, workers = [], [], set(), {}
    with transaction(db):
        for task in tasks:
            tid = task.get("id")
            key = (task.get("data") or {}).get("item_key")
            if key is None or key not in items:
                reason = ("the task has no item_key in its data (not a task cultura pushed)" if key is None
                          else f"no item {key!r} in this project" + (f"'s campaign {campaign!r}" if campaign else ""))
                log.append({"key": f"task {tid}", "status": "failed", "reason": reason})
                n["rejected"] += 1
                continue
            item_id, kind = items[key]
            spec = get_kind(kind)
            ls_pid = _source_project(source, task.get("project"))
            touched.add(ls_pid)
            for a in task.get("annotations") or []:
                n["annotations"] += 1
                akey = f"task {tid} annotation {a.get('id')}"
                canc = int(bool(a.get("was_cancelled")))
                parsed = spec.parse(a.get("result") or []) if not canc else {"label": None, "value": None,
                                                                             "details": None}
                wid = _worker(db, a, workers)
                if a.get("id") is None or wid is None or (not canc and parsed["label"] is None
                                                          and parsed["value"] is None):
                    why = ("no annotation id" if a.get("id") is None else "no completed_by" if wid is None
                           else f"no {kind} answer in its result")
                    log.append({"key": akey, "status": "failed", "reason": why})
                    n["rejected"] += 1
                    continue
                res = dumps(a.get("result") or [])
                prev = db.execute("SELECT version, result, was_cancelled FROM annotations WHERE ls_project_id = ? AND "
                                  "ls_annotation_id = ? ORDER BY version DESC LIMIT 1", [ls_pid, a["id"]]).fetchone()
                log.append({"key": akey, "status": "ok", "reason": None})
                if prev and prev[1] == res and prev[2] == canc:
                    n["unchanged"] += 1
                    continue
                n["versions" if prev else "new"] += 1
                rows.append({"assignment_id": None, "item_id": item_id, "annotator_id": wid, "purpose": "annotate",
                             "ls_project_id": ls_pid, "ls_task_id": tid if tid is not None else -1,
                             "ls_annotation_id": a["id"], "version": prev[0] + 1 if prev else 1, "result": res,
                             "label": parsed["label"], "value": parsed["value"],
                             "details": dumps(parsed["details"]) if parsed["details"] else None,
                             "was_cancelled": canc, "completed_by": _user_id(a), "lead_time": a.get("lead_time"),
                             "ls_created_at": a.get("created_at"), "ls_updated_at": a.get("updated_at"),
                             "is_current": 0, "pulled_at": t})
        if rows:
            db["annotations"].insert_all(rows)
        for ls_pid in touched:
            _set_current(db, ls_pid)
        db["import_rows"].upsert_all([{"kind": IMPORT_KIND, "source": source, **r, "created_at": t} for r in log],
                                     pk=("kind", "source", "key"))
    return {"source": source, **n}
