"""Annotations against a real Label Studio: deletions, other users, second annotations, and push / pull killed
at chosen points or run twice at once."""
from __future__ import annotations

import functools
import uuid

import pytest

from cultura.annotate import annotators as ann_mod, pull as pull_mod, push as push_mod
from cultura.annotate.kinds import get_kind
from cultura.annotate.server import use_server
from cultura.project import Project, init_project
from tests.fakes.labelstudio import add_images, labelstudio  # noqa: F401
from tests.integration.reliability.harness import CRASHED, child_error, query, run_child, start_child, wait_child
from tests.integration.reliability.test_concurrency import _paused, _wait_for

pytestmark = pytest.mark.labelstudio


@pytest.fixture
def ls(tmp_path, labelstudio):  # noqa: F811
    """A closed project wired to the session's Label Studio with two annotators and 4 images; returns
    (root, batch name, client)."""
    p = init_project(tmp_path / "p", countries=["US", "JP"])
    use_server(p, labelstudio.url, labelstudio.api_key)
    tag = uuid.uuid4().hex[:6]
    for n in ("ann", "bob"):
        ann_mod.add_annotator(p, f"{n}{tag}", email=f"{n}.{tag}@example.org", country="JP")
    add_images(p, "rice", "JP", 4, seed=int(tag, 16) % 97)
    p.close()
    return p.root, f"b{tag}", labelstudio.connection().client


def _push_run(batch, p):
    push_mod.push(p, "filter", overlap=2, batch=batch)


def _push(batch):
    return functools.partial(_push_run, batch)


def _pull(p):
    pull_mod.pull(p)


def _ls_projects(client, batch):
    return [pr for pr in client.projects.list() if (pr.title or "").startswith(f"cultura {batch} ")]


def _tasks(root):
    return query(root, "SELECT a.id, a.ls_task_id, an.ls_user_id, i.item_key FROM assignments a JOIN annotators an "
                       "ON an.id = a.annotator_id JOIN annotation_items i ON i.id = a.item_id ORDER BY a.id")


def _annotate(client, task, uid, label):
    return client.annotations.create(task, result=get_kind("filter").result_for(label), completed_by=uid)


def _current(root):
    return query(root, "SELECT ls_task_id, annotator_id, ls_annotation_id, label FROM annotations "
                       "WHERE is_current = 1 ORDER BY 1, 2")


def _ls_task_keys(client, pr):
    return sorted(t.data["item_key"] for t in client.tasks.list(project=pr.id))


def test_push_killed_between_project_creation_and_its_record(ls):
    """Label Studio created the project, cultura died before recording it: the rerun finds it again (no empty
    duplicate project), imports every task once."""
    root, batch, client = ls
    point = ("sql", r"UPDATE \W?campaign_projects\W? SET \W?ls_project_id", 1)
    assert run_child(root, _push(batch), point) == CRASHED
    assert len(_ls_projects(client, batch)) == 1
    assert run_child(root, _push(batch)) == 0, child_error(root)
    prs = _ls_projects(client, batch)
    assert len(prs) == 2                               # one per annotator, none twice
    assert sorted(r[0] for r in query(root, "SELECT ls_project_id FROM campaign_projects")) == \
        sorted(pr.id for pr in prs)
    for pr in prs:
        keys = _ls_task_keys(client, pr)
        assert len(keys) == 4 and len(set(keys)) == 4


def test_push_killed_after_import_before_record(ls):
    root, batch, client = ls
    assert run_child(root, _push(batch), ("after", "cultura.annotate.push:_after_import", 1)) == CRASHED
    assert run_child(root, _push(batch)) == 0, child_error(root)
    assert all(r[1] is not None for r in _tasks(root))
    for pr in _ls_projects(client, batch):
        keys = _ls_task_keys(client, pr)
        assert len(keys) == 4 and len(set(keys)) == 4


def test_two_pushes_at_once(ls):
    """The second push is refused at once, naming the first; the first finishes; every task once."""
    root, batch, client = ls
    reached, go = root.parent / "imported", root.parent / "go"
    a = start_child(root, _paused(_push(batch), "cultura.annotate.push:_after_import", 1, reached, go))
    _wait_for(reached)
    assert run_child(root, _push(batch)) == 1
    err = child_error(root)
    assert f"Another 'cultura annotate push' (process {reached.read_text()}) is running" in err
    go.touch()
    assert wait_child(a) == 0
    assert len(_tasks(root)) == 8 and all(r[1] is not None for r in _tasks(root))
    for pr in _ls_projects(client, batch):
        assert len(_ls_task_keys(client, pr)) == 4


def test_pull_cases_and_pull_killed(ls, labelstudio):  # noqa: F811
    """Deleted in Label Studio -> a deleted version, never current; an annotation by the admin -> recorded under
    the admin; a second annotation by the same annotator -> one current row; pull killed at its insert ->
    the rerun gives the same rows."""
    root, batch, client = ls
    assert run_child(root, _push(batch)) == 0, child_error(root)
    tasks = _tasks(root)
    anns = [_annotate(client, t, uid, "keep") for _, t, uid, _ in tasks]
    assert run_child(root, _pull, ("sql", r"INTO \W?annotations\b", 1)) == CRASHED
    assert query(root, "SELECT count(*) FROM annotations")[0][0] == 0
    assert run_child(root, _pull) == 0, child_error(root)
    assert len(_current(root)) == 8

    # 1. deleted in Label Studio
    client.annotations.delete(anns[0].id)
    # 2. the admin annotates an annotator's task
    admin = client.users.whoami()
    admin_ann = _annotate(client, tasks[1][1], admin.id, "remove")
    # 3. the same annotator annotates the same task a second time
    second = _annotate(client, tasks[2][1], tasks[2][2], "remove")
    assert run_child(root, _pull) == 0, child_error(root)

    deleted = query(root, "SELECT version, is_current, deleted_at IS NOT NULL FROM annotations "
                          "WHERE ls_annotation_id = ? ORDER BY version", [anns[0].id])
    assert deleted == [(1, 0, 0), (2, 0, 1)]
    by_admin = query(root, "SELECT an.email, an.role, an.active, a.is_current FROM annotations a JOIN annotators an "
                           "ON an.id = a.annotator_id WHERE a.ls_annotation_id = ?", [admin_ann.id])
    assert by_admin == [(admin.email, "external", 0, 1)]
    mine = query(root, "SELECT ls_annotation_id, is_current FROM annotations WHERE ls_task_id = ? AND "
                       "completed_by = ? ORDER BY ls_annotation_id", [tasks[2][1], tasks[2][2]])
    assert mine == [(anns[2].id, 0), (second.id, 1)]
    current = _current(root)
    assert len(current) == 8 and len({(t, a) for t, a, *_ in current}) == 8   # 8 - deleted + admin
    # pulling again changes nothing
    n = query(root, "SELECT count(*) FROM annotations")[0][0]
    assert run_child(root, _pull) == 0 and query(root, "SELECT count(*) FROM annotations")[0][0] == n
    p = Project(root)
    try:
        assert pull_mod.pull(p)["deleted"] == 0
    finally:
        p.close()
