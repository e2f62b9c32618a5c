"""Push items to Label Studio: one project per annotator per campaign (Community edition has no task
assignment), K annotators per item with balanced workload and native-speaker constraints, gold items mixed
in for everyone.

Idempotent and resumable: items, assignments and projects are recorded before anything is sent; a Label
Studio project carries its cultura reference in its description and is found again by it (and its title) when
a kill came between its creation and its recording, so no empty duplicate is left behind; tasks are
imported in bulk chunks and their ids recorded per chunk; a rerun after a failure first reconciles the tasks
Label Studio already holds (by ``item_key`` in the task data), so no task is ever imported twice. One push at
a time per project: a second one is refused at once, naming the process that runs the first.

Progress (:mod:`cultura.progress`): one task per push counting the tasks sent (per chunk, per project), and a
``waiting for …`` line around each call Label Studio answers only when done (a chunk's import, an export of a
project's tasks, an annotator's server starting).
"""
from __future__ import annotations

import hashlib
import html as h
import json
import random
from typing import TYPE_CHECKING, Callable

import httpx

from cultura.bounds import COUNT_OR_NONE, SEED, Bound, from_field
from cultura.config import AnnotateSection
from cultura.db import dumps, now, transaction
from cultura.db.leases import db_root, stage_lock
from cultura.annotate.pool import IMAGE_ITSELF, image_exclusions
from cultura.errors import CulturaError
from cultura.names import label_name
from cultura.progress import Progress, task, track, waiting
from cultura.redact import strip_userinfo

from .accounts import connection_for
from .annotators import get_annotators
from .adaptive import assign_opinions
from .grid import get_grid, render_grid_config
from .grid_io import grid_size, push_grid_project
from .items import build_items, check_image_base, check_image_urls, task_data
from .people import isolation_note
from .kinds import FILTER_GUIDELINE, get_kind, guideline, render_config
from .server import Connection, LabelStudioError, connect, unreachable

if TYPE_CHECKING:
    from ..project import Project

CHUNK = 2000


class ProjectMissing(LabelStudioError):
    """A Label Studio project recorded by cultura no longer exists (deleted by hand)."""


# ------------------------------------------------------------------------------------------- campaign

def ensure_campaign(db, name: str, kind: str, overlap: int, params: dict) -> dict:
    rows = list(db["campaigns"].rows_where("name = ?", [name]))
    if rows:
        c = rows[0]
        if c["kind"] != kind:
            raise CulturaError(f"Campaign {name!r} is a {c['kind']!r} campaign; give another batch name for "
                               f"{kind!r} items.", param="batch")
        if overlap != c["overlap"]:
            db["campaigns"].update(c["id"], {"overlap": overlap, "updated_at": now()})
        return db["campaigns"].get(c["id"])
    name = label_name(name, what="campaign name", param="batch")  # the one door campaigns are made by
    db["campaigns"].insert({"name": name, "kind": kind, "overlap": overlap, "params": dumps(params),
                            "created_at": now()})
    return next(db["campaigns"].rows_where("name = ?", [name]))


# ----------------------------------------------------------------------------------- Label Studio I/O

def _api(conn: Connection, fn, *args, **kwargs):
    """Call the SDK; connection failures become one clear sentence."""
    from label_studio_sdk.core.api_error import ApiError  # deferred: heavy optional dependency, loaded on first use
    try:
        return fn(*args, **kwargs)
    except httpx.HTTPError as e:
        raise unreachable(conn.url, e) from None
    except ApiError as e:
        if e.status_code == 404:
            raise ProjectMissing(f"Label Studio at {conn.url} answered 404 (not found).") from None
        raise LabelStudioError(f"Label Studio answered HTTP {e.status_code}: {e.body}") from None


def check_project(conn: Connection, db, prow: dict) -> bool:
    """True if the project exists (a project marked ``missing`` that answers again is ``active`` again);
    otherwise mark it ``missing`` (nothing local is deleted)."""
    r = conn.get(f"/api/projects/{prow['ls_project_id']}")
    if r.status_code == 404:
        db["campaign_projects"].update(prow["id"], {"status": "missing", "checked_at": now(), "reason":
                                                    "project deleted in Label Studio"})
        return False
    if r.status_code >= 400:
        raise LabelStudioError(f"Label Studio answered HTTP {r.status_code} for project "
                               f"{prow['ls_project_id']}.")
    db["campaign_projects"].update(prow["id"], {"checked_at": now(), "status": "active", "reason": None})
    return True


def ensure_ls_project(conn: Connection, db, prow: dict, kind: str, *, config: str | None = None) -> dict:
    """Create the Label Studio project of ``prow`` (with ``config``, else the kind's) if not yet created; record its
    id at once."""
    if prow.get("ls_project_id"):
        if not check_project(conn, db, prow):   # asked again every time: a 404 may have passed
            raise ProjectMissing(
                f"Label Studio project {prow['ls_project_id']} ({prow['title']!r}) was deleted in Label Studio; "
                "its annotations pulled so far are kept. Run 'cultura annotate status' to see it; push to a new "
                "--batch to send its items again.")
        return db["campaign_projects"].get(prow["id"])
    adjud = prow["purpose"] == "adjudicate"
    description = f"cultura campaign project ({kind}) · ref {_project_ref(db, prow)}"
    ls_id = _find_ls_project(conn, db, prow["title"][:50], description)  # created, then a kill before recording
    if ls_id is None:
        cfg = config or render_config(kind, adjudication=adjud)
        instr = _instructions(kind)
        p = _api(conn, conn.client.projects.create, title=prow["title"][:50], label_config=cfg,
                 description=description, expert_instruction=instr,
                 show_instruction=True, maximum_annotations=1, show_skip_button=True)
        ls_id = p.id
    with transaction(db):
        db["campaign_projects"].update(prow["id"], {"ls_project_id": ls_id, "ls_url": conn.url,
                                                    "status": "active"})
    return db["campaign_projects"].get(prow["id"])


def _project_ref(db, prow: dict) -> str:
    """A reference unique to this cultura project's campaign project row, written into the Label Studio
    project's description so the project can be found again."""
    seed = f"{db_root(db)}|{prow['id']}|{prow['created_at']}|{prow['title']}"
    return hashlib.sha256(seed.encode()).hexdigest()[:16]


def _find_ls_project(conn: Connection, db, title: str, description: str) -> int | None:
    """The id of a Label Studio project with this title and description that no campaign project records."""
    known = {r[0] for r in db.execute("SELECT ls_project_id FROM campaign_projects "
                                      "WHERE ls_project_id IS NOT NULL").fetchall()}
    page = 1
    while True:
        r = conn.get("/api/projects", page=page, page_size=100)
        if r.status_code >= 400:
            return None
        body = r.json()
        results = body.get("results", []) if isinstance(body, dict) else body
        for p in results:
            if p.get("title") == title and (p.get("description") or "") == description and p["id"] not in known:
                return p["id"]
        if not isinstance(body, dict) or not body.get("next") or not results:
            return None
        page += 1


def _instructions(kind: str) -> str:
    name = {"dedup-review": "dedup_review", "relevance": "relevance_rubric", "entity": "entity",
            "translation": "translation", "context": "context"}.get(kind)
    text = guideline(name) if name else FILTER_GUIDELINE
    return "<pre style='white-space:pre-wrap'>" + h.escape(text) + "</pre>"


def ls_task_keys(conn: Connection, ls_project_id: int, *, progress: Progress = None) -> dict[str, int]:
    """item_key → task id for every task Label Studio holds in the project."""
    out: dict[str, int] = {}
    with waiting(f"Label Studio to export the tasks of project {ls_project_id}", progress=progress):
        r = conn.get(f"/api/projects/{ls_project_id}/export", exportType="JSON", download_all_tasks="true")
    if r.status_code == 404:
        raise ProjectMissing(f"Label Studio project {ls_project_id} was deleted.")
    r.raise_for_status()
    for t in r.json():
        k = (t.get("data") or {}).get("item_key")
        if k is not None:
            out.setdefault(k, t["id"])
    return out


def _after_import(prow: dict, n: int) -> None:
    """Hook between a chunk's import and its recording (tests use it to simulate a crash there)."""


def push_project(conn: Connection, db, prow: dict, kind: str, *, image_base: str | None = None,
                 chunk: int = CHUNK, on_chunk=None, progress: Progress = None) -> int:
    """Import the pending assignments of one campaign project; returns how many tasks were created. ``on_chunk``
    is called after each chunk is recorded; ``progress`` hears what each import waits for."""
    prow = ensure_ls_project(conn, db, prow, kind)
    pending = db.execute(
        """SELECT a.id, i.item_key, i.kind, i.payload, i.id FROM assignments a
           JOIN annotation_items i ON i.id = a.item_id WHERE a.project_id = ? AND a.ls_task_id IS NULL
           AND a.status = 'pending' ORDER BY a.id""", [prow["id"]]).fetchall()
    if not pending:
        return 0
    pushed_before = db.execute("SELECT COUNT(*) FROM assignments WHERE project_id = ? AND ls_task_id IS NOT "
                               "NULL", [prow["id"]]).fetchone()[0]
    # Reconcile: tasks Label Studio holds that we did not record (a crash between import and record).
    info = _api(conn, conn.client.projects.get, prow["ls_project_id"])
    if (getattr(info, "task_number", None) or 0) > pushed_before:
        keys = ls_task_keys(conn, prow["ls_project_id"], progress=progress)
        with transaction(db):
            for aid, key, *_ in pending:
                if key in keys:
                    db["assignments"].update(aid, {"ls_task_id": keys[key], "status": "pushed",
                                                   "pushed_at": now()})
        pending = [p for p in pending if p[1] not in keys]
    earlier = _earlier_labels(db, prow) if prow["purpose"] == "adjudicate" else {}
    created = 0
    for start in range(0, len(pending), chunk):
        part = pending[start:start + chunk]
        tasks = []
        for aid, key, k, payload, item_id in part:
            data = task_data(k, key, json.loads(payload), image_base=image_base)
            if earlier:
                data["earlier"] = earlier.get(item_id, "")
            tasks.append(data)
        with waiting(f"Label Studio to import {len(tasks):,} task{'s' if len(tasks) != 1 else ''} into "
                     f"{prow['title']!r}", progress=progress):
            res = _api(conn, conn.client.projects.import_tasks, prow["ls_project_id"], request=tasks,
                       return_task_ids=True)
        ids = list(res.task_ids or [])
        if len(ids) != len(part):
            raise LabelStudioError(f"Label Studio returned {len(ids)} task ids for {len(part)} tasks; rerun "
                                   "push to reconcile.")
        _after_import(prow, len(part))
        t = now()
        with transaction(db):
            db.conn.executemany("UPDATE assignments SET ls_task_id = ?, status = 'pushed', pushed_at = ? WHERE id = ?",
                           [(tid, t, p[0]) for tid, p in zip(ids, part)])
            db.execute("UPDATE campaign_projects SET n_tasks = (SELECT COUNT(*) FROM assignments WHERE "
                       "project_id = ? AND ls_task_id IS NOT NULL) WHERE id = ?", [prow["id"], prow["id"]])
        created += len(part)
        if on_chunk:
            on_chunk(prow, created)
    return created


class _SentCount:
    """The push's progress: tasks sent to Label Studio of those waiting to be sent when it began (assignments,
    read back from the database after each chunk, so grid tasks count their items), and projects done."""

    def __init__(self, db, campaign: dict, name: str, n_projects: int, progress: Progress):
        self.db, self.cid, self.n_projects, self.projects = db, campaign["id"], n_projects, 0
        self.before = self._sent()
        waiting_ = self.db.execute(
            "SELECT COUNT(*) FROM assignments a JOIN campaign_projects p ON p.id = a.project_id WHERE "
            "p.campaign_id = ? AND p.purpose = 'annotate' AND a.ls_task_id IS NULL AND a.status = 'pending'",
            [self.cid]).fetchone()[0]
        self.bar = task(f"pushing {name} to Label Studio", waiting_, progress=progress,
                        projects=f"0/{n_projects}")

    def _sent(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM assignments a JOIN campaign_projects p ON p.id = a.project_id "
                               "WHERE p.campaign_id = ? AND p.purpose = 'annotate' AND a.ls_task_id IS NOT NULL",
                               [self.cid]).fetchone()[0]

    def on_chunk(self, then=None):
        """A chunk callback that moves the count on (and calls ``then``, the caller's own)."""
        def chunked(prow, created):
            self.bar.update(done=self._sent() - self.before)
            if then:
                then(prow, created)
        return chunked

    def project_done(self) -> None:
        self.projects += 1
        self.bar.update(done=self._sent() - self.before, projects=f"{self.projects}/{self.n_projects}")

    def __enter__(self) -> _SentCount:
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()


def _earlier_labels(db, prow: dict) -> dict[int, str]:
    rows = db.execute(
        """SELECT a.item_id, an.name, a.label, a.value FROM annotations a JOIN annotators an
           ON an.id = a.annotator_id JOIN annotation_items i ON i.id = a.item_id
           WHERE i.campaign_id = ? AND a.is_current = 1 AND a.purpose = 'annotate' AND a.was_cancelled = 0
           ORDER BY an.name""", [prow["campaign_id"]]).fetchall()
    out: dict[int, list[str]] = {}
    for item_id, name, label, value in rows:
        out.setdefault(item_id, []).append(f"{name}: {label if label is not None else value}")
    return {k: "; ".join(v) for k, v in out.items()}


def refresh_task_data(conn: Connection, db, prow: dict, *, image_base: str | None = None,
                      progress: Progress = None) -> int:
    """Update the data of tasks already in Label Studio whose data changed (a new ``image_base``, an edited
    payload): a re-push fixes broken image URLs in place, annotations kept. Returns how many were updated."""
    if not prow.get("ls_project_id"):
        return 0
    want = {}
    earlier = _earlier_labels(db, prow) if prow["purpose"] == "adjudicate" else {}
    for key, k, payload, item_id in db.execute(
            """SELECT i.item_key, i.kind, i.payload, i.id FROM assignments a JOIN annotation_items i
               ON i.id = a.item_id WHERE a.project_id = ? AND a.ls_task_id IS NOT NULL""", [prow["id"]]):
        data = task_data(k, key, json.loads(payload), image_base=image_base)
        if earlier:
            data["earlier"] = earlier.get(item_id, "")
        want[key] = data
    if not want:
        return 0
    with waiting(f"Label Studio to export the {len(want):,} tasks of {prow['title']!r}", progress=progress):
        r = conn.get(f"/api/projects/{prow['ls_project_id']}/export", exportType="JSON", download_all_tasks="true")
    if r.status_code == 404:
        raise ProjectMissing(f"Label Studio project {prow['ls_project_id']} was deleted.")
    r.raise_for_status()
    changed = []
    for t in r.json():
        data = t.get("data") or {}
        new = want.get(data.get("item_key"))
        if new is not None and any(data.get(f) != v for f, v in new.items()):
            changed.append((t["id"], {**data, **new}))
    if changed:  # one request per task (a new image base changes them all)
        for tid, data in track(changed, f"updating {len(changed):,} tasks of {prow['title']!r}", progress=progress):
            _api(conn, conn.client.tasks.update, id=tid, data=data)
    return len(changed)


def check_campaign_open(db, name: str) -> None:
    """A closed or archived campaign takes no new items (reopen it with 'cultura annotate campaigns open')."""
    row = db.execute("SELECT status FROM campaigns WHERE name = ?", [name]).fetchone()
    if row and row[0] in ("closed", "archived"):
        raise CulturaError(f"Campaign {name!r} is {row[0]}: it takes no new items. Reopen it with 'cultura "
                           f"annotate campaigns open {name}', or push to a new batch name.")


# ------------------------------------------------------------------------------------------------ push

def push(project: Project, kind: str, *, overlap: int = 2, annotators: list[str] | None = None, gold: int | None = None,
         batch: str | None = None, source=None, other_countries: int | None = None, seed: int = 0,
         image_base: str | None = None, conn: Connection | None = None, chunk: int = CHUNK,
         max_tasks: int | None = None, on_chunk=None, grid: int | None = None, adaptive: bool = False,
         prioritise: Callable[[Project, str, list[dict]], list[dict]] | None = None, progress: Progress = None) -> dict:
    """Build the items of ``kind``, assign them and import the new tasks into Label Studio.

    ``prioritise(project, kind, items)`` reorders the items before they are sent: ``--prioritise attribution``
    (relevance only) passes :func:`cultura.evaluate.suites.attribution.priority.prioritised`, so the pairs the
    automated CAIRe judge is least sure about are rated first.

    ``gold``: how many gold items (items with a known answer, from ``source``) every annotator also gets
    (default: all of them). ``grid``: images per grid task (filter, relevance; :mod:`cultura.annotate.grid`);
    ``adaptive``: one opinion first, more up to ``overlap`` where needed (:mod:`cultura.annotate.adaptive`). Both
    are the campaign's from its first push on. ``progress``: a reporter (:mod:`cultura.progress`) told the tasks
    sent and what each long call to Label Studio waits for. Returns a summary; a second call with the same state
    adds nothing."""
    get_kind(kind), grid and get_grid(kind)  # unknown kinds (and kinds no grid lays out) fail here, naming the valid ones
    if batch is not None:  # a new campaign's name, checked before any item is built
        batch = label_name(batch, what="campaign name", param="batch")
    overlap, gold, seed = OVERLAP.check(overlap, "overlap"), GOLD.check_optional(gold, "gold"), SEED.check(seed, "seed")
    cfg = project.config.annotate
    other_countries = OTHER_COUNTRIES.check(cfg.relevance_other_countries if other_countries is None
                                            else other_countries, "other_countries")
    image_base = image_base or cfg.image_base_url
    check_image_base(image_base)
    max_tasks = int(max_tasks or cfg.max_tasks_per_project)
    with stage_lock(project.root, "annotate-push", "cultura annotate push"):
        return _push(project, kind, overlap=overlap, annotators=annotators, gold=gold, batch=batch,
                     source=source, other_countries=other_countries, seed=seed, image_base=image_base,
                     conn=conn, chunk=chunk, max_tasks=max_tasks, on_chunk=on_chunk, prioritise=prioritise,
                     grid=grid and GRID.check(grid, "grid"), adaptive=adaptive, progress=progress)


#: Annotators per item.
OVERLAP = Bound(1, 1000)
#: Images per grid task.
GRID = Bound(2, 24)
#: Gold items mixed into every annotator's project (0: none).
GOLD = COUNT_OR_NONE
#: Other countries each image is rated for (relevance): the range of annotate.relevance_other_countries.
OTHER_COUNTRIES = from_field(AnnotateSection, "relevance_other_countries")

#: Pool exclusions (:mod:`cultura.annotate.pool`) that keep an image from annotators: its bytes were never decoded
#: or cannot be (``unreadable``, ``undecoded``: a browser may not show them either), or a decision already took it
#: out. An open culture conflict is what the relevance and dedup reviews decide, and ``unreviewed`` is what filter
#: review is for, so those images are still sent.
PUSH_EXCLUDED = (*IMAGE_ITSELF, "duplicate_dropped", "filter_removed")


def _out_of_pool(db, kind: str) -> set[str]:
    """Images no annotator should see for ``kind``: out of the pool for a reason in :data:`PUSH_EXCLUDED` (a
    dedup review still sees dropped copies of the sets it decides)."""
    reasons = PUSH_EXCLUDED if kind != "dedup-review" else (*IMAGE_ITSELF, "filter_removed")
    return {sha for sha, r in image_exclusions(db).items() if r in reasons}


def sets_in_pool(items: list[dict], out_of_pool: set[str]) -> tuple[list[dict], int]:
    """Duplicate sets judged as sets: every member is checked against the pool (a member a decision took out is
    never sent), and a set is reviewed while two or more of its members are in the pool, whichever is the
    representative (the first member left stands for the item). Returns the items and the members left out."""
    out, left = [], 0
    for it in items:
        members = [m for m in it["payload"]["members"] if m["sha256"] not in out_of_pool]
        left += len(it["payload"]["members"]) - len(members)
        if len(members) >= 2:
            out.append({**it, "sha256": members[0]["sha256"], "payload": {**it["payload"], "members": members}})
    return out, left


def _refresh_sets(db, campaign_id: int, items: list[dict]) -> None:
    """A stored set nobody was given yet takes the members it has now (one left the pool since it was stored),
    so the members a decision took out are not sent with it. Part of the caller's transaction."""
    fresh = {it["item_key"]: it for it in items}
    for iid, key, payload in db.execute(
            "SELECT id, item_key, payload FROM annotation_items WHERE campaign_id = ? AND id NOT IN "
            "(SELECT item_id FROM assignments)", [campaign_id]).fetchall():
        it = fresh.get(key)
        if it is not None and json.loads(payload) != it["payload"]:
            db.execute("UPDATE annotation_items SET payload = ?, sha256 = ? WHERE id = ?",
                       [dumps(it["payload"]), it["sha256"], iid])


def _push(project: Project, kind, *, overlap, annotators, gold, batch, source, other_countries, seed, image_base, conn,
          chunk, max_tasks, on_chunk, prioritise, grid, adaptive, progress) -> dict:
    db = project.db
    check_campaign_open(db, batch or kind)
    people = get_annotators(project, annotators, role=None if annotators else "annotator")
    if not people:
        raise CulturaError("No active annotators. Add some with 'cultura annotate annotators add NAME --email E "
                           "[--country C] [--languages ja,en]'.")
    # at 12,000 images building and assigning the items takes half a minute before the first task is sent
    with task(f"building the {kind} items", progress=progress) as prep:
        items = build_items(project, kind, source=source, other_countries=other_countries, seed=seed)
        prep.update(done=len(items))
        out_of_pool = _out_of_pool(db, kind)   # images a decision already took out: never sent to annotators
        if kind == "dedup-review":
            items, left_out = sets_in_pool(items, out_of_pool)
        else:
            left_out = sum(1 for it in items if it.get("sha256") in out_of_pool)
            items = [it for it in items if it.get("sha256") not in out_of_pool]
        if prioritise:
            items = prioritise(project, kind, items)
        check_image_urls(items, image_base)
        name = batch or kind
        n_before = db.execute("SELECT COUNT(*) FROM annotation_items i JOIN campaigns c ON c.id = i.campaign_id "
                              "WHERE c.name = ?", [name]).fetchone()[0]
        with transaction(db):
            campaign = ensure_campaign(db, name, kind, overlap, {"gold": gold, "other_countries": other_countries,
                                                                 "source": str(source) if source else None,
                                                                 **({"grid": grid} if grid else {}),
                                                                 **({"adaptive": True} if adaptive else {})})
            t = now()
            db["annotation_items"].insert_all(
                [{"campaign_id": campaign["id"], "item_key": it["item_key"], "kind": kind,
                  "payload": dumps(it["payload"]), "sha256": it.get("sha256"), "country": it.get("country"),
                  "language": it.get("language"), "cluster_id": it.get("cluster_id"),
                  "gold": dumps(it["gold"]) if it.get("gold") else None, "created_at": t} for it in items],
                ignore=True)
            if kind == "dedup-review":
                _refresh_sets(db, campaign["id"], items)
        stored = [dict(r) for r in db["annotation_items"].rows_where("campaign_id = ?", [campaign["id"]],
                                                                     order_by="id")]
        gold_rows = [r for r in stored if r["gold"]]
        rng = random.Random(seed)
        gold_keys = {r["item_key"] for r in (gold_rows if gold is None else
                                             rng.sample(gold_rows, min(gold, len(gold_rows))))}
        # gold items not selected for mixing are left out of this push; so are items of an earlier push whose image
        # has left the pool since
        pool = [r for r in stored if (not r["gold"] or r["item_key"] in gold_keys)
                and r.get("sha256") not in out_of_pool]
        with transaction(db):
            counts = assign_opinions(db, campaign, pool, people, overlap=overlap, gold_keys=gold_keys,
                                     max_tasks=max_tasks)
    conn = conn or connect(project)
    created, updated, missing = 0, 0, []
    # read all rows first: iterating a cursor while writing holds a read snapshot that another process's
    # commit makes stale, and the write then fails at once with "database is locked" (no busy wait)
    prows = [dict(r) for r in db["campaign_projects"].rows_where("campaign_id = ? AND purpose = 'annotate'",
                                                                 [campaign["id"]], order_by="id")]
    with _SentCount(db, campaign, name, len(prows), progress) as bar:
        for prow in prows:
            owner = db["annotators"].get(prow["annotator_id"])
            if not owner["active"]:
                bar.project_done()
                continue   # access revoked; their unanswered items were handed to others above
            try:
                # each annotator's projects live on their own server (or, on a shared one, their organization)
                with waiting(f"{owner['name']}'s Label Studio", progress=progress):
                    pc = connection_for(project, owner, conn, prow)
                chunked = bar.on_chunk(on_chunk)
                if (size := grid_size(campaign)):  # grid tasks: several items per Label Studio task
                    created += push_grid_project(pc, db, ensure_ls_project(pc, db, prow, kind, config=render_grid_config(
                        kind, size)), kind, size, image_base=image_base, on_chunk=chunked)
                    continue
                created += push_project(pc, db, prow, kind, image_base=image_base, chunk=chunk, on_chunk=chunked,
                                        progress=progress)
                updated += refresh_task_data(pc, db, db["campaign_projects"].get(prow["id"]), image_base=image_base,
                                             progress=progress)
            except ProjectMissing as e:
                missing.append({"project": prow["title"], "ls_project_id": prow["ls_project_id"], "error": str(e)})
            finally:
                bar.project_done()
    return {"campaign": name, "kind": kind, "items": len(stored), "new_items": len(stored) - n_before,
            "gold_items": len(gold_keys), "out_of_pool": left_out, **counts, "tasks_created": created,
            "tasks_updated": updated, "image_base": strip_userinfo(image_base), "missing_projects": missing,
            **({"isolation": note} if (note := isolation_note(project)) else {})}
