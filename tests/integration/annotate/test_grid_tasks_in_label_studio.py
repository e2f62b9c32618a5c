"""Grid tasks and adaptive overlap on the real Label Studio: a grid answer is pulled as the per-image answers of
one-image tasks (same labels, agreement and Dawid-Skene), annotators stay blind in grids, and later pushes of an
adaptive campaign ask one more opinion exactly for the items that are not sure yet."""
from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections import defaultdict

import pytest

from cultura.annotate import annotators as ann_mod, pull as pull_mod, push as push_mod
from cultura.annotate.aggregate import aggregate
from cultura.annotate.grid import KEYS, grid_kinds, grid_result, per_image_labels
from cultura.annotate.kinds import get_kind
from cultura.annotate.report import agreement_report, campaigns
from cultura.annotate.people import server_row
from cultura.annotate.server import use_server
from cultura.annotate.simulate import simulate_annotations
from tests.fakes.labelstudio import add_images, labelstudio  # noqa: F401
from tests.fakes.ls_annotator import AnnotatorSession

pytestmark = pytest.mark.labelstudio


@pytest.fixture
def blindproject(project, labelstudio):
    use_server(project, labelstudio.url, labelstudio.api_key, data_dir=labelstudio.data_dir)
    project.tag = uuid.uuid4().hex[:6]
    return project


def _email(p, name):
    return f"{name}.{p.tag}@example.org"


def _labels_by_item(db, campaign: str) -> dict[tuple[str, str], str]:
    return {(k, n): lab for k, n, lab in db.execute(
        "SELECT i.item_key, an.name, a.label FROM annotations a JOIN annotation_items i ON i.id = a.item_id "
        "JOIN annotators an ON an.id = a.annotator_id JOIN campaigns c ON c.id = i.campaign_id WHERE c.name = ? "
        "AND a.is_current = 1 AND a.purpose = 'annotate'", [campaign])}


def test_grid_answers_pull_as_per_image_labels_and_adaptive_overlap_asks_only_where_needed(blindproject, labelstudio):
    p, db = blindproject, blindproject.db
    add_images(p, "rice", "JP", 30)
    for n in ("ann", "bob", "cat"):
        assert ann_mod.add_annotator(p, n, email=_email(p, n), country="JP")["blind"] is True
        ann_mod.set_password(p, n, f"pw-{n}-123456")

    first = push_mod.push(p, "filter", batch="grid", overlap=3, grid=12, adaptive=True)
    assert first["assignments"] == 30 and first["adaptive"]["asked_again"] == 0     # one opinion first
    grids = list(db["grid_tasks"].rows)
    assert first["tasks_created"] == len(grids) and all(g["ls_task_id"] for g in grids)
    assert sum(len(json.loads(g["item_keys"])) for g in grids) == 30
    assert push_mod.push(p, "filter", batch="grid", overlap=3)["tasks_created"] == 0           # idempotent

    # blind in grids as in one-image tasks: each annotator lists only the grids of their own project
    mine = defaultdict(set)
    for name, tid in db.execute("SELECT an.name, g.ls_task_id FROM grid_tasks g JOIN campaign_projects p ON "
                                "p.id = g.project_id JOIN annotators an ON an.id = p.annotator_id"):
        mine[name].add(tid)
    # each on a Label Studio server of their own, where only their own grids exist (every route of another's
    # server refusing them is the route test's, tests/integration/annotate/test_blind.py)
    url = {n: server_row(p, next(db["annotators"].rows_where("name = ?", [n]))["id"])["url"] for n in mine}
    sessions = {n: AnnotatorSession.login(url[n], _email(p, n), f"pw-{n}-123456") for n in mine}
    for n, s in sessions.items():
        assert {t["id"] for t in s.my_tasks()} == mine[n]
        for other in set(mine) - {n}:
            with pytest.raises(AssertionError, match="login as"):
                AnnotatorSession.login(url[other], _email(p, n), f"pw-{n}-123456")

    simulate_annotations(p, "grid", disagreement=0.1, seed=3)   # raters right 9 times in 10: none looks unskilled
    pulled = pull_mod.pull(p, campaign="grid")
    assert pulled["new"] == 30 and pulled["unknown_tasks"] == 0
    labels = _labels_by_item(db, "grid")
    assert len(labels) == 30 and set(labels.values()) <= {"keep", "remove"}
    # every stored label is what the grid's own answer says for that cell (read as its annotator reads it)
    for name, s in sessions.items():
        for task in s.my_tasks():
            keys = [task["data"][f"key{i}"] for i in range(12)]
            (a,) = s.get(f"/api/tasks/{task['id']}/annotations").json()
            for k, parsed in per_image_labels("filter", a["result"], keys).items():
                assert labels[(k, name)] == parsed["label"]

    # the simulated truth is "keep": a lone "keep" is sure, a lone "remove" is the rare verdict, confirmed
    removed = {k for (k, _), lab in labels.items() if lab == "remove"}
    assert removed
    again = push_mod.push(p, "filter", batch="grid", overlap=3)
    assert again["adaptive"]["asked_again"] == len(removed) and again["adaptive"]["reasons"] == {
        "rare": len(removed)}, again["adaptive"]
    assert again["adaptive"]["share_of_fixed"] == pytest.approx((30 + len(removed)) / 90)
    simulate_annotations(p, "grid", disagreement=0.0, seed=4)
    pull_mod.pull(p, campaign="grid")
    assert len(_labels_by_item(db, "grid")) == 30 + len(removed)
    third = push_mod.push(p, "filter", batch="grid", overlap=3)    # "keep" against "remove": a third decides
    assert third["adaptive"]["asked_again"] == len(removed) and third["adaptive"]["reasons"] == {
        "disagree": len(removed)}, third["adaptive"]
    simulate_annotations(p, "grid", disagreement=0.0, seed=5)
    pull_mod.pull(p, campaign="grid")
    assert len(_labels_by_item(db, "grid")) == 30 + 2 * len(removed)
    assert push_mod.push(p, "filter", batch="grid", overlap=3)["adaptive"]["asked_again"] == 0   # every item settled


def test_every_grid_kind_renders_a_config_label_studio_accepts(labelstudio):
    from cultura.annotate.grid import example_task, render_grid_config

    client = labelstudio.connection().client
    for kind in grid_kinds():
        pr = client.projects.create(title=f"grid {kind} {uuid.uuid4().hex[:4]}", label_config=render_grid_config(kind, 24))
        r = client.projects.import_tasks(pr.id, request=[example_task(kind, 24)], return_task_ids=True)
        assert len(r.task_ids) == 1
        client.projects.delete(pr.id)
