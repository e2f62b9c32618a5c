"""The raw labels in and out: ``export-labels`` writes the (task, worker, label, time) table every aggregation
tool reads, in crowd-kit's column names, as CSV or Parquet; ``import-labels`` reads a Label Studio JSON export
made elsewhere.

Import: each task is matched to an item by the ``item_key`` cultura put in every task's data (the export of a
project cultura pushed, made on another server or by hand); an annotator by the e-mail in ``completed_by``,
else by the Label Studio user id cultura recorded when it made their account (Label Studio 1.23's export gives
``"completed_by": 3`` without e-mail). A user known by e-mail only becomes an inactive annotator with role
``external`` named after it; an id no annotator has is a rejected row, never a second annotator who may be a
known one. An answer outside the campaign's label set (:func:`cultura.annotate.kinds.answer_problem`: a
``maybe`` on a keep/remove item) is a rejected row too: never stored, exported or fed to a model. Every task and
annotation is recorded in ``import_rows`` (kind ``labelstudio-labels``): ``ok``, or ``failed`` with the reason.

Idempotent by content, whatever the file is called: an answer an annotator's current one on that item already
says (pulled, or imported before) adds nothing; the others are stored like pulled ones (append-only versions)
under a negative ``ls_project_id`` derived from the exported project's id, so an edited export adds versions.

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
from cultura.errors import CulturaError, unknown
from cultura.files import refuse_existing, write_atomic

from .aggregate import labels_table
from .annotators import external_annotator, known_annotator
from .kinds import answer_problem, get_kind
from .people import server_row
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


def _source_project(project_id) -> int:
    """The ``ls_project_id`` imported annotations are stored under: derived from the exported project's id only,
    never from the file's name, so the same export under another name is the same annotations."""
    return -(zlib.crc32(f"labelstudio-export:{project_id}".encode()) & 0x7FFFFFFF) - 1


def _own_server_user(project: Project, name: str) -> tuple[int, int]:
    """``(annotator id, their user id on their own server)`` for an export taken from ``name``'s server."""
    rows = list(project.db["annotators"].rows_where("name = ?", [name]))
    if not rows:
        raise unknown("annotator", name, [r["name"] for r in project.db["annotators"].rows], param="annotator")
    srv = server_row(project, rows[0]["id"])
    if srv is None or srv["ls_user_id"] is None:
        raise CulturaError(f"Annotator {name!r} has no Label Studio server of their own; leave out --annotator "
                           "for an export of the project's shared server.", param="annotator")
    return rows[0]["id"], srv["ls_user_id"]


def _worker(db, a: dict, cache: dict, own: tuple[int, int] | None = None) -> tuple[int | None, str | None]:
    """``(annotator id, None)`` for the Label Studio user of annotation ``a``, or ``(None, reason)``. A user is
    matched by e-mail, else by the Label Studio user id recorded when cultura made their account (Label
    Studio's own export gives ``completed_by`` as that id, without e-mail); a user known by e-mail only becomes
    an inactive external annotator named after it; an id nobody here has is refused, never made a second
    annotator who may be a known one."""
    by = a.get("completed_by")
    email = (by.get("email") if isinstance(by, dict) else None) or a.get("completed_by_email") or None
    uid = _user_id(a)
    k = ((email or "").lower(), uid)
    if k not in cache and own is not None and not email:   # ids of that annotator's own server
        cache[k] = (own[0], None) if uid == own[1] else (None, (
            f"Label Studio user {uid} is not the annotator whose server this export comes from (their id there "
            f"is {own[1]}); import each server's export with its own annotator's --annotator"))
    if k not in cache:
        row = known_annotator(db, email=email, ls_user_id=uid)
        if row is None and email:
            row = external_annotator(db, email)
        if row is not None:
            cache[k] = (row["id"], None)
        elif uid is None:
            cache[k] = (None, "no completed_by")
        else:
            cache[k] = (None, f"Label Studio user {uid} is none of this project's annotators and the export gives "
                              "no e-mail for them; export with the annotators' e-mails (completed_by expanded), name "
                              "the annotator whose own server the export comes from (--annotator NAME), or add the "
                              "annotator, then import again")
    return cache[k]


def import_labels(project: Project, path: str | Path, *, source: str | None = None,
                  campaign: str | None = None, annotator: str | None = None) -> dict:
    """Read a Label Studio JSON export (a list of tasks with their annotations) made elsewhere; see the module
    docstring. ``annotator``: the export comes from that annotator's own Label Studio server, whose user ids are
    that server's (every annotator's server numbers its users from 1, so an id alone names nobody). Returns
    counts of tasks and annotations imported, unchanged and rejected."""
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
    own = _own_server_user(project, annotator) if annotator else None
    where, params = "1 = 1", []
    if campaign:
        where, params = "campaign_id = ?", [campaigns(db, campaign)[0]["id"]]
    items = {k: (i, kind, payload) for i, k, kind, payload in db.execute(
        f"SELECT id, item_key, kind, payload FROM annotation_items WHERE {where} ORDER BY id", params).fetchall()}
    t = now()
    n = {"tasks": len(tasks), "annotations": 0, "new": 0, "versions": 0, "unchanged": 0, "rejected": 0}
    log, rows, touched, workers = [], [], set(), {}
    # what each annotator's latest answer on each item says (label, value, details, cancelled), pulled or
    # imported: an answer already held is not imported again, however its JSON was laid out
    held = {(i, w): says for i, w, *says in db.execute(
        "SELECT item_id, annotator_id, label, value, details, was_cancelled FROM annotations WHERE is_current = 1 "
        "AND purpose = 'annotate' ORDER BY COALESCE(ls_updated_at, ''), id").fetchall()}
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
            item_id, kind, payload = items[key]
            spec = get_kind(kind)
            ls_pid = _source_project(task.get("project"))
            touched.add(ls_pid)
            for a in task.get("annotations") or []:
                n["annotations"] += 1
                akey = f"task {tid} annotation {a.get('id')}"
                canc = int(bool(a.get("was_cancelled")))
                parsed = spec.parse(a.get("result") or []) if not canc else {"label": None, "value": None,
                                                                             "details": None}
                wid, who_not = _worker(db, a, workers, own)
                why = ("no annotation id" if a.get("id") is None else who_not if wid is None
                       else f"no {kind} answer in its result" if not canc and parsed["label"] is None
                       and parsed["value"] is None
                       else answer_problem(spec, parsed, json.loads(payload or "{}")))
                if why:
                    log.append({"key": akey, "status": "failed", "reason": why})
                    n["rejected"] += 1
                    continue
                res = dumps(a.get("result") or [])
                details = dumps(parsed["details"]) if parsed["details"] else None
                says = [parsed["label"], parsed["value"], details, canc]
                log.append({"key": akey, "status": "ok", "reason": None})
                if held.get((item_id, wid)) == says:
                    # this annotator's current answer on this item already says exactly this (pulled, or
                    # imported before from a file of any name): nothing to add
                    n["unchanged"] += 1
                    continue
                prev = db.execute("SELECT version, result, was_cancelled FROM annotations WHERE ls_project_id = ? AND "
                                  "ls_annotation_id = ? ORDER BY version DESC LIMIT 1", [ls_pid, a["id"]]).fetchone()
                if prev and prev[1] == res and prev[2] == canc:
                    n["unchanged"] += 1
                    continue
                n["versions" if prev else "new"] += 1
                held[(item_id, wid)] = says
                rows.append({"assignment_id": None, "item_id": item_id, "annotator_id": wid, "purpose": "annotate",
                             "ls_project_id": ls_pid, "ls_task_id": tid if tid is not None else -1,
                             "ls_annotation_id": a["id"], "version": prev[0] + 1 if prev else 1, "result": res,
                             "label": parsed["label"], "value": parsed["value"],
                             "details": details, "was_cancelled": canc, "completed_by": _user_id(a), "lead_time": a.get("lead_time"),
                             "ls_created_at": a.get("created_at"), "ls_updated_at": a.get("updated_at"),
                             "is_current": 0, "pulled_at": t})
        if rows:
            db["annotations"].insert_all(rows)
        for ls_pid in touched:
            _set_current(db, ls_pid)
        db["import_rows"].upsert_all([{"kind": IMPORT_KIND, "source": source, **r, "created_at": t} for r in log],
                                     pk=("kind", "source", "key"))
    return {"source": source, **n}
