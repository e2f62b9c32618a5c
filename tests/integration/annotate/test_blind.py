"""Blind by construction, on real Label Studio servers: every annotator and the adjudicator work on a server of
their own. They log in with their OWN credentials, answer through the HTTP API and in the labelling interface
(headless Chromium); every route of Label Studio — read from its own URL configuration, not a hand list — tried
by annotator B against annotator A's server and objects gives B nothing an anonymous visitor does not get, and
writes nothing; the manager sees every campaign."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
import uuid
from dataclasses import dataclass, field

import httpx
import pytest
from click.testing import CliRunner

from cultura.annotate import annotators as ann_mod, decide, pull as pull_mod, push as push_mod, report
from cultura.annotate.kinds import get_kind
from cultura.annotate.people import label_studio_origins, manager_login, person_connection, server_row, status_all
from cultura.annotate.server import ls_python, use_server
from cultura.cli import cli
from tests.fakes.labelstudio import add_images, labelstudio, stop_annotator_servers  # noqa: F401
from tests.fakes.ls_annotator import AnnotatorSession
from tests.fakes.ls_routes import concrete, routes

pytestmark = pytest.mark.labelstudio

CHROMIUM = "/usr/bin/chromium"
FILTER = get_kind("filter")


@dataclass
class Team:
    project: object
    tag: str
    sessions: dict = field(default_factory=dict)
    objects: dict = field(default_factory=dict)     # annotator A's objects on A's server, by kind
    start_seconds: dict = field(default_factory=dict)

    def email(self, name: str) -> str:
        return f"{name}.{self.tag}@example.org"

    def row(self, name: str) -> dict:
        return next(self.project.db["annotators"].rows_where("name = ?", [name]))

    def server(self, name: str) -> dict:
        return server_row(self.project, self.row(name)["id"])


@pytest.fixture(scope="module")
def team(tmp_path_factory, _fresh_project, labelstudio):
    """Two annotators and an adjudicator, each with a server of their own; a filter campaign of 4 images pushed
    with overlap 2; annotator ann's objects of every kind (an answer, a draft, a prediction, a data-manager view,
    an export) on her server. Every server started here is stopped at the end."""
    from cultura.project import Project

    root = tmp_path_factory.mktemp("blind") / "proj"
    shutil.copytree(_fresh_project, root)
    p = Project(root)
    use_server(p, labelstudio.url, labelstudio.api_key, data_dir=labelstudio.data_dir)
    t = Team(p, uuid.uuid4().hex[:6])
    try:
        add_images(p, "rice", "JP", 4)
        for name, role in (("ann", "annotator"), ("bob", "annotator"), ("judy", "adjudicator")):
            t0 = time.monotonic()
            out = ann_mod.add_annotator(p, name, email=t.email(name), country="JP", role=role)
            t.start_seconds[name] = time.monotonic() - t0
            assert out["blind"] is True and out["server"].startswith("http://127.0.0.1:")
            ann_mod.set_password(p, name, f"pw-{name}-123456")
        assert push_mod.push(p, "filter", overlap=2)["tasks_created"] == 8
        for name in ("ann", "bob"):
            t.sessions[name] = AnnotatorSession.login(t.server(name)["url"], t.email(name), f"pw-{name}-123456")
        ann = t.sessions["ann"]
        (proj,) = ann.projects()
        tasks = ann.tasks(proj["id"])
        answer = ann.answer(tasks[0]["id"], FILTER.result_for("keep"), 3.0)
        draft = ann.post(f"/api/tasks/{tasks[1]['id']}/drafts", {"result": FILTER.result_for("remove"),
                                                                 "lead_time": 1.0})
        assert draft.status_code == 201, draft.text[:300]
        admin = person_connection(p, t.row("ann"))
        pred = admin.client.predictions.create(task=tasks[1]["id"], result=FILTER.result_for("keep"),
                                               model_version="planted")
        view = ann.post("/api/dm/views/", {"project": proj["id"], "data": {"title": "ann's view"}})
        assert view.status_code == 201, view.text[:300]
        export = ann.post(f"/api/projects/{proj['id']}/exports/", {})
        assert export.status_code in (200, 201), export.text[:300]
        me = ann.whoami()
        t.objects = {"project": proj["id"], "task": tasks[0]["id"], "annotation": answer["id"],
                     "draft": draft.json()["id"], "prediction": pred.id, "view": view.json()["id"],
                     "export": export.json()["id"], "user": me["id"], "organization": me["active_organization"],
                     "title": proj["title"], "item_key": tasks[0]["data"]["item_key"]}
        yield t
    finally:
        for s in t.sessions.values():
            s.close()
        stop_annotator_servers(p)
        p.close()


def test_each_annotator_works_on_a_server_of_their_own_and_sees_only_their_work(team):
    p, db = team.project, team.project.db
    servers = {s["annotator"]: s for s in status_all(p)}
    assert set(servers) == {"ann", "bob", "judy"} and all(s["running"] for s in servers.values())
    urls = {s["url"] for s in servers.values()}
    assert len(urls) == 3 and p.root.joinpath(".secrets", "servers.json").stat().st_mode & 0o777 == 0o600
    # the image server answers each annotator's Label Studio (its CORS origins)
    assert urls <= set(label_studio_origins(p))

    for name, s in team.sessions.items():
        assert s.whoami()["email"] == team.email(name)
        # the whole server holds their own campaign project and its 4 tasks, nothing else
        (own,) = s.projects()
        assert len(s.my_tasks()) == 4
        users = json.dumps(s.get("/api/users").json())
        other = "bob" if name == "ann" else "ann"
        assert team.email(other) not in users and other not in users
        for t in s.my_tasks():
            if not t.get("total_annotations"):
                s.answer(t["id"], FILTER.result_for("keep" if name == "ann" or t["id"] % 2 else "remove"), 4.0)
        # their login and their token mean nothing on anyone else's server
        with pytest.raises(AssertionError):
            AnnotatorSession.login(team.server(other)["url"], team.email(name), f"pw-{name}-123456")
        r = httpx.get(team.server(other)["url"] + "/api/projects", headers={"Authorization": f"Token {s.token()}"})
        assert r.status_code == 401

    got = pull_mod.pull(p)
    assert got["new"] == 8 and got["missing_projects"] == []
    by = dict(db.execute("SELECT an.name, COUNT(*) FROM annotations x JOIN annotators an ON an.id = x.annotator_id "
                         "GROUP BY 1").fetchall())
    assert by == {"ann": 4, "bob": 4}

    # disagreements go to the adjudicator's own server: the earlier labels of the items she decides, nothing else
    summ, = decide.adjudicate(p)
    assert summ["sent_to_adjudication"] == summ["disagreements"] > 0 and summ["adjudicator"] == "judy"
    judy = AnnotatorSession.login(team.server("judy")["url"], team.email("judy"), "pw-judy-123456")
    (adj,) = judy.projects()
    adj_tasks = judy.tasks(adj["id"])
    assert len(adj_tasks) == summ["disagreements"]
    assert all("keep" in t["data"]["earlier"] and "remove" in t["data"]["earlier"] for t in adj_tasks)
    judy.close()
    for name in ("ann", "bob"):
        with pytest.raises(AssertionError):
            AnnotatorSession.login(team.server("judy")["url"], team.email(name), f"pw-{name}-123456")

    # the manager logs into any annotator's server as its admin and sees that annotator's campaign projects
    for name in ("ann", "bob", "judy"):
        login = manager_login(p, team.row(name)["id"])
        m = AnnotatorSession.login(login["url"], login["username"], login["password"])
        titles = [x["title"] for x in m.projects()]
        want = [r["title"][:50] for r in db["campaign_projects"].rows_where("annotator_id = ?", [team.row(name)["id"]])]
        assert sorted(titles) == sorted(want) and want
        m.close()
    # and cultura shows every campaign project, each on its annotator's server
    assert {r["annotator"] for r in report.status(p) if r.get("annotator")} >= {"ann", "bob", "judy"}

    res = CliRunner().invoke(cli, ["--project", str(p.root), "annotate", "annotators", "report", "--json"])
    assert res.exit_code == 0, res.output
    (camp,) = json.loads(res.stdout)
    rows = {a["annotator"]: a for a in camp["annotators"]}
    assert {n: (a["done"], a["assigned"]) for n, a in rows.items()} == {"ann": (4, 4), "bob": (4, 4)}
    res = CliRunner().invoke(cli, ["--project", str(p.root), "annotate", "server", "status", "--json"])
    assert res.exit_code == 0, res.output
    st = json.loads(res.stdout)
    assert {s["annotator"] for s in st["annotator_servers"]} == {"ann", "bob", "judy"} and "isolation" not in st
    secrets = json.loads(p.root.joinpath(".secrets", "servers.json").read_text())
    assert not any(v in res.output for e in secrets.values() for v in e.values())


def _state(data_dir) -> dict:
    """Every row of every table of a Label Studio database except the session store (what a request may write)."""
    con = sqlite3.connect(f"file:{data_dir}/label_studio.sqlite3?mode=ro", uri=True)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: sorted(map(repr, con.execute(f'SELECT * FROM "{n}"').fetchall()))
                for n in names if n != "django_session"}
    finally:
        con.close()


def test_every_label_studio_route_refuses_another_annotator(team):
    """Annotator B (bob) with his session and with his token, against annotator A's (ann's) server and objects:
    every route of Label Studio's URL configuration, with GET, POST, PATCH and DELETE, gives B no more than an
    anonymous visitor gets (who gets none of A's data), and nothing on A's server is written or moved."""
    a_srv = team.server("ann")
    a_dir = team.project.root / a_srv["data_dir"]
    every = routes(ls_python(team.project), a_dir)
    api = [r for r in every if "api/" in r["pattern"]]
    assert len(api) > 150          # Label Studio 1.23.2 has 172 API routes; a broken walk finds few
    # every API route with every method; the pages (admin, data manager, sign-up, media) with GET and POST
    tries = sorted({(concrete(r["pattern"], team.objects), m) for r in every
                    for m in (("GET", "POST", "PATCH", "DELETE") if "api/" in r["pattern"] else ("GET", "POST"))})
    b = team.sessions["bob"]
    b_token = b.token()
    marks = [team.email("ann"), team.objects["title"], team.objects["item_key"]]
    before = _state(a_dir)
    # the baseline: a visitor with no account, holding the same CSRF cookie and header as B's browser
    csrf = b.http.cookies.get("csrftoken", "")
    browser = {"X-CSRFToken": csrf, "Referer": a_srv["url"] + "/"}
    anonymous = httpx.Client(base_url=a_srv["url"], timeout=120, cookies={"csrftoken": csrf}, headers=browser)
    clients = {
        "B's session": httpx.Client(base_url=a_srv["url"], timeout=120, cookies=b.http.cookies, headers=browser),
        "B's token": httpx.Client(base_url=a_srv["url"], timeout=120, headers={"Authorization": f"Token {b_token}"}),
    }
    leaks, tried = [], 0
    body = {"project": team.objects["project"], "task": team.objects["task"], "result": [], "title": "B was here",
            "active_organization": 1, "email": "b@evil.invalid", "password": "pw-evil-123456"}
    try:
        for path, method in tries:
            for who, c in clients.items():
                r = c.request(method, path, json=None if method == "GET" else body)
                tried += 1
                if any(m in r.text for m in marks):
                    leaks.append((who, method, path, r.status_code, "A's data in the answer"))
                if r.status_code < 300:   # answered: only what anybody gets (the version, the login page)
                    anon = anonymous.request(method, path, json=None if method == "GET" else body).status_code
                    if anon != r.status_code:
                        leaks.append((who, method, path, r.status_code, f"anonymous gets {anon}"))
        # nobody makes an account on A's server by themselves: the sign-up form, filled in as a browser does
        page = anonymous.get("/user/signup/")
        anonymous.post("/user/signup/", data={"email": "b@evil.invalid", "password": "pw-evil-123456",
                                              "csrfmiddlewaretoken": csrf},
                       headers={"Referer": a_srv["url"] + "/user/signup/"})
        assert page.status_code < 500
    finally:
        anonymous.close()
        for c in clients.values():
            c.close()
    assert leaks == []
    assert tried == 2 * len(tries) and len(tries) > 4 * 150 + 2 * 150
    after = _state(a_dir)
    assert {n for n in before if before[n] != after.get(n)} == set()


def test_the_labelling_interface_works_for_each_annotator(team):
    """In headless Chromium, each annotator logs into their own server, opens a task, labels it, the editor
    autosaves a draft, and they submit; the manager opens the same project on that server."""
    if not os.path.exists(CHROMIUM):
        pytest.skip("chromium is not installed (apt-get install chromium)")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    p = team.project
    add_images(p, "tea", "JP", 1, seed=5)
    # a new campaign: all 5 images, each to both annotators
    assert push_mod.push(p, "filter", overlap=2, batch="ui")["tasks_created"] == 10
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
            "--disable-dev-shm-usage"])
        try:
            for name in ("ann", "bob"):
                srv, s = team.server(name), team.sessions[name]
                ls_pid = next(p.db.execute(
                    "SELECT cp.ls_project_id FROM campaign_projects cp JOIN campaigns c ON c.id = cp.campaign_id "
                    "WHERE c.name = 'ui' AND cp.annotator_id = ?", [team.row(name)["id"]]))[0]
                task = s.tasks(ls_pid)[0]
                ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
                page = ctx.new_page()
                page.goto(f"{srv['url']}/user/login/")
                page.fill("input[name=email]", team.email(name))
                page.fill("input[name=password]", f"pw-{name}-123456")
                page.click("button[type=submit]")
                page.wait_for_url(lambda u: "/user/login" not in u, timeout=600_000)
                page.goto(f"{srv['url']}/projects/{ls_pid}/data?task={task['id']}")
                page.locator("label", has_text="Keep").first.wait_for(state="visible", timeout=600_000)
                page.locator("label", has_text="Keep").first.click()
                _wait(lambda: s.get(f"/api/tasks/{task['id']}/drafts").json(), "the autosaved draft")
                page.locator("button", has_text="Submit").first.click()
                _wait(lambda: s.get(f"/api/tasks/{task['id']}/annotations/").json(), "the submitted annotation")
                ctx.close()
                # the manager's view of the same project on that server
                login = manager_login(p, team.row(name)["id"])
                ctx = browser.new_context()
                page = ctx.new_page()
                page.goto(f"{srv['url']}/user/login/")
                page.fill("input[name=email]", login["username"])
                page.fill("input[name=password]", login["password"])
                page.click("button[type=submit]")
                page.wait_for_url(lambda u: "/user/login" not in u, timeout=600_000)
                page.goto(f"{srv['url']}/projects/{ls_pid}/data")
                page.locator("text=cultura ui").first.wait_for(state="visible", timeout=600_000)
                ctx.close()
        finally:
            browser.close()
    got = pull_mod.pull(p, campaign="ui")
    assert got["new"] == 2


def _wait(probe, what: str, deadline: float = 600) -> None:
    """Wait for ``probe()`` to return something (a deadline only guards against a hang)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if probe():
            return
        time.sleep(0.5)
    raise AssertionError(f"{what} never appeared")
