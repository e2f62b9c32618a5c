"""Annotation without a Label Studio server: templates, parsing, items (one per duplicate set), assignment,
rules, decisions, image URLs push accepts, secrets, CLI help. (The image server itself:
tests/integration/annotate/test_image_server.py.)"""
from __future__ import annotations

import json
import os
import stat

import pytest
from click.testing import CliRunner

from cultura.annotate import decide, kinds, server
from cultura.annotate import items as items_mod
from cultura.annotate import push as push_mod
from cultura.annotate.assign import assign
from cultura.annotate.items import dedup_items, image_url
from cultura.annotate.push import check_image_urls
from cultura.db import dumps, now
from cultura.errors import CulturaError
from tests.fakes.labelstudio import add_cluster, add_images
from tests.fakes.world import dup_cluster, make_world


@pytest.mark.parametrize("kind", ["filter", "dedup-review", "relevance", "entity", "context", "translation"])
@pytest.mark.parametrize("adjudication", [False, True])
def test_every_template_renders_and_validates(kind, adjudication):
    xml = kinds.render_config(kind, adjudication=adjudication)
    assert xml.lstrip().startswith("<View>")
    assert ("$earlier" in xml) == adjudication


def test_guideline_texts_are_in_the_interfaces():
    assert "Allowed differences include time of day" in kinds.render_config("dedup-review")
    assert "Highly Relevant" in kinds.render_config("relevance")
    assert "Mostly inaccurate" in kinds.render_config("translation")
    assert "Guideline for annotating entities" in kinds.render_config("entity")


def test_invalid_config_is_rejected_offline():
    with pytest.raises(kinds.TemplateError, match="invalid"):
        kinds.validate_config('<View><Choices name="c" toName="nothing"><Choice value="a"/></Choices></View>')
    with pytest.raises(kinds.TemplateError, match="lacks"):
        kinds.validate_config('<View><Image name="i" value="$image"/></View>', example={"img": "x"})


def test_unknown_kind_names_the_valid_ones():
    with pytest.raises(CulturaError, match="Did you mean 'filter'"):
        kinds.get_kind("filtr")


@pytest.mark.parametrize("kind,label,parsed", [
    ("filter", "remove", ("remove", None)), ("relevance", "4", ("4", 4.0)), ("entity", "western", ("western", None)),
    ("translation", "2", ("2", 2.0)), ("dedup-review", "keep:1,3", ("keep:1,3", None)),
    ("dedup-review", "all", ("all", None))])
def test_results_round_trip_through_the_parsers(kind, label, parsed):
    spec = kinds.get_kind(kind)
    p = spec.parse(spec.result_for(label))
    assert (p["label"], p["value"]) == parsed


def test_parsers_accept_display_values_too():
    res = [{"from_name": "relevance", "type": "choices", "value": {"choices": ["5 — Highly Relevant"]}}]
    assert kinds.get_kind("relevance").parse(res)["value"] == 5.0
    res = [{"from_name": "decision", "value": {"choices": ["Remove"]}},
           {"from_name": "reason", "value": {"choices": ["Not a photo", "watermark_text"]}}]
    p = kinds.get_kind("filter").parse(res)
    assert p["label"] == "remove" and p["details"]["reasons"] == ["not_photo", "watermark_text"]


def test_items_from_database_state(project):
    a = add_images(project, "rice", "JP", 3)
    b = add_images(project, "rice", "US", 2, seed=1)
    cid = add_cluster(project, [a[0], a[1]])
    f = items_mod.build_items(project, "filter")
    assert {i["item_key"] for i in f} == {f"filter:{s}" for s in a + b}
    assert all(i["payload"]["concept"] == "rice" and i["payload"]["url"].startswith("http") for i in f)
    d = items_mod.build_items(project, "dedup-review")
    assert [i["cluster_id"] for i in d] == [cid] and len(d[0]["payload"]["members"]) == 2
    r = items_mod.build_items(project, "relevance", other_countries=1)
    assert len(r) == 2 * 5  # own country + 1 other, per image
    assert {i["country"] for i in r if i["sha256"] == a[0]} >= {"JP"}
    # a 'remove' decision drops the image from relevance items
    project.db["decisions"].insert({"kind": "filter", "item_key": f"filter:{a[0]}", "sha256": a[0], "label": "remove",
                                    "rule": "manual", "decided_at": now()})
    assert a[0] not in {i["sha256"] for i in items_mod.build_items(project, "relevance")}


def test_task_data_uses_urls_never_base64(project):
    a = add_images(project, "tea", "JP", 2)
    add_cluster(project, a)
    it = items_mod.build_items(project, "dedup-review")[0]
    data = items_mod.task_data("dedup-review", it["item_key"], it["payload"], image_base="http://127.0.0.1:9/")
    assert "base64" not in json.dumps(data) and "http://127.0.0.1:9/blobs/" in data["cluster"]
    assert [o["value"] for o in data["options"]] == ["keep all (all distinct)", "image 1", "image 2"]
    spec = kinds.get_kind("dedup-review")
    kinds.validate_config(kinds.render_config("dedup-review"), example=data)
    assert spec.parse(spec.result_for("keep:2"))["details"]["keep"] == [2]


def test_entity_and_translation_items_from_files(project, tmp_path):
    f = tmp_path / "ents.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in [
        {"entity": "sushi", "country": "JP", "category": "food", "gold": "local"},
        {"entity": "lasagna", "country": "JP", "category": "food"}]), encoding="utf-8")
    ents = items_mod.build_items(project, "entity", source=f)
    assert [e["gold"] for e in ents] == [{"label": "local"}, None] and ents[0]["language"] == "ja"
    c = tmp_path / "tr.csv"
    c.write_text("source,translation,language,gold\na photo of rice,ご飯の写真,ja,5\n", encoding="utf-8")
    tr = items_mod.build_items(project, "translation", source=c)
    assert tr[0]["gold"] == {"value": 5.0} and tr[0]["item_key"].startswith("translation:")
    with pytest.raises(CulturaError, match="give a source file"):
        items_mod.build_items(project, "entity")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"entity": "x"\n', encoding="utf-8")
    with pytest.raises(CulturaError, match="bad.jsonl: line 1 is not JSON"):
        items_mod.build_items(project, "entity", source=bad)


def _annotator(db, name, country=None, languages=()):
    db["annotators"].insert({"name": name, "email": f"{name}@x.org", "ls_user_id": None, "country": country,
                             "languages": dumps(list(languages)), "role": "annotator", "active": 1,
                             "created_at": now()})
    r = next(db["annotators"].rows_where("name = ?", [name]))
    r["languages"] = list(languages)
    return r


def _stored_items(db, campaign, items):
    db["annotation_items"].insert_all([{"campaign_id": campaign["id"], "item_key": it["item_key"], "kind":
                                        campaign["kind"], "payload": dumps(it["payload"]), "sha256": it.get("sha256"),
                                        "country": it.get("country"), "language": it.get("language"),
                                        "gold": dumps(it["gold"]) if it.get("gold") else None, "created_at": now()}
                                       for it in items], ignore=True)
    return [dict(r) for r in db["annotation_items"].rows_where("campaign_id = ?", [campaign["id"]], order_by="id")]


def test_assignment_is_balanced_with_overlap_and_idempotent(project):
    db = project.db
    add_images(project, "rice", "JP", 9)
    people = [_annotator(db, n) for n in ("ann", "bob", "cat")]
    camp = push_mod.ensure_campaign(db, "filter", "filter", 2, {})
    stored = _stored_items(db, camp, items_mod.build_items(project, "filter"))
    res = assign(db, camp, stored, people, overlap=2, gold_keys=set())
    assert res["assignments"] == 18 and res["under_assigned"] == 0
    loads = dict(db.execute("SELECT annotator_id, COUNT(*) FROM assignments GROUP BY 1").fetchall())
    assert sorted(loads.values()) == [6, 6, 6]
    per_item = {r[0] for r in db.execute("SELECT COUNT(*) FROM assignments GROUP BY item_id").fetchall()}
    assert per_item == {2}
    assert assign(db, camp, stored, people, overlap=2, gold_keys=set())["assignments"] == 0
    # one project per annotator
    assert db["campaign_projects"].count == 3


def test_native_speaker_constraints_and_gold_for_everyone(project):
    db = project.db
    add_images(project, "rice", "JP", 2)
    jp = _annotator(db, "aiko", "JP", ["ja"])
    us = _annotator(db, "ted", "US", ["en"])
    camp = push_mod.ensure_campaign(db, "relevance", "relevance", 1, {})
    stored = _stored_items(db, camp, items_mod.build_items(project, "relevance", other_countries=3))
    assign(db, camp, stored, [jp, us], overlap=1, gold_keys=set())
    rows = db.execute("SELECT i.country, an.country FROM assignments a JOIN annotation_items i ON i.id = a.item_id "
                      "JOIN annotators an ON an.id = a.annotator_id").fetchall()
    assert rows and all(ic == ac for ic, ac in rows)  # relevance for X only goes to annotators from X
    camp2 = push_mod.ensure_campaign(db, "ent", "entity", 1, {})
    ents = [{"item_key": f"entity:{i}", "payload": {}, "language": "ja", "country": "JP",
             "gold": {"label": "local"} if i == 0 else None} for i in range(3)]
    stored = _stored_items(db, camp2, ents)
    assign(db, camp2, stored, [jp, us], overlap=1, gold_keys={"entity:0"})
    who = db.execute("SELECT an.name FROM assignments a JOIN annotators an ON an.id = a.annotator_id JOIN "
                     "annotation_items i ON i.id = a.item_id WHERE i.campaign_id = ?", [camp2["id"]]).fetchall()
    assert {w[0] for w in who} == {"aiko"}  # ted speaks no Japanese


def test_projects_split_before_the_task_limit(project):
    db = project.db
    add_images(project, "rice", "JP", 5)
    ann = _annotator(db, "ann")
    camp = push_mod.ensure_campaign(db, "filter", "filter", 1, {})
    stored = _stored_items(db, camp, items_mod.build_items(project, "filter"))
    assign(db, camp, stored, [ann], overlap=1, gold_keys=set(), max_tasks=2)
    parts = [r[0] for r in db.execute("SELECT COUNT(*) FROM assignments GROUP BY project_id ORDER BY project_id")]
    assert parts == [2, 2, 1]


def test_decision_rules_and_item_agreement():
    assert decide.majority(["keep", "keep", "remove"]) == "keep"
    assert decide.majority(["keep", "remove"]) is None
    assert decide.unanimity(["a", "a"]) == "a" and decide.unanimity(["a", "b"]) is None
    assert decide.median([1, 4, 5]) == 4.0 and decide.mean([1, 2]) == 1.5
    assert decide.item_agreement([3, 4], "ordinal") == 0.75
    assert decide.item_agreement(["a", "a", "b"], "nominal") == pytest.approx(2 / 3)


def test_record_decision_supersedes_and_is_idempotent(project):
    db = project.db
    row = {"kind": "filter", "item_key": "filter:x", "label": "keep", "value": None, "rule": "majority",
           "n_annotations": 2}
    assert decide.record_decision(db, row) and not decide.record_decision(db, row)
    assert decide.record_decision(db, {**row, "label": "remove", "rule": "adjudicated"})
    rows = list(db["decisions"].rows_where(order_by="id"))
    assert [(r["label"], r["superseded"]) for r in rows] == [("keep", 1), ("remove", 0)]


def test_secrets_file_is_private_and_connect_needs_a_server(project, monkeypatch):
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    with pytest.raises(server.LabelStudioError, match="server start"):
        server.connect(project)
    # keys that no test data contains: a used key is scrubbed process-wide from then on
    first, second = "ls-test-key-k1-" + "0123456789" * 3, "ls-test-key-x2-" + "9876543210" * 3
    p = server.write_secrets(project, {"url": "http://127.0.0.1:9", "api_key": first})
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    assert first not in repr(server.connect(project, check=False))
    port = server.free_port()
    server.use_server(project, f"http://127.0.0.1:{port}", second)
    with pytest.raises(server.LabelStudioError, match="does not answer"):
        server.connect(project)
    # nothing secret in the database
    dump = "\n".join(project.db.conn.iterdump())
    assert second not in dump and first not in dump


def test_missing_executable_is_explained(project, monkeypatch):
    monkeypatch.setenv("LABEL_STUDIO_BIN", "/nonexistent/label-studio")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(server.Path, "is_file", lambda self: False)
    with pytest.raises(server.LabelStudioError, match="LABEL_STUDIO_BIN"):
        server.find_executable(project)


def test_every_annotate_command_has_help():
    from cultura.cli import cli

    group = cli.commands["annotate"]

    def walk(cmd, path):
        assert (cmd.help or "").strip(), f"{path} has no help"
        for p in cmd.params:
            if p.param_type_name == "option":
                assert p.help, f"{path} {p.name} has no help"
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, f"{path} {name}")
    walk(group, "annotate")
    r = CliRunner().invoke(cli, ["annotate", "push", "--help"])
    assert r.exit_code == 0 and "--overlap" in r.output


def test_agreement_status_and_adjudicate_cli_offline(project):
    """Annotations already pulled: agreement, status and adjudication need no Label Studio."""
    db = project.db
    shas = add_images(project, "rice", "JP", 4)
    people = [_annotator(db, n) for n in ("ann", "bob")]
    camp = push_mod.ensure_campaign(db, "filter", "filter", 2, {})
    stored = _stored_items(db, camp, items_mod.build_items(project, "filter"))
    assign(db, camp, stored, people, overlap=2, gold_keys=set())
    labels = {("ann", 0): "keep", ("bob", 0): "keep", ("ann", 1): "remove", ("bob", 1): "remove",
              ("ann", 2): "keep", ("bob", 2): "remove", ("ann", 3): "keep", ("bob", 3): "keep"}
    by_id = {p["id"]: p["name"] for p in people}
    for n, a in enumerate(db["assignments"].rows_where(order_by="id")):
        idx = [s["id"] for s in stored].index(a["item_id"])
        name = by_id[a["annotator_id"]]
        db["assignments"].update(a["id"], {"ls_task_id": 100 + n, "status": "pushed"})
        db["annotations"].insert({"assignment_id": a["id"], "item_id": a["item_id"], "annotator_id": a["annotator_id"],
                                  "ls_project_id": 1, "ls_task_id": 100 + n, "ls_annotation_id": n + 1, "version": 1,
                                  "result": "[]", "label": labels[(name, idx)], "lead_time": 5.0 + n,
                                  "ls_updated_at": f"2026-01-01T00:00:{n:02d}", "pulled_at": now()})
    runner = CliRunner()
    from cultura.cli import cli
    base = ["--project", str(project.root), "annotate"]
    r = runner.invoke(cli, base + ["agreement", "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)[0]
    assert rep["percent_agreement"] == 0.75 and rep["pairwise_kappa"][0]["n_common"] == 4
    assert runner.invoke(cli, base + ["agreement"]).exit_code == 0
    r = runner.invoke(cli, base + ["status", "--json"])
    assert {x["annotator"]: x["done"] for x in json.loads(r.stdout)} == {"ann": 4, "bob": 4}
    r = runner.invoke(cli, base + ["adjudicate", "--json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)[0]
    assert (s["decided"], s["disagreements"], s["unresolved"]) == (3, 1, 1) and "adjudicator" in s["note"]
    dec = {d["sha256"]: d["label"] for d in db["decisions"].rows_where("superseded = 0")}
    assert dec == {stored[i]["sha256"]: lab for i, lab in [(0, "keep"), (1, "remove"), (3, "keep")]}
    r = runner.invoke(cli, base + ["adjudicate", "--rule", "median"])
    assert r.exit_code == 1 and "does not fit" in r.output
    assert set(shas) >= set(dec)


def test_text_items_come_from_the_project_tables(project):
    """Without --from, entity items are the entity table's candidates and translation items are the
    LLM-written benchmark queries beside their English counterpart."""
    import pytest

    from cultura.annotate.items import build_items
    from cultura.curate.concepts import add_concepts
    from cultura.db import now
    from cultura.errors import CulturaError
    from cultura.curate.entities import add_entities

    with pytest.raises(CulturaError, match="cultura build queries"):
        build_items(project, "translation")
    add_concepts(project, ["bus"])
    for cc, lang, text, src in [("US", "en", "Show me a bus", "llm:m"), ("JP", "ja", "バスを見せて", "llm:m"),
                                ("TH", "th", "รถเมล์", "term")]:
        project.db["benchmark_queries"].insert({"concept_id": 1, "country": cc, "language": lang,
                                                "variant": "task" if src != "term" else "short", "text": text,
                                                "source": src, "status": "ok", "updated_at": now()})
    items = build_items(project, "translation")
    assert [(i["item_key"], i["payload"]["source"], i["payload"]["translation"]) for i in items] == [
        ("translation:bq-2", "Show me a bus", "バスを見せて")]
    add_entities(project, [{"language": "ja", "side": "local", "type": "food", "native": "寿司", "english": "sushi",
                            "status": "candidate"}], source="test")
    ents = build_items(project, "entity")
    assert len(ents) == 1 and ents[0]["item_key"].startswith("entity:ent-") and ents[0]["country"] == "JP"


def test_image_url_never_doubles_blobs():
    p = {"path": "blobs/ab/x.jpg", "url": "file:///tmp/x.jpg"}
    assert image_url(p, "http://127.0.0.1:8081") == "http://127.0.0.1:8081/blobs/ab/x.jpg"
    assert image_url(p, "http://127.0.0.1:8081/blobs/") == "http://127.0.0.1:8081/blobs/ab/x.jpg"
    assert image_url(p, None) == "file:///tmp/x.jpg"


def test_push_refuses_urls_a_browser_cannot_load():
    items = [{"payload": {"path": "blobs/ab/x.jpg", "url": "file:///tmp/x.jpg"}}]
    with pytest.raises(CulturaError, match="serve-images.*image_base_url"):
        check_image_urls(items, None)
    with pytest.raises(CulturaError, match="not an http"):
        check_image_urls(items, "file:///srv/blobs")
    check_image_urls(items, "http://127.0.0.1:8081")  # fine
    dedup = [{"payload": {"members": [{"path": "blobs/a.jpg", "url": "https://ex.org/a.jpg"},
                                      {"path": "blobs/b.jpg", "url": None}]}}]
    with pytest.raises(CulturaError, match="1 of 2"):
        check_image_urls(dedup, None)


def test_dedup_review_is_one_item_per_duplicate_set(project):
    w = make_world(project, concepts=("bus",), per_cell=3)
    a, b, c = w["images"][("bus", "JP")]
    c1 = dup_cluster(project, [a, b])       # say, pHash
    c2 = dup_cluster(project, [a, b, c])    # and dHash over the same copies
    [item] = dedup_items(project)
    assert item["payload"]["cluster_ids"] == [c1, c2]
    assert {m["sha256"] for m in item["payload"]["members"]} == {a, b, c}
