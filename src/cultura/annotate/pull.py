"""Pull annotations from every campaign project into the append-only ``annotations`` table.

The first pull of a project (and one with ``full``) takes Label Studio's synchronous JSON export of its
labelled tasks. Later pulls fetch only what changed: Label Studio stamps a task's ``updated_at`` whenever one
of its annotations is created, edited or deleted, so the data manager's task list filtered on ``updated_at``
later than the last pull's *watermark* (the latest stamp seen) names the changed tasks without their
annotations, and only those tasks are exported (``ids[]``). A changed task with no annotation left needs no
export: every annotation pulled from it is deleted. A task deleted in Label Studio leaves no stamp, so when
the project holds fewer tasks than at the last pull the project is exported whole again; ``--full`` does the
same on request (an annotation saved while a pull lists the changed tasks is seen by the next pull). An annotation
is attributed by ``completed_by`` (the Label Studio user) to an annotator; a new annotation becomes version 1;
an annotation whose result changed since the last pull becomes a new version and the older row is kept with
``is_current = 0``. Pulling twice changes nothing. A project deleted by hand in Label Studio is detected,
marked ``missing`` and reported; its rows pulled so far are kept.

An annotation deleted in Label Studio becomes a *deleted* version (``deleted_at`` set, never current). An
annotation by a Label Studio user who is not the project's annotator (the admin, say) is recorded under that
user: an annotator row found by the user's e-mail, or created inactive (role ``external``) so it is never
assigned work. At most one annotation per task and annotator is current: the most recently updated one.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from cultura import progress as progress_mod
from cultura.db import dumps, now, transaction
from cultura.db.leases import stage_lock

from .accounts import connection_for
from .grid_io import expand_grid_tasks, grid_member_tasks
from .kinds import answer_problem, get_kind
from .people import server_row
from .server import Connection, LabelStudioError, connect

if TYPE_CHECKING:
    from ..project import Project


def pull(project: Project, *, campaign: str | None = None, conn: Connection | None = None,
         annotator_id: int | None = None, full: bool = False, progress: progress_mod.Progress = None) -> dict:
    """Pull every campaign project (or those of ``campaign``, or of one annotator); returns counts per status.
    Only tasks changed since a project's last pull are fetched; ``full``: re-export every project. A project
    marked ``missing`` is asked for again every time (it may have been a passing 404). One pull at a time per
    project: a second one is refused at once, naming the process that runs the first."""
    with stage_lock(project.root, "annotate-pull", "cultura annotate pull"):
        return _pull(project, campaign=campaign, conn=conn, annotator_id=annotator_id, full=full,
                     progress=progress)


def _pull(project: Project, *, campaign: str | None, conn: Connection | None, annotator_id: int | None,
          full: bool = False, progress: progress_mod.Progress = None) -> dict:
    db = project.db
    where = "p.ls_project_id IS NOT NULL AND p.status IN ('active', 'missing')"
    params: list = []
    if campaign:
        where += " AND c.name = ?"
        params.append(campaign)
    else:
        where += " AND c.status != 'archived'"  # archived campaigns are pulled only when named
    if annotator_id is not None:
        where += " AND p.annotator_id = ?"
        params.append(annotator_id)
    prows = db.execute(f"SELECT p.id, p.ls_project_id, p.title, c.kind, p.annotator_id, p.purpose, p.ls_as, "
                       f"p.status FROM campaign_projects p JOIN campaigns c ON c.id = p.campaign_id WHERE {where} "
                       f"ORDER BY p.id", params).fetchall()
    conn = conn or connect(project)   # the project's server answers: a stopped one is named before anything
    shared_users = {r[0]: r[1] for r in db.execute("SELECT ls_user_id, id FROM annotators "
                                                   "WHERE ls_user_id IS NOT NULL").fetchall()}
    total = {"projects": len(prows), "new": 0, "versions": 0, "unchanged": 0, "deleted": 0, "unknown_tasks": 0,
             "rejected": 0, "missing_projects": [], "revoked_projects": 0, "full_exports": 0,
             "tasks_fetched": 0, "annotations_fetched": 0}
    with progress_mod.task("annotate pull", total=len(prows), progress=progress) as bar:
        for pid, ls_pid, title, kind, owner, purpose, ls_as, status in prows:
            bar.update(project=title)   # what the bar waits for while Label Studio exports it
            _pull_project(project, conn, shared_users, total, pid, ls_pid, title, kind, owner, purpose, ls_as,
                          status, full=full)
            bar.advance(new=total["new"], changed=total["versions"], unchanged=total["unchanged"],
                        fetched=total["annotations_fetched"])
    return total


def _pull_project(project: Project, conn: Connection, shared_users: dict, total: dict, pid, ls_pid, title, kind,
                  owner, purpose, ls_as, status, *, full: bool) -> None:
    db = project.db
    own = server_row(project, owner) if ls_as == "server" and owner else None
    if own is not None and own["status"] == "revoked":
        total["revoked_projects"] += 1   # pulled one last time when access was revoked; none since
        return
    pc = connection_for(project, db["annotators"].get(owner), conn,
                        {"id": pid, "ls_project_id": ls_pid, "ls_as": ls_as}) if owner else conn
    # user ids are per server: on an annotator's own server only their id is theirs
    users = {own["ls_user_id"]: owner} if own is not None else dict(shared_users)
    r = pc.get(f"/api/projects/{ls_pid}")
    if r.status_code == 404:
        with transaction(db):
            db["campaign_projects"].update(pid, {"status": "missing", "checked_at": now(),
                                                 "reason": "project deleted in Label Studio"})
            db["annotation_pulls"].insert({"project_id": pid, "status": "missing", "pulled_at": now(),
                                           "error": f"Label Studio project {ls_pid} not found"})
        total["missing_projects"].append({"project": title, "ls_project_id": ls_pid})
        return
    if r.status_code >= 400:
        raise LabelStudioError(f"Label Studio answered HTTP {r.status_code} reading project {ls_pid} ({title!r}).")
    if status == "missing":
        with transaction(db):
            db["campaign_projects"].update(pid, {"status": "active", "checked_at": now(), "reason": None})
    n_tasks = (r.json() or {}).get("task_number")
    last = db.execute("SELECT watermark, ls_tasks FROM annotation_pulls WHERE project_id = ? AND status = 'ok' "
                      "ORDER BY id DESC LIMIT 1", [pid]).fetchone()
    # a whole export on the first pull, on request, after a 404, or when tasks were deleted in Label Studio (their
    # annotations leave no trace an incremental listing would show)
    whole = full or status == "missing" or last is None or last[0] is None or (
        last[1] is not None and n_tasks is not None and n_tasks < last[1])
    if whole:
        raw = _export(pc, ls_pid, title, None)
        marks = [t.get("updated_at") for t in raw]
        scope = None
        total["full_exports"] += 1
    else:
        changed = _changed_tasks(pc, ls_pid, title, last[0])
        marks = [t.get("updated_at") for t in changed]
        # a task with no annotation left needs no body: what it held is gone (scope below)
        raw = _export(pc, ls_pid, title, [t["id"] for t in changed
                                          if (t.get("total_annotations") or 0) + (t.get("cancelled_annotations") or 0)])
        scope = {t["id"] for t in changed}
        scope |= grid_member_tasks(db, pid, scope)
    watermark = max([m for m in marks if m] + ([last[0]] if last and last[0] and not whole else []), default=None)
    fetched = sum(len(t.get("annotations") or []) for t in raw)
    total["tasks_fetched"] += len(raw)
    total["annotations_fetched"] += fetched
    tasks = expand_grid_tasks(db, pid, kind, raw)   # a grid answer = its members' one-image answers
    for uid in {_user_id(a) for t in tasks for a in (t.get("annotations") or [])} - set(users) - {None}:
        users[uid] = _external_annotator(pc, db, uid, by_id=own is None)
        if own is None:
            shared_users[uid] = users[uid]
    n = _store(db, pid, ls_pid, kind, owner, purpose, tasks, users, f"a{owner}" if own is not None else "",
               scope=scope, record={"watermark": watermark, "ls_tasks": n_tasks, "n_fetched": fetched,
                                    "full": int(whole)})
    for k in ("new", "versions", "unchanged", "deleted", "unknown_tasks", "rejected"):
        total[k] += n[k]


#: task ids per export request (a GET with ``ids[]``: the URL stays short)
EXPORT_IDS = 300
#: tasks per page of the changed-task listing
LIST_PAGE = 5000


def _export(conn: Connection, ls_pid: int, title: str, ids: list[int] | None) -> list[dict]:
    """Label Studio's JSON export of the project's labelled tasks (``ids``: of those tasks only)."""
    if ids is not None and not ids:
        return []
    out = []
    for start in range(0, len(ids), EXPORT_IDS) if ids is not None else [None]:
        some = {} if start is None else {"ids[]": ids[start:start + EXPORT_IDS]}   # a list: the key repeats
        r = conn.get(f"/api/projects/{ls_pid}/export", exportType="JSON", **some)
        if r.status_code >= 400:
            raise LabelStudioError(f"Label Studio answered HTTP {r.status_code} exporting project {ls_pid} "
                                   f"({title!r}).")
        out += r.json()
    return out


def _changed_tasks(conn: Connection, ls_pid: int, title: str, since: str) -> list[dict]:
    """The project's tasks whose ``updated_at`` is later than ``since`` (Label Studio stamps a task whenever one
    of its annotations is created, edited or deleted): id, updated_at and annotation counts, no bodies."""
    query = json.dumps({"filters": {"conjunction": "and", "items": [
        {"filter": "filter:tasks:updated_at", "operator": "greater", "type": "Datetime", "value": since}]}})
    out: list[dict] = []
    page = 1
    while True:
        r = conn.get("/api/tasks/", project=ls_pid, page=page, page_size=LIST_PAGE, fields="task_only",
                     include="id,updated_at,total_annotations,cancelled_annotations", query=query)
        if r.status_code >= 400:
            raise LabelStudioError(f"Label Studio answered HTTP {r.status_code} listing changed tasks of project "
                                   f"{ls_pid} ({title!r}).")
        body = r.json()
        got = body.get("tasks") or []
        out += got
        if not got or len(out) >= (body.get("total") or 0):
            return out
        page += 1


def _user_id(a: dict):
    u = a.get("completed_by")
    if isinstance(u, dict):
        u = u.get("id")
    try:
        return int(u) if u is not None else None
    except (TypeError, ValueError):
        return None


def _external_annotator(conn: Connection, db, uid: int, *, by_id: bool = True) -> int:
    """The annotator row of Label Studio user ``uid`` who is none of the project's annotators: found by e-mail
    (and linked, on the shared server), or created inactive with role ``external``. ``by_id`` False: ``uid`` is
    an id on an annotator's own server, which means nothing elsewhere (found by e-mail only, never linked)."""
    email = None
    r = conn.get(f"/api/users/{uid}")
    if r.status_code < 400:
        email = (r.json() or {}).get("email") or None
    with transaction(db):
        row = db.execute("SELECT id FROM annotators WHERE ls_user_id = ?", [uid]).fetchone() if by_id else None
        if row is None and email:
            row = db.execute("SELECT id FROM annotators WHERE lower(email) = lower(?)", [email]).fetchone()
            if row is not None and by_id:
                db["annotators"].update(row[0], {"ls_user_id": uid, "updated_at": now()})
        if row is not None:
            return row[0]
        name = f"ls-user-{uid}" if by_id else f"ls-user-{uid}-{conn.url.rsplit(':', 1)[-1]}"
        return db["annotators"].insert({"name": name, "email": email or f"{name}@label-studio.invalid",
                                        "ls_user_id": uid if by_id else None, "ls_url": conn.url, "role": "external", "active": 0,
                                        "created_at": now()}).last_pk


def _store(db, pid, ls_pid, kind, owner, purpose, tasks, users, server: str = "", *, scope: set | None = None,
           record: dict | None = None) -> dict:
    """Append what changed in one project's export. ``server``: '' for the shared server, 'a<ID>' for annotator
    ID's own (ids are per server). ``scope``: the task ids whose every annotation is in ``tasks`` (an incremental
    pull: an annotation elsewhere is not deleted for being absent); None: all of them. ``record``: kept with the
    pull's row (its watermark and counts)."""
    spec = get_kind(kind)
    tmap = {t: (a, i) for a, t, i in db.execute(
        "SELECT id, ls_task_id, item_id FROM assignments WHERE project_id = ? AND ls_task_id IS NOT NULL",
        [pid]).fetchall()}
    # the latest version of every annotation pulled so far (current or not)
    cols = ("id", "assignment_id", "item_id", "annotator_id", "ls_task_id", "ls_annotation_id", "version",
            "result", "was_cancelled", "completed_by", "lead_time", "ls_created_at", "ls_updated_at",
            "deleted_at")
    # ids are per server (every annotator's server numbers its projects and annotations from 1): an annotation
    # is known by its campaign project and its id there
    latest = {r[5]: dict(zip(cols, r)) for r in db.execute(
        f"WITH mine AS (SELECT * FROM annotations WHERE {PROJECT_SCOPE}) SELECT {', '.join(cols)} FROM mine a "
        "WHERE version = (SELECT max(version) FROM mine b WHERE b.ls_annotation_id = a.ls_annotation_id)",
        [pid]).fetchall()}
    n = {"new": 0, "versions": 0, "unchanged": 0, "deleted": 0, "unknown_tasks": 0, "rejected": 0}
    rows, seen = [], set()
    t = now()
    for task in tasks:
        if task["id"] not in tmap:
            n["unknown_tasks"] += 1
            continue
        assignment_id, item_id = tmap[task["id"]]
        for a in task.get("annotations") or []:
            seen.add(a["id"])
            res = dumps(a.get("result") or [])
            canc = int(bool(a.get("was_cancelled")))
            prev = latest.get(a["id"])
            if prev and not prev["deleted_at"] and prev["result"] == res and prev["was_cancelled"] == canc:
                n["unchanged"] += 1
                continue
            parsed = spec.parse(a.get("result") or []) if not canc else {"label": None, "value": None,
                                                                         "details": None}
            why = None if canc else answer_problem(spec, parsed, _payload(db, item_id) if spec.item_check else None)
            if why:  # kept in the log with the reason, never a label (current_annotations leaves it out)
                parsed = {"label": None, "value": None, "details": {"rejected": why}}
                n["rejected"] += 1
            version = prev["version"] + 1 if prev else 1
            n["versions" if prev else "new"] += 1
            uid = _user_id(a)
            rows.append({"assignment_id": assignment_id, "item_id": item_id, "ls_server": server,
                         "annotator_id": users.get(uid, owner) if uid is not None else owner, "purpose": purpose,
                         "ls_project_id": ls_pid, "ls_task_id": task["id"], "ls_annotation_id": a["id"],
                         "version": version, "result": res, "label": parsed["label"], "value": parsed["value"],
                         "details": dumps(parsed["details"]) if parsed["details"] else None,
                         "was_cancelled": canc, "completed_by": uid,
                         "lead_time": a.get("lead_time"), "ls_created_at": a.get("created_at"),
                         "ls_updated_at": a.get("updated_at"), "is_current": 0, "pulled_at": t})
    # annotations pulled before and gone from Label Studio's export now: deleted there
    for aid, prev in latest.items():
        if aid in seen or prev["deleted_at"] or (scope is not None and prev["ls_task_id"] not in scope):
            continue
        n["deleted"] += 1
        rows.append({"ls_server": server, **{k: prev[k] for k in cols if k not in ("id", "deleted_at")}, "purpose": purpose,
                     "ls_project_id": ls_pid, "version": prev["version"] + 1, "result": "[]", "label": None,
                     "value": None, "details": None, "is_current": 0, "pulled_at": t, "deleted_at": t})
    with transaction(db):
        if rows:
            db["annotations"].insert_all(rows)
        _set_current(db, ls_pid, project_id=pid)
        db["annotation_pulls"].insert({"project_id": pid, "status": "ok", "n_new": n["new"],
                                       "n_versions": n["versions"], "pulled_at": t, **(record or {})})
        db["campaign_projects"].update(pid, {"checked_at": t})
    return n


#: The annotations pulled from one campaign project (``?`` = campaign_projects.id).
PROJECT_SCOPE = "assignment_id IN (SELECT id FROM assignments WHERE project_id = ?)"


def _payload(db, item_id: int) -> dict:
    row = db.execute("SELECT payload FROM annotation_items WHERE id = ?", [item_id]).fetchone()
    return json.loads(row[0] or "{}") if row else {}


def _set_current(db, ls_pid: int, *, project_id: int | None = None) -> None:
    """``is_current`` = the latest version of a not-deleted annotation that is the most recently updated one of
    its annotator on its task (a second annotation by the same person replaces the first). Over the
    annotations of campaign project ``project_id`` (pulled), else of ``ls_pid`` (imported)."""
    scope, arg = (PROJECT_SCOPE, project_id) if project_id is not None else ("ls_project_id = ?", ls_pid)
    rows = db.execute(
        f"WITH mine AS (SELECT * FROM annotations WHERE {scope}) "
        "SELECT id, ls_task_id, annotator_id, ls_updated_at, ls_annotation_id, deleted_at, is_current "
        "FROM mine a WHERE version = (SELECT max(version) FROM mine b WHERE b.ls_annotation_id = a.ls_annotation_id)",
        [arg]).fetchall()
    best: dict[tuple, tuple] = {}
    for rid, task, annotator, updated, aid, deleted, _ in rows:
        if deleted:
            continue
        key, rank = (task, annotator), (updated or "", aid)
        if key not in best or rank > best[key][0]:
            best[key] = (rank, rid)
    want = {rid for _, rid in best.values()}
    have = {r[0] for r in db.execute(f"SELECT id FROM annotations WHERE {scope} AND is_current = 1",
                                     [arg]).fetchall()}
    if have - want:
        db.conn.executemany("UPDATE annotations SET is_current = 0 WHERE id = ?", [(i,) for i in have - want])
    if want - have:
        db.conn.executemany("UPDATE annotations SET is_current = 1 WHERE id = ?", [(i,) for i in want - have])


def current_annotations(db, campaign_id: int, *, purpose: str = "annotate") -> list[dict]:
    """Current, non-cancelled annotations of a campaign with item and annotator fields; an answer outside the
    campaign's label set (``details.rejected``) is no annotation here, so no agreement, rule or export sees it."""
    cur = db.execute(
        """SELECT a.item_id, i.item_key, i.gold, i.country, i.sha256, i.cluster_id, i.payload,
                  a.annotator_id, an.name AS annotator, a.label, a.value, a.details, a.lead_time,
                  a.ls_updated_at
           FROM annotations a JOIN annotation_items i ON i.id = a.item_id
           LEFT JOIN annotators an ON an.id = a.annotator_id
           WHERE i.campaign_id = ? AND a.purpose = ? AND a.is_current = 1 AND a.was_cancelled = 0
             AND (a.details IS NULL OR json_extract(a.details, '$.rejected') IS NULL)
           ORDER BY a.item_id, an.name""", [campaign_id, purpose])
    cols = [d[0] for d in cur.description]
    out = [dict(zip(cols, r)) for r in cur.fetchall()]
    for r in out:
        r["gold"] = json.loads(r["gold"]) if r["gold"] else None
    return out
