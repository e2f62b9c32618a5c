"""LLM entity bias (seed 001): tables, the real HF scoring path on a tiny GPT-2, the OpenAI-compatible
completions path against the local stub, CBS vs the double loop, sentiment / QA / coverage."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from cultura.errors import CulturaError
from cultura.evaluate.suites.llm_bias import (compute_cbs, entity_sets, get_scorer, import_contexts,
                                       import_entities, list_contexts, split_mask)
from cultura.models.scorers import OpenAICompletionsScorer, score_cached
from cultura.evaluate.metrics import cultural_bias_score
from tests.fakes.tiny_lm import tiny_lm  # noqa: F401

ENTS = [
    {"language": "en", "type": "food", "side": "local", "native": "sushi"},
    {"language": "en", "type": "food", "side": "local", "native": "ramen"},
    {"language": "en", "type": "food", "side": "western", "native": "pizza"},
    {"language": "en", "type": "food", "side": "western", "native": "steak"},
    {"language": "en", "type": "food", "side": "western", "native": "pasta"},
]
CTXS = [
    {"language": "en", "kind": "grounded", "type": "food", "text": "In Kyoto I ate [MASK] yesterday.",
     "sentiment": "positive"},
    {"language": "en", "kind": "neutral", "type": "food", "text": "Lunch was [MASK] today.",
     "sentiment": "neutral"},
]


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def filled(project, tmp_path):
    import_entities(project, _write_jsonl(tmp_path / "e.jsonl", ENTS))
    import_contexts(project, _write_jsonl(tmp_path / "c.jsonl", CTXS))
    return project


def test_import_idempotent_and_validated(project, tmp_path):
    p = _write_jsonl(tmp_path / "e.jsonl", ENTS)
    assert import_entities(project, p)["inserted"] == 5
    assert import_entities(project, p) == {"rows": 5, "inserted": 0, "existing": 5}
    assert entity_sets(project, "en", "food") == (["sushi", "ramen"], ["pizza", "steak", "pasta"])
    bad = _write_jsonl(tmp_path / "bad.jsonl", [{"language": "en", "type": "food", "side": "eastern",
                                                   "native": "x"}])
    with pytest.raises(CulturaError, match="side"):
        import_entities(project, bad)
    csv = tmp_path / "c.csv"
    csv.write_text("language,kind,type,text\nja,grounded,food,[MASK]と[MASK]\n", encoding="utf-8")
    with pytest.raises(CulturaError, match="exactly one"):
        import_contexts(project, csv)
    assert split_mask("a [MASK] b") == ("a ", " b")


def test_cbs_equals_double_loop_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(50):
        a = -rng.integers(0, 5, size=rng.integers(1, 8)).astype(float)
        b = -rng.integers(0, 5, size=rng.integers(1, 8)).astype(float)
        loop = sum(bj > ai for ai in a for bj in b) / (len(a) * len(b))
        assert cultural_bias_score(a, b) == pytest.approx(loop)


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


def test_llm_suite_skips_without_llm(filled):
    from cultura.evaluate.runner import run_evaluation
    from cultura.evaluate.suites.llm_bias import suite as _  # noqa: F401

    rec = run_evaluation(filled, ["fake"], ["llm", "prevalence"])[0]
    assert rec.status == "failed" and "Unknown LLM scorer family" in rec.reason  # fake is no LLM
    # under --suite all the llm suite takes its model from options/config only, and skips without one
    rec = next(r for r in run_evaluation(filled, ["fake"], "all") if r.suite == "llm")
    assert rec.status == "skipped" and "--option llm.llm" in rec.reason


def test_llm_suite_takes_the_model_from_model_option(filled, tiny_lm):  # noqa: F811
    """`cultura evaluate run --model hf:… --suite llm`: the --model spec is the LLM under evaluation."""
    from cultura.evaluate.runner import run_evaluation
    from cultura.evaluate.suites.llm_bias import suite as _  # noqa: F401

    spec = f"hf:{tiny_lm}"
    rec = run_evaluation(filled, [spec], ["llm"], options={"generator": "none", "n_resamples": 20,
                                                          "english": False})[0]
    assert rec.status == "done", rec.reason
    assert rec.model == spec


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


def test_pattern_extraction(project, tmp_path):
    from cultura.curate.entities import list_entities
    from cultura.evaluate.suites.llm_bias.patterns import extract_entities

    corpus = _write_jsonl(tmp_path / "corpus.jsonl", [
        {"text": "We loved the Japanese dish okonomiyaki and the Thai dish pad thai."},
        {"text": "Again the Japanese dish okonomiyaki, then the American food cheeseburger."}])
    out = extract_entities(project, corpus, "en", min_count=1)
    assert out["distinct"] == 3 and out["inserted"] == 3
    assert extract_entities(project, corpus, "en")["inserted"] == 0  # idempotent
    sides = {r["native"]: r["side"] for r in list_entities(project, status="candidate")}
    assert sides == {"okonomiyaki": "local", "pad thai": "local", "cheeseburger": "western"}


def test_entity_decisions_round_trip(project, tmp_path):
    from cultura.db import now
    from cultura.annotate.kinds import apply_entity_table_decisions
    from cultura.curate.entities import export_entity_items, list_entities

    import_entities(project, _write_jsonl(tmp_path / "e.jsonl", ENTS[:2]), status="candidate")
    assert export_entity_items(project, tmp_path / "items.jsonl") == 2
    keys = [json.loads(x)["key"] for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    project.db["decisions"].insert_all([
        {"kind": "entity", "item_key": f"entity:{keys[0]}", "label": "local", "rule": "majority", "decided_at": now()},
        {"kind": "entity", "item_key": f"entity:{keys[1]}", "label": "noise", "rule": "majority", "decided_at": now()}])
    assert apply_entity_table_decisions(project.db) == {"accepted": 1, "rejected": 1, "unknown": 0}
    assert [r["native"] for r in list_entities(project)] == ["sushi"]


def test_cli_commands(project, tmp_path):
    from click.testing import CliRunner

    from cultura.cli import cli
    from cultura.evaluate.suites.llm_bias import commands as llm_commands

    if "entities" not in cli.commands:
        llm_commands.register(cli)
    p = _write_jsonl(tmp_path / "e.jsonl", ENTS)
    r = CliRunner().invoke(cli, ["--project", str(project.root), "entities", "import", str(p), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["inserted"] == 5
    r = CliRunner().invoke(cli, ["--project", str(project.root), "contexts", "import", str(p)])
    assert r.exit_code == 1 and "text" in r.output  # one clear sentence
    for group in ("entities", "contexts", "kb", "attribution"):
        for name, cmd in cli.commands[group].commands.items():
            assert cmd.help, f"{group} {name} has no help"
            assert all(o.help for o in cmd.params if isinstance(o, __import__("click").Option)), (group, name)
