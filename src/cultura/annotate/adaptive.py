"""Adaptive overlap on a campaign's tables: push asks ``first`` opinions of every item (one by default), and on
each later push one more opinion for the items :mod:`cultura.annotate.overlap` names (not yet sure: a rare
verdict, trusted opinions that disagree, an unskilled rater, a failed gold check in the same grid), up to the
campaign's overlap; new work goes only to raters whose estimated skill is not low. What it saved against fixed
overlap is reported with every push.
"""
from __future__ import annotations

import json
from collections import Counter

from cultura.db import now

from .assign import _project_row, assign, eligible
from .overlap import Opinion, Policy, askable, estimate_skills, label_shares, next_round, tasks_saved
from .pull import current_annotations

#: opinions asked first when a campaign is adaptive
FIRST = Policy.first


def is_adaptive(campaign: dict) -> bool:
    params = campaign.get("params")
    params = json.loads(params) if isinstance(params, str) and params else params or {}
    return bool(params.get("adaptive"))


def _opinions(db, campaign: dict) -> tuple[list[Opinion], dict]:
    """The campaign's current answers (:func:`cultura.annotate.pull.current_annotations`: an answer outside the
    label set is none) as opinions (batch = the grid they came in) and the gold answers."""
    grid_of = {(a, k): g for g, a, keys in db.execute(
        "SELECT g.id, p.annotator_id, g.item_keys FROM grid_tasks g JOIN campaign_projects p ON p.id = g.project_id "
        "WHERE p.campaign_id = ?", [campaign["id"]]) for k in json.loads(keys)}
    ops, gold = [], {}
    for r in current_annotations(db, campaign["id"]):
        if r["annotator"] is None:
            continue   # an answer of no annotator row is no rater's opinion
        label = r["label"] if r["label"] is not None else (str(int(r["value"])) if r["value"] is not None else None)
        if label is None:
            continue
        ops.append(Opinion(r["item_id"], r["annotator"], label, grid_of.get((r["annotator_id"], r["item_key"]))))
        g = r["gold"] or {}
        if g.get("label") is not None or g.get("value") is not None:
            gold[r["item_id"]] = g.get("label") if g.get("label") is not None else str(int(g["value"]))
    return ops, gold


def assign_opinions(db, campaign: dict, items: list[dict], annotators: list[dict], *, overlap: int,
                    gold_keys: set[str], max_tasks: int) -> dict:
    """Assignments for a push: fixed overlap as before, or, for an adaptive campaign, ``first`` opinions for new
    items and one more for each answered item the policy names. Returns the counts (``adaptive`` for the latter)."""
    if not is_adaptive(campaign):
        return assign(db, campaign, items, annotators, overlap=overlap, gold_keys=gold_keys, max_tasks=max_tasks)
    policy = Policy(first=min(FIRST, overlap), most=overlap)
    ops, gold = _opinions(db, campaign)
    skills = estimate_skills(ops, gold=gold)
    shares = label_shares(ops, skills=skills, gold=gold)
    trusted = set(askable([a["name"] for a in annotators], skills, policy))
    people = [a for a in annotators if a["name"] in trusted]
    counts = assign(db, campaign, items, people, overlap=policy.first, gold_keys=gold_keys, max_tasks=max_tasks)
    waiting = {r[0] for r in db.execute(
        "SELECT a.item_id FROM assignments a JOIN annotation_items i ON i.id = a.item_id WHERE i.campaign_id = ? "
        "AND a.purpose = 'annotate' AND NOT EXISTS (SELECT 1 FROM annotations x WHERE x.assignment_id = a.id AND "
        "x.is_current = 1 AND x.was_cancelled = 0)", [campaign["id"]])}
    more = {i: why for i, why in next_round(ops, skills=skills, gold=gold, policy=policy, shares=shares).items()
            if i not in waiting}
    asked = {}
    for item_id, who in db.execute("SELECT a.item_id, an.name FROM assignments a JOIN annotators an ON "
                                   "an.id = a.annotator_id JOIN annotation_items i ON i.id = a.item_id WHERE "
                                   "i.campaign_id = ? AND a.purpose = 'annotate'", [campaign["id"]]):
        asked.setdefault(item_id, set()).add(who)
    load = Counter(who for names in asked.values() for who in names)
    by_id = {it["id"]: it for it in items}
    rows, reasons, stuck = [], Counter(), 0
    for item_id, why in sorted(more.items()):
        reasons[why] += 1
        it = by_id.get(item_id)
        if why == "adjudicate" or it is None:
            continue   # adjudication decides it ('cultura annotate adjudicate' sends it to the adjudicator)
        free = [a for a in people if a["name"] not in asked.get(item_id, set()) and eligible(campaign["kind"], it, a)]
        if not free:
            stuck += 1
            continue
        a = min(free, key=lambda a: (load[a["name"]], a["name"]))
        load[a["name"]] += 1
        p = _project_row(db, campaign, a, "annotate", max_tasks)
        rows.append({"item_id": item_id, "annotator_id": a["id"], "project_id": p["id"], "purpose": "annotate",
                     "status": "pending", "created_at": now()})
    db["assignments"].insert_all(rows, ignore=True)
    non_gold = [it for it in items if it["item_key"] not in gold_keys and not it.get("gold")]
    ids = {it["id"] for it in non_gold}
    used = db.execute("SELECT COUNT(*) FROM assignments a JOIN annotation_items i ON i.id = a.item_id WHERE "
                      "i.campaign_id = ? AND a.purpose = 'annotate' AND i.gold IS NULL", [campaign["id"]]).fetchone()[0]
    counts["assignments"] += len(rows)
    counts["adaptive"] = {"first": policy.first, "most": policy.most, "confidence": policy.confidence, "asked_again": len(rows),
                          "reasons": dict(sorted(reasons.items())), "no_free_annotator": stuck,
                          "low_skill_annotators": sorted(a["name"] for a in annotators if a["name"] not in trusted),
                          **tasks_saved(used, len(ids), overlap)}
    return counts
