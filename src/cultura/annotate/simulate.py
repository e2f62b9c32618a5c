"""Simulated annotators for demos and benchmarks — clearly labelled as such, never for real data.

Every answer is a Label Studio annotation with ``completed_by`` set to the assigned annotator's user and a
``lead_time``, on the annotator's own project (their own server when they have one), so pull, agreement and
adjudication run exactly as they would on human work; the project is untouched otherwise.

Where cultura reaches the server's data dir (its own servers, or one recorded with ``use_server(...,
data_dir=)``) the answers are written in bulk by Label Studio's own models, one process per server
(:data:`ANSWER_SCRIPT`): the rows the API's create makes, ``bulk_create``-d hundreds per transaction instead
of one HTTP request each, then the tasks' counters, ``is_labeled`` and ``updated_at`` and the project's summary
brought up to date by Label Studio's own functions, as its own bulk actions do. Elsewhere (a server cultura
does not run) they go one request per answer through the API. Both ways give the same labels for the same seed.

>>> # simulate_annotations(project, "filter", disagreement=0.15, seed=0)
"""
from __future__ import annotations

import json
import os
import queue
import random
import subprocess
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from cultura import progress as progress_mod
from cultura.bounds import PROBABILITY, SEED

from .accounts import connection_for, ls_data_dir
from .grid_io import GridAnswers
from .kinds import get_kind
from .people import server_row
from .pull import pull
from .server import DJANGO_PREAMBLE, QUIET_ENV, Connection, LabelStudioError, connect, ls_python

if TYPE_CHECKING:
    from ..project import Project

SIMULATED_NOTE = "SIMULATED annotator (cultura.annotate.simulate): not human judgements"

#: answers per transaction (and per progress line) in the bulk writer
CHUNK = 500
#: bulk writers running at once (one per server; each is a Label Studio process of a few hundred MB)
WRITERS = max(2, min(4, os.cpu_count() or 2))

#: Run by Label Studio's Python on one server's data dir: create the answers read from stdin (JSON
#: ``{"answers": [[task id, user id, result, lead time], ...]}``) ``CHUNK`` per transaction, printing
#: ``@@<answers done>`` after each. One ``bulk_create`` per chunk (the row as the API's create makes it, its
#: ``result_count`` as ``Annotation.save`` counts it), then what Label Studio's own bulk actions (propagate
#: annotations, predictions to annotations) do after one: ``update_tasks_counters_and_is_labeled`` for the
#: tasks touched, their ``updated_at`` (``Annotation.update_task``) and the project summary's labels
#: (``update_created_annotations_and_labels``, around its reset of a control new to the summary: ``add_to_summary``)
#: — what the per-save signals would have done one row at a time.
ANSWER_SCRIPT = DJANGO_PREAMBLE + r"""
from django.db import transaction
from django.utils import timezone
from projects.models import Project, ProjectSummary
from tasks.models import Annotation, Task


def add_to_summary(summary, anns):
    # the answers' labels into the project summary as one call per answer (the API's create) counts them:
    # update_created_annotations_and_labels starts a control's label counts afresh for every answer while the
    # control is missing from the saved summary (it looks there, not at the counts it is adding up), so an
    # answer that brings a new control goes alone, the answers between such ones in one call
    start = 0
    for i, a in enumerate(anns):
        if any(isinstance(r, dict) and r.get("from_name") not in summary.created_labels for r in a.result or []):
            if start < i:
                summary.update_created_annotations_and_labels(anns[start:i])
            summary.update_created_annotations_and_labels([a])
            start = i + 1
    if start < len(anns):
        summary.update_created_annotations_and_labels(anns[start:])


req = json.load(sys.stdin)
answers, chunk = req["answers"], int(req["chunk"])
projects = {}
done = 0
for start in range(0, len(answers), chunk):
    part = answers[start:start + chunk]
    tasks = dict(Task.objects.filter(id__in={a[0] for a in part}).values_list("id", "project_id"))
    missing = sorted({a[0] for a in part} - set(tasks))
    if missing:
        print("@@" + json.dumps({"error": f"task {missing[0]} is not on this server"}), flush=True)
        sys.exit(3)
    with transaction.atomic():
        for pid in set(tasks.values()) - set(projects):
            projects[pid] = Project.objects.get(id=pid)
        made = Annotation.objects.bulk_create([
            Annotation(task_id=task_id, project_id=tasks[task_id], completed_by_id=user_id, result=result,
                       lead_time=lead_time, updated_by_id=projects[tasks[task_id]].created_by_id,
                       result_count=len({r.get("id") for r in result or []}))
            for task_id, user_id, result, lead_time in part])
        by_project = {}
        for a in made:
            by_project.setdefault(a.project_id, []).append(a)
        for pid, anns in by_project.items():
            ids = sorted({a.task_id for a in anns})
            projects[pid].update_tasks_counters_and_is_labeled(Task.objects.filter(id__in=ids))
            Task.objects.filter(id__in=ids).update(updated_at=timezone.now())
            summary = ProjectSummary.objects.filter(project_id=pid).first()
            if summary is not None:
                add_to_summary(summary, anns)
    done += len(part)
    print("@@" + json.dumps({"done": done}), flush=True)
"""


def _truth(kind: str, item_key: str, payload: dict, gold, rng: random.Random) -> str:
    if gold:
        return gold.get("label") or str(int(gold["value"]))
    spec = get_kind(kind)
    if kind == "dedup-review":
        return "keep:1"
    if kind == "relevance":
        return "5" if payload.get("own") else rng.choice(["1", "2"])
    return spec.labels[0] if kind != "translation" else rng.choice(["4", "5"])


def _answers(project: Project, campaign: str, purpose: str, disagreement: float, seed: int) -> list[dict]:
    """Every open task's simulated answer, in assignment order (the draws of one seeded generator): one per
    one-image task, one per grid once all its members have a label."""
    db = project.db
    rows = db.execute(
        """SELECT a.ls_task_id, an.ls_user_id, an.id, p.id, p.ls_project_id, p.ls_as, i.kind, i.item_key, i.payload, i.gold FROM assignments a
           JOIN annotators an ON an.id = a.annotator_id JOIN annotation_items i ON i.id = a.item_id
           JOIN campaigns c ON c.id = i.campaign_id JOIN campaign_projects p ON p.id = a.project_id
           WHERE c.name = ? AND a.purpose = ? AND a.ls_task_id IS NOT NULL
             AND a.status IN ('pending', 'pushed')
             AND NOT EXISTS (SELECT 1 FROM annotations x WHERE x.assignment_id = a.id)
           ORDER BY a.id""", [campaign, purpose]).fetchall()
    rng = random.Random(seed)
    grids = GridAnswers(db)
    own_uid: dict[int, int] = {}   # an annotator's user id on their own server: one look-up each, not one per task
    out = []
    for task, uid, aid, pid, ls_pid, ls_as, kind, key, payload, gold in rows:
        spec = get_kind(kind)
        truth = _truth(kind, key, json.loads(payload), json.loads(gold) if gold else None,
                       random.Random(f"{seed}:{key}"))
        label = truth
        if rng.random() < disagreement:
            if kind == "dedup-review":
                label = "all"
            else:
                others = [x for x in spec.labels if x != truth]
                label = rng.choice(others) if others else truth
        if ls_as == "server":   # user ids are per server: the annotator's id on their own
            if aid not in own_uid:
                own_uid[aid] = server_row(project, aid)["ls_user_id"]
            uid = own_uid[aid]
        where = {"annotator_id": aid, "project_id": pid, "ls_project_id": ls_pid, "ls_as": ls_as}
        if task < 0:   # a grid member: its grid is answered once, with every member's label (cultura.annotate.grid_io)
            done = grids.add(pid, kind, key, label, user_id=uid, lead_time=round(rng.uniform(1, 4), 2))
            if done:
                tid, result, uid, lead, members = done
                out.append({**where, "task": tid, "user": uid, "result": result, "lead_time": lead, "items": members})
            continue
        out.append({**where, "task": task, "user": uid, "result": spec.result_for(label),
                    "lead_time": round(rng.uniform(2, 20), 2), "items": 1})
    return out


def _data_dir(project: Project, a: dict) -> Path | None:
    """The data dir of the server holding answer ``a``'s project, when cultura reaches it."""
    if a["ls_as"] == "server":
        row = server_row(project, a["annotator_id"])
        return project.root / row["data_dir"] if row else None
    return ls_data_dir(project)


def _write_bulk(project: Project, batches: dict[Path, list[dict]], bar) -> None:
    """Create each server's answers with Label Studio's models (:data:`ANSWER_SCRIPT`), ``WRITERS`` servers' writers
    at once (their databases are apart; each spends seconds setting Django up before its first answer)."""
    events: queue.Queue = queue.Queue()
    procs: dict[Path, subprocess.Popen] = {}
    waiting = list(batches)

    def start_next() -> None:
        ddir = waiting.pop(0)
        env = {**os.environ, **QUIET_ENV, "LABEL_STUDIO_BASE_DATA_DIR": str(ddir)}
        procs[ddir] = subprocess.Popen([ls_python(project), "-c", ANSWER_SCRIPT], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=str(ddir),
                                       text=True)
        threading.Thread(target=_feed, args=(procs[ddir], ddir, batches[ddir], events), daemon=True).start()

    for _ in range(min(len(waiting), WRITERS)):
        start_next()
    seen = {d: 0 for d in batches}
    errors: dict[Path, str] = {}
    running = len(procs)
    while running:
        ddir, msg = events.get()
        if msg is None:
            running -= 1
            if waiting:
                start_next()
                running += 1
        elif "error" in msg:
            errors[ddir] = msg["error"]
        else:
            bar.advance(sum(a["items"] for a in batches[ddir][seen[ddir]:msg["done"]]), server=str(ddir.name))
            seen[ddir] = msg["done"]
    for ddir, proc in procs.items():
        err = proc.stderr.read()
        if proc.wait() != 0 or seen[ddir] != len(batches[ddir]):
            tail = errors.get(ddir) or ((err or "").strip().splitlines()[-1:] or ["no output"])[0]
            raise LabelStudioError(f"Writing simulated answers into Label Studio at {ddir} stopped after "
                                   f"{seen[ddir]} of {len(batches[ddir])} ({tail}); rerun 'annotate simulate' to "
                                   "answer the rest.")


def _feed(proc: subprocess.Popen, ddir: Path, answers: list[dict], events: queue.Queue) -> None:
    """Send one writer its answers and pass on what it prints (None once it is done)."""
    try:
        proc.stdin.write(json.dumps({"chunk": CHUNK, "answers": [[a["task"], a["user"], a["result"],
                                                                  a["lead_time"]] for a in answers]}))
        proc.stdin.close()
    except BrokenPipeError:   # it died setting up: its stderr says why
        pass
    for line in proc.stdout:
        if line.startswith("@@"):
            events.put((ddir, json.loads(line[2:])))
    events.put((ddir, None))


def simulate_annotations(project: Project, campaign: str, *, disagreement: float = 0.1, seed: int = 0,
                         purpose: str = "annotate", conn: Connection | None = None,
                         bulk: bool = True, progress: progress_mod.Progress = None) -> dict:
    """Annotate every pushed, not yet annotated task of ``campaign``: each item gets a plausible answer
    (gold answer if known), and each annotator deviates from it with probability ``disagreement``.
    ``bulk`` False: one API request per answer even where the server's data dir is at hand."""
    disagreement, seed = PROBABILITY.check(disagreement, "disagreement"), SEED.check(seed, "seed")
    db = project.db
    conn = conn or connect(project)
    pull(project, campaign=campaign, conn=conn, progress=progress)  # so tasks answered earlier are known and skipped
    answers = _answers(project, campaign, purpose, disagreement, seed)
    # one batch per server: its data dir (bulk) or None (one request per answer)
    batches: dict[Path | None, list[dict]] = {}
    dirs: dict[tuple, Path | None] = {}   # one look-up (and one stat) per annotator's server, not per answer
    for a in answers:
        where = (a["ls_as"], a["annotator_id"] if a["ls_as"] == "server" else None)
        if bulk and where not in dirs:
            d = _data_dir(project, a)
            dirs[where] = d if d is not None and (d / "label_studio.sqlite3").exists() else None
        batches.setdefault(dirs[where] if bulk else None, []).append(a)
    n = sum(a["items"] for a in answers)
    with progress_mod.task("annotate simulate", total=n, progress=progress, campaign=campaign,
                           servers=len(batches)) as bar:
        bulk_batches = {d: part for d, part in batches.items() if d is not None}
        if bulk_batches:
            _write_bulk(project, bulk_batches, bar)
        if None in batches:
            conns: dict[int, Connection] = {}
            for a in batches[None]:
                pid = a["project_id"]
                if pid not in conns:   # as the annotator themself when the task is in their organization
                    conns[pid] = connection_for(project, db["annotators"].get(a["annotator_id"]), conn,
                                                {"id": pid, "ls_project_id": a["ls_project_id"], "ls_as": a["ls_as"]})
                conns[pid].client.annotations.create(a["task"], result=a["result"], completed_by=a["user"],
                                                     lead_time=a["lead_time"])
                bar.advance(a["items"])
    return {"campaign": campaign, "simulated_annotations": n, "bulk_servers": sum(1 for d in batches if d),
            "note": SIMULATED_NOTE}
