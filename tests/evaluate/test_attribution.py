"""Cultural attribution (seed 004, CAIRe): KB import + faiss index, visual entity linking, the judge over the
OpenAI-compatible stub with log-probabilities, evaluation vs scipy / sklearn, priority for annotation."""
from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest
from PIL import Image

from cultura.db import now
from cultura.evaluate.suites.attribution.priority import judge_uncertainty as attribution_priority
from cultura.evaluate.suites.attribution import (build_kb_index, evaluate_attribution, get_judge,
                                          human_ratings, import_kb, link_image, relevance_agreement,
                                          run_attribution)
from cultura.models.judges import result_from_logprobs
from cultura.evaluate.metrics import expected_score
from cultura.models.embedders import FakeEmbedder, embed_images_cached

COLORS = {"red": (200, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 200)}


def _store_images(project):
    shas = {}
    for name, rgb in COLORS.items():
        im = Image.new("RGB", (16, 16), rgb)
        path = project.root / "blobs" / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        im.save(path)
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        project.db["images"].insert({"sha256": sha, "path": f"blobs/{name}.png", "format": "png", "width": 16,
                                     "height": 16, "bytes": path.stat().st_size, "status": "ok",
                                     "created_at": now()})
        shas[name] = sha
    return shas


@pytest.fixture
def world(project, tmp_path):
    shas = _store_images(project)
    kbdir = tmp_path / "kb"
    kbdir.mkdir()
    for name, rgb in COLORS.items():
        Image.new("RGB", (16, 16), rgb).save(kbdir / f"{name}.png")
    rows = [
        {"id": "e:sushi", "lemma": "sushi", "gloss": "Japanese dish", "text": "Sushi is a dish from Japan.",
         "images": ["red.png"]},
        {"id": "e:fruit", "lemma": "fruit", "text": "Fruit is eaten everywhere.", "images": "red.png;green.png"},
        {"id": "e:padthai", "lemma": "pad thai", "text": "Pad thai is a dish from Thailand.",
         "images": ["blue.png"], "frequency": 3},
    ]
    (kbdir / "kb.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = import_kb(project, kbdir / "kb.jsonl", kb="tiny")
    assert summary == {"kb": "tiny", "entities": 3, "images": 3, "missing_images": 0}
    return project, shas


def test_index_and_linking(world):
    project, shas = world
    emb = FakeEmbedder(dim=16)
    index = build_kb_index(project, emb, "tiny")
    assert index.size == 3 and index.index.ntotal == 3
    red = embed_images_cached(project, emb, [shas["red"]])[0]
    # k=1: the identical KB image (red) carries two entities; union, then re-rank by image-lemma cosine
    ranked = link_image(index, red, k=1, method="lemma")
    assert {e for e, _ in ranked} == {"e:sushi", "e:fruit"}
    manual = sorted(((e, float(np.dot(red, index.lemma_vecs[e]))) for e in ("e:sushi", "e:fruit")),
                    key=lambda t: -t[1])
    assert [e for e, _ in ranked] == [e for e, _ in manual]
    assert ranked[0][1] == pytest.approx(manual[0][1], abs=1e-5)
    freq = link_image(index, red, k=3, method="frequency")
    assert freq[0] == ("e:fruit", 2.0)  # fruit owns red and green
    assert len(link_image(index, red, k=20)) == 3  # k larger than the index


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


def test_relevance_agreement_validates():
    with pytest.raises(ValueError, match="same length"):
        relevance_agreement([1, 2], [1], ["JP", "JP"])
    r = relevance_agreement([4.0, 4.0, 4.0], [1, 5, 3], ["JP"] * 3, aggregation="pooled")
    assert math.isnan(r["pearson"]) and "constant" in r["pearson_reason"]


def test_attribution_suite_with_stub_judge(world):
    from cultura.evaluate.runner import load_results, run_evaluation
    from cultura.evaluate.suites.attribution import suite as _  # noqa: F401 - registers the suite

    project, _shas = world
    rec = run_evaluation(project, ["fake:dim=16"], ["attribution"],
                         options={"attribution": {"judge": "stub", "kb": "tiny", "k": 2}})[0]
    assert rec.status == "done", rec.reason
    rows = load_results(project, suite="attribution")
    assert {"n_scored", "mean_score", "pearson"} <= {r["metric"] for r in rows}
    no_ratings = [r for r in rows if r["metric"] == "pearson"]
    assert all(r["n"] == 0 and "human rating" in r["details"]["reason"] for r in no_ratings)
    from cultura.evaluate.report import build_report
    sections = dict(build_report(project)["sections"])
    assert "CAIRe" in sections["attribution"].title


def test_push_prioritise_orders_by_judge_uncertainty(monkeypatch):
    """`annotate push relevance --prioritise attribution` puts the pairs the judge is least sure about first."""
    from cultura.evaluate.suites.attribution import priority as push_mod
    from cultura.errors import CulturaError
    from cultura.evaluate.suites.attribution import priority as ev

    items = [{"sha256": "a", "country": "JP"}, {"sha256": "b", "country": "JP"}, {"sha256": "c", "country": "TH"}]
    monkeypatch.setattr(ev, "judge_uncertainty", lambda project: [("c", "TH", 0.9), ("a", "JP", 0.2)])
    out = push_mod.prioritised(None, "relevance", items, "attribution")
    assert [i["sha256"] for i in out] == ["c", "a", "b"]
    import pytest
    with pytest.raises(CulturaError, match="relevance"):
        push_mod.prioritised(None, "filter", items, "attribution")
    with pytest.raises(KeyError, match="Unknown priority"):
        push_mod.prioritised(None, "relevance", items, "judge")
    monkeypatch.setattr(ev, "judge_uncertainty", lambda project: [])
    with pytest.raises(CulturaError, match="cultura attribution run"):
        push_mod.prioritised(None, "relevance", items, "attribution")


def test_binarisation_is_seed_004_scores_greater_than_3():
    """Seed 004 §5.4: "we convert all metrics' outputs into binary judgments by assigning scores greater than 3
    on the five-point scale (relevant, highly relevant) to positive label 1, and the others 0." A continuous
    expected score of 3.6 is relevant, 3.0 is not; ``rule="ge"`` is the other reading (score >= t, App. C.7)."""
    from cultura.evaluate.suites.attribution.evaluation import binarise, binary_metrics, relevance_agreement

    assert binarise([3.0, 3.6, 4.0, 2.9]).tolist() == [False, True, True, False]
    assert binarise([3.0, 3.6, 4.0], threshold=4, rule="ge").tolist() == [False, False, True]
    m = binary_metrics([3.6, 3.2, 1.0, 4.8], [4, 5, 4, 1])
    assert (m["precision"], m["recall"], m["rule"]) == (2 / 3, 2 / 3, "score > 3")
    ge = binary_metrics([3.6, 3.2, 1.0, 4.8], [4, 5, 4, 1], threshold=4, rule="ge")
    assert (ge["precision"], ge["recall"]) == (0.0, 0.0)
    r = relevance_agreement([3.6, 3.2, 1.0, 4.8], [4, 5, 4, 1], ["JP"] * 4, aggregation="pooled")
    assert r["rule"] == "score > 3" and r["by_threshold"][4.0]["rule"] == "score >= 4"
    with pytest.raises(ValueError, match="rule"):
        binarise([1.0], rule="gte")
