"""Adaptive overlap against fixed overlap 3 on a planted team: decision accuracy and opinions asked.

    python perf/bench_adaptive_overlap.py                  # 960 items, 5 careful raters + 1 random clicker, 10 seeds
    python perf/bench_adaptive_overlap.py --items 300 --seeds 3 --json

A filter campaign: items are "keep" or (10 %) "remove". The team: careful raters right with a probability
drawn in [0.85, 0.95], and one random clicker (each answer a coin toss). Every rater's answers come in batches
of ``--grid`` items (a grid task) with one gold item in each (gold answers count as opinions in both arms).

- ``fixed 3``: every item answered by 3 raters drawn at random; decided by majority (cultura's default rule)
  and, for reference, by crowd-kit's Dawid-Skene fed the gold answers;
- ``adaptive``: :mod:`cultura.annotate.overlap` with its defaults: two opinions first, then one more only where
  the trusted opinions disagree, a rater's estimated skill (one-coin EM on the answers so far, gold fixed) is
  low, or the rater failed the gold item of the batch; items still undecided after three go to adjudication
  (counted as one more opinion, by a rater right with 0.95);
- ``adaptive first=1``: one opinion first; a second only for the rare verdict or for the reasons above.

Printed per arm: accuracy of the decisions on the non-gold items and opinions asked (share of fixed 3), mean
and standard deviation over the seeds. Two opinions first cannot go under 2/3 of fixed 3 opinions; the
``first=1`` arm shows what the 60 % goal needs.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from cultura.annotate.overlap import (Opinion, Policy, askable, decisions,  # noqa: E402
                                      estimate_skills, next_round)

LABELS = ("keep", "remove")


def planted_team(rng: random.Random, careful: int = 5) -> dict[str, float | None]:
    """rater → accuracy (``None`` = random clicker)."""
    team = {f"careful-{i}": rng.uniform(0.85, 0.95) for i in range(careful)}
    team["clicker"] = None
    return team


def answer(rng: random.Random, acc: float | None, truth: str) -> str:
    if acc is None:
        return rng.choice(LABELS)
    return truth if rng.random() < acc else next(x for x in LABELS if x != truth)


class Campaign:
    """Items with a planted truth, gold items, and an asking machine that records every opinion."""

    def __init__(self, seed: int, n_items: int, grid: int, remove: float = 0.1, n_gold: int = 40):
        self.rng = random.Random(seed)
        self.team = planted_team(self.rng)
        self.truth = {f"i{k}": ("remove" if self.rng.random() < remove else "keep") for k in range(n_items)}
        self.gold = {f"g{k}": ("remove" if k % 5 == 0 else "keep") for k in range(n_gold)}
        self.grid = grid
        self.opinions: list[Opinion] = []
        self.batches = 0

    def ask(self, want: dict[str, int], raters: list[str] | None = None) -> None:
        """Ask each item of ``want`` (item → how many more opinions) of raters who have not answered it; each
        rater's new items go in grids of ``grid - 1`` plus one gold item."""
        asked = {}
        for o in self.opinions:
            asked.setdefault(o.item, set()).add(o.rater)
        per_rater: dict[str, list[str]] = {r: [] for r in self.team}
        load = {r: 0 for r in self.team}
        for item, n in want.items():
            free = [r for r in (raters or self.team) if r not in asked.get(item, set())]
            self.rng.shuffle(free)
            for r in sorted(free, key=lambda r: load[r])[:n]:
                per_rater[r].append(item)
                load[r] += 1
        golds = sorted(self.gold)
        for r, items in per_rater.items():
            for start in range(0, len(items), self.grid - 1):
                self.batches += 1
                batch = ("b", self.batches)
                g = golds[self.rng.randrange(len(golds))]
                for it in items[start:start + self.grid - 1] + [g]:
                    truth = self.truth.get(it) or self.gold[it]
                    self.opinions.append(Opinion(it, r, answer(self.rng, self.team[r], truth), batch))


def accuracy(decided: dict, truth: dict) -> float:
    return sum(decided.get(i) == t for i, t in truth.items()) / len(truth)


def fixed(seed: int, n_items: int, grid: int, k: int = 3) -> dict:
    c = Campaign(seed, n_items, grid)
    c.ask({i: k for i in c.truth})
    maj = decisions(c.opinions, policy=Policy(first=1, most=k, low_skill=0.0))
    out = {"opinions": len(c.opinions), "accuracy": accuracy(maj, c.truth)}
    try:  # crowd-kit's Dawid-Skene on the same answers, gold answers fed
        import pandas as pd
        from crowdkit.aggregation import DawidSkene

        df = pd.DataFrame([{"task": o.item, "worker": o.rater, "label": o.label} for o in c.opinions])
        ds = DawidSkene(n_iter=100, tol=1e-5).fit_predict(df, true_labels=pd.Series(c.gold))
        out["accuracy_dawid_skene"] = accuracy(ds.to_dict(), c.truth)
    except ImportError:
        pass
    return out


def adaptive(seed: int, n_items: int, grid: int, policy: Policy = Policy(), waves: int = 4) -> dict:
    c = Campaign(seed, n_items, grid)
    items = list(c.truth)
    adjudicated, reasons, skills = {}, {}, {}
    for w in range(waves):   # items pushed in waves: a rater found unskilled gets no new work
        want = {i: policy.first for i in items[w * len(items) // waves:(w + 1) * len(items) // waves]}
        for _ in range(policy.most + 1):
            if not want:
                break
            c.ask(want, askable(c.team, skills, policy))
            skills = estimate_skills(c.opinions, gold=c.gold)
            want = _more(c, skills, policy, adjudicated, reasons)
    skills = estimate_skills(c.opinions, gold=c.gold)
    decided = {**decisions(c.opinions, skills=skills, gold=c.gold, policy=policy), **adjudicated}
    return {"opinions": len(c.opinions) + len(adjudicated), "accuracy": accuracy(decided, c.truth),
            "adjudicated": len(adjudicated), "reasons": reasons, "clicker_skill": skills.get("clicker")}


def _more(c: Campaign, skills: dict, policy: Policy, adjudicated: dict, reasons: dict) -> dict:
    """The next round's asks; items the policy sends to adjudication are decided by an adjudicator."""
    more = next_round(c.opinions, skills=skills, gold=c.gold, policy=policy)
    for it, why in more.items():
        if it in adjudicated:
            continue
        reasons[why] = reasons.get(why, 0) + 1
        if why == "adjudicate":
            # an adjudicator (right with 0.95) decides; one more opinion's worth of work
            adjudicated[it] = answer(c.rng, 0.95, c.truth[it])
    return {it: 1 for it, why in more.items() if why != "adjudicate" and it not in adjudicated}


def summary(xs: list[float]) -> dict:
    return {"mean": statistics.fmean(xs), "sd": statistics.stdev(xs) if len(xs) > 1 else 0.0,
            "min": min(xs), "max": max(xs)}


def run(n_items: int = 960, seeds: int = 10, grid: int = 16, waves: int = 4) -> dict:
    arms = {"fixed 3": [], "adaptive": [], "adaptive first=1": []}
    for s in range(seeds):
        f = fixed(s, n_items, grid)
        a = adaptive(s, n_items, grid, waves=waves)
        a1 = adaptive(s, n_items, grid, Policy(first=1, most=3), waves=waves)
        for name, r in (("fixed 3", f), ("adaptive", a), ("adaptive first=1", a1)):
            arms[name].append({**r, "share_of_fixed": r["opinions"] / f["opinions"]})
    out = {"items": n_items, "seeds": seeds, "grid": grid, "waves": waves, "arms": {}}
    for name, rs in arms.items():
        out["arms"][name] = {k: summary([r[k] for r in rs])
                             for k in ("accuracy", "opinions", "share_of_fixed") if rs[0].get(k) is not None}
        if "accuracy_dawid_skene" in rs[0]:
            out["arms"][name]["accuracy_dawid_skene"] = summary([r["accuracy_dawid_skene"] for r in rs])
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=960)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--grid", type=int, default=16)
    ap.add_argument("--waves", type=int, default=4, help="pushes the items arrive in (skills re-estimated between)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    res = run(a.items, a.seeds, a.grid, a.waves)
    if a.json:
        print(json.dumps(res, indent=2))
        return
    print(f"{res['items']} items, {res['seeds']} seeds, grids of {res['grid']} (one gold each), {res['waves']} waves; mean ± sd [min, max]")
    for name, m in res["arms"].items():
        line = [f"{name:18}"]
        for k, v in m.items():
            line.append(f"{k} {v['mean']:.3f} ± {v['sd']:.3f} [{v['min']:.3f}, {v['max']:.3f}]"
                        if k != "opinions" else f"opinions {v['mean']:.0f} ± {v['sd']:.0f}")
        print("  ".join(line))


if __name__ == "__main__":
    main()
