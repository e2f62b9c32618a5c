"""Seed 001 (Camellia) conventions: each test reproduces the paper or fails on a reading
the paper's own numbers rule out."""
from __future__ import annotations


import pytest

from cultura.evaluate.suites.llm_bias import import_contexts, import_entities
from tests.fakes.tiny_lm import tiny_lm  # noqa: F401
from tests.unit.evaluate.test_llm_bias_paper import PAR_ENTS, _write_jsonl  # noqa: F401 - shared with the unit tests


def test_default_score_is_the_completed_context_log_likelihood(tiny_lm):  # noqa: F811
    import torch

    from cultura.models.scorers import DEFAULT_MODE, get_scorer

    assert DEFAULT_MODE == "sentence"
    s = get_scorer(f"hf:{tiny_lm}")
    tok, model = s.loaded[0], s.loaded[1]

    def by_hand(text):
        ids = [tok.eos_token_id] + tok(text, add_special_tokens=False)["input_ids"]   # GPT-2: BOS = EOS
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([ids])).logits[0], -1)
        return sum(lp[i - 1, ids[i]].item() for i in range(1, len(ids)))

    (v,) = s.score([("I ate [MASK] today in Kyoto.", "sushi")])
    assert v == pytest.approx(by_hand("I ate sushi today in Kyoto."), abs=1e-4)
    # the text after [MASK] counts by default (prefix mode ignores it)
    a, b = s.score([("I ate [MASK] today in Kyoto.", "sushi"), ("I ate [MASK] in Rome.", "sushi")])
    pa, pb = s.score([("I ate [MASK] today in Kyoto.", "sushi"), ("I ate [MASK] in Rome.", "sushi")], mode="prefix")
    assert pa == pytest.approx(pb) and a != pytest.approx(b)
    # a context opening with [MASK]: P(entity … | BOS), a number, in both modes
    (m,) = s.score([("[MASK] is tasty.", "sushi")])
    assert m == pytest.approx(by_hand("sushi is tasty."), abs=1e-4)


def test_report_has_cbs_vs_coverage_figure(project):
    from cultura.evaluate.suites import row
    from cultura.evaluate.suites.llm_bias.suite import render_llm

    rows = []
    for m, covs, cbss in (("hf:llama", {"zh": 0.05, "hi": 0.02}, {"zh": 0.32, "hi": 0.26}),
                          ("hf:qwen", {"zh": 0.25, "hi": 0.01}, {"zh": 0.27, "hi": 0.29})):
        for lang in ("zh", "hi"):
            rows.append(row("llm", "script_coverage", covs[lang], group={"language": lang}, details={"llm_spec": m}))
            rows.append(row("llm", "cbs_mean", cbss[lang], group={"language": lang, "kind": "grounded"},
                            details={"llm_spec": m}))
    rows.append(row("llm", "cbs_mean", 0.5, group={"language": "zh", "kind": "neutral"}, details={"llm_spec": "hf:x"}))
    sec = render_llm(rows, project)
    assert "Figure 13" in sec.html and "data:image/png;base64," in sec.html
    pts = {(p["model"], p["language"]): (p["coverage"], p["cbs"]) for p in sec.csv_tables["llm_cbs_vs_coverage"]}
    assert pts == {("hf:llama", "zh"): (0.05, 0.32), ("hf:llama", "hi"): (0.02, 0.26),
                   ("hf:qwen", "zh"): (0.25, 0.27), ("hf:qwen", "hi"): (0.01, 0.29)}


def test_cbs_native_and_english_score_the_same_entity_pairs(project, tmp_path, tiny_lm):  # noqa: F811
    from cultura.evaluate.suites.llm_bias.cbs import cbs_by_context

    import_entities(project, _write_jsonl(tmp_path / "e.jsonl", PAR_ENTS))
    import_contexts(project, _write_jsonl(tmp_path / "c.jsonl", [
        {"language": "ja", "kind": "grounded", "type": "food", "text": "京都で[MASK]を食べた。",
         "english": "In Kyoto I ate [MASK]."}]))
    spec = f"hf:{tiny_lm}"
    (nat,) = cbs_by_context(project, spec, parallel=True)
    (en,) = cbs_by_context(project, spec, english=True)
    (everything,) = cbs_by_context(project, spec)
    assert (nat["n_local"], nat["n_western"]) == (en["n_local"], en["n_western"]) == (4, 4)
    assert everything["n_local"] == 5          # without parallel: every accepted entity (おでん too)


def test_text_longer_than_the_context_fails_with_its_reason(tiny_lm):  # noqa: F811
    from cultura.models.scorers import HFScorer

    s = HFScorer(str(tiny_lm), max_length=4)
    (lp, _, reason), = s.score_pairs([("", "a sentence with rather many more tokens than four")])
    assert lp is None and "longer than the model's context (4 tokens)" in reason
    (lp, n, reason), = s.score_pairs([("a long prefix that is cut from the left", " ok")])
    assert lp is not None and reason is None
