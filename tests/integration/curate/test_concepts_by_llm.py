"""Concepts generated and translated by an LLM (the local OpenAI-compatible stub): validation, retries, failures
stored, the fallback when structured output is unsupported, hand-set terms kept."""
import json

import pytest

from cultura.curate import concepts as C
from cultura.errors import CulturaError
from tests.fakes.openai_stub import last_user_message


def _concept_reply(names, codes):
    return json.dumps({"concepts": [{"concept": n, "description": f"{n}s", "examples": {c: f"{n}-{c}" for c in codes}}
                                    for n in names]})


def test_generate_validates_retries_and_stores_failures(project, openai_stub):
    codes = ["US", "JP", "TH", "DE"]
    replies = iter([
        "this is not json",                                       # batch 1, attempt 1 -> retry with the error
        _concept_reply(["Kite", "wedding"], codes),                # batch 1, attempt 2 -> ok
        json.dumps({"concepts": [{"name": "x"}]}),                 # batch 2: wrong schema x3 -> stored failure
        json.dumps({"concepts": [{"name": "x"}]}),
        json.dumps({"concepts": [{"name": "x"}]}),
        _concept_reply(["festival"], codes),                       # batch 3
    ])
    openai_stub.responder = lambda req: next(replies)
    project.config.llm.batch_size = 2
    res = C.generate_concepts(project, n=3, model="stub-model")
    assert res == {"requested": 3, "added": 3, "failed_batches": 1}
    assert [r["name"] for r in C.list_concepts(project)] == ["festival", "kite", "wedding"]
    ex = {(r["country"], r["entity"]) for r in project.db["concept_examples"].rows}
    assert ("JP", "Kite-JP") in ex
    calls = list(project.db["llm_calls"].rows)
    assert [c["status"] for c in calls] == ["ok", "invalid", "ok"]
    assert calls[1]["attempts"] == 3 and "concepts.0.concept" in calls[1]["error"]
    assert calls[1]["reply"] == json.dumps({"concepts": [{"name": "x"}]})
    # the retry carried the validation error back to the model
    retry = openai_stub.chat_requests()[1]
    assert "not valid" in last_user_message(retry) and retry["messages"][-2]["role"] == "assistant"
    # the App. H prompt was used, with the project's countries
    first = last_user_message(openai_stub.chat_requests()[0])
    assert "concepts that unique and vary in these country" in first and "Thailand" in first
    # the key never reaches the database
    dump = "\n".join(str(r) for r in project.db["llm_calls"].rows)
    assert openai_stub.api_key not in dump


def test_generate_falls_back_when_structured_output_unsupported(project, openai_stub):
    openai_stub.reject_response_format = {"json_schema"}
    openai_stub.responder = lambda req: _concept_reply(["kite"], ["US"])
    C.generate_concepts(project, n=1)
    kinds = [(r.get("response_format") or {}).get("type") for r in openai_stub.chat_requests()]
    assert kinds == ["json_schema", "json_object"]


def test_translate_set_term_and_queries(project, openai_stub):
    C.add_concepts(project, ["bus", "wedding"])

    def responder(req):
        text = last_user_message(req)
        lang = {"Japanese": {"bus": "バス", "wedding": "結婚式"}, "Thai": {"bus": "รถเมล์"},
                "German": {"bus": "Bus", "wedding": "Hochzeit"}}
        for name, terms in lang.items():
            if f"in {name}" in text:
                return json.dumps({"terms": terms})
        return "{}"

    openai_stub.responder = responder
    res = C.translate_concepts(project, model="stub")
    # US is English (no call); TH's 'wedding' missing in the reply -> counted as failed, not fatal
    assert res == {"stored": 7, "failed": 1, "kept": 0}
    terms = {(t["concept"], t["country"]): t for t in C.list_terms(project)}
    assert terms[("bus", "JP")]["term"] == "バス" and terms[("bus", "US")]["source"] == "english"
    C.set_term(project, "wedding", "TH", "งานแต่งงาน")
    q = C.build_queries(project)
    assert q["missing_terms"] == 0 and q["total"] == 2 * 4 + 2 * 3
    texts = {r["text"] for r in project.db["queries"].rows}
    assert {"bus Japan", "バス 日本", "งานแต่งงาน ประเทศไทย"} <= texts
    # a manual term survives re-translation with --overwrite
    C.translate_concepts(project, model="stub", overwrite=True)
    assert {(t["concept"], t["country"]): t["source"] for t in C.list_terms(project)}[("wedding", "TH")] == "manual"
    # changing a term makes the old native query stale, not deleted
    n = project.db["queries"].count
    C.set_term(project, "bus", "JP", "路線バス")
    C.build_queries(project)
    assert project.db["queries"].count == n + 1
    stale = [r["text"] for r in project.db["queries"].rows_where("status = 'stale'")]
    assert stale == ["バス 日本"]
    with pytest.raises(CulturaError, match="not one of this project's countries"):
        C.set_term(project, "bus", "FR", "bus")
