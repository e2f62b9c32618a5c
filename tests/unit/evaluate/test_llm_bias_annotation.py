"""The ``context`` annotation kind (seed 001 §3.3) without a server: results parsed back, items from the contexts
table, adjudicated decisions back into it; annotate reads the entity table itself."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cultura.annotate import items as items_mod, kinds
from cultura.evaluate.suites.llm_bias import import_contexts, import_entities, list_contexts
from tests.fakes.labelstudio import labelstudio  # noqa: F401

CANDIDATES = [
    {"language": "ja", "kind": "grounded", "type": "food", "text": "京都で[MASK]を食べた。最高！",
     "english": "I ate [MASK] in Kyoto. The best!"},
    {"language": "ja", "kind": "grounded", "type": "food", "text": "今日の昼は[MASK]だった。"},
    {"language": "ja", "kind": "neutral", "type": "names_female", "text": "[MASK]さんに会った。"},
    {"language": "ja", "kind": "grounded", "type": "food", "text": "[MASK]は不味い、二度と行かない。"},
]


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("label", kinds.get_kind("context").labels)
def test_context_results_parse_back(label):
    spec = kinds.get_kind("context")
    assert spec.parse(spec.result_for(label))["label"] == label


def test_context_items_from_the_contexts_table(project, tmp_path):
    out = import_contexts(project, _jsonl(tmp_path / "c.jsonl", CANDIDATES), status="candidate")
    assert out["inserted"] == 4
    assert list_contexts(project) == []              # candidates are not evaluated before annotation
    items = items_mod.build_items(project, "context")
    ids = [c["id"] for c in list_contexts(project, status="candidate")]
    assert [it["item_key"] for it in items] == [f"context:ctx-{i}" for i in ids]
    assert items[2]["payload"]["type"] == "female first name" and items[0]["language"] == "ja"
    xml = kinds.render_config("context")
    for it in items:
        kinds.validate_config(xml, example=items_mod.task_data("context", it["item_key"], it["payload"]))


def test_context_decisions_go_back_to_the_contexts_table(project, tmp_path):
    from cultura.db import now

    import_contexts(project, _jsonl(tmp_path / "c.jsonl", CANDIDATES), status="candidate")
    import_contexts(project, _jsonl(tmp_path / "d.jsonl", [{**CANDIDATES[1], "kind": "neutral"}]))  # exists
    ids = [c["id"] for c in list_contexts(project, status="candidate")]
    labels = ["grounded/positive", "neutral/neutral", "qa", "reject"]
    project.db["decisions"].insert_all([{"kind": "context", "item_key": f"context:ctx-{i}", "label": lab,
                                         "rule": "majority", "decided_at": now()} for i, lab in zip(ids, labels)])
    assert kinds.apply_context_decisions(project.db) == {"active": 2, "excluded": 2, "unknown": 0}
    rows = {r["id"]: r for r in list_contexts(project, status=None)}
    assert (rows[ids[0]]["status"], rows[ids[0]]["kind"], rows[ids[0]]["sentiment"]) == ("active", "grounded",
                                                                                         "positive")
    # annotated neutral, but the same text is already a neutral context: excluded with the reason
    assert rows[ids[1]]["status"] == "excluded" and "duplicate" in rows[ids[1]]["reason"]
    assert (rows[ids[2]]["kind"], rows[ids[2]]["sentiment"], rows[ids[2]]["status"]) == ("qa", None, "active")
    assert rows[ids[3]]["status"] == "excluded" and rows[ids[3]]["reason"] == "annotated reject"


def test_annotate_reads_the_entity_table_itself(project, tmp_path):
    import_entities(project, _jsonl(tmp_path / "e.jsonl", [
        {"language": "ja", "type": "food", "side": "local", "native": "寿司", "country": "JP"},
        {"language": "ja", "type": "food", "side": "western", "native": "ピザ"}]), status="candidate")
    items = items_mod.build_items(project, "entity")
    assert [it["payload"]["entity"] for it in items] == ["寿司", "ピザ"]
    assert all(it["item_key"].startswith("entity:ent-") and it["country"] == "JP" for it in items)
    src = (Path(items_mod.__file__)).read_text(encoding="utf-8")
    assert "evaluate" not in src.replace("evaluated", "")


def test_entity_decisions_go_back_to_the_entities_table_on_adjudication(project, tmp_path):
    from cultura.db import now
    from cultura.curate.entities import list_entities

    import_entities(project, _jsonl(tmp_path / "e.jsonl", [
        {"language": "ja", "type": "food", "side": "local", "native": "寿司", "country": "JP"},
        {"language": "ja", "type": "food", "side": "local", "native": "ピザ", "country": "JP"},
        {"language": "ja", "type": "food", "side": "local", "native": "パン", "country": "JP"}]), status="candidate")
    ids = {e["native"]: e["id"] for e in list_entities(project, status="candidate")}
    project.db["decisions"].insert_all([
        {"kind": "entity", "item_key": f"entity:ent-{ids[n]}", "label": lab, "rule": "majority", "decided_at": now()}
        for n, lab in (("寿司", "local"), ("ピザ", "western"), ("パン", "neither"))])
    assert kinds.get_kind("entity").write_back(project.db) == {"accepted": 2, "rejected": 1, "unknown": 0}
    got = {e["native"]: (e["status"], e["side"]) for e in list_entities(project, status=None)}
    assert got == {"寿司": ("accepted", "local"), "ピザ": ("accepted", "western"), "パン": ("rejected", "local")}
