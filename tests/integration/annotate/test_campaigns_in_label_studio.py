"""Annotation against a real Label Studio (one server per session, see tests/labelstudio_fixture.py).
Annotators are simulated by creating annotations through the SDK with ``completed_by`` set to each user."""
from __future__ import annotations

import json
import uuid

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from cultura.annotate import annotators as ann_mod, decide, pull as pull_mod, push as push_mod, report
from cultura.annotate.kinds import get_kind
from cultura.annotate.server import LabelStudioError, use_server
from tests.fakes.labelstudio import TcpProxy, add_cluster, add_images, labelstudio  # noqa: F401

pytestmark = pytest.mark.labelstudio


@pytest.fixture
def lsproject(project, labelstudio):
    use_server(project, labelstudio.url, labelstudio.api_key)
    project.tag = uuid.uuid4().hex[:6]   # unique e-mails: users persist for the whole session
    return project


def _add(project, name, **kw):
    return ann_mod.add_annotator(project, name, email=f"{name}.{project.tag}@example.org", **kw)


def _assignments(db, campaign, purpose="annotate"):
    cur = db.execute(
        """SELECT a.id, a.ls_task_id, an.name, an.ls_user_id, i.item_key, i.id FROM assignments a
           JOIN annotators an ON an.id = a.annotator_id JOIN annotation_items i ON i.id = a.item_id
           JOIN campaigns c ON c.id = i.campaign_id WHERE c.name = ? AND a.purpose = ? ORDER BY a.id""",
        [campaign, purpose])
    return [dict(zip(["id", "task", "name", "uid", "key", "item_id"], r)) for r in cur.fetchall()]


def _annotate(client, kind, task, uid, label, lead_time=4.0):
    return client.annotations.create(task, result=get_kind(kind).result_for(label), completed_by=uid,
                                     lead_time=lead_time)


def test_end_to_end_filter_campaign(lsproject, labelstudio):
    p, db = lsproject, lsproject.db
    client = labelstudio.connection().client
    shas = add_images(p, "rice", "JP", 6)
    for n in ("ann", "bob", "cat"):
        _add(p, n, country="JP")
    _add(p, "judy", role="adjudicator")
    assert {a["name"] for a in ann_mod.list_annotators(p)} == {"ann", "bob", "cat", "judy"}

    res = push_mod.push(p, "filter", overlap=2)
    assert res["items"] == 6 and res["assignments"] == 12 and res["tasks_created"] == 12
    again = push_mod.push(p, "filter", overlap=2)
    assert again["tasks_created"] == 0 and again["new_items"] == 0
    prows = list(db["campaign_projects"].rows)
    assert len(prows) == 3
    for pr in prows:  # each annotator's own project holds exactly its tasks
        assert client.projects.get(pr["ls_project_id"]).task_number == 4

    truth = {f"filter:{s}": ("remove" if i % 3 == 0 else "keep") for i, s in enumerate(shas)}
    asg = _assignments(db, "filter")
    first_of = {}
    planted = set()
    label_of = {}
    for a in asg:
        label = truth[a["key"]]
        if a["key"] in first_of and len(planted) < 2:  # second annotator disagrees on two items
            label = "keep" if label == "remove" else "remove"
            planted.add(a["key"])
        first_of.setdefault(a["key"], a)
        label_of[(a["key"], a["name"])] = label
        a["ann"] = _annotate(client, "filter", a["task"], a["uid"], label, lead_time=3.0 + a["id"])
    first = pull_mod.pull(p)
    assert first["new"] == 12 and first["versions"] == 0
    # one annotation edited in Label Studio: becomes a new version, the old one is kept
    edited = next(a for a in asg if a["key"] not in planted)
    client.annotations.update(edited["ann"].id, result=get_kind("filter").result_for(
        "keep" if truth[edited["key"]] == "remove" else "remove"))
    planted.add(edited["key"])
    label_of[(edited["key"], edited["name"])] = "keep" if truth[edited["key"]] == "remove" else "remove"
    second = pull_mod.pull(p)
    assert (second["new"], second["versions"]) == (0, 1)
    versions = db.execute("SELECT version, is_current FROM annotations WHERE ls_annotation_id = ? ORDER BY version",
                          [edited["ann"].id]).fetchall()
    assert versions == [(1, 0), (2, 1)]
    assert pull_mod.pull(p)["versions"] == 0 and db["annotations"].count == 13

    # agreement equals sklearn's and krippendorff's
    rep = report.agreement_report(p, "filter")[0]
    names = ["ann", "bob", "cat"]
    keys = sorted(truth)
    mat = np.array([[{"keep": 0, "remove": 1}[label_of[(k, n)]] if (k, n) in label_of else np.nan for k in keys]
                    for n in names], dtype=float)
    assert rep["krippendorff_alpha_nominal"] == pytest.approx(
        krippendorff.alpha(reliability_data=mat, level_of_measurement="nominal"))
    for pk in rep["pairwise_kappa"]:
        i, j = names.index(pk["a"]), names.index(pk["b"])
        common = ~(np.isnan(mat[i]) | np.isnan(mat[j]))
        assert pk["n_common"] == common.sum()
        if common.sum() >= 2 and len(set(mat[i][common]) | set(mat[j][common])) > 1:
            expected = cohen_kappa_score(mat[i][common], mat[j][common])
            assert pk["kappa"] == pytest.approx(expected) or (np.isnan(expected) and pk["kappa"] is None)
    agree = [k for k in keys if k not in planted]
    assert rep["percent_agreement"] == pytest.approx(len(agree) / len(keys))
    assert {w["annotator"]: w["done"] for w in rep["workload"]} == {"ann": 4, "bob": 4, "cat": 4}
    assert set(rep["throughput"]) == set(names)

    # adjudication project holds exactly the disagreements
    summ = decide.adjudicate(p, campaign="filter")[0]
    assert summ["decided"] == len(agree) and summ["disagreements"] == len(planted)
    assert summ["sent_to_adjudication"] == len(planted)
    adj = next(db["campaign_projects"].rows_where("purpose = 'adjudicate'"))
    tasks = list(client.tasks.list(project=adj["ls_project_id"], fields="all"))
    assert {t.data["item_key"] for t in tasks} == planted
    assert all(":" in t.data["earlier"] for t in tasks)
    assert decide.adjudicate(p, campaign="filter")[0]["sent_to_adjudication"] == 0  # no duplicates

    judy = next(r for r in ann_mod.get_annotators(p, ["judy"]))
    for a in _assignments(db, "filter", "adjudicate"):
        _annotate(client, "filter", a["task"], judy["ls_user_id"], truth[a["key"]])
    assert pull_mod.pull(p)["new"] == len(planted)
    summ = decide.adjudicate(p, campaign="filter")[0]
    assert summ["adjudicated"] == len(planted) and summ["disagreements"] == 0
    dec = {r["item_key"]: r for r in db["decisions"].rows_where("superseded = 0")}
    assert {k: d["label"] for k, d in dec.items()} == truth
    assert {d["rule"] for k, d in dec.items() if k in planted} == {"adjudicated"}
    removed = {r[0] for r in db.execute("SELECT sha256 FROM decisions WHERE kind='filter' AND superseded=0 AND "
                                        "label='remove'")}
    assert removed == {s for i, s in enumerate(shas) if i % 3 == 0}
    n_dec = db["decisions"].count
    again = pull_mod.pull(p)
    assert (again["new"], again["versions"]) == (0, 0)
    decide.adjudicate(p, campaign="filter")
    assert db["decisions"].count == n_dec  # idempotent
    st = report.status(p)
    assert {r["annotator"] for r in st} >= {"ann", "bob", "cat", "judy"}


def test_dedup_relevance_and_entity_with_gold(lsproject, labelstudio, tmp_path):
    p, db = lsproject, lsproject.db
    client = labelstudio.connection().client
    jp = add_images(p, "tea", "JP", 3)
    add_images(p, "tea", "US", 1, seed=5)
    cid = add_cluster(p, jp[:3])
    _add(p, "aiko", country="JP", languages=["ja"])
    _add(p, "ken", country="JP", languages=["ja", "en"])
    _add(p, "ted", country="US", languages=["en"])

    # dedup review: keep images 1 and 3 of the cluster
    push_mod.push(p, "dedup-review", overlap=2, annotators=["aiko", "ken"])
    for a in _assignments(db, "dedup-review"):
        _annotate(client, "dedup-review", a["task"], a["uid"], "keep:1,3")
    pull_mod.pull(p)
    decide.adjudicate(p, campaign="dedup-review")
    assert db["dup_clusters"].get(cid)["status"] == "resolved"
    got = {r["sha256"]: r["label"] for r in db["decisions"].rows_where("kind = 'dedup' AND superseded = 0")}
    assert got == {jp[0]: "keep", jp[1]: "drop", jp[2]: "keep"}

    # relevance: JP items only to JP annotators, Likert agreement with quadratic weights
    res = push_mod.push(p, "relevance", overlap=2, other_countries=1)
    asg = _assignments(db, "relevance")
    items = {r["item_key"]: r for r in db["annotation_items"].rows_where("kind = 'relevance'")}
    for a in asg:
        assert items[a["key"]]["country"] == {"aiko": "JP", "ken": "JP", "ted": "US"}[a["name"]]
    # items of countries without an annotator (neither JP nor US) are reported by country, not silently dropped;
    # the copy the dedup review dropped is out of the pool and goes to nobody
    assert res["out_of_pool"] > 0 and not [it for it in items.values() if it["sha256"] == jp[1]]
    no_annotator = [k for k, it in items.items() if it["country"] not in ("JP", "US") and it["sha256"] != jp[1]]
    assert res["unassigned"] == len(no_annotator) > 0
    by_country = res["unassigned_countries"]
    assert sum(by_country.values()) == len(no_annotator) and set(by_country) <= {"TH", "DE"}
    assert f"native to {', '.join(sorted(by_country))}" in res["warning"]
    scores = {}
    for a in asg:
        v = 2 + a["item_id"] % 4
        if a["name"] == "ken" and a["item_id"] % 2:
            v -= 1
        scores[(a["key"], a["name"])] = v
        _annotate(client, "relevance", a["task"], a["uid"], str(v))
    pull_mod.pull(p)
    rep = report.agreement_report(p, "relevance")[0]
    both = sorted({k for k, n in scores if n == "aiko"} & {k for k, n in scores if n == "ken"})
    x = [scores[(k, "aiko")] for k in both]
    y = [scores[(k, "ken")] for k in both]
    q = next(r for r in rep["pairwise_kappa_quadratic"] if {r["a"], r["b"]} == {"aiko", "ken"})
    expected = cohen_kappa_score(x, y, weights="quadratic")
    assert (q["kappa"] is None and np.isnan(expected)) or q["kappa"] == pytest.approx(expected)
    assert "JP" in rep["by_country"]
    summ = decide.adjudicate(p, campaign="relevance", rule_name="median", min_agreement=0.7)[0]
    assert summ["decided"] >= len(both) and summ["disagreements"] == 0
    jp_dec = list(db["decisions"].rows_where("kind = 'relevance' AND superseded = 0 AND country = 'JP'"))
    assert len(jp_dec) == len(both)
    for d in jp_dec:
        assert d["value"] == np.median([scores[(d["item_key"], n)] for n in ("aiko", "ken")]) and d["sha256"]

    # entity from a file, with a gold item everyone gets
    f = tmp_path / "entities.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in [
        {"key": "sushi", "entity": "sushi", "country": "JP", "category": "food", "gold": "local"},
        {"key": "pizza", "entity": "pizza", "country": "JP", "category": "food"},
        {"key": "natto", "entity": "natto", "country": "JP", "category": "food"}]), encoding="utf-8")
    res = push_mod.push(p, "entity", overlap=1, source=f, gold=1)
    assert res["gold_items"] == 1
    asg = _assignments(db, "entity")
    gold_people = {a["name"] for a in asg if a["key"] == "entity:sushi"}
    assert gold_people == {"aiko", "ken"}  # every Japanese speaker; ted has no 'ja'
    for a in asg:
        label = {"entity:sushi": "local" if a["name"] == "aiko" else "western", "entity:pizza": "western",
                 "entity:natto": "local"}[a["key"]]
        _annotate(client, "entity", a["task"], a["uid"], label)
    pull_mod.pull(p)
    rep = report.agreement_report(p, "entity")[0]
    assert rep["gold_accuracy"] == {"aiko": {"n_gold": 1, "accuracy": 1.0}, "ken": {"n_gold": 1, "accuracy": 0.0}}


def test_server_stopped_mid_push_then_rerun_without_duplicates(lsproject, labelstudio):
    p, db = lsproject, lsproject.db
    add_images(p, "bread", "DE", 7)
    proxy = TcpProxy(int(labelstudio.url.rsplit(":", 1)[1]))
    use_server(p, proxy.url, labelstudio.api_key)
    _add(p, "uwe", country="DE")
    calls = []

    def cut_after_first_chunk(prow, n):
        calls.append(n)
        proxy.stop()

    with pytest.raises(LabelStudioError, match="does not answer.*rerun"):
        push_mod.push(p, "filter", overlap=1, chunk=3, on_chunk=cut_after_first_chunk)
    assert calls == [3]
    proxy.start()  # server back on the same address

    # and a crash between Label Studio accepting a chunk and cultura recording it
    orig = push_mod._after_import

    def crash(prow, n):
        push_mod._after_import = orig
        raise KeyboardInterrupt

    push_mod._after_import = crash
    try:
        with pytest.raises(KeyboardInterrupt):
            push_mod.push(p, "filter", overlap=1, chunk=3)
    finally:
        push_mod._after_import = orig
    res = push_mod.push(p, "filter", overlap=1, chunk=3)
    prow = next(db["campaign_projects"].rows)
    client = labelstudio.connection().client
    tasks = list(client.tasks.list(project=prow["ls_project_id"], fields="all"))
    keys = [t.data["item_key"] for t in tasks]
    assert len(keys) == 7 and len(set(keys)) == 7
    assert db.execute("SELECT COUNT(*) FROM assignments WHERE ls_task_id IS NULL").fetchone()[0] == 0
    assert sorted(r[0] for r in db.execute("SELECT ls_task_id FROM assignments")) == sorted(t.id for t in tasks)
    assert push_mod.push(p, "filter", overlap=1)["tasks_created"] == 0
    assert res["missing_projects"] == []
    proxy.stop()


def test_project_deleted_by_hand_is_detected_and_nothing_is_lost(lsproject, labelstudio):
    p, db = lsproject, lsproject.db
    client = labelstudio.connection().client
    add_images(p, "soup", "TH", 2)
    _add(p, "nok", country="TH")
    _add(p, "mai", country="TH")
    # a server cultura does not run: annotators share it, and push says what isolation holds there
    assert "NOT blind" in push_mod.push(p, "filter", overlap=1)["isolation"]
    asg = _assignments(db, "filter")
    for a in asg:
        _annotate(client, "filter", a["task"], a["uid"], "keep")
    assert pull_mod.pull(p)["new"] == 2
    gone = next(db["campaign_projects"].rows_where("annotator_id = (SELECT id FROM annotators WHERE name='nok')"))
    client.projects.delete(gone["ls_project_id"])
    res = pull_mod.pull(p)
    assert [m["ls_project_id"] for m in res["missing_projects"]] == [gone["ls_project_id"]]
    assert db["campaign_projects"].get(gone["id"])["status"] == "missing"
    assert db["annotations"].count == 2  # nothing lost locally
    assert any("MISSING" in (r.get("purpose") or "") for r in report.status(p))
    add_images(p, "soup", "TH", 2, seed=9)
    res = push_mod.push(p, "filter", overlap=1)
    assert res["missing_projects"] and "deleted in Label Studio" in res["missing_projects"][0]["error"]
    assert db["annotations"].count == 2


CHROMIUM = "/usr/bin/chromium"

EXPECTED_CONTROLS = {"filter": ["Keep", "Remove"], "dedup-review": ["keep all (all distinct)", "image 2"],
                     "relevance": ["1 — Not Relevant", "5 — Highly Relevant"], "entity": ["Local culture", "Western"],
                     "translation": ["1 — Inaccurate", "5 — Perfect"]}


def test_screenshot_every_template_renders_in_the_real_ui(project, labelstudio, tmp_path):
    """Headless Chromium logs in to Label Studio and opens one task of each template."""
    import os
    if not os.path.exists(CHROMIUM):
        pytest.skip("chromium is not installed (apt-get install chromium)")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    from cultura.annotate.images import serve_in_thread
    from cultura.annotate.items import task_data
    from cultura.annotate.kinds import render_config

    sha = add_images(project, "rice", "JP", 2)
    rel = [project.db["images"].get(s)["path"] for s in sha]
    httpd, base = serve_in_thread(project.blobs)
    client = labelstudio.connection().client
    payloads = {
        "filter": {"path": rel[0], "concept": "rice"},
        "relevance": {"path": rel[0], "culture_name": "Japan"},
        "dedup-review": {"members": [{"path": rel[0]}, {"path": rel[1]}]},
        "entity": {"entity": "sushi", "category": "food", "culture_name": "Japan"},
        "translation": {"source": "a photo of rice", "translation": "ご飯の写真", "language": "ja",
                        "source_language": "en"}}
    opened = {}
    for kind, payload in payloads.items():
        pr = client.projects.create(title=f"screenshot {kind}", label_config=render_config(kind))
        r = client.projects.import_tasks(pr.id, request=[task_data(kind, f"{kind}:shot", payload, image_base=base)],
                                         return_task_ids=True)
        opened[kind] = (pr.id, r.task_ids[0])
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                "--disable-dev-shm-usage"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{labelstudio.url}/user/login/")
            page.fill("input[name=email]", labelstudio.username)
            page.fill("input[name=password]", labelstudio.password)
            page.click("button[type=submit]")
            page.wait_for_url(lambda u: "/user/login" not in u, timeout=600_000)
            for kind, (pid, tid) in opened.items():
                page.goto(f"{labelstudio.url}/projects/{pid}/data?task={tid}")
                for text in EXPECTED_CONTROLS[kind]:  # a choice control (label with a checkbox/radio)
                    page.locator("label", has_text=text).first.wait_for(state="visible", timeout=600_000)
                # wait for the state asserted (the inputs render after their labels; under load later)
                choices = page.locator("label input[type=checkbox], label input[type=radio]")
                choices.nth(1).wait_for(state="attached", timeout=600_000)
                assert choices.count() >= 2
                if kind in ("filter", "relevance"):  # the blob reached the editor (no CORS/URL error)
                    page.locator("text=Downloading image").wait_for(state="hidden", timeout=600_000)
                    if page.locator("text=There was an issue loading URL").count():
                        # on a busy machine the editor's first fetch can give up; a CORS or URL error stays
                        page.reload()
                        page.locator("label", has_text=EXPECTED_CONTROLS[kind][0]).first.wait_for(
                            state="visible", timeout=600_000)
                        page.locator("text=Downloading image").wait_for(state="hidden", timeout=600_000)
                    assert page.locator("text=There was an issue loading URL").count() == 0
                try:
                    page.wait_for_load_state("networkidle", timeout=5_000)
                except Exception:  # a long-poll may keep the network busy; the checks above already passed
                    pass
                page.screenshot(path=str(tmp_path / f"{kind}.png"))
                assert (tmp_path / f"{kind}.png").stat().st_size > 10_000
            browser.close()
    finally:
        httpd.shutdown()


def test_cli_server_start_status_stop(project, labelstudio, monkeypatch):
    """The project's own server: loopback, free port, 0600 secrets, status via the CLI, clean stop."""
    import os
    import stat

    from click.testing import CliRunner

    from cultura.annotate.people import server_status, start_server, stop_server
    from cultura.annotate.server import secrets_path
    from cultura.cli import cli
    from tests.fakes.labelstudio import SEED, _executable

    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    monkeypatch.setenv("LABEL_STUDIO_BIN", _executable())
    st = start_server(project, seed_dir=SEED)
    try:
        assert st["running"] and st["started"] and st["url"].startswith("http://127.0.0.1:")
        assert stat.S_IMODE(os.stat(secrets_path(project)).st_mode) == 0o600
        key = json.loads(secrets_path(project).read_text())["api_key"]
        r = CliRunner().invoke(cli, ["--project", str(project.root), "annotate", "server", "status", "--json"])
        assert r.exit_code == 0 and json.loads(r.stdout)["running"] and key not in r.output
        assert start_server(project)["started"] is False  # already running: no second server
        r = CliRunner().invoke(cli, ["--project", str(project.root), "annotate", "annotators", "add", "zoe",
                                     "--email", f"zoe.{uuid.uuid4().hex[:6]}@example.org", "--json"])
        assert r.exit_code == 0, r.output
    finally:
        stop_server(project)
    assert not server_status(project)["running"]
    r = CliRunner().invoke(cli, ["--project", str(project.root), "annotate", "pull"])
    assert r.exit_code == 1 and "does not answer" in r.output and "server start" in r.output


def test_simulated_annotators_for_the_demo(lsproject, tmp_path):
    from cultura.annotate.simulate import simulate_annotations

    p = lsproject
    f = tmp_path / "tr.csv"
    f.write_text("source,translation,language\n" + "".join(f"photo {i},写真 {i},ja\n" for i in range(6)),
                 encoding="utf-8")
    _add(p, "sim1", country="JP")
    _add(p, "sim2", country="JP")
    push_mod.push(p, "translation", overlap=2, source=f)
    res = simulate_annotations(p, "translation", disagreement=0.3, seed=1)
    assert res["simulated_annotations"] == 12 and "SIMULATED" in res["note"]
    assert simulate_annotations(p, "translation")["simulated_annotations"] == 0  # pulls first: no repeats
    assert pull_mod.pull(p)["new"] == 0 and p.db["annotations"].count == 12
    rep = report.agreement_report(p, "translation")[0]
    assert rep["level"] == "ordinal" and rep["percent_agreement"] is not None
    assert rep["pairwise_kappa_quadratic"][0]["n_common"] == 6
