"""Query texts set by hand in bulk (``build set-query --from FILE``: every row checked, the good ones written in
one transaction, the others reject rows with their reason), and English-speaking countries whose term was never
set taking the concept's English name, with a note."""
from __future__ import annotations

import json

from click.testing import CliRunner

from cultura.cli import cli
from cultura.curate.benchmark_queries import english_defaults, list_queries, missing_terms
from tests.fakes.world import make_world


def _cli(project, *args):
    return CliRunner().invoke(cli, ["--project", str(project.root), *map(str, args)])


def test_set_query_from_a_file_sets_the_good_rows_and_rejects_the_others_with_reasons(project, tmp_path):
    make_world(project, concepts=("bus", "temple"), per_cell=0)
    f = tmp_path / "queries.jsonl"
    rows = [{"concept": "bus", "country": "DE", "variant": "mention_JP", "text": "bus-de aus Japan"},
            {"concept": "temple", "country": "th", "variant": "mention_US", "text": "temple-th สหรัฐอเมริกา"},
            {"concept": "kite", "country": "DE", "variant": "short", "text": "Drachen"},
            {"concept": "bus", "country": "DE", "variant": "mention_jp", "text": "x"},
            {"concept": "bus", "country": "DE", "variant": "short", "text": "  "}]
    f.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n{broken\n", encoding="utf-8")
    r = _cli(project, "build", "set-query", "--from", f, "--json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert (res["rows"], res["set"], res["rejected"]) == (6, 2, 4)
    reasons = {x["line"]: x["reason"] for x in res["rejects"]}
    assert "Unknown concept 'kite'" in reasons[3] and "Variant 'mention_jp'" in reasons[4]
    assert "empty" in reasons[5] and "not JSON" in reasons[6]
    assert project.db["ingest_rejects"].count == 4
    stored = {(q["concept"], q["country"], q["variant"]): q for q in list_queries(project)}
    assert stored[("bus", "DE", "mention_JP")]["source"] == "manual"
    assert stored[("temple", "TH", "mention_US")]["text"] == "temple-th สหรัฐอเมริกา"
    # the same file again: the same texts, no second reject row
    assert json.loads(_cli(project, "build", "set-query", "--from", f, "--json").output)["set"] == 2
    assert project.db["ingest_rejects"].count == 4
    # a file without the columns, or with positional arguments too: one sentence each
    (tmp_path / "bad.csv").write_text("concept,text\nbus,x\n", encoding="utf-8")
    out = _cli(project, "build", "set-query", "--from", tmp_path / "bad.csv")
    assert out.exit_code != 0 and "needs the columns concept, country, variant, text" in out.output
    out = _cli(project, "build", "set-query", "bus", "--from", f)
    assert out.exit_code != 0 and "not both" in out.output


def test_an_english_speaking_country_without_a_term_takes_the_concept_name(project):
    make_world(project, concepts=("bus",), per_cell=0)
    project.db.execute("DELETE FROM terms WHERE country = 'US'")
    project.db.conn.commit()
    cid = project.db.execute("SELECT id FROM concepts WHERE name = 'bus'").fetchone()[0]
    assert missing_terms(project, [(cid, "US")]) == []
    assert english_defaults(project, [(cid, "US"), (cid, "JP")]) == [(cid, "US")]
    # a country of another language still needs its term
    project.db.execute("DELETE FROM terms WHERE country = 'JP'")
    project.db.conn.commit()
    assert missing_terms(project, [(cid, "US"), (cid, "JP")]) == [(cid, "JP")]
