"""Pull annotations from every campaign project into the append-only ``annotations`` table.

Each project is exported through Label Studio's synchronous JSON export (labelled tasks only). An annotation
is attributed by ``completed_by`` (the Label Studio user) to an annotator; a new annotation becomes version 1;
an annotation whose result changed since the last pull becomes a new version and the older row is kept with
``is_current = 0``. Pulling twice changes nothing. A project deleted by hand in Label Studio is detected,
marked ``missing`` and reported; its rows pulled so far are kept.
"""
from __future__ import annotations

import json

from cultura.db import dumps, now

from .kinds import get_kind
from .push import LabelStudioError
from .server import Connection, connect


def pull(project, *, campaign: str | None = None, conn: Connection | None = None) -> dict:
    """Pull every active campaign project (or those of ``campaign``); returns counts per status."""
    db = project.db
    conn = conn or connect(project)
    where = "p.ls_project_id IS NOT NULL AND p.status = 'active'"
    params: list = []
    if campaign:
        where += " AND c.name = ?"
        params.append(campaign)
    else:
        where += " AND c.status != 'archived'"  # archived campaigns are pulled only when named
    prows = db.execute(f"SELECT p.id, p.ls_project_id, p.title, c.kind, p.annotator_id, p.purpose "
                       f"FROM campaign_projects p JOIN campaigns c ON c.id = p.campaign_id WHERE {where} "
                       f"ORDER BY p.id", params).fetchall()
    users = {r[0]: r[1] for r in db.execute("SELECT ls_user_id, id FROM annotators").fetchall()}
    total = {"projects": len(prows), "new": 0, "versions": 0, "unchanged": 0, "unknown_tasks": 0,
             "missing_projects": []}
    for pid, ls_pid, title, kind, owner, purpose in prows:
        r = conn.get(f"/api/projects/{ls_pid}/export", exportType="JSON")
        if r.status_code == 404:
            with db.conn:
                db["campaign_projects"].update(pid, {"status": "missing", "checked_at": now(),
                                                     "reason": "project deleted in Label Studio"})
                db["annotation_pulls"].insert({"project_id": pid, "status": "missing", "pulled_at": now(),
                                               "error": f"Label Studio project {ls_pid} not found"})
            total["missing_projects"].append({"project": title, "ls_project_id": ls_pid})
            continue
        if r.status_code >= 400:
            raise LabelStudioError(f"Label Studio answered HTTP {r.status_code} exporting project {ls_pid} "
                                   f"({title!r}).")
        n = _store(db, pid, ls_pid, kind, owner, purpose, r.json(), users)
        for k in ("new", "versions", "unchanged", "unknown_tasks"):
            total[k] += n[k]
    return total


def _store(db, pid, ls_pid, kind, owner, purpose, tasks, users) -> dict:
    spec = get_kind(kind)
    tmap = {t: (a, i) for a, t, i in db.execute(
        "SELECT id, ls_task_id, item_id FROM assignments WHERE project_id = ? AND ls_task_id IS NOT NULL",
        [pid]).fetchall()}
    latest = {aid: (v, res, canc) for aid, v, res, canc in db.execute(
        "SELECT ls_annotation_id, version, result, was_cancelled FROM annotations WHERE ls_project_id = ? "
        "AND is_current = 1", [ls_pid]).fetchall()}
    n = {"new": 0, "versions": 0, "unchanged": 0, "unknown_tasks": 0}
    rows, supersede = [], []
    t = now()
    for task in tasks:
        if task["id"] not in tmap:
            n["unknown_tasks"] += 1
            continue
        assignment_id, item_id = tmap[task["id"]]
        for a in task.get("annotations") or []:
            res = dumps(a.get("result") or [])
            canc = int(bool(a.get("was_cancelled")))
            prev = latest.get(a["id"])
            if prev and prev[1] == res and prev[2] == canc:
                n["unchanged"] += 1
                continue
            parsed = spec.parse(a.get("result") or []) if not canc else {"label": None, "value": None,
                                                                         "details": None}
            version = prev[0] + 1 if prev else 1
            if prev:
                supersede.append(a["id"])
            n["versions" if prev else "new"] += 1
            rows.append({"assignment_id": assignment_id, "item_id": item_id,
                         "annotator_id": users.get(a.get("completed_by"), owner), "purpose": purpose,
                         "ls_project_id": ls_pid, "ls_task_id": task["id"], "ls_annotation_id": a["id"],
                         "version": version, "result": res, "label": parsed["label"], "value": parsed["value"],
                         "details": dumps(parsed["details"]) if parsed["details"] else None,
                         "was_cancelled": canc, "completed_by": a.get("completed_by"),
                         "lead_time": a.get("lead_time"), "ls_created_at": a.get("created_at"),
                         "ls_updated_at": a.get("updated_at"), "is_current": 1, "pulled_at": t})
    with db.conn:
        if supersede:
            db.conn.executemany("UPDATE annotations SET is_current = 0 WHERE ls_project_id = ? AND ls_annotation_id = ?",
                           [(ls_pid, x) for x in supersede])
        if rows:
            db["annotations"].insert_all(rows)
        db["annotation_pulls"].insert({"project_id": pid, "status": "ok", "n_new": n["new"],
                                       "n_versions": n["versions"], "pulled_at": t})
        db["campaign_projects"].update(pid, {"checked_at": t})
    return n


def current_annotations(db, campaign_id: int, *, purpose: str = "annotate") -> list[dict]:
    """Current, non-cancelled annotations of a campaign with item and annotator fields."""
    cur = db.execute(
        """SELECT a.item_id, i.item_key, i.gold, i.country, i.sha256, i.cluster_id, i.payload,
                  a.annotator_id, an.name AS annotator, a.label, a.value, a.details, a.lead_time,
                  a.ls_updated_at
           FROM annotations a JOIN annotation_items i ON i.id = a.item_id
           LEFT JOIN annotators an ON an.id = a.annotator_id
           WHERE i.campaign_id = ? AND a.purpose = ? AND a.is_current = 1 AND a.was_cancelled = 0
           ORDER BY a.item_id, an.name""", [campaign_id, purpose])
    cols = [d[0] for d in cur.description]
    out = [dict(zip(cols, r)) for r in cur.fetchall()]
    for r in out:
        r["gold"] = json.loads(r["gold"]) if r["gold"] else None
    return out
