"""Who answers what: native-speaker eligibility, the annotator's campaign project (split in parts), and the
assignment of items to the least-loaded eligible annotators. Push calls it; adaptive overlap calls it again for
the items that need one more opinion.
"""
from __future__ import annotations

import json

from cultura.db import now

MAX_TASKS_PER_PROJECT = 90_000      # Label Studio recommends < 100k tasks per project


# --------------------------------------------------------------------------------------- eligibility

def eligible(kind: str, item: dict, annotator: dict) -> bool:
    """Native-speaker constraints: relevance for country X → annotators from X (seed 004); entity and
    translation → speakers of the item's language; filter and dedup-review → anyone."""
    if kind == "relevance":  # a free-text culture label (cultura.cultures) may name the country it belongs to
        payload = item.get("payload")
        label_cc = (json.loads(payload) if isinstance(payload, str) and payload else payload or {}).get("label_country")
        return annotator.get("country") == item.get("country") or bool(label_cc and annotator.get("country") == label_cc)
    if kind in ("entity", "translation", "context"):
        lang = item.get("language")
        if kind == "entity" and annotator.get("country") and annotator["country"] == item.get("country"):
            return True
        return bool(lang) and lang in (annotator.get("languages") or [])
    return True


def _project_row(db, campaign: dict, annotator: dict, purpose: str, max_tasks: int, *,
                 full: bool = False) -> dict:
    """The annotator's current project row for the campaign; a new part when the last one is full."""
    rows = list(db["campaign_projects"].rows_where(
        "campaign_id = ? AND annotator_id = ? AND purpose = ?", [campaign["id"], annotator["id"], purpose],
        order_by="part DESC"))
    if rows:
        last = rows[0]
        n = db.execute("SELECT COUNT(*) FROM assignments WHERE project_id = ?", [last["id"]]).fetchone()[0]
        if n < max_tasks and not full:
            return last
        part = last["part"] + 1
    else:
        part = 1
    suffix = " · adjudication" if purpose == "adjudicate" else ""
    title = f"cultura {campaign['name']} · {annotator['name']}{suffix}" + (f" · part {part}" if part > 1 else "")
    pid = db["campaign_projects"].insert({"campaign_id": campaign["id"], "annotator_id": annotator["id"],
                                          "purpose": purpose, "part": part, "title": title,
                                          "created_at": now()}).last_pk
    return db["campaign_projects"].get(pid)


def assign(db, campaign: dict, items: list[dict], annotators: list[dict], *, overlap: int,
           gold_keys: set[str], purpose: str = "annotate",
           max_tasks: int = MAX_TASKS_PER_PROJECT) -> dict:
    """Create assignment rows for items that have none yet. Gold items go to every eligible annotator,
    others to the ``overlap`` least-loaded eligible ones (ties by name). Returns counts."""
    kind = campaign["kind"]
    withdrawn = _withdraw(db, campaign["id"], purpose)
    load = {a["id"]: 0 for a in annotators}
    for aid, n in db.execute("SELECT a.annotator_id, COUNT(*) FROM assignments a JOIN annotation_items i "
                             "ON i.id = a.item_id WHERE i.campaign_id = ? AND a.purpose = ? AND a.status "
                             "!= 'reassigned' GROUP BY 1", [campaign["id"], purpose]).fetchall():
        if aid in load:
            load[aid] = n
    have: dict[int, set] = {}
    for item_id, aid in db.execute("SELECT a.item_id, a.annotator_id FROM assignments a JOIN annotation_items i "
                                   "ON i.id = a.item_id WHERE i.campaign_id = ? AND a.purpose = ?",
                                   [campaign["id"], purpose]).fetchall():
        have.setdefault(item_id, set()).add(aid)
    projects: dict[int, dict] = {}
    rows, under, unassigned = [], 0, []
    handed = []
    for it in items:
        gone = withdrawn.get(it["id"], [])
        if it["id"] in have and not gone:
            continue
        # an item of a deactivated annotator goes to eligible others who never had it, one for each withdrawn
        ok = [a for a in annotators if eligible(kind, it, a) and a["id"] not in have.get(it["id"], ())]
        if not ok:
            if not gone:
                unassigned.append((it["item_key"], it.get("country")))
            continue
        if gone:
            chosen = sorted(ok, key=lambda a: (load[a["id"]], a["name"]))[:len(gone)]
            handed += gone[:len(chosen)]
        elif it["item_key"] in gold_keys:
            chosen = ok
        else:
            chosen = sorted(ok, key=lambda a: (load[a["id"]], a["name"]))[:overlap]
            under += len(chosen) < overlap
        for a in chosen:
            load[a["id"]] += 1
            p = projects.get(a["id"])
            if p is None or p["_n"] >= max_tasks:
                p = projects[a["id"]] = _project_row(db, campaign, a, purpose, max_tasks, full=p is not None)
                p["_n"] = db.execute("SELECT COUNT(*) FROM assignments WHERE project_id = ?",
                                     [p["id"]]).fetchone()[0]
            p["_n"] += 1
            rows.append({"item_id": it["id"], "annotator_id": a["id"], "project_id": p["id"],
                         "purpose": purpose, "status": "pending", "created_at": now()})
    db["assignments"].insert_all(rows, ignore=True)
    if handed:
        db.conn.executemany("UPDATE assignments SET status = 'reassigned' WHERE id = ?", [(i,) for i in handed])
    by_country: dict[str, int] = {}
    for _, cc in unassigned:
        if cc:
            by_country[cc] = by_country.get(cc, 0) + 1
    out = {"assignments": len(rows), "reassigned": len(handed),
           "withdrawn_waiting": sum(len(v) for v in withdrawn.values()) - len(handed),
           "under_assigned": under, "unassigned": len(unassigned),
           "unassigned_examples": [k for k, _ in unassigned[:5]]}
    if kind == "relevance":  # relevance needs a native annotator per culture (seed 004): name who is missing
        out["unassigned_countries"] = dict(sorted(by_country.items()))
        if by_country:
            out["warning"] = (f"{len(unassigned)} relevance items have no eligible annotator: no active annotator "
                              f"is native to {', '.join(sorted(by_country))}. Add one per country ('cultura annotate "
                              f"annotators add NAME --email E --country {min(by_country)}') and push again; until "
                              "then build refuses these unrated links (or keeps them with --allow-unrated).")
    return out


def _withdraw(db, campaign_id: int, purpose: str) -> dict[int, list[int]]:
    """Mark the unanswered assignments of deactivated annotators ``withdrawn`` (kept, never pushed again) and
    return every withdrawn one not handed to someone else yet, by item."""
    db.execute("UPDATE assignments SET status = 'withdrawn' WHERE purpose = ? AND status IN ('pending', 'pushed') "
               "AND item_id IN (SELECT id FROM annotation_items WHERE campaign_id = ?) "
               "AND annotator_id IN (SELECT id FROM annotators WHERE active = 0) "
               "AND NOT EXISTS (SELECT 1 FROM annotations x WHERE x.assignment_id = assignments.id "
               "AND x.is_current = 1)", [purpose, campaign_id])
    out: dict[int, list[int]] = {}
    for aid, item_id in db.execute("SELECT a.id, a.item_id FROM assignments a JOIN annotation_items i ON i.id = "
                                   "a.item_id WHERE i.campaign_id = ? AND a.purpose = ? AND a.status = 'withdrawn' "
                                   "ORDER BY a.id", [campaign_id, purpose]).fetchall():
        out.setdefault(item_id, []).append(aid)
    return out
