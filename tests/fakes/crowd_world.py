"""A planted annotation campaign written straight into the annotate tables (no Label Studio): known truths,
annotators of known reliability (a probability of answering right, or ``"random"`` for a random clicker, or a
severity offset for 1–5 ratings), gold items. For aggregation and the annotator report.

>>> # truth = plant_campaign(project, "filter", workers={"a": 0.9, "r": "random"}, n_items=60, n_gold=10)
"""
from __future__ import annotations

import json
import random

from cultura.db import dumps, now, transaction


def plant_campaign(project, kind: str, *, workers: dict, n_items: int, n_gold: int = 0, seed: int = 0,
                   name: str | None = None, labels=("keep", "remove"), p_first: float = 0.7) -> dict:
    """Write a campaign of ``n_items`` items (the first ``n_gold`` are gold), each answered by every worker.
    Nominal kinds: worker value = accuracy in [0, 1] or ``"random"``. Ordinal (``relevance``): worker value =
    severity (points added, then rounded and clipped to 1–5). Returns ``{item_key: truth}``."""
    rng = random.Random(seed)
    db, t = project.db, now()
    name = name or kind
    truth = {}
    with transaction(db):
        cid = db["campaigns"].insert({"name": name, "kind": kind, "overlap": len(workers), "created_at": t}).last_pk
        wids = {}
        for i, w in enumerate(workers):
            wid = db.execute("SELECT id FROM annotators WHERE name = ?", [w]).fetchone()
            wids[w] = wid[0] if wid else db["annotators"].insert({
                "name": w, "email": f"{w}@example.org", "ls_user_id": 1000 + i, "languages": "[]",
                "role": "annotator", "active": 1, "created_at": t}).last_pk
        pids = {w: db["campaign_projects"].insert({"campaign_id": cid, "annotator_id": wid, "ls_project_id": 5000 + wid,
                                                   "title": f"{name} · {w}", "created_at": t}).last_pk
                for w, wid in wids.items()}
        ann_id = (db.execute("SELECT COALESCE(MAX(ls_annotation_id), 0) FROM annotations").fetchone()[0]) + 1
        for n in range(n_items):
            key = f"{kind}:planted{seed}-{n:04d}"
            if kind == "relevance":
                tv = rng.choice([1, 2, 3, 4, 5])
                truth[key] = float(tv)
                gold = dumps({"value": tv}) if n < n_gold else None
            else:
                tl = labels[0] if rng.random() < p_first else labels[1]
                truth[key] = tl
                gold = dumps({"label": tl}) if n < n_gold else None
            iid = db["annotation_items"].insert({"campaign_id": cid, "item_key": key, "kind": kind, "payload": "{}",
                                                 "gold": gold, "created_at": t}).last_pk
            for w, q in workers.items():
                aid = db["assignments"].insert({"item_id": iid, "annotator_id": wids[w], "project_id": pids[w],
                                                "ls_task_id": 10 ** 6 + iid * 10 + wids[w], "status": "pushed",
                                                "created_at": t}).last_pk
                label, value = None, None
                if kind == "relevance":
                    value = float(min(5, max(1, round(truth[key] + q + rng.choice([-0.4, 0, 0, 0.4])))))
                elif q == "random":
                    label = rng.choice(labels)
                else:
                    label = truth[key] if rng.random() < q else next(x for x in labels if x != truth[key])
                db["annotations"].insert({"assignment_id": aid, "item_id": iid, "annotator_id": wids[w],
                                          "ls_project_id": 5000 + wids[w], "ls_task_id": 10 ** 6 + iid * 10 + wids[w],
                                          "ls_annotation_id": ann_id, "version": 1, "result": json.dumps([]),
                                          "label": label, "value": value, "completed_by": 1000,
                                          "lead_time": round(rng.uniform(2, 9) * (0.2 if q == "random" else 1), 2),
                                          "ls_updated_at": t, "pulled_at": t})
                ann_id += 1
    return truth
