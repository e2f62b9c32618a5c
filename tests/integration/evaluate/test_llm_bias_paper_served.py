"""Seed 001 (Camellia) conventions that need a served model or a local SPARQL endpoint: each test reproduces the
paper or fails on a reading the paper's own numbers rule out."""
from __future__ import annotations

import json
import math

import pytest

from cultura.evaluate.suites.llm_bias import import_contexts, import_entities
from tests.fakes.tiny_lm import tiny_lm  # noqa: F401
from tests.unit.evaluate.test_llm_bias_paper import DATA, PAR_ENTS, _run_sparql, _write_jsonl  # noqa: F401 - shared with the unit tests


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


def _echo(req):
    """A completions server with echo + logprobs: one token per character, no BOS (the first token has no
    log-probability); a chat request is answered "1"."""
    if "messages" in req:
        return "1"
    choices = []
    for i, p in enumerate(req["prompt"]):
        lps = [None] + [-0.1 * (1 + (ord(c) % 3)) for c in p[1:]]
        choices.append({"index": i, "text": p, "finish_reason": "length", "logprobs": {
            "tokens": list(p), "token_logprobs": lps, "text_offset": list(range(len(p))), "top_logprobs": None}})
    return {"id": "c", "object": "text_completion", "created": 0, "model": req["model"], "choices": choices,
            "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1}}


def test_mask_first_context_same_rule_in_both_scorers(tiny_lm, openai_stub, monkeypatch):  # noqa: F811
    from cultura.models.scorers import NO_START_REASON, get_scorer

    openai_stub.responder = _echo
    # no start token: a failure with the same reason in both modes (not a silent number)
    for mode in ("sentence", "prefix"):
        (lp, _, reason), = get_scorer("openai:stub-lm").score_pairs(
            __import__("cultura.models.scorers", fromlist=["to_pairs"]).to_pairs([("[MASK] is tasty.", "sushi")],
                                                                                  mode))
        assert lp is None and reason == NO_START_REASON
    # with a start token the first token is conditioned on it
    s = get_scorer("openai:stub-lm?bos=^")
    (v,) = s.score([("[MASK] is tasty.", "sushi")])
    assert v == pytest.approx(sum(-0.1 * (1 + (ord(c) % 3)) for c in "sushi is tasty."))
    assert s.identity.endswith("?bos=^")
    assert openai_stub.requests[-1]["prompt"] == ["^sushi is tasty."]
    # the HF scorer: the same reason when its tokenizer has no BOS/EOS token to condition on
    hf = get_scorer(f"hf:{tiny_lm}")
    tok, model, dev, path = hf.loaded

    class NoStartTokenizer:    # the same tokenizer without BOS/EOS tokens
        bos_token_id = eos_token_id = None
        pad_token_id = 0

        def __call__(self, *a, **kw):
            return tok(*a, **kw)
    monkeypatch.setattr(type(hf), "loaded", property(lambda self: (NoStartTokenizer(), model, dev, path)))
    (lp, _, reason), = hf.score_pairs([("", "sushi is tasty.")])
    assert lp is None and reason == NO_START_REASON
    (lp, _, reason), = hf.score_pairs([("I ate", " sushi")])
    assert lp is not None and reason is None


def test_native_and_english_runs_use_the_same_entities(project, tmp_path, openai_stub):
    from cultura.evaluate.runner import run_evaluation

    import_entities(project, _write_jsonl(tmp_path / "e.jsonl", PAR_ENTS))
    import_contexts(project, _write_jsonl(tmp_path / "c.jsonl", [
        {"language": "ja", "kind": "grounded", "type": "food", "sentiment": "positive",
         "text": f"京都で[MASK]を{i}回食べた。", "english": f"In Kyoto I ate [MASK] {i} times."} for i in range(6)] + [
        {"language": "ja", "kind": "qa", "type": "food", "text": f"旅の{i}日目、[MASK]が美味しかった。",
         "english": f"On day {i} of the trip the [MASK] was delicious."} for i in range(4)]))
    to_en = {e["native"]: e["english"] for e in PAR_ENTS if e.get("english")}
    openai_stub.responder = _echo
    recs = run_evaluation(project, ["fake"], ["llm"], options={"llm": {
        "llm": "openai:stub-lm?api=echo&bos=^", "generator": "openai:stub-chat", "n_entities": 2, "seeds": [0, 1],
        "n_resamples": 20, "coverage": False}})
    assert recs[0].status == "done", recs[0].reason
    prompts = [r["messages"][-1]["content"] for r in openai_stub.requests if "messages" in r]

    def fills(marker_native, marker_en):
        nat, en = set(), set()
        for p in prompts:
            for n, e in to_en.items():
                if n in p and marker_native in p:
                    nat.add(e)
                if f" {e} " in p or f"the {e} was" in p:
                    en.add(e)
        return nat, en
    nat, en = fills("京都", "Kyoto")
    assert nat and nat == en                       # the same entities, in Japanese and in English
    assert not any("おでん" in p for p in prompts)  # the entity without an English form is in neither run


def test_western_entities_in_one_pass_written_in_6_languages(project):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qs, urlparse

    from cultura.curate.entities import list_entities
    from cultura.evaluate.suites.llm_bias.wikidata import build_western_query, collect_western_wikidata

    q = build_western_query("authors")
    assert '"US" "CA" "MX"' in q and '"FR"' in q and ">= 6" in q
    rows = _run_sparql(q)
    # Shakespeare (7 of the 9 languages) is kept, once per language; a writer in 3 languages is not
    assert {r["item"].rsplit("/", 1)[1] for r in rows} == {"Q692"}
    assert sorted(r["lang"] for r in rows) == sorted(["zh", "ja", "ko", "vi", "ur", "hi", "ml"])
    assert ">= 1" in build_western_query("food")        # the ≥ 6 filter is for authors, locations, sports clubs
    assert {r["item"].rsplit("/", 1)[1] for r in _run_sparql(build_western_query("authors", min_languages=2))} \
        == {"Q692", "Q900002"}

    recorded = (DATA / "wikidata_western_authors.json").read_bytes()   # the answer to q on the graph above
    seen = []

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            seen.append(parse_qs(urlparse(self.path).query)["query"][0])
            self.send_response(200)
            self.send_header("Content-Type", "application/sparql-results+json")
            self.send_header("Content-Length", str(len(recorded)))
            self.end_headers()
            self.wfile.write(recorded)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        out = collect_western_wikidata(project, types=["authors"],
                                       endpoint=f"http://127.0.0.1:{srv.server_port}/sparql")
    finally:
        srv.shutdown()
        srv.server_close()
    assert seen == [q] and out == {"authors": {"entities": 1, "inserted": 7}}
    ents = list_entities(project, status="candidate", side="western")
    assert {e["qid"] for e in ents} == {"Q692"} and {e["country"] for e in ents} == {"GB"}
    assert {e["language"]: e["native"] for e in ents}["ja"] == "ウィリアム・シェイクスピア"
    assert all(e["english"] == "William Shakespeare" for e in ents)


# -- 6. LLM entity extraction: both sides, with a command ----------------------------------------------------

def _extraction_chat(req):
    text = req["messages"][-1]["content"]
    assert '"western"' in text and "North America or Europe" in text   # the prompt asks for both sides
    body = text.split('Text: "', 1)[1]
    found = []
    for ent, culture in (("ラーメン", "local"), ("ピザ", "western"), ("ケバブ", "other"), ("寿司", "local")):
        if ent in body:
            found.append({"entity": ent, "culture": culture})
    if "ラーメン" in body:
        found.append({"entity": "カレー", "culture": "local"})      # not in the text: dropped
    return json.dumps({"entities": found}, ensure_ascii=False)


def test_llm_extraction_proposes_both_sides(project, tmp_path, openai_stub):
    from click.testing import CliRunner

    from cultura.cli import cli
    from cultura.curate.entities import list_entities

    corpus = tmp_path / "ja.txt"
    corpus.write_text("昨日はラーメンとピザを食べた。\nケバブも美味しい。\n", encoding="utf-8")
    openai_stub.responder = _extraction_chat
    r = CliRunner().invoke(cli, ["--project", str(project.root), "entities", "extract-llm", str(corpus),
                                 "--language", "ja", "--country", "JP", "--type", "food", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out == {"texts": 2, "local": 1, "western": 1, "other": 1, "not_in_text": 1, "failed_calls": 0,
                   "inserted": 2}
    got = {(e["native"], e["side"], e["type"]) for e in list_entities(project, status="candidate")}
    assert got == {("ラーメン", "local", "food"), ("ピザ", "western", "food")}
    r = CliRunner().invoke(cli, ["--project", str(project.root), "entities", "extract-llm", str(corpus),
                                 "--language", "ja", "--country", "JP"])
    assert r.exit_code == 1 and "type" in r.output


def test_qa_prompts_sent_by_the_suite_say_the_type_in_words(project, tmp_path, openai_stub):
    from cultura.evaluate.suites.llm_bias.qa import extractive_qa

    import_entities(project, _write_jsonl(tmp_path / "e.jsonl", [
        {"language": "ko", "type": "names_female", "side": "local", "native": "서윤"},
        {"language": "ko", "type": "names_female", "side": "western", "native": "제시카"}]))
    import_contexts(project, _write_jsonl(tmp_path / "c.jsonl", [
        {"language": "ko", "kind": "qa", "type": "names_female", "text": "어제 [MASK]를 만났다."}]))
    openai_stub.responder = lambda req: "서윤"
    (q,) = extractive_qa(project, "openai:stub-chat", n_entities=1)
    prompts = [r["messages"][-1]["content"] for r in openai_stub.requests if "messages" in r]
    assert prompts and all("female first name" in p and "names female" not in p for p in prompts)
    assert q["acc_local"] == 100.0 and q["acc_western"] == 0.0


def test_pattern_windows_go_to_the_llm(project, tmp_path, openai_stub):
    from cultura.curate.entities import list_entities
    from cultura.evaluate.suites.llm_bias.patterns import llm_extract_entities

    corpus = tmp_path / "ja.txt"
    corpus.write_text("長い前置きの文章がここにあります。今日は肉じゃがのレシピを見た。その後で散歩に行きました。\n",
                      encoding="utf-8")
    sent = []

    def chat(req):
        text = req["messages"][-1]["content"].split('Text: "', 1)[1].split('"', 1)[0]
        sent.append(text)
        return json.dumps({"entities": [{"entity": "肉じゃが", "culture": "local"}]}, ensure_ascii=False)
    openai_stub.responder = chat
    out = llm_extract_entities(project, corpus, "ja", country="JP", from_patterns=True)
    assert sent == ["ます。今日は肉じゃがのレシピを見た。その後で散歩"]   # the trigger ± 10 characters
    assert out["local"] == 1 and out["inserted"] == 1
    (e,) = list_entities(project, status="candidate")
    assert (e["native"], e["type"], e["side"]) == ("肉じゃが", "food", "local")


def test_coverage_of_a_served_model_from_its_tokenizer_option(project, tmp_path, tiny_lm, openai_stub):  # noqa: F811
    from cultura.evaluate.runner import load_results, run_evaluation

    import_entities(project, _write_jsonl(tmp_path / "e.jsonl", PAR_ENTS))
    import_contexts(project, _write_jsonl(tmp_path / "c.jsonl", [
        {"language": "ja", "kind": "grounded", "type": "food", "text": "京都で[MASK]を食べた。"}]))
    openai_stub.responder = _echo
    recs = run_evaluation(project, ["fake"], ["llm"], options={"llm": {
        "llm": "openai:stub-lm?bos=^", "generator": "none", "n_resamples": 20, "english": False,
        "tokenizer": str(tiny_lm)}})
    assert recs[0].status == "done", recs[0].reason
    cov = [r for r in load_results(project, suite="llm") if r["metric"] == "script_coverage"]
    assert [r["group"]["language"] for r in cov] == ["ja"] and 0 < cov[0]["value"] < 1


def test_no_parseable_reply_is_nan_with_a_reason_not_zero(project, tmp_path, openai_stub):
    from cultura.evaluate.suites.llm_bias.sentiment import sentiment_association

    import_entities(project, _write_jsonl(tmp_path / "e.jsonl", PAR_ENTS))
    import_contexts(project, _write_jsonl(tmp_path / "c.jsonl", [
        {"language": "ja", "kind": "grounded", "type": "food", "sentiment": "positive", "text": "[MASK]を食べた。"},
        {"language": "ja", "kind": "neutral", "type": "food", "sentiment": "neutral", "text": "昼は[MASK]。"}]))
    openai_stub.responder = lambda req: "ありがとうございます"
    (r,) = sentiment_association(project, "openai:stub-chat", n_entities=2, seeds=[0], n_resamples=20)
    assert math.isnan(r["delta_fn"]) and math.isnan(r["delta_fp"]) and "no parseable reply" in r["reason"]
    assert r["invalid"] == 8
