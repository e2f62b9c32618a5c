"""LLM entity bias (seed 001) without a model: entity import, CBS against the double loop, a suite with no LLM
skipped, pattern extraction, entity decisions, the CLI commands."""
from __future__ import annotations

import json

import numpy as np
import pytest

from cultura.errors import CulturaError
from cultura.evaluate.suites.llm_bias import (entity_sets, import_contexts,
                                       import_entities, split_mask)
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


def test_llm_suite_skips_without_llm(filled):
    from cultura.evaluate.runner import run_evaluation
    from cultura.evaluate.suites.llm_bias import suite as _  # noqa: F401

    rec = run_evaluation(filled, ["fake"], ["llm", "prevalence"])[0]
    assert rec.status == "failed" and "Unknown LLM scorer family" in rec.reason  # fake is no LLM
    # under --suite all the llm suite takes its model from options/config only, and skips without one
    rec = next(r for r in run_evaluation(filled, ["fake"], "all") if r.suite == "llm")
    assert rec.status == "skipped" and "--option llm.llm" in rec.reason


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

    p = _write_jsonl(tmp_path / "e.jsonl", ENTS)
    r = CliRunner().invoke(cli, ["--project", str(project.root), "entities", "import", str(p), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["inserted"] == 5
    r = CliRunner().invoke(cli, ["--project", str(project.root), "contexts", "import", str(p)])
    assert r.exit_code == 1 and "text" in r.output  # one clear sentence
    for group in ("entities", "contexts", "kb", "attribution"):
        for name, cmd in cli.commands[group].commands.items():
            assert cmd.help, f"{group} {name} has no help"
            assert all(o.help for o in cmd.params if isinstance(o, __import__("click").Option)), (group, name)
