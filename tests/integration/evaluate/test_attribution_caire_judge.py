"""CAIRe (seed 004) with a served judge (the local OpenAI-compatible stub): enough alternatives for every digit,
incomplete rows flagged, free-text culture labels, the VLM baseline without retrieval."""
from __future__ import annotations

import json

import pytest

from tests.fakes.tiny_lm import tiny_lm  # noqa: F401 - fixture
from tests.unit.evaluate.test_attribution_caire import ORIGIN, PHOTOS, _cli, _photo, photo_world  # noqa: F401 - shared with the unit tests


def _digits_responder(req):
    """Like a real model: many non-digit tokens outrank the low digits; only top_logprobs alternatives come back."""
    ranked = [("Score", -0.05), (" ", -3.0), ("The", -3.5), ("5", -4.0), ("**", -4.5), ("4", -5.0), ("I", -6.0),
              ("3", -8.0), ("2", -11.0), ("1", -13.0)] + [(f"tok{i}", -14.0 - i) for i in range(20)]
    top = ranked[:req["top_logprobs"]]
    return {"id": "chatcmpl-stub", "object": "chat.completion", "created": 0, "model": req["model"],
            "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "Score"},
                         "logprobs": {"content": [{"token": "Score", "logprob": -0.05, "bytes": None,
                                                   "top_logprobs": [{"token": t, "logprob": v, "bytes": None}
                                                                    for t, v in top]}]}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def test_judge_requests_enough_alternatives_for_all_digits(openai_stub):
    from cultura.errors import CulturaError
    from cultura.evaluate.metrics import expected_score
    from cultura.models.judges import get_judge

    openai_stub.responder = _digits_responder
    res = get_judge("openai:m").rate(culture="Japan", entity_text="x")
    assert openai_stub.chat_requests()[-1]["top_logprobs"] == 20
    assert res.missing == [] and res.reason is None
    assert res.score == pytest.approx(expected_score({"1": -13.0, "2": -11.0, "3": -8.0, "4": -5.0, "5": -4.0}))
    # with the old top_logprobs=5, digits 1-4 fall out of the list: the result is flagged, not silently 0
    few = get_judge("openai:m", top_logprobs=5).rate(culture="Japan", entity_text="x")
    assert few.status == "ok" and few.missing == ["1", "2", "3", "4"] and "1, 2, 3, 4" in few.reason
    with pytest.raises(CulturaError, match="top_logprobs"):
        get_judge("openai:m", top_logprobs=3)


def test_incomplete_judge_rows_are_flagged_in_the_table(photo_world, openai_stub):
    from cultura.evaluate.suites.attribution import OpenAIJudge, import_kb, run_attribution

    project, kbfile, shas = photo_world
    import_kb(project, kbfile)
    openai_stub.responder = _digits_responder
    out = run_attribution(project, "fake:dim=16", OpenAIJudge("m", top_logprobs=5), countries=["JP"], k=1)
    assert out["incomplete"] == 2
    rows = project.db.execute("SELECT missing_tokens, reason FROM attribution_scores").fetchall()
    assert all(json.loads(m) == ["1", "2", "3", "4"] and "not among" in r for m, r in rows)


# ------------------------------------------------------------------------- item 5: free-text culture labels

def test_free_text_culture_labels_through_attribution_judge_and_annotation(photo_world, openai_stub, tmp_path):
    """`--culture Shinto` used to fail with "Unknown country code 'SHINTO'"; culture labels are first-class."""
    from cultura.annotate.items import relevance_items
    from cultura.annotate.assign import eligible
    from cultura.cultures import resolve_culture
    from cultura.errors import UnknownName
    from cultura.evaluate.suites.attribution.evaluation import human_ratings

    project, kbfile, shas = photo_world
    assert _cli(project, "kb", "import", str(kbfile)).exit_code == 0
    r = _cli(project, "culture", "add", "Yoruba", "--country", "NG", "--language", "yo",
             "--description", "an ethnic group of West Africa")
    assert r.exit_code == 0, r.output
    openai_stub.responder = _digits_responder
    r = _cli(project, "attribution", "run", "--model", "fake:dim=16", "--judge", "openai:m", "--culture",
             "Shinto", "--culture", "yoruba", "--country", "JP", "--top-k", "1", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["scored"] == 6
    keys = {k for (k,) in project.db.execute("SELECT DISTINCT country FROM attribution_scores")}
    assert keys == {"Shinto", "Yoruba", "JP"}
    prompts = [m["messages"][-1]["content"] for m in openai_stub.chat_requests()]
    assert any("Target culture: Shinto\n" in p for p in prompts)
    assert any("Target culture: Yoruba (an ethnic group of West Africa)" in p for p in prompts)
    assert any("Target culture: Japan" in p for p in prompts)
    # the free-text label is registered, so annotation and evaluation share its key
    listed = json.loads(_cli(project, "culture", "list", "--json").output)
    assert {x["key"]: x["kind"] for x in listed}["Shinto"] == "label"
    assert resolve_culture(project, "SHINTO").key == "Shinto"
    with pytest.raises(UnknownName, match="country code 'XX'"):
        resolve_culture(project, "XX")
    # relevance items for annotation carry the labels; Yoruba's annotators are from NG
    items = [i for i in relevance_items(project) if i["country"] == "Yoruba"]
    assert len(items) == 2 and items[0]["payload"]["culture_name"] == "Yoruba"
    assert eligible("relevance", items[0], {"country": "NG"}) and not eligible("relevance", items[0], {"country": "JP"})
    # a ratings file names the label in any case
    f = tmp_path / "ratings.csv"
    f.write_text(f"sha256,culture,rating\n{shas['sushi']},shinto,4\n")
    assert human_ratings(project, source=f) == {(shas["sushi"], "Shinto"): (4.0, 1)}


def _cot_responder(req):
    """A chain-of-thought reply ending in "Score: 4", with per-token log-probabilities."""
    toks = [("The", -0.1, []), (" image", -0.1, []), (" shows", -0.1, []), (" food", -0.2, []), (".\n", -0.1, []),
            ("Score", -0.01, []), (":", -0.01, []),
            (" 4", -0.3, [(" 4", -0.3), (" 5", -1.5), (" 3", -2.5), (" 2", -6.0), (" 1", -9.0)])]
    content = "".join(t for t, _, _ in toks)
    return {"id": "chatcmpl-stub", "object": "chat.completion", "created": 0, "model": req["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content},
                         "logprobs": {"content": [{"token": t, "logprob": lp, "bytes": None,
                                                   "top_logprobs": [{"token": a, "logprob": b, "bytes": None}
                                                                    for a, b in alts]} for t, lp, alts in toks]}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": len(toks), "total_tokens": 1 + len(toks)}}


def test_vlm_baseline_without_retrieval(photo_world, openai_stub):
    """Baseline 2 (§5.2): a VLM with the chain-of-thought prompt, the image and no retrieved text; the score is
    the expectation at the "Score: N" position. No encoder or KB is needed."""
    from cultura.evaluate.metrics import expected_score
    from cultura.models.judges import result_from_cot

    project, _kbfile, shas = photo_world
    openai_stub.responder = _cot_responder
    r = _cli(project, "attribution", "run", "--context", "none", "--judge", "openai-vision-cot:vlm",
             "--culture", "JP", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["scored"] == 2 and out["encoder"] == "" and out["kb"] == ""
    req = openai_stub.chat_requests()[-1]
    parts = req["messages"][-1]["content"]
    text = next(p["text"] for p in parts if p["type"] == "text")
    assert any(p["type"] == "image_url" for p in parts)
    assert "Retrieved information" not in text and "Think step by step" in text and 'Score: N' in text
    assert req["max_tokens"] > 1
    rows = project.db.execute("SELECT judge, context, score, argmax, status FROM attribution_scores").fetchall()
    want = expected_score({"1": -9.0, "2": -6.0, "3": -2.5, "4": -0.3, "5": -1.5})
    assert all(j.startswith("openai-vision-cot:vlm@") and c == "none" and s == pytest.approx(want) and a == 4
               and st == "ok" for j, c, s, a, st in rows)
    parsed = result_from_cot(None, "Reasoning...\n**Score:** 2")
    assert parsed.status == "parsed" and parsed.score == 2.0
    assert result_from_cot(None, "no score here").status == "failed"
