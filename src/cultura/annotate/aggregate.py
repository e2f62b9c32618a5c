"""Aggregation that weights annotators by estimated skill: crowd-kit's models on the raw (task, worker, label)
table, plus a severity-adjusted rule for 1–5 ratings.

The table (:func:`labels_table`) is what ``cultura annotate export-labels`` writes, in crowd-kit's column names
(``task`` = the item's stable key, ``worker`` = the annotator's name, ``label``), one row per item × annotator:
the current annotation of each annotator (purpose ``annotate``), gold items included. Running a crowd-kit
model on that file gives exactly the labels cultura decides (tests check it).

Categorical rules (filter keep/remove, dedup keep/drop, entity and context labels), crowd-kit 1.4:
``dawid-skene`` (per-annotator confusion matrices; gold answers are fed to it as ``true_labels``),
``one-coin-dawid-skene``, ``glad`` (annotator expertise × item difficulty), ``mace`` (spamming
probability per annotator), ``wawa`` (weighted by agreement with the majority), ``zero-based-skill`` and
``gold-majority`` (majority weighted by accuracy on the gold items; needs gold items).

Ordinal rule ``severity`` for 1–5 ratings (relevance, translation): an additive rater-effects model,
``rating[item, annotator] = quality[item] + severity[annotator] + noise``, fitted by alternating least squares
with the severities summing to zero (gold items enter with their quality fixed to the gold value, so they pin
the severities). The decided value is ``quality`` clipped to [1, 5]. Why this and not a crowd-kit model: the
categorical models treat 1–5 as five unrelated classes (a 4 is as wrong as a 1 for a truth of 5) and need
many items per annotator per class; crowd-kit has no ordinal model. The dominant rater effect on Likert
scales is severity/leniency — one rater consistently a point lower — (the facet of many-facet Rasch
measurement); a mean or median over a different subset of raters per item is biased by who happened to rate
it, the additive model removes that and reports each annotator's severity as their estimate.

Each decision records its rule and parameters (``decisions.rule_params``); each annotator's estimate goes to
``annotator_skills`` (campaign × annotator × rule).
"""
from __future__ import annotations

from collections import defaultdict
from importlib.metadata import version

import numpy as np

from cultura.db import dumps, now, transaction
from cultura.errors import CulturaError

from .pull import current_annotations
from .report import latest_per_rater

#: name → (crowd-kit class, constructor parameters, whether fit takes gold answers)
CROWD_RULES: dict[str, tuple[str, dict, bool]] = {
    "dawid-skene": ("DawidSkene", {"n_iter": 100, "tol": 1e-5}, True),
    "one-coin-dawid-skene": ("OneCoinDawidSkene", {"n_iter": 100, "tol": 1e-5}, False),
    "glad": ("GLAD", {"n_iter": 100, "tol": 1e-5}, False),
    "mace": ("MACE", {"n_restarts": 10, "n_iter": 50, "random_state": 0}, False),
    "wawa": ("Wawa", {}, False),
    "zero-based-skill": ("ZeroBasedSkill", {"n_iter": 100}, False),
    "gold-majority": ("GoldMajorityVote", {}, True),
}
ORDINAL_RULES = {"severity": {"n_iter": 200, "tol": 1e-9}}
#: how each model's per-annotator estimate reads
SKILL_MEANING = {
    "dawid-skene": "accuracy: sum over classes of prior × P(answer = class | truth = class)",
    "one-coin-dawid-skene": "probability of a correct answer",
    "glad": "expertise alpha (0 = random, < 0 = adversarial)",
    "mace": "competence: probability of not spamming",
    "wawa": "agreement with the majority vote",
    "zero-based-skill": "skill from agreement with the weighted vote",
    "gold-majority": "accuracy on gold items",
    "severity": "severity: points added to the item's quality (< 0 = harsh, > 0 = lenient)",
}


def labels_table(db, campaign: dict) -> list[dict]:
    """The raw labels of a campaign: one row per item × annotator (their current annotation), in crowd-kit's
    columns ``task``, ``worker``, ``label`` plus ``value`` (1–5 ratings), ``time`` (Label Studio lead time,
    seconds), ``gold`` (the item's known answer, else empty) and ``campaign``."""
    rows = []
    for r in sorted(latest_per_rater(current_annotations(db, campaign["id"])),
                    key=lambda r: (r["item_key"], r["annotator"] or "")):
        g = r["gold"] or {}
        gold = g.get("label") if g.get("label") is not None else (
            str(int(g["value"])) if g.get("value") is not None else None)
        label = r["label"] if r["label"] is not None else (str(int(r["value"])) if r["value"] is not None
                                                           else None)
        if label is None:
            continue
        rows.append({"task": r["item_key"], "worker": r["annotator"], "label": label, "value": r["value"],
                     "time": r["lead_time"], "gold": gold, "campaign": campaign["name"]})
    return rows


def rule_params(rule: str) -> dict:
    if rule in CROWD_RULES:
        cls, params, gold = CROWD_RULES[rule]
        return {"library": "crowd-kit", "version": version("crowd-kit"), "model": cls, "params": params,
                "gold_fed": gold}
    return {"library": "cultura", "model": "additive rater effects (ALS)", "params": ORDINAL_RULES[rule],
            "gold_fed": True}


def crowdkit_fit(rule: str, rows: list[dict]):
    """Fit crowd-kit's model for ``rule`` on ``rows`` (from :func:`labels_table`). Returns ``(labels,
    probabilities, skills)``: task → label, task → posterior of that label (None where the model gives
    none), worker → skill."""
    import pandas as pd  # deferred: heavy optional dependency (crowd-kit works on DataFrames)
    try:
        import crowdkit.aggregation as ck  # deferred: heavy optional dependency (extra 'crowd')
    except ImportError:
        raise CulturaError(f"Rule {rule!r} needs crowd-kit: pip install 'cultura[crowd]'.", param="rule") from None

    cls, params, gold_fed = CROWD_RULES[rule]
    df = pd.DataFrame([{"task": r["task"], "worker": r["worker"], "label": r["label"]} for r in rows])
    true = pd.Series({r["task"]: r["gold"] for r in rows if r["gold"] is not None}, dtype=object)
    if rule == "gold-majority" and true.empty:
        raise CulturaError("Rule 'gold-majority' weights annotators by their gold accuracy, and this campaign "
                           "has no answered gold item; push gold items (--gold) or use another rule.",
                           param="rule")
    model = getattr(ck, cls)(**params)
    model.fit(df, true) if (gold_fed and not true.empty) else model.fit(df)
    if getattr(model, "labels_", None) is None:
        # Wawa, ZeroBasedSkill and GoldMajorityVote vote in their predict step, which in crowd-kit 1.4.2 calls a
        # scikit-learn check that scikit-learn >= 1.6 no longer supports: the two lines of their own _apply
        mv = ck.MajorityVote().fit(df, model.skills_)
        model.labels_, model.probas_ = mv.labels_, mv.probas_
    labels = model.labels_
    probas = getattr(model, "probas_", None)
    prob = {}
    for t, lab in labels.items():
        prob[t] = float(probas.loc[t, lab]) if probas is not None and lab in probas.columns else None
    return {t: str(v) for t, v in labels.items()}, prob, _skills(rule, model, df)


def _skills(rule: str, model, df) -> dict[str, float]:
    import pandas as pd  # deferred: heavy optional dependency

    if rule == "dawid-skene":
        err, pri = model.errors_, model.priors_
        out = {}
        for w in df["worker"].unique():
            out[w] = float(sum(pri[c] * err.loc[(w, c), c] for c in pri.index if (w, c) in err.index))
        return out
    if rule == "glad":
        return {str(k): float(v) for k, v in model.alphas_.items()}
    if rule == "mace":
        names = pd.factorize(df["worker"])[1]
        s = np.asarray(model.spamming_, dtype=float)
        return {str(w): float(s[i, 1] / s[i].sum()) for i, w in enumerate(names)}
    sk = getattr(model, "skills_", None)
    return {str(k): float(v) for k, v in sk.items()} if sk is not None else {}


def severity_fit(rows: list[dict], *, n_iter: int = 200, tol: float = 1e-9):
    """The additive rater-effects fit for 1–5 ratings: ``(quality per task, severity per worker)``. Gold
    tasks keep their gold value as quality; severities sum to zero (the scale's origin stays the raters')."""
    tasks = sorted({r["task"] for r in rows})
    workers = sorted({r["worker"] for r in rows})
    gold = {r["task"]: float(r["gold"]) for r in rows if r["gold"] is not None}
    ti = {t: i for i, t in enumerate(tasks)}
    wi = {w: i for i, w in enumerate(workers)}
    T = np.array([ti[r["task"]] for r in rows])
    W = np.array([wi[r["worker"]] for r in rows])
    x = np.array([float(r["value"] if r["value"] is not None else r["label"]) for r in rows])
    sev = np.zeros(len(workers))
    q = np.zeros(len(tasks))
    for _ in range(n_iter):
        q_new = np.bincount(T, x - sev[W], len(tasks)) / np.maximum(np.bincount(T, minlength=len(tasks)), 1)
        for t, v in gold.items():
            q_new[ti[t]] = v
        sev_new = np.bincount(W, x - q_new[T], len(workers)) / np.maximum(np.bincount(W, minlength=len(workers)), 1)
        if not gold:
            sev_new -= sev_new.mean()
        done = np.abs(sev_new - sev).max(initial=0) < tol and np.abs(q_new - q).max(initial=0) < tol
        q, sev = q_new, sev_new
        if done:
            break
    return {t: float(q[i]) for t, i in ti.items()}, {w: float(sev[i]) for w, i in wi.items()}


def aggregate(db, campaign: dict, rule: str, level: str) -> tuple[dict, dict, dict]:
    """Run ``rule`` over the campaign's labels table and store the per-annotator estimates.
    Returns ``(decided, probability, skills)`` keyed by item key / annotator name."""
    rows = labels_table(db, campaign)
    if level == "ordinal":
        if rule not in ORDINAL_RULES:
            raise CulturaError(f"Rule {rule!r} is for labels; for 1–5 ratings use one of severity, median, mean.",
                               param="rule")
        q, skills = severity_fit(rows, **ORDINAL_RULES[rule])
        decided, prob = {t: min(5.0, max(1.0, v)) for t, v in q.items()}, {t: None for t in q}
    else:
        if rule not in CROWD_RULES:
            raise CulturaError(f"Rule {rule!r} is for 1–5 ratings; for labels use one of "
                               f"{', '.join(CROWD_RULES)}.", param="rule")
        decided, prob, skills = crowdkit_fit(rule, rows) if rows else ({}, {}, {})
    store_skills(db, campaign, rule, skills, rows)
    return decided, prob, skills


def store_skills(db, campaign: dict, rule: str, skills: dict, rows: list[dict]) -> None:
    ids = dict(db.execute("SELECT name, id FROM annotators").fetchall())
    n = defaultdict(int)
    for r in rows:
        n[r["worker"]] += 1
    t = now()
    with transaction(db):
        for w, s in skills.items():
            if w not in ids:
                continue
            db["annotator_skills"].upsert({"campaign_id": campaign["id"], "annotator_id": ids[w], "rule": rule,
                                           "skill": s, "n_labels": n[w], "meaning": SKILL_MEANING.get(rule),
                                           "params": dumps(rule_params(rule)), "computed_at": t},
                                          pk=("campaign_id", "annotator_id", "rule"))


def stored_skills(db, campaign_id: int) -> dict[str, dict[str, float]]:
    """annotator name → {rule: skill} for a campaign."""
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for name, rule, skill in db.execute("SELECT an.name, s.rule, s.skill FROM annotator_skills s JOIN annotators an "
                                        "ON an.id = s.annotator_id WHERE s.campaign_id = ?", [campaign_id]):
        out[name][rule] = skill
    return dict(out)

