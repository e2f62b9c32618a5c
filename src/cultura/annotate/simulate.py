"""Simulated annotators for demos and benchmarks — clearly labelled as such, never for real data.

Creates annotations through the Label Studio API with ``completed_by`` set to each assigned annotator's
user, so pull, agreement and adjudication run exactly as they would on human work. Every simulated
annotation carries ``lead_time`` and the project is untouched otherwise.

>>> # simulate_annotations(project, "filter", disagreement=0.15, seed=0)
"""
from __future__ import annotations

import json
import random
from typing import TYPE_CHECKING

from cultura.bounds import PROBABILITY, SEED
from cultura.errors import CulturaError

from .accounts import connection_for
from .grid_io import GridAnswers
from .kinds import get_kind
from .people import server_row
from .pull import pull
from .server import Connection, connect

if TYPE_CHECKING:
    from ..project import Project

SIMULATED_NOTE = "SIMULATED annotator (cultura.annotate.simulate): not human judgements"


def _truth(kind: str, item_key: str, payload: dict, gold, rng: random.Random) -> str:
    if gold:
        return gold.get("label") or str(int(gold["value"]))
    spec = get_kind(kind)
    if kind == "dedup-review":
        return "keep:1"
    if kind == "relevance":
        return "5" if payload.get("own") else rng.choice(["1", "2"])
    return spec.labels[0] if kind != "translation" else rng.choice(["4", "5"])


def simulate_annotations(project: Project, campaign: str, *, disagreement: float = 0.1, seed: int = 0,
                         purpose: str = "annotate", conn: Connection | None = None) -> dict:
    """Annotate every pushed, not yet annotated task of ``campaign``: each item gets a plausible answer
    (gold answer if known), and each annotator deviates from it with probability ``disagreement``."""
    disagreement, seed = PROBABILITY.check(disagreement, "disagreement"), SEED.check(seed, "seed")

    db = project.db
    conn = conn or connect(project)
    pull(project, campaign=campaign, conn=conn)  # so tasks annotated earlier are known and skipped
    rows = db.execute(
        """SELECT a.ls_task_id, an.ls_user_id, an.id, p.id, p.ls_project_id, p.ls_as, i.kind, i.item_key, i.payload, i.gold FROM assignments a
           JOIN annotators an ON an.id = a.annotator_id JOIN annotation_items i ON i.id = a.item_id
           JOIN campaigns c ON c.id = i.campaign_id JOIN campaign_projects p ON p.id = a.project_id
           WHERE c.name = ? AND a.purpose = ? AND a.ls_task_id IS NOT NULL
             AND a.status IN ('pending', 'pushed')
             AND NOT EXISTS (SELECT 1 FROM annotations x WHERE x.assignment_id = a.id)
           ORDER BY a.id""", [campaign, purpose]).fetchall()
    rng = random.Random(seed)
    n = 0
    conns: dict[int, Connection] = {}
    grids = GridAnswers(db)
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
        # as the annotator themself when they have a blind account (the task is in their organization)
        if pid not in conns:
            conns[pid] = connection_for(project, db["annotators"].get(aid), conn,
                                        {"id": pid, "ls_project_id": ls_pid, "ls_as": ls_as})
        if ls_as == "server":   # user ids are per server: the annotator's id on their own
            uid = server_row(project, aid)["ls_user_id"]
        if task < 0:   # a grid member: its grid is answered once, with every member's label (cultura.annotate.grid_io)
            n += grids.add(conns[pid], pid, kind, key, label, user_id=uid, lead_time=round(rng.uniform(1, 4), 2))
            continue
        conns[pid].client.annotations.create(task, result=spec.result_for(label), completed_by=uid,
                                             lead_time=round(rng.uniform(2, 20), 2))
        n += 1
    return {"campaign": campaign, "simulated_annotations": n, "note": SIMULATED_NOTE}
