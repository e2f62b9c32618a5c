"""cultura's inventory translation step (seed 003 App. E/F) against the local OpenAI stub: a good reply is
written and loaded as unvalidated, a bad reply (lost placeholder, wrong pair count) is a recorded failure,
a rerun skips what exists, and the CLI command."""
from __future__ import annotations

import json
import re
import tomllib

import pytest
from click.testing import CliRunner

from cultura.evaluate.suites.social.data import inventory_status, load_inventory
from cultura.evaluate.suites.social.translate import check_translation, translate_inventory
from tests.fakes.openai_stub import last_user_message


def _first_user(req) -> str:
    return next(m["content"] for m in req["messages"] if m["role"] == "user")

EN = load_inventory(None, "en")


def _good(req) -> str:
    """Translate by marking each English caption; pairs in order; placeholders kept as they are."""
    text = _first_user(req)
    block = text.split("Prompts (label: English caption):\n")[1].split("\n\n")[0] if "Prompts (" in text else ""
    prompts = dict(re.findall(r"^- (.+?): (.+)$", block, re.M))
    pairs = re.findall(r"^\d+\. \[(.+)\] / \[(.+)\]$", text, re.M)
    return json.dumps({"prompts": {k: f"DE {v}" for k, v in prompts.items()},
                       "pairs": [[f"DE {a}", f"DE {b}"] for a, b in pairs]})


def test_good_reply_written_and_loaded_unvalidated(project, openai_stub):
    openai_stub.responder = _good
    res = translate_inventory(project, "de", model="stub-model")
    assert res["counts"] == {"ok": 5} and res["written"]
    path = project.root / "inventories" / "de.toml"
    data = tomllib.loads(path.read_text("utf-8"))
    assert data["validated"] == "unvalidated" and data["source"] == "llm:stub-model"
    assert data["agency"]["pairs"] == [list(p) for p in EN.pairs["agency"]]
    inv = load_inventory(project, "de")
    assert set(inv.sections) == set(EN.sections) and inv.axes == ["crime", "communion", "agency"]
    assert inv.sections["communion"]["untrustworthy"] == "DE a photo of an untrustworthy person"
    assert inv.sections["crime"]["suspicious person"] == "DE a photo of a suspicious person"
    assert res["validation"]["status"] == "unvalidated" == inventory_status(project, "de")["status"]
    req = openai_stub.chat_requests()[0]
    assert req["model"] == "stub-model" and "German" in last_user_message(req)
    assert project.db.execute("SELECT count(*) FROM llm_calls WHERE stage = 'social.translate' AND "
                              "status = 'ok'").fetchone()[0] == 5


def test_rerun_skips_existing_and_keeps_seed_sections(project, openai_stub):
    openai_stub.responder = _good
    # French has the seed's communion prompts built in: only the other four sections are translated
    res = translate_inventory(project, "fr", sections=["communion", "agency"])
    assert {r["section"]: r["status"] for r in res["sections"]} == {"communion": "skipped", "agency": "ok"}
    n = len(openai_stub.chat_requests())
    res = translate_inventory(project, "fr")
    status = {r["section"]: r["status"] for r in res["sections"]}
    assert status == {"demographic": "ok", "crime": "ok", "non_human": "ok", "communion": "skipped",
                      "agency": "skipped"}
    assert len(openai_stub.chat_requests()) == n + 3
    data = tomllib.loads((project.root / "inventories" / "fr.toml").read_text("utf-8"))
    assert set(data) >= {"agency", "crime"} and "communion" not in data
    inv = load_inventory(project, "fr")
    assert not inv.sections["communion"]["trustworthy"].startswith("DE")    # the seed's French prompt kept
    assert inv.sections["agency"]["powerful"].startswith("DE")
    assert inventory_status(project, "fr")["status"] == "unvalidated"
    again = translate_inventory(project, "fr")
    assert again["counts"] == {"skipped": 5} and len(openai_stub.chat_requests()) == n + 3
    # overwrite translates again, keeping the file's layout
    again = translate_inventory(project, "fr", sections=["agency"], overwrite=True)
    assert again["counts"] == {"ok": 1}
    assert load_inventory(project, "fr").sections["crime"]["thief"].startswith("DE")


def test_bad_replies_are_recorded_failures(project, openai_stub):
    def bad(req):
        text = _first_user(req)
        if "Antonym pairs" in text:   # drops a pair
            pairs = re.findall(r"^\d+\. \[(.+)\] / \[(.+)\]$", text, re.M)[:-1]
            return json.dumps({"prompts": {}, "pairs": [[a, b] for a, b in pairs]})
        return _good(req)

    openai_stub.responder = bad
    res = translate_inventory(project, "de", sections=["crime", "agency"])
    rows = {r["section"]: r for r in res["sections"]}
    assert rows["crime"]["status"] == "ok" and rows["agency"]["status"] == "failed"
    assert "5 pair(s), expected 6" in rows["agency"]["reason"] and rows["agency"]["llm_call"]
    data = tomllib.loads((project.root / "inventories" / "de.toml").read_text("utf-8"))
    assert "agency" not in data and "crime" in data
    # a failed section is retried by the next run
    openai_stub.responder = lambda req: json.dumps({"prompts": {}, "pairs": []})
    res = translate_inventory(project, "de", sections=["agency"])
    assert res["sections"][0]["status"] == "failed" and "0 pair(s)" in res["sections"][0]["reason"]
    # nothing written at all when every section fails
    res = translate_inventory(project, "tr", sections=["crime"])
    assert res["counts"] == {"failed": 1} and not res["written"]
    assert not (project.root / "inventories" / "tr.toml").exists()


def test_lost_placeholder_is_a_failure(project, openai_stub):
    from cultura.evaluate.suites.social import data as social_data

    en = project.root / "inventories" / "en.toml"
    en.parent.mkdir(parents=True)
    en.write_text('[crime.prompts]\nthief = "a photo of a {} thief"\n', encoding="utf-8")
    openai_stub.responder = lambda req: json.dumps({"prompts": {"thief": "ein Foto eines Diebes"}, "pairs": []})
    res = translate_inventory(project, "de", sections=["crime"])
    assert res["sections"][0]["status"] == "failed"
    assert "lost placeholder(s) {}" in res["sections"][0]["reason"]
    # the LLM was told the problem and asked again
    assert len(openai_stub.chat_requests()) == project.config.llm.max_attempts
    assert "lost placeholder" in openai_stub.chat_requests()[-1]["messages"][-1]["content"]
    openai_stub.responder = lambda req: json.dumps({"prompts": {"thief": "ein Foto eines {} Diebes"}, "pairs": []})
    assert translate_inventory(project, "de", sections=["crime"])["counts"] == {"ok": 1}
    assert social_data.load_inventory(project, "de").sections["crime"]["thief"] == "ein Foto eines {} Diebes"


def test_check_translation_reasons():
    src = {"a": "x {g}"}
    assert check_translation(src, [("p", "n")], {"a": "y {g}"}, [["P", "N"]]) == []
    probs = check_translation(src, [("p", "n")], {"b": "y {h}"}, [["P"]])
    assert any("missing label(s) a" in p for p in probs) and any("unexpected label(s) b" in p for p in probs)
    assert any("pair 1 has 1 caption(s)" in p for p in probs)
    assert any("identically" in p for p in check_translation({}, [("p", "n")], {}, [["X", "X"]]))
    assert any("does not have" in p for p in check_translation(src, [], {"a": "y {g} {z}"}, []))


def test_bad_input_and_cli(project, openai_stub):
    from cultura.errors import CulturaError
    from cultura.cli import cli

    with pytest.raises(CulturaError, match="source language"):
        translate_inventory(project, "en")
    with pytest.raises(CulturaError, match="Unknown language 'zz'"):
        translate_inventory(project, "zz")
    with pytest.raises(CulturaError, match="Unknown inventory section"):
        translate_inventory(project, "de", sections=["crimes"])

    def root_args(args):
        return ["--project", str(project.root), *args]

    openai_stub.responder = _good
    res = CliRunner().invoke(cli, root_args(["social", "translate-inventory", "de", "--section", "crime", "--model", "m1",
                                    "--json"]))
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["counts"] == {"ok": 1} and out["validation"]["status"] == "unvalidated"
    res = CliRunner().invoke(cli, root_args(["social", "translate-inventory", "de", "--section", "crime"]))
    assert res.exit_code == 0 and "skipped" in res.output and "unvalidated" in res.output
    res = CliRunner().invoke(cli, root_args(["social", "inventories", "--json"]))
    assert {r["language"]: r["status"] for r in json.loads(res.stdout)}["de"] == "unvalidated"
