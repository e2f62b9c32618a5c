"""Agreement and progress reports over pulled annotations (the statistics come from
:mod:`cultura.annotate.agreement`, which wraps sklearn, krippendorff and statsmodels).

Per campaign: percent agreement, Cohen's κ per annotator pair (quadratic-weighted for Likert kinds),
Fleiss' κ, Krippendorff's α (nominal and ordinal), each annotator's agreement with the leave-one-out
consensus, gold accuracy, throughput (items/hour, median lead time), workload (assigned / done / remaining)
and a per-country and per-language breakdown (``by_country``, ``by_language``: the language of each item).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from cultura.curate.cultures_decide import open_conflicts
from cultura.db import now
from cultura.errors import CulturaError, unknown
from cultura.progress import Progress, task

from . import agreement as ag
from .decisions import imported_ratings
from .kinds import get_kind, kinds
from .pull import current_annotations

if TYPE_CHECKING:
    from ..project import Project


def _nan(x):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def _clean(obj):
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        return _nan(float(obj))
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def campaigns(db, name: str | None = None) -> list[dict]:
    """Every campaign, or the one named ``name`` (a name no push made is :func:`no_campaign`'s sentence)."""
    rows = list(db["campaigns"].rows_where("name = ?" if name else None, [name] if name else [], order_by="id"))
    if name and not rows:
        raise no_campaign(db, name)
    return rows


def no_campaign(db, name: str) -> CulturaError:
    """The error for a campaign nobody pushed. A kind's name (what push names a campaign without a batch name)
    says what to do: name the campaigns of that kind when they have other names, else start one; for
    ``relevance``, what imported ratings already decided. Any other name is unknown (with the names there are)."""
    if name not in kinds():
        names = [r["name"] for r in db["campaigns"].rows]
        if not names:
            return CulturaError(f"Unknown campaign {name!r}: no campaign was pushed yet ('cultura annotate push "
                                f"KIND' starts one; the kinds are {', '.join(kinds())}).", param="campaign")
        return unknown("campaign", name, names, param="campaign")
    same = [r["name"] for r in db["campaigns"].rows_where("kind = ?", [name], order_by="id")]
    if same:
        return CulturaError(f"No campaign is named {name!r}: the {name} campaigns are {', '.join(same)}; name one "
                            "of them, or none for every campaign.", param="campaign")
    return CulturaError(f"No {name} campaign was pushed, so it has no annotations: {not_pushed(db, name)}",
                        param="campaign")


def unpushed_kind(db, name: str | None) -> bool:
    """True when ``name`` is an annotation kind no campaign was ever pushed for (by that name or another)."""
    return bool(name) and name in kinds() and not db.execute(
        "SELECT 1 FROM campaigns WHERE name = ? OR kind = ? LIMIT 1", [name, name]).fetchone()


def not_pushed(db, kind: str) -> str:
    """What a kind without a campaign means (one sentence's end): how to start one, and for relevance what the
    imported ratings decided and which culture questions are still open."""
    start = f"'cultura annotate push {kind}' starts one"
    n, files = imported_ratings(db) if kind == "relevance" else (0, [])
    if not n:
        return start + "."
    left = len(open_conflicts(db))
    still = (f"{left} culture question{'s are' if left != 1 else ' is'} still open (rate those images for every "
             "country they were found for, or decide with 'cultura images flags --resolve')" if left else
             "no culture question is open")
    return (f"the {n:,} relevance rating{'s' if n != 1 else ''} imported from {', '.join(files)} "
            f"{'are decisions' if n != 1 else 'is a decision'} already and settle the culture questions they "
            f"rate, {still}; {start} if you want annotators to rate more.")


def latest_per_rater(records: list[dict]) -> list[dict]:
    """One record per (item, annotator): the most recently updated."""
    best: dict[tuple, dict] = {}
    for r in records:
        k = (r["item_id"], r["annotator"])
        if k not in best or (r["ls_updated_at"] or "") >= (best[k]["ls_updated_at"] or ""):
            best[k] = r
    return list(best.values())


def rating_matrix(records: list[dict], level: str):
    """(matrix, raters, items, categories) for ``records`` (non-gold, one per item × annotator)."""
    if level == "ordinal":
        recs = [{**r, "v": r["value"]} for r in records if r["value"] is not None]
        m, raters, items = ag.to_matrix(recs, "item_id", "annotator", "v")
        return m, raters, items, None
    cats = sorted({r["label"] for r in records if r["label"] is not None})
    m, raters, items = ag.to_matrix([r for r in records if r["label"] is not None], "item_id", "annotator",
                                    "label", categories=cats)
    return m, raters, items, cats


def agreement_stats(records: list[dict], level: str) -> dict:
    """All agreement statistics of one set of records (needs ≥ 2 annotators on some item)."""
    out: dict = {"n_annotations": len(records), "n_items": len({r["item_id"] for r in records})}
    if len({r["annotator"] for r in records}) < 2:
        return {**out, "note": "fewer than 2 annotators: agreement undefined"}
    m, raters, items, cats = rating_matrix(records, level)
    if not (np.sum(~np.isnan(m), axis=0) >= 2).any():
        return {**out, "note": "no item has 2 or more annotations yet"}
    weights = "quadratic" if level == "ordinal" else None
    out["percent_agreement"] = ag.percent_agreement(m)
    out["pairwise_kappa"] = [{"a": p["pair"][0], "b": p["pair"][1], "n_common": p["n_common"],
                              "kappa": p["kappa"]} for p in ag.pairwise_kappas(m, raters)]
    if weights:
        out["pairwise_kappa_quadratic"] = [
            {"a": p["pair"][0], "b": p["pair"][1], "n_common": p["n_common"], "kappa": p["kappa"]}
            for p in ag.pairwise_kappas(m, raters, weights="quadratic")]
    out["fleiss_kappa"] = ag.fleiss_kappa(m)
    out["krippendorff_alpha_nominal"] = ag.krippendorff_alpha(m, level="nominal")
    out["krippendorff_alpha_ordinal"] = ag.krippendorff_alpha(m, level="ordinal") if level == "ordinal" else None
    out["loo_consensus"] = ag.loo_consensus_agreement(m, level=level, annotator_names=raters)
    why = _kappa_undefined_reason(m)
    for p in out["pairwise_kappa"] + out.get("pairwise_kappa_quadratic", []):
        if p["kappa"] is None or (isinstance(p["kappa"], float) and math.isnan(p["kappa"])):
            p["why_undefined"] = "the pair's labels do not vary (chance agreement 1: κ = 0/0)" \
                if p["n_common"] else "no item rated by both"
    for key in ("fleiss_kappa", "krippendorff_alpha_nominal", "krippendorff_alpha_ordinal"):
        v = out.get(key)
        if key in out and v is not None and isinstance(v, float) and math.isnan(v):
            out[f"{key}_undefined"] = why
    return out


def _kappa_undefined_reason(m) -> str:
    values = np.unique(m[~np.isnan(m)])
    if len(values) <= 1:
        return ("every annotation has the same value, so chance agreement is 1 and κ/α are 0/0 (undefined); "
                "see percent agreement")
    return "too few items rated by 2 or more annotators to estimate chance agreement"


def agreement_report(project: Project, campaign: str | None = None, *, progress: Progress = None) -> list[dict]:
    """One report per campaign (see module docstring). Values that are undefined are ``None``. ``progress``
    (:mod:`cultura.progress`) is told each campaign's steps: its answers read, the whole campaign's statistics,
    each country's, the languages'."""
    db = project.db
    reports = []
    for c in campaigns(db, campaign):
        with task(f"agreement of {c['name']}", progress=progress) as bar:
            reports.append(_clean(_agreement(db, c, bar)))
    return reports


def _agreement(db, c: dict, bar) -> dict:
    """The agreement report of campaign ``c``, advancing ``bar`` a step at a time."""
    spec = get_kind(c["kind"])
    recs = latest_per_rater(current_annotations(db, c["id"]))
    main = [r for r in recs if r["gold"] is None]
    countries = sorted({r["country"] for r in main if r["country"]})
    by_country = len(countries) > 1 or c["kind"] == "relevance"
    bar.update(done=1, total=3 + (len(countries) if by_country else 0), answers=len(recs))
    rep = {"campaign": c["name"], "kind": c["kind"], "level": spec.level, "overlap": c["overlap"]}
    try:
        rep.update(agreement_stats(main, spec.level))
    except ag.AgreementInputError as e:
        rep["note"] = str(e)
    rep["gold_accuracy"] = _gold(recs, spec.level)
    rep["throughput"] = _throughput(recs)
    rep["workload"] = workload(db, c["id"])
    bar.advance()
    if by_country:
        rep["by_country"] = {}
        for cc in countries:
            sub = [r for r in main if r["country"] == cc]
            try:
                rep["by_country"][cc] = agreement_stats(sub, spec.level)
            except ag.AgreementInputError as e:
                rep["by_country"][cc] = {"note": str(e)}
            if spec.level == "ordinal":
                rep["by_country"][cc]["mean_value"] = float(np.mean([r["value"] for r in sub]))
            bar.advance()
    by_language = _by_language(db, main, spec.level, c["kind"])
    if by_language is not None:
        rep["by_language"] = by_language
    bar.advance()
    return rep


def _by_language(db, main: list[dict], level: str, kind: str) -> dict | None:
    """The same agreement statistics per item language (``annotation_items.language``: the translation
    campaign's target language, a relevance item's caption language), when items have more than one language
    or the campaign is a translation campaign; None otherwise."""
    ids = sorted({r["item_id"] for r in main})
    langs: dict[int, str] = {}
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        marks = ",".join("?" * len(part))
        langs.update(db.execute(f"SELECT id, language FROM annotation_items WHERE id IN ({marks}) "
                                "AND language IS NOT NULL AND language != ''", part).fetchall())
    languages = sorted(set(langs.values()))
    if not languages or (len(languages) < 2 and kind != "translation"):
        return None
    out = {}
    for lang in languages:
        sub = [r for r in main if langs.get(r["item_id"]) == lang]
        try:
            out[lang] = agreement_stats(sub, level)
        except ag.AgreementInputError as e:
            out[lang] = {"note": str(e)}
        if level == "ordinal":
            out[lang]["mean_value"] = float(np.mean([r["value"] for r in sub]))
    return out


def _gold(recs: list[dict], level: str) -> dict:
    out = {}
    for name in sorted({r["annotator"] for r in recs if r["gold"] is not None}):
        mine = [r for r in recs if r["annotator"] == name and r["gold"] is not None]
        labels = {r["item_id"]: (r["value"] if level == "ordinal" else r["label"]) for r in mine}
        gold = {r["item_id"]: r["gold"].get("value" if level == "ordinal" else "label") for r in mine}
        out[name] = {"n_gold": len(mine), "accuracy": ag.gold_accuracy(labels, gold)}
    return out


def _throughput(recs: list[dict]) -> dict:
    out = {}
    for name in sorted({r["annotator"] for r in recs}):
        lt = [r["lead_time"] for r in recs if r["annotator"] == name and r["lead_time"] is not None]
        if lt:
            out[name] = ag.throughput(lt)
    return out


def workload(db, campaign_id: int) -> list[dict]:
    """Per annotator: assigned, done (a current annotation), remaining, last activity."""
    rows = db.execute(
        """SELECT an.name, p.purpose, COUNT(a.id),
                  SUM(EXISTS (SELECT 1 FROM annotations x WHERE x.assignment_id = a.id AND x.is_current = 1)),
                  SUM(a.ls_task_id IS NULL),
                  (SELECT MAX(x.ls_updated_at) FROM annotations x JOIN assignments y ON y.id = x.assignment_id
                   WHERE y.project_id IN (SELECT id FROM campaign_projects WHERE campaign_id = ?
                   AND annotator_id = an.id))
           FROM assignments a JOIN annotators an ON an.id = a.annotator_id
           JOIN campaign_projects p ON p.id = a.project_id
           WHERE p.campaign_id = ? AND a.status != 'reassigned' GROUP BY an.id, p.purpose ORDER BY an.name""",
        [campaign_id, campaign_id]).fetchall()
    return [{"annotator": n, "purpose": pur, "assigned": a, "done": d or 0, "remaining": a - (d or 0),
             "not_pushed": np_ or 0, "last_activity": last} for n, pur, a, d, np_, last in rows]


def status(project: Project) -> list[dict]:
    """Per campaign and annotator: done / remaining / last activity, and projects missing in Label Studio."""
    db = project.db
    out = []
    for c in campaigns(db):
        if c["status"] == "archived":
            continue
        missing = [r["title"] for r in db["campaign_projects"].rows_where(
            "campaign_id = ? AND status = 'missing'", [c["id"]])]
        for w in workload(db, c["id"]):
            out.append({"campaign": c["name"], "kind": c["kind"], **w})
        for t in missing:
            out.append({"campaign": c["name"], "kind": c["kind"], "annotator": t, "purpose": "MISSING in "
                        "Label Studio"})
    return out


CAMPAIGN_STATUSES = ("active", "closed", "archived")


def list_campaigns(project: Project) -> list[dict]:
    """Every campaign: name, kind, overlap, status, items, projects, decisions."""
    db = project.db
    return [{"campaign": c["name"], "kind": c["kind"], "overlap": c["overlap"], "status": c["status"],
             "items": db.execute("SELECT COUNT(*) FROM annotation_items WHERE campaign_id = ?",
                                 [c["id"]]).fetchone()[0],
             "projects": db.execute("SELECT COUNT(*) FROM campaign_projects WHERE campaign_id = ?",
                                    [c["id"]]).fetchone()[0],
             "decisions": db.execute("SELECT COUNT(*) FROM decisions WHERE campaign = ? AND superseded = 0",
                                     [c["name"]]).fetchone()[0],
             "created_at": c["created_at"]} for c in campaigns(db)]


def set_campaign_status(project: Project, name: str, status: str) -> dict:
    """Close (``closed``: push adds nothing), archive (``archived``: also skipped by pull and status) or reopen
    (``active``) a campaign. Nothing is deleted."""
    if status not in CAMPAIGN_STATUSES:
        raise CulturaError(f"Campaign status {status!r} is not one of {', '.join(CAMPAIGN_STATUSES)}.")
    db = project.db
    c = campaigns(db, name)[0]
    db["campaigns"].update(c["id"], {"status": status, "updated_at": now()})
    return {"campaign": name, "was": c["status"], "status": status}


def require_campaign(db, name: str | None) -> None:
    if name is None and not db["campaigns"].count:
        raise CulturaError("No campaign yet. Push items first: 'cultura annotate push filter'.")


# ------------------------------------------------------------------ the answers behind each item (the view)

def current_answers(db) -> list[tuple]:
    """Every rater's current answer, oldest first: ``(item id, annotator name, purpose, label, value, details,
    lead time)`` (nothing when no annotation was ever pulled)."""
    if "annotations" not in db.table_names():
        return []
    return db.execute(
        "SELECT a.item_id, an.name, a.purpose, a.label, a.value, a.details, a.lead_time FROM annotations a "
        "LEFT JOIN annotators an ON an.id = a.annotator_id WHERE a.is_current = 1 AND a.was_cancelled = 0 "
        "AND a.deleted_at IS NULL ORDER BY a.id").fetchall()


def items_with_campaign(db) -> list[tuple]:
    """Every annotation item with its campaign, by id: ``(id, item_key, kind, sha256, country, cluster_id,
    payload, campaign name)``."""
    return db.execute(
        "SELECT i.id, i.item_key, i.kind, i.sha256, i.country, i.cluster_id, i.payload, c.name FROM "
        "annotation_items i JOIN campaigns c ON c.id = i.campaign_id ORDER BY i.id").fetchall()

