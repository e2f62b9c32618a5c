"""The CAIRe relevance judge against the local OpenAI-compatible stub: log-probabilities and their fallbacks, and
the run → evaluate → push priority chain."""
from __future__ import annotations

import math

import numpy as np
import pytest

from cultura.db import now
from cultura.evaluate.suites.attribution.priority import judge_uncertainty as attribution_priority
from cultura.evaluate.suites.attribution import (evaluate_attribution, get_judge,
                                          human_ratings, run_attribution)
from cultura.models.judges import result_from_logprobs
from cultura.evaluate.metrics import expected_score
from cultura.models.embedders import FakeEmbedder
from tests.unit.evaluate.test_attribution import COLORS, _store_images, world  # noqa: F401 - shared with the unit tests


def _judge_responder(req):
    """Chat completion with logprobs: high scores when the target culture is named in the retrieved text."""
    text = req["messages"][-1]["content"]
    text = text if isinstance(text, str) else " ".join(p.get("text", "") for p in text)
    culture = text.split("Target culture: ", 1)[1].splitlines()[0]
    info = text.split('"""', 2)[1] if '"""' in text else ""
    if culture in info:
        top = {"5": -0.2, "4": -1.8, "3": -4.0, "2": -6.0, "1": -8.0}
    elif culture == "Germany":
        top = {"1": -1.609, "2": -1.609, "3": -1.609, "4": -1.609, "5": -1.609}  # maximally unsure
    else:
        top = {"1": -0.1, "2": -2.5, "3": -5.0, "Score": -6.0, "one": -7.0}  # "4", "5" absent → p = 0
    best = max(top, key=top.get)
    return {"id": "chatcmpl-stub", "object": "chat.completion", "created": 0, "model": req["model"],
            "choices": [{"index": 0, "finish_reason": "length",
                         "message": {"role": "assistant", "content": best},
                         "logprobs": {"content": [{"token": best, "logprob": top[best], "bytes": None,
                                                   "top_logprobs": [{"token": t, "logprob": v, "bytes": None}
                                                                    for t, v in top.items()]}]}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def test_judge_logprobs_and_fallbacks(openai_stub):
    openai_stub.responder = _judge_responder
    judge = get_judge("openai:stub-judge")
    res = judge.rate(culture="Japan", entity_text="Sushi is a dish from Japan.", titles=["sushi"])
    assert res.status == "ok" and res.argmax == 5
    assert res.score == pytest.approx(expected_score({"1": -8.0, "2": -6.0, "3": -4.0, "4": -1.8, "5": -0.2}))
    req = openai_stub.chat_requests()[-1]
    assert req["logprobs"] is True and req["top_logprobs"] == 20 and req["max_tokens"] == 1
    low = judge.rate(culture="Thailand", entity_text="Sushi is a dish from Japan.")
    assert low.logprobs["5"] == -math.inf and low.argmax == 1 and 1 <= low.score < 1.2
    parsed = result_from_logprobs([("Score", -0.1)], reply="I would say 4.")
    assert parsed.status == "parsed" and parsed.score == 4.0
    failed = result_from_logprobs([], reply="no idea")
    assert failed.status == "failed" and "no score" in failed.reason


def test_run_evaluate_priority(world, openai_stub):
    project, shas = world
    openai_stub.responder = _judge_responder
    emb = FakeEmbedder(dim=16)
    out = run_attribution(project, emb, "openai:stub-judge", kb="tiny", countries=["JP", "TH", "DE"], k=1)
    assert out["scored"] == 9 and out["failed"] == 0 and out["skipped"] == 0
    n_req = len(openai_stub.chat_requests())
    again = run_attribution(project, emb, "openai:stub-judge", kb="tiny", countries=["JP", "TH", "DE"], k=1)
    assert again["skipped"] == 9 and again["scored"] == 0 and len(openai_stub.chat_requests()) == n_req

    # human ratings: decisions of the relevance campaign (one mean value per image x country)
    ratings = {("red", "JP"): 4.5, ("red", "TH"): 1.0, ("blue", "TH"): 5.0, ("blue", "JP"): 2.0,
               ("green", "JP"): 3.0, ("green", "TH"): 2.5}
    project.db["decisions"].insert_all([{"kind": "relevance", "item_key": f"relevance:{shas[n]}:{cc}",
                                         "sha256": shas[n], "country": cc, "value": v, "rule": "median",
                                         "n_annotations": 3, "decided_at": now()}
                                        for (n, cc), v in ratings.items()])
    assert human_ratings(project)[(shas["red"], "JP")] == (4.5, 3)
    (ev,) = evaluate_attribution(project, aggregation="pooled")
    scores = {(r["sha256"], r["country"]): r["score"] for r in
              project.db.query("SELECT * FROM attribution_scores")}
    keys = [(shas[n], cc) for (n, cc) in ratings]
    pred = np.array([scores[k] for k in keys])
    hum = np.array([ratings[(n, cc)] for (n, cc) in ratings])
    from scipy.stats import pearsonr
    from sklearn.metrics import f1_score, precision_score
    assert ev["n"] == 6
    assert ev["pearson"] == pytest.approx(pearsonr(pred, hum).statistic)
    assert ev["threshold"] == 3.0 and ev["rule"] == "score > 3"  # seed 004 Table 1's "greater than 3"
    assert ev["precision"] == pytest.approx(precision_score(hum > 3, pred > 3))
    assert ev["f1"] == pytest.approx(f1_score(hum > 3, pred > 3))
    assert ev["by_threshold"][4.0]["f1"] == pytest.approx(f1_score(hum >= 4, pred >= 4))  # App. C.7
    assert ev["per_country"]["JP"]["n"] == 3

    prio = attribution_priority(project)
    # rated pairs are left out; Germany (uniform distribution) is the most uncertain
    assert {c for _, c, _ in prio} == {"DE"} and prio[0][2] == pytest.approx(1.0, abs=1e-3)
    allp = attribution_priority(project, unrated_only=False)
    assert len(allp) == 9 and allp[-1][2] <= allp[0][2]
