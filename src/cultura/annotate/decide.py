"""Adjudication: turn pulled annotations into final decisions (the core ``decisions`` table).

Per item with all its annotations in: a decision rule (``majority``, ``unanimity`` for labels; ``median``,
``mean`` for Likert values) and the item's agreement decide; items below ``min_agreement`` are disagreements
and go to an adjudication project that shows the earlier labels to a designated adjudicator. Once the
adjudicator's annotation is pulled, the item is decided with rule ``adjudicated``. Gold items are decided
by their known answer (rule ``gold``).

Model rules (:mod:`cultura.annotate.aggregate`) weight annotators by estimated skill instead: crowd-kit's
``dawid-skene``, ``glad``, ``mace``, ``wawa``, ... for labels and ``severity`` for 1–5 ratings decide every
complete item from a model fitted on the whole campaign; ``min_agreement`` is then a minimum posterior
probability (default 0: no item is sent to adjudication). Every rule-decided row records ``rule_params``.

Item agreement: nominal = share of annotations equal to the modal label; ordinal = ``1 - (max - min) / 4`` on
the 1–5 scale. Defaults: ``min_agreement`` 1.0 for labels (every disagreement is adjudicated) and 0.75 for
Likert ratings (ratings more than one point apart are adjudicated).

Effects read by the rest of cultura: a current ``filter`` decision ``remove`` excludes the image from
benchmarks; ``dedup`` decisions (one row per cluster member, keep/drop) resolve the cluster
(``dup_clusters.status = 'resolved'``, every cluster of the duplicate set) — which copy stays, never which
culture: the ``culture_conflict`` flags stay open; ``relevance`` decisions attach a value to image × country and
resolve the flag of an image rated (itself or a copy) for every country it was found for
(:mod:`cultura.curate.cultures_decide`).
"""
from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Callable

from cultura.curate.clusters import resolve_clusters
from cultura.curate.cultures_decide import open_conflicts, resolve_rated_conflicts
from cultura.bounds import PROBABILITY
from cultura.db import dumps, now, transaction
from cultura.db.leases import stage_lock
from cultura.errors import CulturaError, unknown
from cultura.progress import Progress, task, waiting

from .accounts import connection_for
from .aggregate import CROWD_RULES, ORDINAL_RULES, aggregate, rule_params
from .annotators import get_annotators
from .assign import _project_row
from .decisions import rated_countries
from .kinds import get_kind
from .pull import current_annotations
from .push import check_image_urls, push_project
from .report import campaigns, latest_per_rater, not_pushed, unpushed_kind
from .server import Connection, connect

if TYPE_CHECKING:
    from ..project import Project

RULES: dict[str, tuple[str, Callable]] = {}
#: Items decided between two progress events (a campaign of 20,000 items tells its reporter 40 times).
PROGRESS_EVERY = 500
DEFAULT_MIN = {"nominal": 1.0, "ordinal": 0.75}


def rule(name: str, level: str):
    def reg(fn):
        RULES[name] = (level, fn)
        return fn
    return reg


@rule("majority", "nominal")
def majority(labels: list[str]):
    """The label held by more than half of the annotators, else None."""
    (top, n), = Counter(labels).most_common(1)
    return top if n * 2 > len(labels) else None


@rule("unanimity", "nominal")
def unanimity(labels: list[str]):
    return labels[0] if len(set(labels)) == 1 else None


@rule("median", "ordinal")
def median(values: list[float]):
    return float(statistics.median(values))


@rule("mean", "ordinal")
def mean(values: list[float]):
    return float(statistics.fmean(values))


def item_agreement(xs: list, level: str) -> float:
    if level == "ordinal":
        return 1.0 - (max(xs) - min(xs)) / 4.0
    return Counter(xs).most_common(1)[0][1] / len(xs)


def record_decision(db, row: dict) -> bool:
    """Insert a decision unless an identical current one exists; supersede the previous one. (Plain SQL: called
    once per item, where sqlite-utils' table lookups cost more than the query.)"""
    cur = db.execute("SELECT id, label, value, rule, n_annotations FROM decisions WHERE kind = ? AND item_key = ? "
                     "AND superseded = 0", [row["kind"], row["item_key"]]).fetchall()
    if cur and cur[0][1:] == tuple(row.get(k) for k in ("label", "value", "rule", "n_annotations")):
        return False
    db.conn.executemany("UPDATE decisions SET superseded = 1 WHERE id = ?", [(c[0],) for c in cur])
    db["decisions"].insert({**row, "superseded": 0, "decided_at": now()})
    return True


def _decision_rows(kind: str, item: dict, label, value, rule_name: str, n: int, agr, details: dict) -> list[dict]:
    base = {"kind": get_kind(kind).decision_kind, "item_key": item["item_key"], "campaign": item["campaign"],
            "sha256": item["sha256"], "country": item["country"], "cluster_id": item["cluster_id"],
            "label": label, "value": value, "rule": rule_name, "n_annotations": n, "agreement": agr,
            "details": dumps(details)}
    if kind != "dedup-review":
        return [base]
    members = [m["sha256"] for m in json.loads(item["payload"])["members"]]
    keep = set(range(1, len(members) + 1)) if label == "all" else {
        int(x) for x in str(label).split(":", 1)[1].split(",") if x}
    return [{**base, "item_key": f"{item['item_key']}:{sha}", "sha256": sha,
             "label": "keep" if i in keep else "drop", "details": dumps({**details, "cluster_label": label})}
            for i, sha in enumerate(members, 1)]


#: An item's agreement (a share of the annotations) or, with a model rule, a posterior probability.
MIN_AGREEMENT = PROBABILITY


def adjudicate(project: Project, *, campaign: str | None = None, rule_name: str | None = None,
               min_agreement: float | None = None, adjudicator: str | None = None,
               conn: Connection | None = None, progress: Progress = None) -> list[dict]:
    """Decide every complete item of each campaign; send disagreements to the adjudicator's project.
    Returns one summary per campaign. A kind nobody pushed a campaign for (``campaign="relevance"`` after
    ``import ratings``) has nothing to adjudicate: its one summary says so, and why, in ``nothing_to_do``.
    ``progress`` (:mod:`cultura.progress`) is told the items decided per campaign, what a model rule's fit and the
    push of disagreements to the adjudicator wait for."""
    min_agreement = MIN_AGREEMENT.check_optional(min_agreement, "min_agreement")
    db = project.db
    if unpushed_kind(db, campaign):
        return [{"campaign": campaign, "kind": campaign, "nothing_to_do": f"Nothing to adjudicate: no {campaign} "
                 f"campaign was pushed; {not_pushed(db, campaign)}"}]
    out = []
    todo = campaigns(db, campaign)
    model_rules = {**{k: "nominal" for k in CROWD_RULES}, **{k: "ordinal" for k in ORDINAL_RULES}}
    levels = {**{k: lvl for k, (lvl, _) in RULES.items()}, **model_rules}
    _check_rule_fits(todo, rule_name, levels, campaign_named=campaign is not None)
    for c in todo:
        spec = get_kind(c["kind"])
        rname = rule_name or spec.default_rule
        model = None
        if rname in model_rules:
            # a model over the whole campaign: each item's decision is the model's, whatever the item's
            # agreement; with --min-agreement, items whose posterior is below it go to adjudication
            with waiting(f"the {rname} model to fit the answers of {c['name']}", progress=progress):
                mdec, mprob, _ = aggregate(db, c, rname, spec.level)
            model = (mdec, mprob, rule_params(rname))
            fn = None
            thr = 0.0 if min_agreement is None else float(min_agreement)
        else:
            fn = RULES[rname][1]
            thr = DEFAULT_MIN[spec.level] if min_agreement is None else float(min_agreement)
        items = {r["id"]: {**r, "campaign": c["name"]} for r in db["annotation_items"].rows_where(
            "campaign_id = ?", [c["id"]])}
        expected = dict(db.execute("SELECT a.item_id, COUNT(*) FROM assignments a JOIN annotation_items i ON "
                                   "i.id = a.item_id WHERE i.campaign_id = ? AND a.purpose = 'annotate' AND a.status != 'reassigned' "
                                   "GROUP BY 1", [c["id"]]).fetchall())
        by_item = defaultdict(list)
        for r in latest_per_rater(current_annotations(db, c["id"])):
            by_item[r["item_id"]].append(r)
        adjud = {}
        for r in latest_per_rater(current_annotations(db, c["id"], purpose="adjudicate")):
            adjud[r["item_id"]] = r
        summ = {"campaign": c["name"], "kind": c["kind"], "rule": rname, "min_agreement": thr, "decided": 0,
                "unchanged": 0, "adjudicated": 0, "gold": 0, "pending": 0, "disagreements": 0,
                "sent_to_adjudication": 0, "unresolved": 0}
        disagreements = []

        def told(done: int) -> None:
            bar.update(done=done, decided=summ["decided"] + summ["adjudicated"] + summ["gold"],
                       disagreements=summ["disagreements"])
        bar = task(f"adjudicating {c['name']}", len(items), progress=progress)  # closed once its items are decided
        with bar, transaction(db):
            for n_seen, (item_id, item) in enumerate(items.items()):
                if n_seen and n_seen % PROGRESS_EVERY == 0:
                    told(n_seen)
                anns = by_item.get(item_id, [])
                key = "value" if spec.level == "ordinal" else "label"
                xs = [a[key] for a in anns if a[key] is not None]
                who = {a["annotator"]: a[key] for a in anns}
                rows = None
                if item["gold"]:
                    g = json.loads(item["gold"])
                    gl = g.get("label") if spec.level == "nominal" else str(int(g["value"]))
                    rows = _decision_rows(c["kind"], item, gl, g.get("value"), "gold", len(xs), None,
                                          {"annotators": who})
                    summ["gold"] += 1
                elif item_id in adjud:
                    a = adjud[item_id]
                    rows = _decision_rows(c["kind"], item, a["label"], a["value"], "adjudicated", len(xs),
                                          item_agreement(xs, spec.level) if xs else None,
                                          {"annotators": who, "adjudicator": a["annotator"]})
                    summ["adjudicated"] += 1
                elif not xs or len(anns) < expected.get(item_id, 0):
                    summ["pending"] += 1
                    continue
                else:
                    agr = item_agreement(xs, spec.level)
                    if model is not None:
                        decided = model[0].get(item["item_key"])
                        p = model[1].get(item["item_key"])
                        low = p is not None and p < thr
                    else:
                        decided = fn(xs)
                        low = agr < thr
                    if decided is None or low:
                        summ["disagreements"] += 1
                        disagreements.append(item)
                        continue
                    extra = {"probability": model[1].get(item["item_key"])} if model is not None else {}
                    if spec.level == "ordinal":
                        rows = _decision_rows(c["kind"], item, str(round(decided)), decided, rname, len(xs), agr,
                                              {"annotators": who, **extra})
                    else:
                        reasons = sorted({x for a in anns for x in (json.loads(a["details"]).get("reasons", [])
                                                                    if a["details"] else [])})
                        rows = _decision_rows(c["kind"], item, decided, None, rname, len(xs), agr,
                                              {"annotators": who, **extra,
                                               **({"reasons": reasons} if reasons else {})})
                    rp = model[2] if model is not None else {"library": "cultura", "model": rname,
                                                             "params": {"min_agreement": thr}}
                    rows = [{**r, "rule_params": dumps(rp)} for r in rows]
                    summ["decided"] += 1
                changed = [record_decision(db, r) for r in rows]
                if not any(changed):
                    summ["unchanged"] += 1
                if c["kind"] == "dedup-review" and item["cluster_id"] is not None:
                    payload = json.loads(item["payload"])
                    cids = payload.get("cluster_ids") or [item["cluster_id"]]
                    resolve_clusters(db, cids)
                    # which copies are kept, not which cultures: a culture_conflict flag stays open until a
                    # culture decision (relevance ratings or a person's resolution), cultures_decide
            told(len(items))
        if c["kind"] == "relevance":
            summ["flags_resolved"] = _resolve_rated_conflicts(db, c["name"])
        if c["kind"] in ("dedup-review", "relevance"):
            summ["culture_questions_open"] = len(open_conflicts(db))
        if spec.write_back is not None:   # decisions → the area's table (e.g. context → contexts)
            summ["written_back"] = spec.write_back(db)
        if disagreements:
            summ.update(_send_to_adjudication(project, c, disagreements, adjudicator, conn, progress))
        out.append(summ)
    return out


def _check_rule_fits(todo: list[dict], rule_name: str | None, levels: dict[str, str], *,
                     campaign_named: bool) -> None:
    """Refuse, before any campaign is decided, a rule that does not fit one of the campaigns to decide: a rule
    for labels on 1–5 ratings or the reverse. Without ``--campaign`` the sentence names the option and the
    campaigns the rule fits, since every campaign of the project is decided then."""
    if rule_name is None:
        return
    if rule_name not in levels:
        raise unknown("decision rule", rule_name, levels)
    level = levels[rule_name]
    misfits = [c for c in todo if get_kind(c["kind"]).level != level]
    if not misfits:
        return
    c = misfits[0]
    what = "labels" if level == "nominal" else "1–5 ratings"
    fits = [x["name"] for x in todo if get_kind(x["kind"]).level == level]
    if not campaign_named and fits:
        raise CulturaError(f"Rule {rule_name!r} is for {what} and does not fit campaign {c['name']!r} "
                           f"({c['kind']}), which is decided too without --campaign; name the campaign with "
                           f"--campaign ({', '.join(fits)}), or leave --rule out for each kind's default.",
                           param="campaign")
    valid = [k for k, lvl in levels.items() if lvl == get_kind(c["kind"]).level]
    raise CulturaError(f"Rule {rule_name!r} does not fit {c['kind']} ({get_kind(c['kind']).level}) annotations; "
                       f"use one of {', '.join(valid)}.", param="rule")


def _resolve_rated_conflicts(db, campaign: str) -> int:
    """:func:`cultura.curate.cultures_decide.resolve_rated_conflicts` with the current relevance decisions."""
    return resolve_rated_conflicts(db, campaign, rated_countries(db))


def _send_to_adjudication(project: Project, c: dict, items: list[dict], adjudicator: str | None,
                          conn: Connection | None, progress: Progress = None) -> dict:
    db = project.db
    people = get_annotators(project, [adjudicator]) if adjudicator else get_annotators(project, role="adjudicator")
    if not people:
        return {"unresolved": len(items), "note": "no adjudicator: add one with 'cultura annotate annotators add "
                "NAME --email E --role adjudicator' or pass --adjudicator NAME"}
    adj = people[0]
    image_base = project.config.annotate.image_base_url
    check_image_urls([{"payload": json.loads(it["payload"])} for it in items], image_base)
    t = now()
    with transaction(db):
        prow = _project_row(db, c, adj, "adjudicate", 10 ** 9)
        db["assignments"].insert_all([{"item_id": it["id"], "annotator_id": adj["id"], "project_id": prow["id"],
                                       "purpose": "adjudicate", "status": "pending", "created_at": t}
                                      for it in items], ignore=True)
    conn = conn or connect(project)
    with stage_lock(project.root, "annotate-push", "cultura annotate push"):  # one pusher at a time
        prow = db["campaign_projects"].get(prow["id"])
        with waiting(f"{adj['name']}'s Label Studio", progress=progress):
            pc = connection_for(project, adj, conn, prow)
        with task(f"sending {len(items):,} disagreements of {c['name']} to {adj['name']}", len(items),
                  progress=progress) as bar:
            n = push_project(pc, db, db["campaign_projects"].get(prow["id"]), c["kind"], image_base=image_base,
                             progress=progress, on_chunk=lambda _prow, created: bar.update(done=created))
    return {"sent_to_adjudication": n, "adjudicator": adj["name"]}
