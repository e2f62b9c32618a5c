"""Simulated answers written in bulk and pulls that fetch only what changed, on real Label Studio servers.

The bulk writer (Label Studio's own models, one process per annotator's server) must give what one API request
per answer gives: the same label per image and annotator for the same seed, the same fields pull reads. A pull
after a pull fetches no annotation body; an edited or deleted answer is still seen."""
from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner

from cultura.annotate import annotators as ann_mod, pull as pull_mod, push as push_mod, report
from cultura.annotate.kinds import get_kind
from cultura.annotate.people import person_connection
from cultura.annotate.server import use_server
from cultura.annotate.simulate import simulate_annotations
import cultura
from cultura.cli import cli
from tests.fakes.labelstudio import add_images, labelstudio, stop_annotator_servers  # noqa: F401

pytestmark = pytest.mark.labelstudio

NAMES = ("ann", "bob", "cat")


def _team(p, tag: str) -> None:
    add_images(p, "rice", "JP", 10)
    for n in NAMES:
        ann_mod.add_annotator(p, n, email=f"{n}.{tag}@example.org", country="JP")
    assert push_mod.push(p, "filter", overlap=2)["tasks_created"] == 20


def _labels(p) -> dict:
    """(image, annotator) → (label, lead time, cancelled) of every current pulled answer."""
    rows = p.db.execute(
        "SELECT i.item_key, an.name, a.label, a.lead_time, a.was_cancelled, a.ls_created_at IS NOT NULL "
        "FROM annotations a JOIN annotation_items i ON i.id = a.item_id JOIN annotators an ON an.id = a.annotator_id "
        "WHERE a.is_current = 1").fetchall()
    return {(k, n): (lab, lead, canc, stamped) for k, n, lab, lead, canc, stamped in rows}


def _label_studio_books(p) -> tuple[dict, dict]:
    """What Label Studio itself keeps, read through its API: per (image, annotator) the task's answer counters,
    ``is_labeled`` and whether ``updated_at`` moved past ``created_at``; and every project summary's
    annotation and label counts, summed."""
    from collections import Counter

    from cultura.annotate.accounts import connection_for
    from cultura.annotate.server import connect

    admin = connect(p)
    tasks, summary = {}, Counter()
    for cp in p.db["campaign_projects"].rows:
        conn = connection_for(p, p.db["annotators"].get(cp["annotator_id"]), admin, cp)
        got = conn.get("/api/tasks", project=cp["ls_project_id"], page_size=1000, fields="all")
        by_id = {t["id"]: t for t in got.json()["tasks"]}
        for key, name, task_id in p.db.execute(
                "SELECT i.item_key, an.name, a.ls_task_id FROM assignments a JOIN annotation_items i ON "
                "i.id = a.item_id JOIN annotators an ON an.id = a.annotator_id WHERE a.project_id = ?",
                [cp["id"]]).fetchall():
            t = by_id[task_id]
            tasks[(key, name)] = (t["total_annotations"], t["cancelled_annotations"], t["is_labeled"],
                                  t["updated_at"] > t["created_at"])
        books = conn.get(f"/api/projects/{cp['ls_project_id']}/summary/").json()
        summary.update({("annotations", k): v for k, v in books["created_annotations"].items()})
        summary.update({("labels", f, lab): v for f, labs in books["created_labels"].items()
                        for lab, v in labs.items()})
    return tasks, dict(summary)


def _snapshot(db) -> list:
    return db.execute("SELECT id, assignment_id, annotator_id, ls_annotation_id, version, result, label, "
                      "is_current, deleted_at FROM annotations ORDER BY id").fetchall()


def _project(tmp_path, fresh, labelstudio, name: str, data_dir):
    import shutil

    from cultura.project import Project

    shutil.copytree(fresh, tmp_path / name)
    p = Project(tmp_path / name)
    use_server(p, labelstudio.url, labelstudio.api_key, data_dir=data_dir)
    _team(p, uuid.uuid4().hex[:6])
    return p


@pytest.fixture
def two_projects(tmp_path, _fresh_project, labelstudio):
    """The same campaign twice: on the shared server cultura does not run (answers go one API request each) and
    with a Label Studio server per annotator (answers go in bulk)."""
    made = []
    try:
        for name, data_dir in (("api", None), ("bulk", labelstudio.data_dir)):
            made.append(_project(tmp_path, _fresh_project, labelstudio, name, data_dir))
        yield made
    finally:
        for p in made:
            stop_annotator_servers(p)
            p.close()


@pytest.fixture
def bulk_project(tmp_path, _fresh_project, labelstudio):
    """The campaign with a Label Studio server per annotator."""
    p = _project(tmp_path, _fresh_project, labelstudio, "bulk", labelstudio.data_dir)
    try:
        yield p
    finally:
        stop_annotator_servers(p)
        p.close()


def test_bulk_simulated_answers_equal_the_ones_sent_one_request_each(two_projects):
    by_api, bulk = two_projects
    res = cultura.open(by_api.root).annotate.simulate("filter", disagreement=0.4, seed=7)
    assert res["simulated_annotations"] == 20 and res["bulk_servers"] == 0
    events = []
    out = simulate_annotations(bulk, "filter", disagreement=0.4, seed=7, progress=events.append)
    assert out["simulated_annotations"] == 20 and out["bulk_servers"] == 3   # one writer per annotator's server
    sim = [e for e in events if e.stage == "annotate simulate"]
    assert sim[-1].finished and sim[-1].done == sim[-1].total == 20
    assert {e.info["campaign"] for e in sim} == {"filter"}
    pull_mod.pull(by_api)
    pull_mod.pull(bulk)
    a, b = _labels(by_api), _labels(bulk)
    assert len(a) == 20 and a == b          # same label, lead time and fields per image and annotator
    assert {v[0] for v in a.values()} == {"keep", "remove"}    # the seed's disagreements are there
    ra, rb = report.agreement_report(by_api, "filter")[0], report.agreement_report(bulk, "filter")[0]
    def work(r):
        return [{k: v for k, v in w.items() if k != "last_activity"} for w in r["workload"]]   # a clock time
    assert ra["percent_agreement"] == rb["percent_agreement"] and work(ra) == work(rb)
    # Label Studio's own books agree: every task's counters and is_labeled, every project's summary
    (tasks_a, summary_a), (tasks_b, summary_b) = _label_studio_books(by_api), _label_studio_books(bulk)
    assert len(tasks_a) == 20 and tasks_a == tasks_b
    assert set(tasks_b.values()) == {(1, 0, True, True)}
    assert summary_a == summary_b and summary_b[("labels", "decision", "remove")] > 0
    assert sum(v for k, v in summary_b.items() if k[0] == "labels") == 20
    # in each annotator's own Label Studio: their tasks labelled, under their own account
    for n in NAMES:
        row = next(bulk.db["annotators"].rows_where("name = ?", [n]))
        conn = person_connection(bulk, row)
        (proj,) = [pr for pr in conn.client.projects.list()]
        assert proj.num_tasks_with_annotations == proj.task_number > 0
    # answered: a second run answers nothing
    assert simulate_annotations(bulk, "filter", seed=7)["simulated_annotations"] == 0


def test_a_pull_after_a_pull_fetches_no_annotation_and_sees_edits_and_deletions(bulk_project):
    p = bulk_project
    runner = CliRunner()

    def pull(*extra):
        r = runner.invoke(cli, ["--project", str(p.root), "annotate", "pull", *extra, "--json"])
        assert r.exit_code == 0, r.output
        return json.loads(r.output[r.output.index("{"):])

    r = runner.invoke(cli, ["--project", str(p.root), "annotate", "simulate", "filter", "--seed", "1", "--json"])
    assert r.exit_code == 0, r.output
    first = pull()
    assert first["new"] == 20 and first["full_exports"] == 3   # nothing was labelled at simulate's own pull
    before = _snapshot(p.db)
    again = pull()
    assert again["annotations_fetched"] == 0 and again["tasks_fetched"] == 0 and again["full_exports"] == 0
    assert again["new"] == again["versions"] == again["deleted"] == 0
    assert _snapshot(p.db) == before

    # ann changes one answer and deletes another, on her own server
    ann = next(p.db["annotators"].rows_where("name = 'ann'"))
    conn = person_connection(p, ann)
    mine = p.db.execute("SELECT ls_annotation_id, label FROM annotations WHERE annotator_id = ? AND is_current = 1 "
                        "ORDER BY id", [ann["id"]]).fetchall()
    (edit_id, label), (drop_id, _) = mine[0], mine[1]
    other = "remove" if label == "keep" else "keep"
    conn.client.annotations.update(edit_id, result=get_kind("filter").result_for(other))
    conn.client.annotations.delete(drop_id)
    seen = pull()
    assert seen["versions"] == 1 and seen["deleted"] == 1 and seen["new"] == 0
    assert seen["annotations_fetched"] == 1 and seen["full_exports"] == 0   # the edited task only
    cur = dict(p.db.execute("SELECT ls_annotation_id, label FROM annotations WHERE annotator_id = ? AND "
                            "is_current = 1", [ann["id"]]).fetchall())
    assert cur[edit_id] == other and drop_id not in cur
    assert pull()["annotations_fetched"] == 0

    # --full re-exports every project and finds nothing new
    full = pull("--full")
    assert full["full_exports"] == 3 and full["annotations_fetched"] == 19
    assert full["new"] == full["versions"] == full["deleted"] == 0
    assert cultura.open(p.root).annotate.pull(full=True)["full_exports"] == 3
