"""Query variants written by an LLM (the local OpenAI-compatible stub): verbose and descriptor texts validated,
short mention queries by LLM and by pattern, editable by hand and through the CLI, and a failed call counted."""
from __future__ import annotations

import json
import re

from click.testing import CliRunner

from cultura.cli import cli
from cultura.curate.benchmark_queries import (QueryError, build_mention_queries, build_queries, build_short_queries,
                                          cue_patterns, language_forms, list_queries, validate_text)
from cultura.curate.query_edits import set_query
from cultura.curate.cues import mention_table
from tests.fakes.openai_stub import last_user_message
from tests.fakes.world import make_world


NAMES = {"US": "United States", "JP": "Japan", "TH": "Thailand", "DE": "Germany"}


def term(concept, cc):
    return concept if cc == "US" else f"{concept}-{cc.lower()}"


def responder(req):
    msg = last_user_message(req)
    if "Write a very short image-search query" in msg:  # mention_query.j2
        native, concept = re.search(r'the object "(.+?)" \((\w+)\)', msg).groups()
        block = {}
        for name, forms in re.findall(r"^\* ([^:]+): (.+)$", msg, re.M):
            block[f"mention_{name}"] = f"{native} {forms.split(', ')[0]}"
        if "Germany" in msg and native.endswith("-th"):
            block["mention_Germany"] += " Japan"  # another culture's cue: invalid
        return json.dumps({concept: block})
    concept = re.search(r"'(\w+)':\n    \{", msg) or re.search(r'"concept": "(\w+)"', msg)
    concept = concept.group(1)
    if "Native Concept Word" in msg:  # Figure 22
        names = re.findall(r"^      '([^']+)': '", msg, re.M)
        cc = {v: k for k, v in NAMES.items()}
        task = {n: f"I need a picture of {term(concept, cc[n]) if n in cc else concept} for school" for n in names}
        casual = {n: f"show me a cool {term(concept, cc[n]) if n in cc else concept}" for n in names}
        if "Japan" in casual:
            casual["Japan"] = f"show me a Japanese {term(concept, 'JP')}"  # a culture cue: invalid
        return json.dumps({concept: {"format_task": task, "format_casual": casual}})
    target = re.search(r"^    \* ([^:]+): ", msg, re.M).group(1)
    cc = {v: k for k, v in NAMES.items()}[target]
    mentions = re.findall(r'"mention_([^"]+)"', msg)
    # the descriptor in the target's language (its CLDR country name), as the validation asks
    lang = {"US": "en", "JP": "ja", "TH": "th", "DE": "de"}[cc]
    code = {v: k for k, v in NAMES.items()}
    block = {f"mention_{m}": f"a picture of {term(concept, cc)} from {language_forms(code[m], lang)[0]}"
             for m in NAMES.values() if m in mentions or True}
    return json.dumps({concept: {"format_task": {target: block}, "format_casual": {target: block}}})


def test_llm_variants(project, openai_stub):
    make_world(project, concepts=("bus", "temple"), per_cell=0)
    openai_stub.responder = responder
    res = build_queries(project)
    assert res["verbose"]["failed_calls"] == 0
    rows = {(r["concept"], r["country"], r["variant"]): r for r in list_queries(project)}
    ok = rows[("bus", "JP", "task")]
    assert ok["status"] == "ok" and "bus-jp" in ok["text"] and ok["source"].startswith("llm:")
    bad = rows[("bus", "JP", "casual")]
    assert bad["status"] == "invalid" and "Japanese" in bad["reason"]
    d = rows[("bus", "TH", "task_mention_JP")]
    assert d["status"] == "ok" and "ญี่ปุ่น" in d["text"]  # Japan, in Thai
    assert rows[("bus", "TH", "casual_mention_DE")]["status"] == "ok"
    # every country × variant exists: parallel by construction
    for cc in NAMES:
        for v in ("short", "task", "casual", "task_mention_US", "casual_mention_TH"):
            assert ("temple", cc, v) in rows
    # reruns keep valid texts and manual edits
    set_query(project, "bus", "JP", "casual", "I want a picture of bus-jp")
    n_calls = len(openai_stub.chat_requests())
    build_queries(project, descriptors=False)
    assert len(openai_stub.chat_requests()) > n_calls
    rows = {(r["concept"], r["country"], r["variant"]): r for r in list_queries(project)}
    assert rows[("bus", "JP", "casual")]["source"] == "manual"
    assert rows[("bus", "JP", "casual")]["status"] == "ok"


def test_short_mention_queries_by_llm_and_pattern_validated_editable_and_by_cli(project, openai_stub, monkeypatch):
    make_world(project, concepts=("bus", "temple"), per_cell=0)
    openai_stub.responder = responder
    res = build_mention_queries(project)
    assert res["failed_calls"] == 0 and res["ok"] == 2 * 4 * 3 - 2 and res["invalid"] == 2
    rows = {(r["concept"], r["country"], r["variant"]): r for r in list_queries(project)}
    th_jp = rows[("bus", "TH", "mention_JP")]
    assert th_jp["status"] == "ok" and th_jp["text"] == "bus-th ญี่ปุ่น" and th_jp["source"].startswith("llm:")
    bad = rows[("bus", "TH", "mention_DE")]
    assert bad["status"] == "invalid" and "culture cue 'Japan'" in bad["reason"]
    assert ("bus", "TH", "mention_TH") not in rows  # never the query language's own culture
    stored = project.db.execute("SELECT descriptor_country, language FROM benchmark_queries WHERE concept_id = "
                                "(SELECT id FROM concepts WHERE name = 'bus') AND country = 'TH' AND "
                                "variant = 'mention_JP'").fetchone()
    assert tuple(stored) == ("JP", "th")
    # a person fixes the invalid one; a rerun keeps it
    set_query(project, "bus", "TH", "mention_DE", "bus-th เยอรมนี")
    build_mention_queries(project, overwrite=True)
    rows = {(r["concept"], r["country"], r["variant"]): r for r in list_queries(project)}
    assert rows[("bus", "TH", "mention_DE")]["source"] == "manual"
    # pattern method: Thai/Japanese/English/German have a pattern; a language without one (German's taken away
    # here) is counted, not guessed
    project.db.execute("DELETE FROM benchmark_queries WHERE variant LIKE 'mention_%'")
    project.db.conn.commit()
    res = build_mention_queries(project, method="pattern", countries=["DE"], descriptors=["US", "JP", "TH"])
    assert res["ok"] == 2 * 3 and res["invalid"] == 0
    assert {r["text"] for r in list_queries(project, concept="bus", country="DE")
            if r["variant"].startswith("mention_")} == {"bus-de aus Japan", "bus-de aus Thailand",
                                                        "bus-de aus den Vereinigten Staaten"}
    project.db.execute("DELETE FROM benchmark_queries WHERE variant LIKE 'mention_%'")
    project.db.conn.commit()
    monkeypatch.delitem(mention_table()["mention"], "de")
    res = build_mention_queries(project, method="pattern")
    assert res["no_pattern"] == 2 * 3 and res["ok"] == 2 * 3 * 3 and res["invalid"] == 0
    rows = {(r["concept"], r["country"], r["variant"]): r for r in list_queries(project)}
    assert rows[("bus", "TH", "mention_JP")]["text"] == "bus-thของญี่ปุ่น"
    assert rows[("bus", "JP", "mention_TH")]["text"] == "タイのbus-jp"
    assert rows[("bus", "US", "mention_JP")]["text"] == "Japanese bus"
    assert rows[("bus", "TH", "mention_JP")]["source"] == "pattern" and ("bus", "DE", "mention_JP") not in rows
    r = CliRunner().invoke(cli, ["--project", str(project.root), "build", "mention-queries", "--method", "pattern",
                                 "--concepts", "temple", "--overwrite", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["no_pattern"] == 3


def test_llm_failure_is_counted(project, openai_stub):
    make_world(project, concepts=("bus", "temple"), per_cell=0)
    openai_stub.responder = lambda req: "not json at all"
    res = build_queries(project, descriptors=False)
    assert res["verbose"]["failed_calls"] == 2
    assert project.db.execute("SELECT count(*) FROM llm_calls WHERE status = 'invalid'").fetchone()[0] == 2
