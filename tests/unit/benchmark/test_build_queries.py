"""Query variants without an LLM: the short queries from the terms, validation (the descriptor in the query's
language, no other culture cue), manual edits through the CLI. (LLM-written variants:
tests/integration/benchmark/test_llm_queries.py.)"""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cultura.cli import cli
from cultura.curate.benchmark_queries import (QueryError, build_short_queries,
                                          cue_patterns, list_queries, validate_text)
from tests.fakes.world import make_world


def test_validate_text():
    pats = cue_patterns(["JP", "TH", "US"])
    assert validate_text("a bus for school", "bus", pats) is None
    assert validate_text("a Japanese bus", "bus", pats) == "culture cue 'Japanese'"
    assert validate_text("ขอรูปรถบัสไทย", "รถบัส", pats) == "culture cue 'ไทย'"
    assert "missing" in validate_text("a coach", "bus", pats)
    # a cue inside the native term itself is not a cue
    assert validate_text("find Thai boxing videos", "Thai boxing", pats) is None


def test_descriptor_validation_needs_the_descriptor_in_the_query_language_and_no_other_cue():
    # the descriptor (JP) must be present; a Thai query without it is not a descriptor query
    assert "descriptor JP missing" in validate_text("ขอรูปรถบัสหน่อย", "รถบัส", cue_patterns(allow=["JP"]))
    th = cue_patterns(allow=["JP"], language="th")
    assert validate_text("ขอรูปรถบัสญี่ปุ่นหน่อย", "รถบัส", th) is None
    assert "descriptor JP missing in language 'th'" in validate_text("ขอรูปรถบัสหน่อย", "รถบัส", th)
    # named in another language only: not in the query language
    assert "descriptor JP missing" in validate_text("ขอรูปรถบัส Japan", "รถบัส", th)
    # another culture's cue, in the query language (จีน = China in Thai) or in English, is invalid
    assert validate_text("ขอรูปรถบัสญี่ปุ่นจีน", "รถบัส", th) == "culture cue 'จีน'"
    assert validate_text("ขอรูปรถบัสญี่ปุ่น Korean", "รถบัส", th) == "culture cue 'Korean'"
    # forms in other languages: Spanish country name or adjective, German adjective by word start
    es = cue_patterns(allow=["JP"], language="es")
    assert validate_text("una foto de un tren de Japón", "tren", es) is None
    assert validate_text("una foto de un tren japonés", "tren", es) is None
    assert "descriptor JP missing" in validate_text("una foto de un tren", "tren", es)
    assert validate_text("ein japanischer Zug", "Zug", cue_patterns(allow=["JP"], language="de")) is None
    # an inflected several-word name still names the country
    assert validate_text("Bus aus den Vereinigten Staaten", "Bus", cue_patterns(allow=["US"], language="de")) is None
    # queries without a descriptor: a country named in the query language is a cue
    assert validate_text("ขอรูปรถบัสจีน", "รถบัส", cue_patterns(language="th")) == "culture cue 'จีน'"


def test_short_queries_and_missing_term(project):
    make_world(project, per_cell=0)
    assert build_short_queries(project)["short"] == 12
    rows = list_queries(project, country="JP")
    assert {r["text"] for r in rows} == {"bus-jp", "temple-jp", "food-jp"}
    project.db.execute("DELETE FROM terms WHERE country = 'DE' AND concept_id = 1")
    project.db.conn.commit()
    with pytest.raises(QueryError, match=r"bus × DE.*cultura concepts translate.*set-term"):
        build_short_queries(project)


def test_set_query_cli(project):
    make_world(project, per_cell=0)
    base = ["--project", str(project.root), "build"]
    r = CliRunner().invoke(cli, base + ["set-query", "bus", "JP", "task", "a Japanese bus-jp please"])
    assert r.exit_code == 0 and "culture cue" in r.output
    r = CliRunner().invoke(cli, base + ["set-query", "bus", "JP", "weird", "x"])
    assert r.exit_code == 1 and "Variant 'weird'" in r.output
    r = CliRunner().invoke(cli, base + ["set-query", "buss", "JP", "task", "x"])
    assert r.exit_code == 1 and "Did you mean 'bus'" in r.output
    r = CliRunner().invoke(cli, base + ["queries", "--short-only", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["short"]["short"] == 12
