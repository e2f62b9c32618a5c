"""Adaptive overlap: who is asked once more. A pure policy (no database, no server), so it is tested on its own
and push calls it at one spot.

Fixed overlap asks every item of ``K`` annotators, though for most items the first two already agree. The
policy asks ``first`` opinions (two by default), then one more, up to ``most``, only where

- ``disagree``: the trusted opinions of the item disagree;
- ``low_skill``: an opinion comes from a rater whose estimated skill is below ``low_skill`` (their opinion
  does not count towards the decision, so the item needs another);
- ``gold_failed``: the rater answered a gold item wrongly in the same batch (the same grid or Label Studio
  task): that batch's other answers of theirs are not trusted either;
- ``rare``: with ``first = 1`` only, the single opinion is not the campaign's usual answer (a "remove"
  among mostly "keep"), so a rare verdict is always confirmed.

An item that reached ``most`` opinions and still has no decision goes to adjudication. The decision of an item
is the majority of its trusted opinions (all opinions when none is trusted), ``None`` on a tie.

Skills come from the caller (stored estimates, gold accuracy) or from :func:`estimate_skills`, a one-coin
model fitted by EM on the opinions themselves, gold answers fixed.

>>> ops = [Opinion("a", "ann", "keep"), Opinion("a", "bob", "keep"), Opinion("b", "ann", "keep"),
...        Opinion("b", "bob", "remove")]
>>> sorted(next_round(ops, skills={"ann": 0.9, "bob": 0.9}).items())
[('b', 'disagree')]
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Hashable, Iterable

#: why an item is asked once more (or adjudicated)
REASONS = ("disagree", "low_skill", "gold_failed", "rare")


@dataclass(frozen=True)
class Opinion:
    """One answer: ``item`` by ``rater``; ``batch`` is the task it came in (a grid's id; ``None`` for one-image
    tasks, where the batch is the item itself)."""

    item: Hashable
    rater: str
    label: str
    batch: Hashable = None


@dataclass(frozen=True)
class Policy:
    """``first`` opinions for every item, at most ``most``; raters below ``low_skill`` are not trusted."""

    first: int = 2
    most: int = 3
    low_skill: float = 0.7

    def __post_init__(self):
        if not 1 <= self.first <= self.most:
            raise ValueError(f"Adaptive overlap needs 1 <= first <= most, got first={self.first}, "
                             f"most={self.most}; set first to 2 and most to 3 (the defaults).")
        if not 0.0 <= self.low_skill <= 1.0:
            raise ValueError(f"low_skill is a probability, got {self.low_skill}; give a value in [0, 1].")


def failed_batches(opinions: Iterable[Opinion], gold: dict) -> set[tuple[str, Hashable]]:
    """``(rater, batch)`` pairs in which the rater answered a gold item wrongly."""
    return {(o.rater, o.batch if o.batch is not None else o.item) for o in opinions
            if o.item in gold and o.label != gold[o.item]}


def _trusted(o: Opinion, skills: dict, failed: set, policy: Policy) -> bool:
    return skills.get(o.rater, 1.0) >= policy.low_skill and (
        o.rater, o.batch if o.batch is not None else o.item) not in failed


def _by_item(opinions: Iterable[Opinion]) -> dict:
    out: dict = defaultdict(list)
    for o in opinions:
        out[o.item].append(o)
    return out


def usual_label(opinions: Iterable[Opinion]) -> str | None:
    """The most common answer of the campaign (ties: the first in sort order)."""
    c = Counter(o.label for o in opinions)
    return min(c, key=lambda x: (-c[x], x)) if c else None


def item_state(ops: list[Opinion], *, skills: dict, failed: set, policy: Policy,
               usual: str | None = None) -> tuple[str | None, str | None]:
    """``(decision, reason)`` of one item: the decision so far (``None`` when there is none) and why it needs
    another opinion (``None`` when it does not; ``"adjudicate"`` when it reached ``most`` undecided)."""
    trusted = [o for o in ops if _trusted(o, skills, failed, policy)]
    counts = Counter(o.label for o in (trusted or ops))
    ranked = counts.most_common()
    decision = ranked[0][0] if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]) else None
    if len(ops) < policy.first:
        reason = "first"
    elif len(trusted) < min(policy.first, len(ops)) or (len(trusted) < len(ops) and len(trusted) < policy.first):
        low = any(skills.get(o.rater, 1.0) < policy.low_skill for o in ops)
        reason = "low_skill" if low else "gold_failed"
    elif len({o.label for o in trusted}) > 1:
        reason = "disagree"
    elif policy.first == 1 and len(ops) == 1 and usual is not None and ops[0].label != usual:
        reason = "rare"
    else:
        reason = None
    if reason not in (None, "first") and len(ops) >= policy.most:
        # the full overlap decides by the trusted majority, as fixed overlap does; a tie goes to a person
        reason = None if decision is not None else "adjudicate"
    return decision, reason


def next_round(opinions: Iterable[Opinion], *, skills: dict | None = None, gold: dict | None = None,
               policy: Policy = Policy(), items: Iterable[Hashable] | None = None) -> dict:
    """Items that need one more opinion (or adjudication) → the reason. ``items`` adds items without any
    opinion yet (they need ``first``); gold items are never asked again (their answer is known)."""
    opinions = list(opinions)
    skills, gold = skills or {}, gold or {}
    failed = failed_batches(opinions, gold)
    usual = usual_label(opinions)
    grouped = _by_item(opinions)
    for it in items or ():
        grouped.setdefault(it, [])
    out = {}
    for it, ops in grouped.items():
        if it in gold:
            continue
        _, reason = item_state(ops, skills=skills, failed=failed, policy=policy, usual=usual)
        if reason is not None:
            out[it] = reason
    return out


def decisions(opinions: Iterable[Opinion], *, skills: dict | None = None, gold: dict | None = None,
              policy: Policy = Policy()) -> dict:
    """Item → decided label (``None`` when undecided) under the policy's trust rules."""
    opinions = list(opinions)
    skills, gold = skills or {}, gold or {}
    failed = failed_batches(opinions, gold)
    return {it: item_state(ops, skills=skills, failed=failed, policy=policy)[0]
            for it, ops in _by_item(opinions).items()}


def estimate_skills(opinions: Iterable[Opinion], *, gold: dict | None = None, n_iter: int = 50,
                    prior: float = 4.0, prior_skill: float = 0.85) -> dict[str, float]:
    """Each rater's probability of a correct answer under a one-coin model (every rater is right with their own
    probability, wrong answers spread evenly), fitted by EM with gold items' truth fixed; ``prior`` pseudo-answers
    right with ``prior_skill`` keep a rater with few answers trusted (above the policy's ``low_skill``) until their
    answers show otherwise; items with one opinion only do not count. Pure Python; crowd-kit's ``OneCoinDawidSkene``
    is the same model on the stored labels."""
    opinions = list(opinions)
    gold = gold or {}
    labels = sorted({o.label for o in opinions} | set(gold.values()))
    if not opinions or len(labels) < 2:
        return {o.rater: 1.0 for o in opinions}
    k = len(labels)
    grouped = _by_item(opinions)
    skills = {r: 0.8 for r in {o.rater for o in opinions}}
    for _ in range(n_iter):
        post = {}
        for it, ops in grouped.items():
            if it in gold:
                post[it] = {lab: float(lab == gold[it]) for lab in labels}
                continue
            w = {}
            for lab in labels:
                p = 1.0
                for o in ops:
                    s = min(max(skills[o.rater], 1e-3), 1 - 1e-3)
                    p *= s if o.label == lab else (1 - s) / (k - 1)
                w[lab] = p
            z = sum(w.values()) or 1.0
            post[it] = {lab: v / z for lab, v in w.items()}
        right: dict = defaultdict(float)
        total: Counter = Counter()
        for o in opinions:
            if o.item not in gold and len(grouped[o.item]) < 2:
                continue   # a lone opinion would only confirm itself: it says nothing of its rater's skill
            right[o.rater] += post[o.item][o.label]
            total[o.rater] += 1
        new = {r: (right[r] + prior_skill * prior) / (total[r] + prior) for r in skills}
        done = max(abs(new[r] - skills[r]) for r in skills) < 1e-6
        skills = new
        if done:
            break
    return skills


def askable(raters: Iterable[str], skills: dict, policy: Policy = Policy()) -> list[str]:
    """The raters new work goes to: those whose estimated skill is not below ``low_skill`` (a rater without an
    estimate yet is asked); all of them when nobody would be left."""
    raters = list(raters)
    ok = [r for r in raters if skills.get(r, 1.0) >= policy.low_skill]
    return ok or raters


def tasks_saved(opinions_used: int, n_items: int, fixed: int) -> dict:
    """What adaptive overlap saved against asking every item of ``fixed`` annotators."""
    full = n_items * fixed
    return {"opinions": opinions_used, "fixed_overlap": fixed, "fixed_opinions": full,
            "saved": full - opinions_used, "share_of_fixed": opinions_used / full if full else None}
