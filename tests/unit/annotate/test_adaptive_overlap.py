"""Adaptive overlap asks a third opinion exactly where the opinions disagree, a rater is unskilled or failed a
gold item of the same batch, and reaches the decisions of fixed overlap 3 with fewer opinions on a planted team."""
from __future__ import annotations

import doctest
import importlib.util
import sys

import pytest

from cultura.annotate import overlap as OV
from cultura.annotate.overlap import Opinion, Policy, next_round
from tests import REPO

SKILLED = {"ann": 0.9, "bob": 0.9, "cat": 0.9, "dan": 0.3}


def test_docstring_examples_run():
    res = doctest.testmod(OV)
    assert res.attempted > 0 and res.failed == 0


def test_two_agreeing_skilled_opinions_settle_an_item_and_one_opinion_is_not_enough():
    ops = [Opinion("a", "ann", "keep"), Opinion("a", "bob", "keep"), Opinion("b", "ann", "keep")]
    assert next_round(ops, skills=SKILLED, items=["a", "b", "c"]) == {"b": "first", "c": "first"}


@pytest.mark.parametrize("ops, why", [
    ([Opinion("x", "ann", "keep"), Opinion("x", "bob", "remove")], "disagree"),
    ([Opinion("x", "ann", "keep"), Opinion("x", "dan", "keep")], "low_skill"),
    ([Opinion("x", "ann", "keep", batch=1), Opinion("g", "ann", "keep", batch=1),
      Opinion("x", "bob", "keep", batch=2)], "gold_failed"),
])
def test_each_reason_asks_exactly_one_more_opinion_until_the_cap(ops, why):
    gold = {"g": "remove"}
    assert next_round(ops, skills=SKILLED, gold=gold) == {"x": why}
    third = ops + [Opinion("x", "cat", "keep", batch=3)]
    assert next_round(third, skills=SKILLED, gold=gold) == {}       # the trusted majority decides
    assert OV.decisions(third, skills=SKILLED, gold=gold)["x"] == "keep"


def test_a_trusted_tie_at_the_cap_goes_to_adjudication():
    ops = [Opinion("x", "ann", "keep"), Opinion("x", "bob", "remove"), Opinion("x", "dan", "keep")]
    assert next_round(ops, skills=SKILLED) == {"x": "adjudicate"}
    assert OV.decisions(ops, skills=SKILLED)["x"] is None


def test_with_one_opinion_first_only_the_rare_verdict_is_confirmed():
    ops = [Opinion(f"k{i}", "ann", "keep") for i in range(5)] + [Opinion("r", "bob", "remove")]
    assert next_round(ops, skills=SKILLED, policy=Policy(first=1)) == {"r": "rare"}


def test_gold_items_are_never_asked_again_and_a_bad_policy_names_the_fix():
    assert next_round([Opinion("g", "ann", "keep")], gold={"g": "remove"}) == {}
    with pytest.raises(ValueError, match="first to 2"):
        Policy(first=3, most=2)


def test_estimated_skills_separate_a_random_clicker_from_careful_raters():
    import random
    rng = random.Random(0)
    truth = {f"i{k}": rng.choice(["keep", "keep", "remove"]) for k in range(200)}
    ops = []
    for it, t in truth.items():
        for r in ("ann", "bob"):
            ops.append(Opinion(it, r, t if rng.random() < 0.9 else ({"keep", "remove"} - {t}).pop()))
        ops.append(Opinion(it, "dan", rng.choice(["keep", "remove"])))
    s = OV.estimate_skills(ops)
    assert min(s["ann"], s["bob"]) > 0.8 and s["dan"] < 0.65
    assert OV.askable(["ann", "bob", "dan"], s) == ["ann", "bob"]


def test_tasks_saved_counts_against_fixed_overlap():
    assert OV.tasks_saved(200, 100, 3) == {"opinions": 200, "fixed_overlap": 3, "fixed_opinions": 300,
                                           "saved": 100, "share_of_fixed": pytest.approx(2 / 3)}


def _bench():
    spec = importlib.util.spec_from_file_location("bench_adaptive_overlap", REPO / "perf" / "bench_adaptive_overlap.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_adaptive_overlap", mod)
    spec.loader.exec_module(mod)
    return mod


def test_adaptive_overlap_matches_fixed_overlap_3_with_fewer_opinions_on_a_planted_team():
    res = _bench().run(n_items=192, seeds=2, grid=16, waves=2)["arms"]
    fixed, two, one = res["fixed 3"], res["adaptive"], res["adaptive first=1"]
    print({k: {m: round(v["mean"], 3) for m, v in a.items()} for k, a in res.items()})
    assert two["accuracy"]["mean"] >= fixed["accuracy"]["mean"] and two["share_of_fixed"]["max"] < 0.95
    assert one["accuracy"]["mean"] >= fixed["accuracy"]["mean"] and one["share_of_fixed"]["max"] <= 0.6
