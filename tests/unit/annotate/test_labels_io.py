"""export-labels / import-labels through the CLI: crowd-kit's columns, CSV and Parquet; a Label Studio JSON
export made elsewhere matched by item_key and e-mail, unknown tasks recorded as rejected rows, idempotent."""
from __future__ import annotations

import json

import pandas as pd
from click.testing import CliRunner

from cultura.annotate.kinds import get_kind
from cultura.cli import cli
from tests.fakes.crowd_world import plant_campaign


def _run(p, *args, ok=True):
    res = CliRunner().invoke(cli, ["--project", str(p.root), *args])
    if ok:
        assert res.exit_code == 0, res.output
    return res


def test_export_csv_and_parquet_hold_the_same_table(project, tmp_path):
    plant_campaign(project, "filter", workers={"ana": 0.9, "ben": 0.8}, n_items=10, n_gold=2)
    s = json.loads(_run(project, "annotate", "export-labels", "--out", str(tmp_path / "l.csv"), "--json").output)
    assert s["rows"] == 20 and s["tasks"] == 10 and s["workers"] == 2
    _run(project, "annotate", "export-labels", "--out", str(tmp_path / "l.parquet"))
    a = pd.read_csv(tmp_path / "l.csv", dtype={"label": str, "gold": str})
    b = pd.read_parquet(tmp_path / "l.parquet")
    assert list(a.columns) == ["task", "worker", "label", "value", "time", "gold", "campaign"]
    assert a[["task", "worker", "label"]].equals(b[["task", "worker", "label"]])
    assert a["gold"].notna().sum() == 4 and (a["time"] > 0).all()
    bad = _run(project, "annotate", "export-labels", "--out", str(tmp_path / "l.xlsx"), ok=False)
    assert bad.exit_code != 0 and ".csv or .parquet" in bad.output


def _ls_export(keys, spec, who):
    """The shape of Label Studio's Export > JSON: tasks with data and annotations (completed_by expanded)."""
    tasks = []
    aid = 100
    for i, k in enumerate(keys):
        anns = []
        for email, label in who:
            aid += 1
            anns.append({"id": aid, "completed_by": {"id": 7, "email": email, "first_name": "", "last_name": ""},
                         "result": spec.result_for(label), "was_cancelled": False, "lead_time": 3.5,
                         "created_at": "2099-01-01T10:00:00Z", "updated_at": "2099-01-01T10:00:00Z"})
        tasks.append({"id": 900 + i, "project": 42, "data": {"item_key": k, "image": "http://x/y.png"},
                      "annotations": anns})
    return tasks


def test_import_a_label_studio_export_made_elsewhere(project, tmp_path):
    truth = plant_campaign(project, "filter", workers={"ana": 0.9, "ben": 0.8}, n_items=6)
    spec = get_kind("filter")
    keys = list(truth)[:3]
    tasks = _ls_export(keys + ["filter:not-in-this-project"], spec,
                       [("ana@example.org", "keep"), ("zoe@elsewhere.org", "remove")])
    tasks.append({"id": 999, "project": 42, "data": {"image": "http://x/z.png"}, "annotations": []})
    f = tmp_path / "export.json"
    f.write_text(json.dumps(tasks))
    ana_keeps = project.db.execute("SELECT COUNT(*) FROM annotations a JOIN annotators n ON n.id = a.annotator_id "
                                   "JOIN annotation_items i ON i.id = a.item_id WHERE n.name = 'ana' "
                                   "AND a.label = 'keep' AND i.item_key IN (?, ?, ?)", keys).fetchone()[0]
    s = json.loads(_run(project, "annotate", "import-labels", str(f), "--json").output)
    # an answer ana's current one already gives is held, not imported twice
    assert s["tasks"] == 5 and s["new"] == 6 - ana_keeps and s["unchanged"] == ana_keeps and s["rejected"] == 2
    rej = {r["key"]: r["reason"] for r in project.db["import_rows"].rows_where("status = 'failed'")}
    assert "no item 'filter:not-in-this-project'" in rej["task 903"] and "item_key" in rej["task 999"]
    # zoe is unknown here: an inactive external annotator; ana's imported answer (updated later than her
    # planted one) became her current one
    zoe = next(project.db["annotators"].rows_where("email = 'zoe@elsewhere.org'"))
    assert zoe["role"] == "external" and zoe["active"] == 0
    out = tmp_path / "l.csv"
    _run(project, "annotate", "export-labels", "--out", str(out))
    df = pd.read_csv(out, dtype={"label": str})
    got = df[df.task.isin(keys)].set_index(["task", "worker"])["label"]
    assert all(got[(k, "ana")] == "keep" for k in keys) and all(got[(k, zoe["name"])] == "remove" for k in keys)
    # the same source again: nothing new; an edited answer: a new version
    again = json.loads(_run(project, "annotate", "import-labels", str(f), "--json").output)
    assert again["new"] == 0 and again["unchanged"] == 6
    tasks[0]["annotations"][0]["result"] = spec.result_for("remove")  # ana changes her mind on the first
    tasks[0]["annotations"][0]["updated_at"] = "2099-01-02T10:00:00Z"
    f.write_text(json.dumps(tasks))
    third = json.loads(_run(project, "annotate", "import-labels", str(f), "--json").output)
    assert third["versions"] + third["new"] == 1 and third["unchanged"] == 5


def test_import_refuses_what_is_not_an_export(project, tmp_path):
    f = tmp_path / "x.json"
    f.write_text("{not json")
    res = _run(project, "annotate", "import-labels", str(f), ok=False)
    assert res.exit_code != 0 and "Export" in res.output
    res = _run(project, "annotate", "import-labels", str(tmp_path / "missing.json"), ok=False)
    assert res.exit_code != 0 and "No file" in res.output
