"""Adaptive overlap: who is asked once more. A pure policy (no database, no server), so it is tested on its own
and push calls it at one spot.

Fixed overlap asks every item of ``K`` annotators, though most items are settled by fewer. The policy asks
``first`` opinions (one by default), then one more, up to ``most``, until the item is *sure*: the posterior of
its leading label, from its trusted opinions, their raters' estimated skills and the campaign's label shares
(a one-coin model), reaches ``confidence``. A lone "keep" from a careful rater in a campaign of mostly "keep" is
sure; everything else is asked again, and the reason says why:

- ``disagree``: the trusted opinions of the item disagree;
- ``low_skill``: an opinion comes from a rater whose estimated skill is below ``low_skill`` (their opinion
  does not count towards the decision, so the item needs another);
- ``gold_failed``: the rater answered a gold item wrongly in the same batch (the same grid or Label Studio
  task): that batch's other answers of theirs are not trusted either;
- ``rare``: the only trusted opinion is not the campaign's usual answer (a "remove" among mostly "keep"), so a
  rare verdict is always confirmed;
- ``unsure``: the trusted opinions agree, but too few or too unskilled to make the decision sure (two "remove"s
  where removing is rare).

An item that reached ``most`` opinions is decided by its trusted opinions' posterior (all opinions' majority
when none is trusted); a tie goes to adjudication. ``decisions`` gives the same decision for every item.

Skills come from the caller (stored estimates, gold accuracy) or from :func:`estimate_skills`, a one-coin
model fitted by EM on the opinions themselves, gold answers fixed; the label shares from :func:`label_shares`.

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
REASONS = ("disagree", "low_skill", "gold_failed", "rare", "unsure")

#: the skill of a rater without an estimate yet (the prior of :func:`estimate_skills`)
UNKNOWN_SKILL = 0.85


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
    """``first`` opinions for every item, at most ``most``; raters below ``low_skill`` are not trusted; an item is
    settled when its leading label's posterior reaches ``confidence``."""

    first: int = 1
    most: int = 3
    low_skill: float = 0.7
    confidence: float = 0.95

    def __post_init__(self):
        if not 1 <= self.first <= self.most:
            raise ValueError(f"Adaptive overlap needs 1 <= first <= most, got first={self.first}, "
                             f"most={self.most}; set first to 1 and most to 3 (the defaults).")
        for name in ("low_skill", "confidence"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} is a probability, got {getattr(self, name)}; give a value in [0, 1].")


def failed_batches(opinions: Iterable[Opinion], gold: dict) -> set[tuple[str, Hashable]]:
    """``(rater, batch)`` pairs in which the rater answered a gold item wrongly."""
    return {(o.rater, o.batch if o.batch is not None else o.item) for o in opinions
            if o.item in gold and o.label != gold[o.item]}


def _skill(skills: dict, rater: str) -> float:
    return min(max(skills.get(rater, UNKNOWN_SKILL), 1e-3), 1 - 1e-3)


def _trusted(o: Opinion, skills: dict, failed: set, policy: Policy) -> bool:
    return skills.get(o.rater, UNKNOWN_SKILL) >= policy.low_skill and (
        o.rater, o.batch if o.batch is not None else o.item) not in failed


def _by_item(opinions: Iterable[Opinion]) -> dict:
    out: dict = defaultdict(list)
    for o in opinions:
        out[o.item].append(o)
    return out


def posterior(ops: Iterable[Opinion], skills: dict, shares: dict) -> dict[str, float]:
    """Label → its probability given the opinions under the one-coin model: each rater right with their skill,
    a wrong answer any other label alike, labels a priori as common as ``shares`` says."""
    ops = list(ops)
    labels = sorted(set(shares) | {o.label for o in ops})
    k = max(len(labels), 2)
    w = {}
    for lab in labels:
        p = shares.get(lab, 1e-3)
        for o in ops:
            s = _skill(skills, o.rater)
            p *= s if o.label == lab else (1 - s) / (k - 1)
        w[lab] = p
    z = sum(w.values()) or 1.0
    return {lab: v / z for lab, v in w.items()}


def label_shares(opinions: Iterable[Opinion], *, skills: dict | None = None, gold: dict | None = None,
                 n_iter: int = 30, prior: float = 2.0) -> dict[str, float]:
    """How common each label is among the campaign's (non-gold) items, corrected for the raters' errors: EM on
    the item posteriors with the skills fixed; ``prior`` pseudo-items per label keep a label no one gave
    possible."""
    opinions = [o for o in opinions if not gold or o.item not in gold]
    skills = skills or {}
    labels = sorted({o.label for o in opinions} | set((gold or {}).values()))
    if not labels:
        return {}
    grouped = _by_item(opinions)
    shares = {lab: 1 / len(labels) for lab in labels}
    for _ in range(n_iter):
        acc = {lab: prior for lab in labels}
        for ops in grouped.values():
            for lab, p in posterior(ops, skills, shares).items():
                acc[lab] += p
        z = sum(acc.values())
        new = {lab: v / z for lab, v in acc.items()}
        done = max(abs(new[lab] - shares[lab]) for lab in labels) < 1e-6
        shares = new
        if done:
            break
    return shares


def usual_label(opinions: Iterable[Opinion]) -> str | None:
    """The most common answer of the campaign (ties: the first in sort order)."""
    c = Counter(o.label for o in opinions)
    return min(c, key=lambda x: (-c[x], x)) if c else None


def item_state(ops: list[Opinion], *, skills: dict, failed: set, policy: Policy,
               shares: dict) -> tuple[str | None, str | None]:
    """``(decision, reason)`` of one item: the decision so far (``None`` when there is none) and why it needs
    another opinion (``None`` when it does not; ``"adjudicate"`` when it reached ``most`` undecided)."""
    trusted = [o for o in ops if _trusted(o, skills, failed, policy)]
    if trusted:
        post = posterior(trusted, skills, shares)
        ranked = sorted(post.values(), reverse=True)
        top = max(post, key=post.get)
        decision = top if len(ranked) == 1 or ranked[0] > ranked[1] + 1e-12 else None
        sure = decision is not None and post[top] >= policy.confidence
    else:
        ranked = Counter(o.label for o in ops).most_common()
        decision = ranked[0][0] if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]) else None
        sure = False
    if len(ops) < policy.first:
        reason = "first"
    elif sure:
        reason = None
    elif len({o.label for o in trusted}) > 1:
        reason = "disagree"
    elif len(trusted) < len(ops) or not trusted:
        low = any(skills.get(o.rater, UNKNOWN_SKILL) < policy.low_skill for o in ops)
        reason = "low_skill" if low else "gold_failed"
    elif len(trusted) == 1 and shares and trusted[0].label != max(shares, key=shares.get):
        reason = "rare"
    else:
        reason = "unsure"
    if reason not in (None, "first") and len(ops) >= policy.most:
        # the full overlap decides, as fixed overlap does; a tie goes to a person
        reason = None if decision is not None else "adjudicate"
    return decision, reason


def _states(opinions, skills, gold, policy, shares, items=()):
    opinions = list(opinions)
    skills, gold = skills or {}, gold or {}
    failed = failed_batches(opinions, gold)
    if shares is None:
        shares = label_shares(opinions, skills=skills, gold=gold)
    grouped = _by_item(opinions)
    for it in items or ():
        grouped.setdefault(it, [])
    return {it: item_state(ops, skills=skills, failed=failed, policy=policy, shares=shares)
            for it, ops in grouped.items() if it not in gold}


def next_round(opinions: Iterable[Opinion], *, skills: dict | None = None, gold: dict | None = None,
               policy: Policy = Policy(), items: Iterable[Hashable] | None = None,
               shares: dict | None = None) -> dict:
    """Items that need one more opinion (or adjudication) → the reason. ``items`` adds items without any
    opinion yet (they need ``first``); gold items are never asked again (their answer is known). ``shares``:
    the labels' shares (:func:`label_shares` of the opinions when not given)."""
    return {it: why for it, (_, why) in _states(opinions, skills, gold, policy, shares, items).items()
            if why is not None}


def decisions(opinions: Iterable[Opinion], *, skills: dict | None = None, gold: dict | None = None,
              policy: Policy = Policy(), shares: dict | None = None) -> dict:
    """Item → decided label (``None`` when undecided) under the policy's trust rules (gold items left out)."""
    return {it: d for it, (d, _) in _states(opinions, skills, gold, policy, shares).items()}


def estimate_skills(opinions: Iterable[Opinion], *, gold: dict | None = None, n_iter: int = 50,
                    prior: float = 4.0, prior_skill: float = 0.85) -> dict[str, float]:
    """Each rater's probability of a correct answer under a one-coin model (every rater is right with their own
    probability, wrong answers spread evenly, labels as common as the campaign's items make them), fitted by EM
    with gold items' truth fixed; ``prior`` pseudo-answers right with ``prior_skill`` keep a rater with few
    answers trusted (above the policy's ``low_skill``) until their answers show otherwise. Every opinion counts,
    a lone one too: which items got more opinions depends only on the answers seen, so the likelihood of all of
    them is the right one, while leaving lone opinions out keeps mostly the answers that were doubted and
    underrates careful raters (a planted team's careful rater fell below ``low_skill`` that way). Pure Python;
    crowd-kit's ``OneCoinDawidSkene`` is the same model on the stored labels."""
    opinions = list(opinions)
    gold = gold or {}
    labels = sorted({o.label for o in opinions} | set(gold.values()))
    if not opinions or len(labels) < 2:
        return {o.rater: 1.0 for o in opinions}
    grouped = _by_item(opinions)
    skills = {r: 0.8 for r in {o.rater for o in opinions}}
    shares = {lab: 1 / len(labels) for lab in labels}
    for _ in range(n_iter):
        post = {}
        for it, ops in grouped.items():
            post[it] = ({lab: float(lab == gold[it]) for lab in labels} if it in gold
                        else posterior(ops, skills, shares))
        # the labels' shares among the campaign's own items: a rare label's lone answers are more often wrong
        acc = {lab: 1.0 + sum(p[lab] for it, p in post.items() if it not in gold) for lab in labels}
        shares = {lab: v / sum(acc.values()) for lab, v in acc.items()}
        right: dict = defaultdict(float)
        total: Counter = Counter()
        for o in opinions:
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
