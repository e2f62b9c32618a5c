"""Concepts: presets (seed 000's Table 10), manual curation, removal as a status, terms from a file, the API key's
file. (Generation and translation by an LLM: tests/integration/curate/test_concepts_by_llm.py.)"""

import json

import pytest
from click.testing import CliRunner

from cultura.cli import cli
from cultura.curate import concepts as C
from cultura.errors import CulturaError
from tests.fakes.world import make_world


def test_load_preset_is_idempotent(project):
    first = C.load_preset(project, "globalrg")
    assert first["added"] == 20
    again = C.load_preset(project, "globalrg")
    assert again["added"] == 0 and again["existing"] == 20
    with pytest.raises(KeyError, match="Unknown concept preset 'globalr'. Did you mean 'globalrg'"):
        C.load_preset(project, "globalr")


def test_3xcm_preset_matches_table_10(project):
    C.load_preset(project, "3xcm")
    names = {r["name"] for r in C.list_concepts(project)}
    assert {"airport", "bus", "food"} <= names
    assert len(names) == 137  # one row of Table 10 is unreadable in the seed text (see data/concepts_3xcm.csv)


def test_remove_is_a_status(project):
    C.add_concepts(project, ["Bus", " bus ", "kite"])
    assert [r["name"] for r in C.list_concepts(project)] == ["bus", "kite"]
    C.remove_concept(project, "kite", reason="too rare")
    assert [r["name"] for r in C.list_concepts(project)] == ["bus"]
    row = project.db["concepts"].get(2)
    assert row["status"] == "removed" and row["reason"] == "too rare"
    with pytest.raises(KeyError, match="Unknown concept 'buss'. Did you mean 'bus'"):
        C.remove_concept(project, "buss")


def test_remove_many_by_name_or_file_checks_every_name_first(project, tmp_path):
    C.add_concepts(project, ["bus", "kite", "temple", "food", "wedding"])
    run = CliRunner()
    out = run.invoke(cli, ["--project", str(project.root), "concepts", "remove", "kite", "templ", "busz"])
    assert out.exit_code != 0 and "Unknown: 'templ', 'busz'; nothing was removed" in out.output
    assert len(C.list_concepts(project)) == 5
    (tmp_path / "drop.txt").write_text("# too rare\nfood\n\nwedding\n", encoding="utf-8")
    out = run.invoke(cli, ["--project", str(project.root), "concepts", "remove", "kite", "Temple", "--from",
                           str(tmp_path / "drop.txt"), "--reason", "too rare", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == {"removed": 4, "already_removed": 0}
    assert [r["name"] for r in C.list_concepts(project)] == ["bus"]
    assert C.remove_concepts(project, ["kite", "food"])["already_removed"] == 2


def test_missing_key_is_a_clear_error(project, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY_FILE", raising=False)
    with pytest.raises(CulturaError, match="set OPENAI_API_KEY"):
        C.generate_concepts(project, n=1)


def test_key_file_must_be_private(project, monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    f = tmp_path / "key"
    f.write_text("sk-x")
    f.chmod(0o644)
    monkeypatch.setenv("OPENAI_API_KEY_FILE", str(f))
    with pytest.raises(CulturaError, match="chmod 600"):
        C.generate_concepts(project, n=1)


def cli_run(project, *args):
    return CliRunner().invoke(cli, ["--project", str(project.root), *args])


def test_set_term_from_file(project, tmp_path):
    make_world(project, concepts=("bus",), per_cell=1, terms=False)
    f = tmp_path / "terms.tsv"
    f.write_text("concept\tcountry\tterm\nbus\tJP\tバス\nbus\tTH\tรถเมล์\n", encoding="utf-8")
    res = cli_run(project, "concepts", "set-term", "--from", str(f), "--json")
    assert res.exit_code == 0, res.output and json.loads(res.stdout)["terms"] == 2
    terms = {r["country"]: r["term"] for r in project.db["terms"].rows}
    assert terms["JP"] == "バス" and terms["TH"] == "รถเมล์"
    f.write_text("concept\tcountry\tterm\nbus\tJP\tバス\nbus\tXX\tfoo\n", encoding="utf-8")
    bad = cli_run(project, "concepts", "set-term", "--from", str(f))
    assert bad.exit_code != 0 and "line 3" in bad.output
