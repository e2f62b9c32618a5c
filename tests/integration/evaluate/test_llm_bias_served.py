"""LLM entity bias (seed 001) against served models: the OpenAI-compatible completions scorer, sentiment and QA
with a served generator, Wikidata collection from a local SPARQL endpoint."""
from __future__ import annotations

import json
import math

import pytest

from cultura.evaluate.suites.llm_bias import (compute_cbs, get_scorer)
from cultura.models.scorers import OpenAICompletionsScorer
from tests.fakes.tiny_lm import tiny_lm  # noqa: F401
from tests.unit.evaluate.test_llm_bias import CTXS, ENTS, _write_jsonl, filled  # noqa: F401 - shared with the unit tests


def _completions_responder(req):
    """Echo + logprobs like vLLM: one token per character, logprob -0.1 per token (first token None)."""
    prompts = req["prompt"] if isinstance(req["prompt"], list) else [req["prompt"]]
    choices = []
    for i, p in enumerate(prompts):
        toks = list(p)
        lps = [None] + [-0.1 * (1 + (ord(c) % 3)) for c in toks[1:]]
        choices.append({"index": i, "text": p, "finish_reason": "length",
                        "logprobs": {"tokens": toks, "token_logprobs": lps,
                                     "text_offset": list(range(len(toks))), "top_logprobs": None}})
    return {"id": "cmpl-stub", "object": "text_completion", "created": 0, "model": req["model"],
            "choices": choices, "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1}}


def test_openai_completions_scorer_against_stub(filled, openai_stub):
    openai_stub.responder = _completions_responder
    s = get_scorer("openai:stub-lm", batch_size=3)
    assert isinstance(s, OpenAICompletionsScorer)
    vals = s.score([("I ate [MASK] today.", "sushi"), ("I ate [MASK] today.", "pizza")], mode="prefix")
    # " sushi" (space moved into the entity): 6 character tokens
    expect = sum(-0.1 * (1 + (ord(c) % 3)) for c in " sushi")
    assert vals[0] == pytest.approx(expect)
    reqs = [r for r in openai_stub.requests if r["_path"].endswith("/completions")]
    assert reqs[0]["echo"] is True and reqs[0]["max_tokens"] == 0 and reqs[0]["logprobs"] == 1
    res = compute_cbs(filled, s, n_resamples=20, mode="prefix")
    assert all(0 <= r["cbs"] <= 1 for r in res["contexts"])
    n = len(openai_stub.requests)
    compute_cbs(filled, s, n_resamples=20, mode="prefix")
    assert len(openai_stub.requests) == n  # cached
    # an entity at the very start of the prompt has no log-probability for its first token → failed, NaN
    assert math.isnan(s.score([("[MASK] is tasty.", "sushi")], mode="prefix")[0])


def test_sentiment_and_qa_with_stub_generator(filled, openai_stub):
    from cultura.evaluate.suites.llm_bias.qa import extractive_qa
    from cultura.evaluate.suites.llm_bias.sentiment import sentiment_association

    def chat(req):
        text = req["messages"][-1]["content"]
        if "Classify the sentiment" in text:
            return "2" if any(w in text for w in ("pizza", "steak", "pasta")) else "1"  # Western → negative
        sentence = text.split('Text: "', 1)[1].split('"', 1)[0]
        return "sushi" if "sushi" in sentence else "something"
    openai_stub.responder = chat
    rows = sentiment_association(filled, "openai:stub-chat", n_entities=2, seeds=[0, 1], n_resamples=50)
    (r,) = rows
    # 2 contexts (positive, neutral), 2 Western fills each, all predicted negative → FN_western = 4, local 0
    assert r["fn_western"] == 4 and r["fn_local"] == 0 and r["delta_fn"] == 4
    # local predicted positive: on the neutral context that is an FP (2 fills)
    assert r["fp_local"] == 2 and r["delta_fp"] == -2
    filled.db["contexts"].insert({"language": "en", "kind": "qa", "type": "food", "source": "t",
                                  "text": "We travelled far. The [MASK] there was great.", "created_at": "x"})
    (q,) = extractive_qa(filled, "openai:stub-chat", n_entities=2)
    assert q["acc_local"] == 50.0 and q["acc_western"] == 0.0 and q["delta_acc"] == 50.0


def test_wikidata_collection_against_local_sparql(project):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qs, urlparse

    from cultura.curate.entities import list_entities
    from cultura.evaluate.suites.llm_bias.wikidata import build_query, collect_wikidata

    seen = []
    recorded = {"head": {"vars": ["item", "native", "english"]}, "results": {"bindings": [
        {"item": {"type": "uri", "value": "http://www.wikidata.org/entity/Q193264"},
         "native": {"type": "literal", "xml:lang": "ja", "value": "寿司"},
         "english": {"type": "literal", "xml:lang": "en", "value": "sushi"}},
        {"item": {"type": "uri", "value": "http://www.wikidata.org/entity/Q851010"},
         "native": {"type": "literal", "xml:lang": "ja", "value": "天ぷら"}}]}}

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            seen.append(parse_qs(urlparse(self.path).query)["query"][0])
            body = json.dumps(recorded).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/sparql-results+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        out = collect_wikidata(project, "JP", types=["food"], endpoint=f"http://127.0.0.1:{srv.server_port}/sparql")
    finally:
        srv.shutdown()
        srv.server_close()
    assert out["food"] == 2 and "wd:Q2095 wd:Q746549" in seen[0] and '"JP"' in seen[0]
    rows = list_entities(project, status="candidate")
    assert {(r["native"], r["english"], r["qid"]) for r in rows} == {("寿司", "sushi", "Q193264"),
                                                                      ("天ぷら", None, "Q851010")}
    assert 'wdt:P218 "ja"' in build_query("names_female", "JP", "ja")
