"""The annotator report: how each annotator works and how each campaign stands.

Per campaign and annotator: tasks assigned and done; median time per task (Label Studio's lead time); images per
hour (per campaign too, with the annotator hours spent: the pace a manager plans with);
agreement with each other annotator (share of shared non-gold items with the same answer; for 1–5 ratings,
within one point) and with the consensus (the majority of the OTHER annotators of each item — leave-one-out,
so an annotator's own vote never counts for them; for ratings, within one point of the others' median); gold
accuracy with its 95 % Wilson interval and n; the skill estimates stored by model rules (``adjudicate --rule
dawid-skene`` ...); and a spammer flag with its reasons:

- gold: at least 5 gold answers and the upper end of the 95 % interval of gold accuracy below 0.75;
- skill: a stored accuracy-like estimate (Dawid-Skene, one-coin, Wawa, zero-based skill, gold-majority) below
  ``chance + (1 - chance) / 4`` (0.625 for two labels), or a MACE competence below 0.3;
- consensus: at least 10 items and agreement with the others' majority at or below ``chance + (1 - chance) / 4``;
- speed: median time per task under a third of the team's median (at least 10 timed tasks).

Per campaign: items, gold items, items answered by everyone assigned, decided items, items waiting for answers,
items whose waiting assignees are deactivated (blocked), and for relevance the countries rated without a
native rater (no active annotator of that country).
"""
from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from ..progress import Progress, task
from .aggregate import stored_skills
from .kinds import get_kind
from .pull import current_annotations
from .report import campaigns, latest_per_rater

if TYPE_CHECKING:
    from ..project import Project

ACCURACY_LIKE = ("dawid-skene", "one-coin-dawid-skene", "wawa", "zero-based-skill", "gold-majority")


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float] | tuple[None, None]:
    """95 % Wilson score interval for ``k`` successes out of ``n`` (equals statsmodels' ``proportion_confint``
    with ``method='wilson'``)."""
    if n == 0:
        return None, None
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def images_per_hour(lead_times: list[float]) -> float | None:
    """Images answered per hour of Label Studio lead time (a grid's time is shared by its images at pull);
    ``None`` without timed answers."""
    t = [x for x in lead_times if x is not None and x > 0]
    return round(3600 * len(t) / sum(t), 1) if t else None


def _same(a, b, level: str) -> bool:
    return abs(float(a) - float(b)) <= 1 if level == "ordinal" else a == b


def annotator_report(project: Project, campaign: str | None = None, *, progress: Progress = None) -> list[dict]:
    """One entry per campaign: ``annotators`` (rows), ``pairs`` (agreement between annotators), ``progress``
    and ``blockers``. The ``progress`` argument (:mod:`cultura.progress`) is told each campaign's annotators as
    their rows are made."""
    db = project.db
    out = []
    for c in campaigns(db, campaign):
        with task(f"annotators report of {c['name']}", progress=progress) as bar:
            out.append(_campaign_report(db, c, bar))
    return out


def _campaign_report(db, c: dict, bar) -> dict:
    """The annotator report of campaign ``c`` (one entry of :func:`annotator_report`), advancing ``bar`` once the
    answers are read and per annotator."""
    spec = get_kind(c["kind"])
    level = spec.level
    key = "value" if level == "ordinal" else "label"
    recs = [r for r in latest_per_rater(current_annotations(db, c["id"])) if r[key] is not None]
    n_labels = len(spec.labels) if getattr(spec, "labels", None) else 2
    chance = 1.0 / max(n_labels, 2)
    low = chance + (1 - chance) / 4
    by_item: dict[int, dict[str, object]] = defaultdict(dict)
    for r in recs:
        by_item[r["item_id"]][r["annotator"]] = r[key]
    gold_of = {r["item_id"]: r["gold"] for r in recs if r["gold"] is not None}
    assigned = dict(db.execute("SELECT an.name, COUNT(*) FROM assignments a JOIN annotators an ON an.id = "
                               "a.annotator_id JOIN annotation_items i ON i.id = a.item_id WHERE i.campaign_id = ? "
                               "AND a.purpose = 'annotate' AND a.status != 'reassigned' GROUP BY 1", [c["id"]]).fetchall())
    skills = stored_skills(db, c["id"])
    names = sorted(set(assigned) | {r["annotator"] for r in recs if r["annotator"]})
    times = {n: [r["lead_time"] for r in recs if r["annotator"] == n and r["lead_time"] is not None]
             for n in names}
    all_times = [t for ts in times.values() for t in ts]
    bar.update(done=1, total=len(names) + 2, answers=len(recs))  # the answers read; each annotator; the campaign
    team_median = statistics.median(all_times) if all_times else None

    # pairwise agreement on shared non-gold items
    pair_n: Counter = Counter()
    pair_same: Counter = Counter()
    for iid, ans in by_item.items():
        if iid in gold_of:
            continue
        who = sorted(ans)
        for i, a in enumerate(who):
            for b in who[i + 1:]:
                pair_n[(a, b)] += 1
                pair_same[(a, b)] += _same(ans[a], ans[b], level)
    pairs = [{"annotator": a, "other": b, "shared_items": n, "agreement": pair_same[(a, b)] / n}
             for (a, b), n in sorted(pair_n.items())]

    rows = []
    for n in names:
        mine = [r for r in recs if r["annotator"] == n]
        # leave-one-out consensus
        cons_n = cons_same = 0
        for r in mine:
            if r["item_id"] in gold_of:
                continue
            others = [v for w, v in by_item[r["item_id"]].items() if w != n]
            if not others:
                continue
            if level == "ordinal":
                ref = statistics.median(others)
            else:
                (top, k), *rest = Counter(others).most_common()
                if rest and rest[0][1] == k:
                    continue   # the others are split: no consensus to compare with
                ref = top
            cons_n += 1
            cons_same += _same(r[key], ref, level)
        g = [r for r in mine if r["gold"] is not None]
        gk = "value" if level == "ordinal" else "label"
        g_ok = sum(1 for r in g if r["gold"].get(gk) is not None and (
            float(r[key]) == float(r["gold"][gk]) if level == "ordinal" else r[key] == r["gold"][gk]))
        lo, hi = wilson(g_ok, len(g))
        med = statistics.median(times[n]) if times[n] else None
        row = {"annotator": n, "assigned": assigned.get(n, 0), "done": len(mine),
               "median_seconds": med, "images_per_hour": images_per_hour(times[n]), "consensus_agreement": cons_same / cons_n if cons_n else None,
               "consensus_n": cons_n, "gold_accuracy": g_ok / len(g) if g else None, "gold_ci_low": lo,
               "gold_ci_high": hi, "gold_n": len(g), "skill": skills.get(n, {})}
        reasons = []
        if len(g) >= 5 and hi is not None and hi < 0.75:
            reasons.append(f"gold accuracy {g_ok}/{len(g)} (95% CI up to {hi:.2f})")
        for rule, s in sorted(skills.get(n, {}).items()):
            if rule in ACCURACY_LIKE and s < low:
                reasons.append(f"{rule} skill {s:.2f} < {low:.2f}")
            elif rule == "mace" and s < 0.3:
                reasons.append(f"mace competence {s:.2f} < 0.30")
        if level == "nominal" and cons_n >= 10 and cons_same / cons_n <= low:
            reasons.append(f"agrees with the others' majority on {cons_same}/{cons_n} items")
        if med is not None and team_median and len(times[n]) >= 10 and med < team_median / 3:
            reasons.append(f"median {med:.1f} s per task, team median {team_median:.1f} s")
        row["spammer"] = bool(reasons)
        row["reason"] = "; ".join(reasons) or None
        rows.append(row)
        bar.advance()

    progress, blockers = _progress(db, c, by_item)
    # the campaign's pace: images answered per hour of annotator time, and per hour of each annotator
    progress["images_per_hour"] = images_per_hour(all_times)
    progress["annotator_hours"] = round(sum(t for t in all_times if t and t > 0) / 3600, 3)
    bar.advance()
    return {"campaign": c["name"], "kind": c["kind"], "level": level, "annotators": rows, "pairs": pairs,
            "progress": progress, "blockers": blockers}


def _progress(db, c: dict, by_item: dict) -> tuple[dict, list[dict]]:
    cid = c["id"]
    items = db.execute("SELECT COUNT(*), SUM(gold IS NOT NULL) FROM annotation_items WHERE campaign_id = ?",
                       [cid]).fetchone()
    per_item = db.execute(
        """SELECT a.item_id, COUNT(*), SUM(an.active = 0) FROM assignments a JOIN annotators an ON an.id = a.annotator_id
           JOIN annotation_items i ON i.id = a.item_id WHERE i.campaign_id = ? AND a.purpose = 'annotate'
           AND a.status != 'reassigned' AND NOT EXISTS (SELECT 1 FROM annotations x WHERE x.assignment_id = a.id AND x.is_current = 1
                           AND x.was_cancelled = 0)
           GROUP BY 1""", [cid]).fetchall()
    waiting = len(per_item)
    blocked = sum(1 for _, n, inactive in per_item if inactive)
    decided = db.execute("SELECT COUNT(DISTINCT item_key) FROM decisions WHERE campaign = ? AND superseded = 0",
                         [c["name"]]).fetchone()[0]
    complete = (items[0] or 0) - waiting
    progress = {"items": items[0] or 0, "gold_items": items[1] or 0, "complete": complete, "waiting": waiting,
                "decided": decided}
    blockers = []
    if waiting:
        blockers.append({"blocker": "items without enough answers", "items": waiting})
    if blocked:
        blockers.append({"blocker": "items waiting for a deactivated annotator (push again to reassign, or "
                         "reactivate them)", "items": blocked})
    if c["kind"] == "relevance":
        natives = {r[0] for r in db.execute("SELECT DISTINCT country FROM annotators WHERE active = 1 AND "
                                            "country IS NOT NULL")}
        need = Counter(r[0] for r in db.execute("SELECT country FROM annotation_items WHERE campaign_id = ? AND "
                                                "country IS NOT NULL", [cid]))
        for cc in sorted(set(need) - natives):
            blockers.append({"blocker": f"country {cc} has no native rater (add one with 'cultura annotate "
                             f"annotators add NAME --email E --country {cc}')", "items": need[cc]})
    return progress, blockers
