"""Grid tasks in Label Studio: push a campaign project's pending assignments as grids, turn pulled grid answers
into the per-item annotations one-image tasks give, and collect a simulation's answers to grids.

Resumable and idempotent as one-image push is: the grids (members in cell order) are recorded in
``grid_tasks`` before anything is sent; a grid whose import was not recorded (a kill between Label Studio's
answer and the write) is found again by its stable key in the task data, so no grid is imported twice. Once a
grid's task id is recorded, every member assignment is marked pushed with ``ls_task_id = -assignment id``.

Pull reads each grid task's answers through :func:`cultura.annotate.grid.per_image_results`: one virtual task
per member (id ``-assignment id``) whose annotation (id ``-(annotation id × 32 + cell)``) carries that cell's
one-image result and the grid's lead time shared evenly; the rest of pull stores them as it stores any
annotation, so versions, deletions, agreement and aggregation see the same per-item labels.
"""
from __future__ import annotations

import json

from cultura.db import dumps, now, transaction

from .grid import cell_keys, get_grid, grid_key, grid_kinds, grid_result, grid_task_data, group_grids, per_image_results
from .server import Connection, LabelStudioError

#: cells per grid at most (a virtual annotation id keeps room for this many cells)
CELL_SLOTS = 32


def grid_size(campaign: dict) -> int | None:
    """The campaign's grid size (``None``: one-image tasks)."""
    params = campaign.get("params")
    params = json.loads(params) if isinstance(params, str) and params else params or {}
    return params.get("grid")


def _ls_grid_tasks(conn: Connection, ls_project_id: int) -> dict[str, int]:
    """Grid key → task id of every grid Label Studio holds in the project."""
    r = conn.get(f"/api/projects/{ls_project_id}/export", exportType="JSON", download_all_tasks="true")
    r.raise_for_status()
    return {t["data"]["item_key"]: t["id"] for t in r.json() if str((t.get("data") or {}).get("item_key", "")).startswith("grid:")}


def _record(db, grid_id: int, ls_task_id: int, project_id: int) -> None:
    keys = json.loads(db["grid_tasks"].get(grid_id)["item_keys"])
    t = now()
    db["grid_tasks"].update(grid_id, {"ls_task_id": ls_task_id})
    db.conn.executemany(
        "UPDATE assignments SET ls_task_id = -id, status = 'pushed', pushed_at = ? WHERE project_id = ? AND "
        "item_id IN (SELECT id FROM annotation_items WHERE item_key = ? AND campaign_id = "
        "(SELECT campaign_id FROM campaign_projects WHERE id = ?))", [(t, project_id, k, project_id) for k in keys])


def push_grid_project(conn: Connection, db, prow: dict, kind: str, size: int, *, image_base: str | None = None,
                      chunk: int = 200, on_chunk=None) -> int:
    """Import the pending assignments of one (already created) campaign project as grids of ``size``; returns
    how many grid tasks were created."""
    get_grid(kind)
    pending = [dict(zip(("assignment_id", "item_key", "payload", "country"), r)) for r in db.execute(
        """SELECT a.id, i.item_key, i.payload, i.country FROM assignments a JOIN annotation_items i ON i.id = a.item_id
           WHERE a.project_id = ? AND a.ls_task_id IS NULL AND a.status = 'pending' ORDER BY a.id""",
        [prow["id"]]).fetchall()]
    gridded = {k for (keys,) in db.execute("SELECT item_keys FROM grid_tasks WHERE project_id = ?", [prow["id"]])
               for k in json.loads(keys)}
    fresh = [p for p in pending if p["item_key"] not in gridded]
    with transaction(db):   # recorded before anything is sent
        db["grid_tasks"].insert_all(
            [{"project_id": prow["id"], "grid_key": grid_key(kind, g), "size": size,
              "item_keys": dumps([m["item_key"] for m in g]), "created_at": now()}
             for g in group_grids(kind, fresh, size)], ignore=True)
    todo = [dict(r) for r in db["grid_tasks"].rows_where("project_id = ? AND ls_task_id IS NULL", [prow["id"]],
                                                         order_by="id")]
    if not todo:
        return 0
    known = _ls_grid_tasks(conn, prow["ls_project_id"])   # imported before a kill, never recorded
    with transaction(db):
        for g in todo:
            if g["grid_key"] in known:
                _record(db, g["id"], known[g["grid_key"]], prow["id"])
    todo = [g for g in todo if g["grid_key"] not in known]
    payloads = {k: (p, c) for k, p, c in db.execute(
        "SELECT item_key, payload, country FROM annotation_items WHERE campaign_id = ?", [prow["campaign_id"]])}
    created = 0
    for start in range(0, len(todo), chunk):
        part = todo[start:start + chunk]
        tasks = []
        for g in part:
            members = [{"item_key": k, "payload": payloads[k][0], "country": payloads[k][1]}
                       for k in json.loads(g["item_keys"])]
            tasks.append(grid_task_data(kind, members, g["size"], image_base=image_base))
        res = conn.client.projects.import_tasks(prow["ls_project_id"], request=tasks, return_task_ids=True)
        ids = list(res.task_ids or [])
        if len(ids) != len(part):
            raise LabelStudioError(f"Label Studio returned {len(ids)} task ids for {len(part)} grid tasks; rerun "
                                   "push to reconcile.")
        with transaction(db):
            for g, tid in zip(part, ids):
                _record(db, g["id"], tid, prow["id"])
            db.execute("UPDATE campaign_projects SET n_tasks = (SELECT COUNT(*) FROM grid_tasks WHERE project_id = ? "
                       "AND ls_task_id IS NOT NULL) WHERE id = ?", [prow["id"], prow["id"]])
        created += len(part)
        if on_chunk:
            on_chunk(prow, created)
    return created


def expand_grid_tasks(db, project_id: int, kind: str, tasks: list[dict]) -> list[dict]:
    """Label Studio's exported tasks with every grid task replaced by one virtual task per member (see the
    module's docstring); other tasks unchanged."""
    grids = {r[0] for r in db.execute("SELECT ls_task_id FROM grid_tasks WHERE project_id = ? AND ls_task_id IS "
                                      "NOT NULL", [project_id])}
    if not grids or kind not in grid_kinds():
        return tasks
    assignment = {k: a for k, a in db.execute(
        "SELECT i.item_key, a.id FROM assignments a JOIN annotation_items i ON i.id = a.item_id "
        "WHERE a.project_id = ?", [project_id])}
    out = []
    for t in tasks:
        if t["id"] not in grids:
            out.append(t)
            continue
        keys = cell_keys(t.get("data") or {})
        n = max(1, sum(1 for k in keys if k))
        cells = {k: [] for k in keys if k}
        for a in t.get("annotations") or []:
            per_item = per_image_results(kind, a.get("result") or [], keys)
            for cell, k in enumerate(keys):
                if k:
                    lead = a.get("lead_time")
                    cells[k].append({**a, "id": -(a["id"] * CELL_SLOTS + cell), "result": per_item[k],
                                     "lead_time": lead / n if lead is not None else None})
        out += [{"id": -assignment[k], "data": {"item_key": k}, "annotations": anns}
                for k, anns in cells.items() if k in assignment]
    return out


def grid_cells(db, project_id: int) -> dict[str, tuple[int, int]]:
    """Item key → (the grid's Label Studio task id, cell) for the project's pushed grids."""
    out = {}
    for tid, keys in db.execute("SELECT ls_task_id, item_keys FROM grid_tasks WHERE project_id = ? AND "
                                "ls_task_id IS NOT NULL", [project_id]):
        for cell, k in enumerate(json.loads(keys)):
            out[k] = (tid, cell)
    return out


class GridAnswers:
    """Collects per-item labels of grid members; once a grid has all its members' labels it is one answer by the
    grid's annotator (a simulation answering grids as a person would)."""

    def __init__(self, db):
        self.db, self.cells, self.got = db, {}, {}

    def add(self, project_id: int, kind: str, item_key: str, label: str, *, user_id: int,
            lead_time: float) -> tuple[int, list, int, float, int] | None:
        """Record one member's label; once the grid is full, its answer: (task id, result, user id, lead time,
        members answered), else None."""
        if project_id not in self.cells:
            self.cells[project_id] = grid_cells(self.db, project_id)
        tid, cell = self.cells[project_id][item_key]
        got = self.got.setdefault(tid, {})
        got[cell] = label
        members = sum(1 for t, _ in self.cells[project_id].values() if t == tid)
        if len(got) < members:
            return None
        return (tid, grid_result(kind, [got[c] for c in range(members)]), user_id, round(lead_time * members, 2),
                members)


def grid_member_tasks(db, project_id: int, task_ids: set[int]) -> set[int]:
    """The per-member stand-in task ids (``-assignment id``) of the project's grids among ``task_ids``."""
    keys = [k for tid, ks in db.execute("SELECT ls_task_id, item_keys FROM grid_tasks WHERE project_id = ? AND "
                                        "ls_task_id IS NOT NULL", [project_id]) if tid in task_ids
            for k in json.loads(ks)]
    if not keys:
        return set()
    have = set(keys)
    return {-a for a, k in db.execute("SELECT a.id, i.item_key FROM assignments a JOIN annotation_items i ON "
                                      "i.id = a.item_id WHERE a.project_id = ?", [project_id]) if k in have}
