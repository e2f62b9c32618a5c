"""vLLM's ``prompt_logprobs`` form of the OpenAI-compatible completions scorer (against the local stub), the
automatic fallback from ``echo`` + ``max_tokens=0``, and the llm report's native-vs-English tables."""
from __future__ import annotations

import json
import math

import pytest

from cultura.errors import CulturaError
from cultura.evaluate.suites.llm_bias import get_scorer, import_contexts, import_entities
from cultura.models.scorers import OpenAICompletionsScorer, split_spec_options


def _lp(ch: str) -> float:
    return -0.1 * (1 + (ord(ch) % 3))


def _prompt_logprobs_body(req, *, bos=False, alternatives=True, decoded=None):
    """vLLM's shape: ``choices[i].prompt_logprobs`` = [None, {token_id: {logprob, rank, decoded_token}}, …],
    one token per character (token id = code point). Every third position also lists a rank-1 alternative
    (the prompt token then has rank 2), as vLLM does when the prompt token is not the top-1."""
    prompts = req["prompt"] if isinstance(req["prompt"], list) else [req["prompt"]]
    choices = []
    for i, p in enumerate(prompts):
        toks = (["<s>"] if bos else []) + list(p)
        plp = [None]
        for j, t in enumerate(toks[1:], start=1):
            entry = {str(ord(t)): {"logprob": _lp(t), "rank": 1 if not alternatives or j % 3 else 2,
                                   "decoded_token": decoded(t) if decoded else t}}
            if alternatives and j % 3 == 0:
                entry = {"99999": {"logprob": -0.01, "rank": 1, "decoded_token": "zz"}, **entry}
            plp.append(entry)
        choices.append({"index": i, "text": "x", "finish_reason": "length", "logprobs": None,
                        "prompt_logprobs": plp})
    return {"id": "cmpl-stub", "object": "text_completion", "created": 0, "model": req["model"],
            "choices": choices, "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def _echo_body(req):
    prompts = req["prompt"] if isinstance(req["prompt"], list) else [req["prompt"]]
    choices = [{"index": i, "text": p, "finish_reason": "length",
                "logprobs": {"tokens": list(p), "token_logprobs": [None] + [_lp(c) for c in p[1:]],
                             "text_offset": list(range(len(p))), "top_logprobs": None}}
               for i, p in enumerate(prompts)]
    return {"id": "cmpl-stub", "object": "text_completion", "created": 0, "model": req["model"],
            "choices": choices, "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1}}


def _completions(stub):
    return [r for r in stub.requests if r["_path"].endswith("/completions")]


EXPECT_SUSHI = sum(_lp(c) for c in " sushi")


def test_prompt_logprobs_form_from_spec(openai_stub):
    openai_stub.responder = _prompt_logprobs_body
    s = get_scorer("openai:stub-lm?mode=prompt_logprobs", batch_size=2)
    assert isinstance(s, OpenAICompletionsScorer) and s.api == "prompt_logprobs"
    assert s.identity.startswith("openai:stub-lm@")  # options are not part of the model name
    res = s.score_pairs([("I ate", " sushi"), ("I ate", " mango sticky rice"), ("", "Lunch was pizza.")])
    assert res[0][0] == pytest.approx(EXPECT_SUSHI) and res[0][1] == 6
    assert res[1][0] == pytest.approx(sum(_lp(c) for c in " mango sticky rice"))
    # sentence mode: the whole prompt is the entity, its first token has no log-probability → failure row
    assert res[2][0] is None and "starts the prompt" in res[2][2]
    req = _completions(openai_stub)[0]
    assert req["prompt_logprobs"] == 1 and req["max_tokens"] == 1 and "echo" not in req
    assert req["prompt"] == ["I ate sushi", "I ate mango sticky rice"]


def test_bos_partial_characters_and_token_ids(openai_stub):
    # a BOS token takes the null slot, so an entity at the start of the prompt is scored
    openai_stub.responder = lambda req: _prompt_logprobs_body(req, bos=True, alternatives=False)
    s = OpenAICompletionsScorer("stub-lm", api="prompt_logprobs")
    (lp, n, reason), = s.score_pairs([("", "sushi")])
    assert reason is None and n == 5 and lp == pytest.approx(sum(_lp(c) for c in "sushi"))

    # vLLM's incremental detokeniser gives "" for a token that ends inside a character: it still counts
    def split_chars(req):
        body = _prompt_logprobs_body(req, alternatives=False)
        for ch in body["choices"]:
            out = [None]
            for entry in ch["prompt_logprobs"][1:]:
                (tid, v), = entry.items()
                if ord(v["decoded_token"]) > 127:   # one partial byte token, then the completing one
                    out.append({"1": {"logprob": -1.0, "rank": 3, "decoded_token": ""}})
                out.append({tid: v})
            ch["prompt_logprobs"] = out
        return body
    openai_stub.responder = split_chars
    (lp, n, reason), = OpenAICompletionsScorer("stub-lm", api="prompt_logprobs").score_pairs([("昨日", "寿司")])
    assert reason is None and n == 4 and lp == pytest.approx(-2.0 + _lp("寿") + _lp("司"))

    # prompt_token_ids, when returned, name the prompt token among several entries
    def with_ids(req):
        body = _prompt_logprobs_body(req, alternatives=False)
        for ch, p in zip(body["choices"], req["prompt"]):
            ch["prompt_token_ids"] = [ord(c) for c in p]
            for entry in ch["prompt_logprobs"][1:]:
                entry["7"] = {"logprob": -0.001, "rank": 5, "decoded_token": "?"}  # a decoy with a higher rank
        return body
    openai_stub.responder = with_ids
    (lp, _, _), = OpenAICompletionsScorer("stub-lm", api="prompt_logprobs").score_pairs([("I ate", " sushi")])
    assert lp == pytest.approx(EXPECT_SUSHI)


def test_decoded_tokens_that_do_not_spell_the_prompt_fail_with_reason(openai_stub):
    openai_stub.responder = lambda req: _prompt_logprobs_body(req, decoded=lambda t: "\ufffd")
    (lp, n, reason), = OpenAICompletionsScorer("stub-lm", api="prompt_logprobs").score_pairs([("I ate", " sushi")])
    assert lp is None and "do not spell the prompt" in reason
    openai_stub.responder = _echo_body   # a server without prompt_logprobs: failure rows, not a crash
    (lp, _, reason), = OpenAICompletionsScorer("stub-lm", api="prompt_logprobs").score_pairs([("I ate", " sushi")])
    assert lp is None and "prompt_logprobs" in reason


def test_auto_falls_back_to_prompt_logprobs_when_echo_max_tokens_0_is_rejected(openai_stub):
    openai_stub.responder = _prompt_logprobs_body
    openai_stub.fail_next = [400]                 # echo + max_tokens=0 refused
    s = get_scorer("openai:stub-lm", batch_size=1)
    assert s.api == "auto"
    vals = s.score([("I ate [MASK] today.", "sushi"), ("I ate [MASK] today.", "pizza")], mode="prefix")
    assert vals[0] == pytest.approx(EXPECT_SUSHI) and vals[1] == pytest.approx(sum(_lp(c) for c in " pizza"))
    reqs = _completions(openai_stub)
    assert reqs[0]["echo"] is True and reqs[0]["max_tokens"] == 0
    assert all(r.get("prompt_logprobs") == 1 and "echo" not in r for r in reqs[1:]) and len(reqs) == 3
    assert s.resolved_api == "prompt_logprobs"


def test_auto_ends_at_echo_max_tokens_1_when_prompt_logprobs_is_ignored(openai_stub):
    openai_stub.responder = _echo_body            # ignores prompt_logprobs (not vLLM)
    openai_stub.fail_next = [400]
    s = get_scorer("openai:stub-lm")
    (v,) = s.score([("I ate [MASK] today.", "sushi")], mode="prefix")
    assert v == pytest.approx(EXPECT_SUSHI) and s.resolved_api == "echo+1"
    reqs = _completions(openai_stub)
    assert [(r.get("echo"), r["max_tokens"], r.get("prompt_logprobs")) for r in reqs] == [
        (True, 0, None), (None, 1, 1), (True, 1, None)]


def test_rejected_forced_form_is_one_clear_sentence(openai_stub):
    openai_stub.fail_next = [400]
    with pytest.raises(CulturaError, match="api=echo"):
        get_scorer("openai:stub-lm?api=prompt_logprobs").score([("I ate [MASK].", "sushi")])


def test_spec_options():
    assert split_spec_options("m?mode=prompt_logprobs&batch_size=4") == ("m", {"api": "prompt_logprobs",
                                                                              "batch_size": 4})
    assert split_spec_options("org/model") == ("org/model", {})
    with pytest.raises(CulturaError, match="completions log-probability API"):
        get_scorer("openai:m?api=nope")
    with pytest.raises(CulturaError, match="key=value"):
        get_scorer("openai:m?api=echo&bad")
    with pytest.raises(CulturaError, match="does not take"):
        get_scorer("hf:x?api=echo")


# -- report: native vs parallel English -----------------------------------------------------------------------

def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_report_shows_parallel_english(project, tmp_path, openai_stub):
    from cultura.evaluate.runner import load_results, run_evaluation
    from cultura.evaluate.suites.llm_bias.suite import DELTA_COLUMN, ENGLISH_COLUMN, render_llm

    ents = [{"language": "ja", "type": "food", "side": s, "native": n, "english": e}
            for s, n, e in (("local", "寿司", "sushi"), ("local", "ラーメン", "ramen"),
                            ("western", "ピザ", "pizza"), ("western", "ステーキ", "steak"))]
    ctxs = [{"language": "ja", "kind": "grounded", "type": "food", "text": "京都で[MASK]を食べた。",
             "english": "In Kyoto I ate [MASK]."}]
    import_entities(project, _jsonl(tmp_path / "e.jsonl", ents))
    import_contexts(project, _jsonl(tmp_path / "c.jsonl", ctxs))
    openai_stub.responder = _prompt_logprobs_body
    recs = run_evaluation(project, ["fake"], ["llm"], options={"llm": {
        "llm": "openai:stub-lm?api=prompt_logprobs&bos=^", "generator": "none", "n_resamples": 20}})
    assert recs[0].status == "done", recs[0].reason
    rows = load_results(project, suite="llm")
    assert {"cbs", "cbs_en"} <= {r["metric"] for r in rows}
    sec = render_llm(rows, project)
    assert ENGLISH_COLUMN in sec.html and ENGLISH_COLUMN in sec.markdown and DELTA_COLUMN in sec.html
    table = sec.csv_tables["llm_cbs_native_vs_english_food"]
    (r,) = table
    nat = next(x for x in rows if x["metric"] == "cbs")["value"]
    en = next(x for x in rows if x["metric"] == "cbs_en")["value"]
    assert r["language"] == "ja" and r["native"] == pytest.approx(nat) and r[ENGLISH_COLUMN] == pytest.approx(en)
    assert r[DELTA_COLUMN] == pytest.approx(nat - en)

    # generation metrics: constructed rows in the suite's shape (English twins carry test_language "en")
    from cultura.evaluate.suites import row
    det = {"llm_spec": "openai:stub-lm"}
    gen = [row("llm", "delta_qa_acc", 20.0, group={"language": "ja", "test_language": "ja"}, details=det),
           row("llm", "delta_qa_acc", 5.0, group={"language": "ja", "test_language": "en"}, details=det),
           row("llm", "delta_fn", 3.0, group={"language": "ja", "test_language": "ja"}, details=det)]
    sec = render_llm(gen, project)
    g = {x["metric"]: x for x in sec.csv_tables["llm_generation_native_vs_english"]}
    assert g["ΔQA accuracy"][ENGLISH_COLUMN] == 5.0 and g["ΔQA accuracy"][DELTA_COLUMN] == 15.0
    assert "ΔFN" not in g  # no English twin for ΔFN: the table only lists metrics with one
    assert not math.isnan(g["ΔQA accuracy"]["native"])
