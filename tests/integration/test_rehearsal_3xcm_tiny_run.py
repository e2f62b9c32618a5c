"""The 3XCM rehearsal (``perf/rehearse_3xcm.py``) at a few dozen images: a 16-country project from generated
images through the command line, every stage run as a process of its own and its cost printed, no row lost
between the ``urls:`` list and the store, and the descriptor benchmark built for every country of the preset
(each language's short descriptor query from its pattern).

CI makes the quick path (``annotation=False``: ratings imported, builds allowed unreviewed and unrated): the
annotated path starts a Label Studio per rater of the 16 countries, minutes on a busy 2-core machine."""
from __future__ import annotations

import importlib.util
import re

from cultura.countries import registry
from tests import REPO


def _script():
    spec = importlib.util.spec_from_file_location("rehearse_3xcm", REPO / "perf" / "rehearse_3xcm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_tiny_rehearsal_builds_every_stage_and_prints_its_cost(tmp_path):
    lines: list[str] = []
    script = _script()
    assert script.SILENCE_LIMIT_S == 10  # the promise: no stage silent for more than 10 s
    res = script.rehearse(tmp_path, 48, 2, report=False, annotation=False, say=lines.append)
    stages = [r["stage"] for r in res["stages"]]
    assert stages[:3] == ["init", "concepts load", "concepts list"] and "images download" in stages
    assert {"build descriptor", "export", "evaluate run", "view (cold)", "status"} <= set(stages)
    cost = re.compile(r"wall +[\d.]+ s +cpu +[\d.]+ s +peak +[\d.]+ MB +[\d.]+ ms/image +silent +[\d.]+ s")
    printed = [ln for ln in lines if cost.search(ln)]
    assert len(printed) == len(stages)  # one line per stage, each with every number
    assert all(r["wall_s"] > 0 and r["peak_mb"] > 0 for r in res["stages"])
    # the longest silence is measured from the stage's own stderr: never longer than the stage itself
    assert all(0 < r["longest_silence_s"] <= r["wall_s"] + 0.01 for r in res["stages"])
    assert res["silent_stages"] == [r["stage"] for r in res["stages"] if r["longest_silence_s"] > script.SILENCE_LIMIT_S]
    # the quick path: no Label Studio stage; the culture questions (if any) decided by imported ratings
    assert res["annotation"] == {} and not [s for s in stages if s.startswith(("annotat", "push", "simulate"))]
    assert ("import ratings" in stages) == (res["culture_questions"] > 0)
    assert res["rows_accounted"] and res["search"]["rows"] == 48 and res["downloaded"] == 48
    assert res["descriptor_query_countries"] == sorted(registry().presets["3xcm"]["countries"])
    assert res["descriptor_trials"] > 0 and res["association_trials"] > 0
    assert {e["status"] for e in res["evaluations"]} == {"done"}, res["evaluations"]
