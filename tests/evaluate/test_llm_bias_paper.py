"""Seed 001 (Camellia) conventions: each test reproduces the paper or fails on the code before issue 13."""
from __future__ import annotations

import json
import math

import pytest

from cultura.evaluate.suites.llm_bias import import_contexts, import_entities


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


# -- 1. sentiment replies: the answer, not the key (seed 001 §4.2, Table 8) --------------------------------

@pytest.mark.parametrize("reply, label", [
    ("Given the above key, the sentiment of this sentence is (0-2): 2", "negative"),
    ("the sentiment of this sentence is (0-2): 1", "positive"),
    ("The sentiment of this sentence is (0–2): 0 (neutral)", "neutral"),
    ("2", "negative"),
    ("2 = negative", "negative"),
    ("Answer: 1 (positive).", "positive"),
    ("Negative", "negative"),
    ("Key: 0 = neutral, 1 = positive, 2 = negative. Answer: 2", "negative"),
])
def test_parse_sentiment_reads_the_answer(reply, label):
    from cultura.evaluate.suites.llm_bias.sentiment import parse_sentiment

    assert parse_sentiment(reply) == label


@pytest.mark.parametrize("reply, reason", [
    ("", "empty"), ("I cannot tell.", "no 0/1/2"), ("1 or 2", "ambiguous"),
    ("the sentiment of this sentence is (0-2):", "no 0/1/2"), ("2 (positive)", "ambiguous"),
])
def test_parse_sentiment_unparseable_has_a_reason(reply, reason):
    from cultura.evaluate.suites.llm_bias.sentiment import parse_sentiment_reply

    label, why = parse_sentiment_reply(reply)
    assert label is None and reason in why


def test_unparseable_replies_are_rows_with_a_reason(project, tmp_path, openai_stub):
    from cultura.evaluate.suites.llm_bias.sentiment import sentiment_association

    import_entities(project, _write_jsonl(tmp_path / "e.jsonl", [
        {"language": "en", "type": "food", "side": "local", "native": "sushi"},
        {"language": "en", "type": "food", "side": "western", "native": "pizza"}]))
    import_contexts(project, _write_jsonl(tmp_path / "c.jsonl", [
        {"language": "en", "kind": "grounded", "type": "food", "text": "I ate [MASK].", "sentiment": "positive"}]))

    def chat(req):
        text = req["messages"][-1]["content"]
        return "Hmm, hard to say." if "pizza" in text else "the sentiment of this sentence is (0-2): 2"
    openai_stub.responder = chat
    (r,) = sentiment_association(project, "openai:stub-chat", n_entities=1, seeds=[0], n_resamples=20)
    assert r["fn_local"] == 1          # the echoed "(0-2): 2" is negative, not the 0 of "(0-2)"
    assert r["invalid"] == 1 and r["invalid_reasons"] == {"no 0/1/2 or sentiment word in the reply": 1}
    assert r["invalid_replies"][0]["side"] == "western" and r["invalid_replies"][0]["reply"] == "Hmm, hard to say."
