"""Blind by construction, on the real Label Studio: annotators log in with their OWN credentials (no admin
token), answer through the HTTP API, and see neither another annotator's projects, tasks nor annotations —
by listing or by typing ids by hand."""
from __future__ import annotations

import json
import time
import uuid

import pytest
from click.testing import CliRunner

from cultura.annotate import annotators as ann_mod, decide, pull as pull_mod, push as push_mod
from cultura.annotate.accounts import read_tokens, tokens_path
from cultura.annotate.kinds import get_kind
from cultura.annotate.server import use_server
from cultura.cli import cli
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


def test_annotators_are_blind_to_each_other(blindproject, labelstudio):
    p, db = blindproject, blindproject.db
    add_images(p, "rice", "JP", 6)
    for n in ("ann", "bob", "cat"):
        assert ann_mod.add_annotator(p, n, email=_email(p, n), country="JP")["blind"] is True
    # tokens are secrets: 0600 file, never in the database
    assert oct(tokens_path(p).stat().st_mode & 0o777) == "0o600"
    toks = read_tokens(p)
    assert len(toks) == 3 and not any(t in json.dumps(list(db["annotators"].rows)) for t in toks.values())

    t0 = time.monotonic()
    res = CliRunner().invoke(cli, ["--project", str(p.root), "annotate", "annotators", "password", "ann",
                                   "--password", "pw-ann-123456", "--json"])
    assert res.exit_code == 0, res.output
    assert time.monotonic() - t0 < 60   # was ~30 s of Label Studio's CLI start-up; guards a hang only
    for n in ("bob", "cat"):
        ann_mod.set_password(p, n, f"pw-{n}-123456")

    push = push_mod.push(p, "filter", overlap=2)
    assert push["tasks_created"] == 12
    mine = {r["name"]: [] for r in db["annotators"].rows}
    for name, ls_pid in db.execute("SELECT an.name, p.ls_project_id FROM campaign_projects p JOIN annotators an "
                                   "ON an.id = p.annotator_id"):
        mine[name].append(ls_pid)

    sessions = {n: AnnotatorSession.login(labelstudio.url, _email(p, n), f"pw-{n}-123456")
                for n in ("ann", "bob", "cat")}
    spec = get_kind("filter")
    answered = {}
    for n, s in sessions.items():
        assert s.whoami()["email"] == _email(p, n)
        # listing: only their own project(s) and tasks; the user list holds only themselves
        assert sorted(x["id"] for x in s.projects()) == sorted(mine[n])
        tasks = s.my_tasks()
        assert len(tasks) == 4
        # the user list names only themselves (members fenced out of their organization show as 'Deleted')
        users = json.dumps(s.get("/api/users").json())
        assert _email(p, n) in users and not any(_email(p, o) in users or f'"{o}"' in users
                                                 for o in sessions if o != n)
        answered[n] = [s.answer(t["id"], spec.result_for("keep" if i % 2 else "remove"), 3.0 + i)
                       for i, t in enumerate(tasks)]

    # direct access typed by hand: every other annotator's project, task and annotation is refused
    for n, s in sessions.items():
        for other in set(sessions) - {n}:
            for pid in mine[other]:
                assert s.try_get(f"/api/projects/{pid}") in (403, 404)
                assert s.try_get(f"/api/projects/{pid}/export", exportType="JSON") in (403, 404)
                assert s.tasks(pid) == []
            for a in answered[other]:
                assert s.try_get(f"/api/tasks/{a['task']}") in (403, 404)
                assert s.try_get(f"/api/annotations/{a['id']}") in (403, 404)
                assert s.try_get(f"/api/tasks/{a['task']}/annotations") in (403, 404)
        # and their own stay reachable (the refusals above are not a broken session)
        a = answered[n][0]
        assert s.try_get(f"/api/annotations/{a['id']}") == 200
        # their own token works the same way as their session
        assert s.token() == read_tokens(p)[_email(p, n)]

    got = pull_mod.pull(p)
    assert got["new"] == 12
    by = dict(db.execute("SELECT an.name, COUNT(*) FROM annotations x JOIN annotators an ON an.id = x.annotator_id "
                         "GROUP BY 1").fetchall())
    assert by == {"ann": 4, "bob": 4, "cat": 4}

    # disagreements go to the adjudicator's own blind project, which shows the earlier labels (by design);
    # the annotators see neither it nor its tasks
    assert ann_mod.add_annotator(p, "judy", email=_email(p, "judy"), role="adjudicator")["blind"] is True
    ann_mod.set_password(p, "judy", "pw-judy-123456")
    summ, = decide.adjudicate(p)
    assert summ["sent_to_adjudication"] == summ["disagreements"] > 0 and summ["adjudicator"] == "judy"
    judy = AnnotatorSession.login(labelstudio.url, _email(p, "judy"), "pw-judy-123456")
    (adj_project,) = judy.projects()
    adj_tasks = judy.tasks(adj_project["id"])
    assert len(adj_tasks) == summ["disagreements"]
    assert all("keep" in t["data"]["earlier"] and "remove" in t["data"]["earlier"] for t in adj_tasks)
    for s in sessions.values():
        assert adj_project["id"] not in [x["id"] for x in s.projects()]
        assert s.try_get(f"/api/projects/{adj_project['id']}") in (403, 404)
        assert s.try_get(f"/api/tasks/{adj_tasks[0]['id']}") in (403, 404)
    judy.close()

    # the annotator report, through the CLI, on what the annotators answered through the API
    res = CliRunner().invoke(cli, ["--project", str(p.root), "annotate", "annotators", "report", "--json"])
    assert res.exit_code == 0, res.output
    (camp,) = json.loads(res.output)
    rows = {a["annotator"]: a for a in camp["annotators"]}
    assert {n: (a["done"], a["assigned"]) for n, a in rows.items()} == {n: (4, 4) for n in ("ann", "bob", "cat")}
    assert rows["ann"]["median_seconds"] == pytest.approx(4.5)   # lead times 3, 4, 5, 6 s
    assert camp["progress"] == {**camp["progress"], "items": 6, "complete": 6, "waiting": 0}
    assert sum(pr["shared_items"] for pr in camp["pairs"]) == 6
    for s in sessions.values():
        s.close()


def test_projects_made_before_an_annotator_became_blind_stay_reachable(project, labelstudio):
    """Upgrading: an annotator created in the admin's organization (older cultura, or a server recorded without
    its data dir) keeps their old project pulled with the admin's token once they become blind; new campaigns
    go to their own organization."""
    p, db = project, project.db
    tag = uuid.uuid4().hex[:6]
    email = f"old.{tag}@example.org"
    use_server(p, labelstudio.url, labelstudio.api_key)            # no data dir: not blind
    add_images(p, "tea", "JP", 2)
    assert ann_mod.add_annotator(p, "old", email=email, country="JP")["blind"] is False
    push_mod.push(p, "filter", overlap=1, batch="before")
    client = labelstudio.connection().client
    (task, uid), = db.execute("SELECT a.ls_task_id, an.ls_user_id FROM assignments a JOIN annotators an ON "
                              "an.id = a.annotator_id LIMIT 1").fetchall()
    client.annotations.create(task, result=get_kind("filter").result_for("keep"), completed_by=uid, lead_time=2.0)

    use_server(p, labelstudio.url, labelstudio.api_key, data_dir=labelstudio.data_dir)
    assert ann_mod.add_annotator(p, "old", email=email, country="JP")["blind"] is True
    assert pull_mod.pull(p)["new"] == 1                              # the old project, through the admin
    add_images(p, "tea", "JP", 1, seed=9)
    push_mod.push(p, "filter", overlap=1, batch="after")
    ann_mod.set_password(p, "old", "pw-old-123456")
    s = AnnotatorSession.login(labelstudio.url, email, "pw-old-123456")
    mine = [x["id"] for x in s.projects()]
    new = [r["ls_project_id"] for r in db["campaign_projects"].rows if r["ls_as"] == "annotator"]
    assert len(new) == 1 and mine == new
    assert pull_mod.pull(p)["missing_projects"] == []
    s.close()
