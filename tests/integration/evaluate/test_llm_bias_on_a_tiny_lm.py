"""LLM entity bias (seed 001) on a tiny random-init GPT-2: the real Hugging Face scoring path batched equals
single, the score cache and CBS, script coverage, the suite through the runner."""
from __future__ import annotations


import numpy as np
import pytest

from cultura.evaluate.suites.llm_bias import (compute_cbs, get_scorer, list_contexts)
from cultura.models.scorers import score_cached
from cultura.evaluate.metrics import cultural_bias_score
from tests.fakes.tiny_lm import tiny_lm  # noqa: F401
from tests.unit.evaluate.test_llm_bias import CTXS, ENTS, _write_jsonl, filled  # noqa: F401 - shared with the unit tests


def test_hf_scorer_real_path_batched_equals_single(tiny_lm):  # noqa: F811
    s = get_scorer(f"hf:{tiny_lm}", batch_size=4)
    items = [("I ate [MASK] today.", e) for e in ("sushi", "pizza", "mango sticky rice")] + \
        [("昨日[MASK]を食べた", "寿司")]
    batched = s.score(items, mode="prefix")
    single = [get_scorer(f"hf:{tiny_lm}", batch_size=1).score([it], mode="prefix")[0] for it in items]
    assert np.allclose(batched, single, atol=1e-4)
    assert all(v < 0 for v in batched)
    # prefix mode = log P(entity | prefix) by hand
    import torch
    tok, model = s.loaded[0], s.loaded[1]
    ids = [tok.eos_token_id] + tok("I ate", add_special_tokens=False)["input_ids"]
    cont = tok(" sushi", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([ids + cont])).logits[0], -1)
    manual = sum(lp[len(ids) - 1 + i, t].item() for i, t in enumerate(cont))
    assert batched[0] == pytest.approx(manual, abs=1e-4)
    # sentence mode scores the whole filled sentence (lower than the entity alone)
    assert s.score(items[:1], mode="sentence")[0] < batched[0]


def test_score_cache_and_cbs(filled, tiny_lm):  # noqa: F811
    s = get_scorer(f"hf:{tiny_lm}")
    res = compute_cbs(filled, s, n_resamples=50)
    assert {r["kind"] for r in res["contexts"]} == {"grounded", "neutral"}
    calls = s.stats["scored"]
    assert calls == 10  # 2 contexts x 5 entities
    again = compute_cbs(filled, s, n_resamples=50)
    assert s.stats["scored"] == calls  # everything from the cache
    for r in res["contexts"]:
        ctx = next(c for c in list_contexts(filled) if c["id"] == r["context_id"])
        lp = score_cached(filled, s, [(ctx["text"], e) for e in ["sushi", "ramen", "pizza", "steak", "pasta"]])
        assert r["cbs"] == pytest.approx(cultural_bias_score(lp[:2], lp[2:]))
    assert again["summary"] == res["summary"]


def test_script_coverage(tiny_lm):  # noqa: F811
    from cultura.evaluate.suites.llm_bias.coverage import decoded_vocabulary, script_coverage, tokenizer_coverage

    s = get_scorer(f"hf:{tiny_lm}")
    cov = tokenizer_coverage(s.tokenizer, ["ja", "th", "vi"])
    assert 0 < cov["ja"] < 1 and 0 < cov["th"] < 1
    vocab = decoded_vocabulary(s.tokenizer)
    assert cov["ja"] == script_coverage(vocab, "Japanese")
    assert script_coverage(["ă", "a", "b", "ệ"], "Vietnamese") == 0.5


def test_llm_suite_through_runner(filled, tiny_lm):  # noqa: F811
    from cultura.evaluate.runner import load_results, run_evaluation
    from cultura.evaluate.suites.llm_bias import suite as _  # noqa: F401 - registers the suite

    recs = run_evaluation(filled, ["fake"], ["llm"], options={"llm": {
        "llm": f"hf:{tiny_lm}", "generator": "none", "n_resamples": 20, "english": False}})
    assert recs[0].status == "done", recs[0].reason
    rows = load_results(filled, suite="llm")
    metrics = {r["metric"] for r in rows}
    assert {"cbs", "cbs_mean", "script_coverage"} <= metrics
    from cultura.evaluate.report import build_report
    sections = dict(build_report(filled)["sections"])
    assert "Camellia" in sections["llm"].title and "<table>" in sections["llm"].html


def test_llm_suite_takes_the_model_from_model_option(filled, tiny_lm):  # noqa: F811
    """`cultura evaluate run --model hf:… --suite llm`: the --model spec is the LLM under evaluation."""
    from cultura.evaluate.runner import run_evaluation
    from cultura.evaluate.suites.llm_bias import suite as _  # noqa: F401

    spec = f"hf:{tiny_lm}"
    rec = run_evaluation(filled, [spec], ["llm"], options={"generator": "none", "n_resamples": 20,
                                                          "english": False})[0]
    assert rec.status == "done", rec.reason
    assert rec.model == spec
