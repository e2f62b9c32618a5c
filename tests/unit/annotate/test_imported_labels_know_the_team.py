"""``annotate import-labels`` of Label Studio 1.23's own JSON export (``"completed_by": <user id>``, no e-mail)
knows the team: the id cultura recorded when it made an annotator's account is that annotator, an id nobody
here has is a rejected row with its reason (never a phantom annotator), an answer outside the campaign's label
set (``maybe``) is a rejected row, and importing the same content again — under any file name — changes
nothing: the labels table, the agreement and the decisions stay as they were."""
from __future__ import annotations

import json

import pandas as pd
from click.testing import CliRunner

import cultura
from cultura.annotate.kinds import get_kind
from cultura.cli import cli
from tests.fakes.crowd_world import plant_campaign


def _run(p, *args, ok=True):
    res = CliRunner().invoke(cli, ["--project", str(p.root), *args])
    if ok:
        assert res.exit_code == 0, res.output
    return res


def _ls_export(db) -> list[dict]:
    """What Label Studio 1.23's Export > JSON writes for the answers already held: one task per item, each
    annotation with ``completed_by`` as the bare user id, annotation ids and timestamps of Label Studio's own."""
    tasks, spec = {}, get_kind("filter")
    for key, item_id, uid, label, aid, upd in db.execute(
            "SELECT i.item_key, i.id, an.ls_user_id, a.label, a.ls_annotation_id, a.ls_updated_at FROM annotations a "
            "JOIN annotation_items i ON i.id = a.item_id JOIN annotators an ON an.id = a.annotator_id "
            "WHERE a.is_current = 1 ORDER BY a.id"):
        t = tasks.setdefault(key, {"id": 7000 + item_id, "project": 12, "data": {"item_key": key},
                                   "annotations": []})
        t["annotations"].append({"id": aid, "completed_by": uid, "result": spec.result_for(label),
                                 "was_cancelled": False, "lead_time": 2.0, "created_at": upd, "updated_at": upd})
    return list(tasks.values())


def _state(p, tmp_path, name):
    _run(p, "annotate", "export-labels", "--out", str(tmp_path / f"{name}.csv"))
    labels = pd.read_csv(tmp_path / f"{name}.csv", dtype={"label": str, "gold": str})
    agreement = json.loads(_run(p, "annotate", "agreement", "--json").output)
    return labels, agreement


def test_label_studio_user_ids_are_the_known_annotators(project, tmp_path):
    truth = plant_campaign(project, "filter", workers={"ana": 0.9, "ben": 0.7, "cy": 0.8}, n_items=12)
    db = project.db
    labels0, agreement0 = _state(project, tmp_path, "before")
    _run(project, "annotate", "adjudicate")
    decisions0 = sorted((d["item_key"], d["label"]) for d in db["decisions"].rows_where("superseded = 0"))
    annotators0 = [r["name"] for r in db["annotators"].rows]

    tasks = _ls_export(db)
    spec = get_kind("filter")
    first, second = list(truth)[:2]
    t1 = next(t for t in tasks if t["data"]["item_key"] == first)
    t1["annotations"].append({"id": 99001, "completed_by": 4242, "result": spec.result_for("keep"),
                              "was_cancelled": False, "created_at": "2099-01-01", "updated_at": "2099-01-01"})
    t2 = next(t for t in tasks if t["data"]["item_key"] == second)
    ana_uid = next(db["annotators"].rows_where("name = 'ana'"))["ls_user_id"]
    t2["annotations"].append({"id": 99002, "completed_by": ana_uid, "result": spec.result_for("maybe"),
                              "was_cancelled": False, "created_at": "2099-01-01", "updated_at": "2099-01-01"})
    f = tmp_path / "project-12-at-2099-01-01.json"
    f.write_text(json.dumps(tasks))
    s = json.loads(_run(project, "annotate", "import-labels", str(f), "--json").output)
    assert (s["new"], s["versions"], s["unchanged"], s["rejected"]) == (0, 0, 36, 2), s
    assert [r["name"] for r in db["annotators"].rows] == annotators0  # no phantom annotator
    rej = {r["key"]: r["reason"] for r in db["import_rows"].rows_where("status = 'failed'")}
    assert "Label Studio user 4242 is none of this project's annotators" in rej["task %d annotation 99001"
                                                                                % t1["id"]]
    assert "'maybe' is outside the filter label set (keep, remove)" in rej["task %d annotation 99002" % t2["id"]]
    labels1, agreement1 = _state(project, tmp_path, "after")
    assert labels1.equals(labels0) and agreement1 == agreement0 and "maybe" not in set(labels1["label"])

    # the same content under another name, and through the front door: nothing new
    g = tmp_path / "renamed.json"
    g.write_text(f.read_text())
    again = cultura.open(project.root).annotate.import_labels(g)
    assert (again["new"], again["versions"], again["rejected"]) == (0, 0, 2)
    _run(project, "annotate", "adjudicate")
    assert sorted((d["item_key"], d["label"]) for d in db["decisions"].rows_where("superseded = 0")) == decisions0
    labels2, agreement2 = _state(project, tmp_path, "again")
    assert labels2.equals(labels0) and agreement2 == agreement0


def test_an_answer_outside_the_label_set_is_refused_for_every_kind():
    from cultura.annotate.kinds import answer_problem, kinds

    for name in kinds():
        spec = get_kind(name)
        assert answer_problem(spec, {"label": "maybe", "value": None, "details": None},
                              {"members": [{}, {}]}) is not None, name
        for label in spec.labels:
            parsed = spec.parse(spec.result_for(label))
            assert answer_problem(spec, parsed, {}) is None, (name, label)
    dedup = get_kind("dedup-review")
    assert answer_problem(dedup, dedup.parse(dedup.result_for("keep:1,2")), {"members": [{}, {}]}) is None
    assert "images 1..2" in answer_problem(dedup, dedup.parse(dedup.result_for("keep:3")), {"members": [{}, {}]})


def test_an_export_of_an_annotators_own_server_is_theirs_when_named(project, tmp_path):
    """Every annotator's own Label Studio numbers its users from 1, so a bare id in such an export names nobody
    until the export says whose server it comes from (--annotator); another id there is refused, never guessed."""
    plant_campaign(project, "filter", workers={"ana": 0.9, "ben": 0.7}, n_items=6)
    db = project.db
    ana, ben = (next(db["annotators"].rows_where("name = ?", [n]))["id"] for n in ("ana", "ben"))
    for aid in (ana, ben):   # both hold user id 2 on their own server, as Label Studio numbers them
        db["annotator_servers"].insert({"annotator_id": aid, "data_dir": f"labelstudio-people/a{aid}", "port": 1,
                                        "url": "http://127.0.0.1:1", "ls_user_id": 2, "created_at": "2026-01-01"})
    tasks = _ls_export(db)
    for t in tasks:   # what ana's server exports: her answers, completed_by her id there
        t["annotations"] = [{**a, "completed_by": 2} for a in t["annotations"]][:1]
    tasks[0]["annotations"].append({**tasks[0]["annotations"][0], "id": 99003, "completed_by": 3})
    f = tmp_path / "ana-server.json"
    f.write_text(json.dumps(tasks))
    before = [r["name"] for r in db["annotators"].rows]
    unnamed = json.loads(_run(project, "annotate", "import-labels", str(f), "--source", "x", "--json").output)
    assert unnamed["new"] == unnamed["versions"] == 0 and unnamed["rejected"] == len(tasks) + 1, unnamed
    assert any("--annotator NAME" in r["reason"] for r in db["import_rows"].rows_where("status = 'failed'"))
    named = json.loads(_run(project, "annotate", "import-labels", str(f), "--annotator", "ana", "--json").output)
    # user 3 is not ana on ana's server; every other answer is recognised as ana's own (what she already said)
    assert (named["rejected"], named["unchanged"], named["new"]) == (1, len(tasks), 0), named
    assert [r["name"] for r in db["annotators"].rows] == before
    res = _run(project, "annotate", "import-labels", str(f), "--annotator", "nobody", ok=False)
    assert res.exit_code != 0 and "--annotator" in res.output and "nobody" in res.output
