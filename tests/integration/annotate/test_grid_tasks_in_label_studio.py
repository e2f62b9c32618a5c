"""Grid tasks and adaptive overlap on the real Label Studio: a grid answer is pulled as the per-image answers of
one-image tasks (same labels, agreement and Dawid-Skene), annotators stay blind in grids, and a later push asks a
third opinion exactly for the items whose first two disagree."""
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
    assert first["assignments"] == 60 and first["adaptive"]["asked_again"] == 0
    grids = list(db["grid_tasks"].rows)
    assert first["tasks_created"] == len(grids) and all(g["ls_task_id"] for g in grids)
    assert sum(len(json.loads(g["item_keys"])) for g in grids) == 60
    assert push_mod.push(p, "filter", batch="grid", overlap=3)["tasks_created"] == 0           # idempotent

    # blind in grids as in one-image tasks: each annotator lists only the grids of their own project
    mine = defaultdict(set)
    for name, tid in db.execute("SELECT an.name, g.ls_task_id FROM grid_tasks g JOIN campaign_projects p ON "
                                "p.id = g.project_id JOIN annotators an ON an.id = p.annotator_id"):
        mine[name].add(tid)
    sessions = {n: AnnotatorSession.login(labelstudio.url, _email(p, n), f"pw-{n}-123456") for n in mine}
    for n, s in sessions.items():
        assert {t["id"] for t in s.my_tasks()} == mine[n]
        for other in set(mine) - {n}:
            assert all(s.get(f"/api/tasks/{t}").status_code in (403, 404) for t in mine[other])

    simulate_annotations(p, "grid", disagreement=0.1, seed=3)   # raters right 9 times in 10: none looks unskilled
    pulled = pull_mod.pull(p, campaign="grid")
    assert pulled["new"] == 60 and pulled["unknown_tasks"] == 0
    labels = _labels_by_item(db, "grid")
    assert len(labels) == 60 and set(labels.values()) <= {"keep", "remove"}
    # every stored label is what the grid's own answer says for that cell (read as its annotator reads it)
    for name, s in sessions.items():
        for task in s.my_tasks():
            keys = [task["data"][f"key{i}"] for i in range(12)]
            (a,) = s.get(f"/api/tasks/{task['id']}/annotations").json()
            for k, parsed in per_image_labels("filter", a["result"], keys).items():
                assert labels[(k, name)] == parsed["label"]

    by_item = defaultdict(set)
    for (k, _), lab in labels.items():
        by_item[k].add(lab)
    disagree = {k for k, labs in by_item.items() if len(labs) > 1}
    assert disagree
    again = push_mod.push(p, "filter", batch="grid", overlap=3)
    assert again["adaptive"]["asked_again"] == len(disagree) and again["adaptive"]["reasons"] == {
        "disagree": len(disagree)}, again["adaptive"]
    assert again["adaptive"]["share_of_fixed"] == pytest.approx((60 + len(disagree)) / 90)
    simulate_annotations(p, "grid", disagreement=0.0, seed=4)
    pull_mod.pull(p, campaign="grid")
    assert len(_labels_by_item(db, "grid")) == 60 + len(disagree)
    assert push_mod.push(p, "filter", batch="grid", overlap=3)["adaptive"]["asked_again"] == 0   # every item settled


def test_every_grid_kind_renders_a_config_label_studio_accepts(labelstudio):
    from cultura.annotate.grid import example_task, render_grid_config

    client = labelstudio.connection().client
    for kind in grid_kinds():
        pr = client.projects.create(title=f"grid {kind} {uuid.uuid4().hex[:4]}", label_config=render_grid_config(kind, 24))
        r = client.projects.import_tasks(pr.id, request=[example_task(kind, 24)], return_task_ids=True)
        assert len(r.task_ids) == 1
        client.projects.delete(pr.id)


CHROMIUM = "/usr/bin/chromium"
SHA = re.compile(r"[0-9a-f]{64}")


def _stats_of(project, campaign: str) -> tuple[dict, dict, dict]:
    """Per-image labels (item key, annotator), agreement numbers and Dawid-Skene decisions and skills of a campaign."""
    db = project.db
    labels = _labels_by_item(db, campaign)
    rep = agreement_report(project, campaign)[0]
    agreement = {k: v for k, v in rep.items() if k not in ("campaign", "throughput", "workload")}
    decided, prob, skills = aggregate(db, campaigns(db, campaign)[0], "dawid-skene", "nominal")
    return labels, agreement, {"decided": decided, "probability": prob, "skills": skills}


def _wait_answered(session, task_id: int) -> None:
    deadline = time.monotonic() + 600      # guards a hang only: the loop waits for the state
    while not session.get(f"/api/tasks/{task_id}/annotations").json():
        assert time.monotonic() < deadline, f"task {task_id} was never submitted"
        time.sleep(0.2)


LOAD_FAILED = "There was an issue loading URL"


def _task_images(page, urls: list[str]) -> list[str]:
    """The sha256 of the pictures the editor shows for the task's images, in cell order, once each has loaded
    (what a person looks at before answering). On a busy machine the editor's first fetch of an image can give
    up and show Label Studio's load error: a person reloads the page, and so does this."""
    loaded = f"""{json.dumps(urls)}.every(u => [...document.querySelectorAll("img")].some(
        x => x.getAttribute("src") === u && x.complete && x.naturalWidth > 0))"""
    for _ in range(5):
        page.wait_for_function(f"() => ({loaded}) || document.body.innerText.includes({json.dumps(LOAD_FAILED)})",
                               timeout=600_000)
        if page.evaluate(f"() => {loaded}"):
            return [SHA.search(u).group(0) for u in urls]
        page.reload()
    raise AssertionError(f"the editor could not load the task's images: {urls[:2]}")


def test_a_person_in_a_browser_filters_96_images_as_grids_with_far_fewer_actions_and_the_same_results(
        blindproject, labelstudio):
    """One annotator in headless Chromium looks at every image and keeps or removes it, once as one-image tasks
    (a click on Keep or Remove, then Ctrl+Enter) and once as grids of 24 (a key per image to remove, then
    Ctrl+Enter); a second annotator gives the same answers through the API in both campaigns. The per-image
    labels, the agreement and Dawid-Skene's decisions and skills are identical."""
    if not os.path.exists(CHROMIUM):
        pytest.skip("chromium is not installed (apt-get install chromium)")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    from cultura.annotate.images import serve_in_thread

    p, db = blindproject, blindproject.db
    shas = sorted(add_images(p, "rice", "JP", 96))
    remove = {s for i, s in enumerate(shas) if i % 10 == 3}          # ~10 % to remove
    truth = {s: "remove" if s in remove else "keep" for s in shas}
    for n in ("ann", "bob"):
        ann_mod.add_annotator(p, n, email=_email(p, n), country="JP")
        ann_mod.set_password(p, n, f"pw-{n}-123456")
    httpd, base = serve_in_thread(p.blobs)
    try:
        push_mod.push(p, "filter", batch="single", overlap=2, image_base=base)
        push_mod.push(p, "filter", batch="grid", overlap=2, grid=24, image_base=base)
        projects = {(c, n): pid for c, n, pid in db.execute(
            "SELECT c.name, an.name, p.ls_project_id FROM campaign_projects p JOIN campaigns c ON c.id = p.campaign_id "
            "JOIN annotators an ON an.id = p.annotator_id")}
        sessions = {n: AnnotatorSession.login(labelstudio.url, _email(p, n), f"pw-{n}-123456") for n in ("ann", "bob")}

        # bob answers through the API, the same in both shapes
        bob = sessions["bob"]
        for t in bob.my_tasks():
            if t["data"]["item_key"].startswith("grid:"):
                keys = [t["data"][f"key{i}"] for i in range(24)]
                bob.answer(t["id"], grid_result("filter", [truth[k.split(":")[1]] if k else None for k in keys]), 30.0)
            else:
                bob.answer(t["id"], get_kind("filter").result_for(truth[t["data"]["item_key"].split(":")[1]]), 4.0)

        ann = sessions["ann"]
        tasks = {c: ann.tasks(projects[(c, "ann")]) for c in ("single", "grid")}
        assert len(tasks["single"]) == 96 and len(tasks["grid"]) == 4
        actions = {"single": 0, "grid": 0}
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                "--disable-dev-shm-usage"])
            page = browser.new_page(viewport={"width": 1600, "height": 1200})
            page.goto(f"{labelstudio.url}/user/login/")
            page.fill("input[name=email]", _email(p, "ann"))
            page.fill("input[name=password]", "pw-ann-123456")
            page.click("button[type=submit]")
            page.wait_for_url(lambda u: "/user/login" not in u, timeout=600_000)
            for t in sorted(tasks["single"], key=lambda t: t["id"]):
                # the next task of the stream (Label Studio opens it after a submit; no action of the person)
                page.goto(f"{labelstudio.url}/projects/{projects[('single', 'ann')]}/data?task={t['id']}")
                (sha,) = _task_images(page, [t["data"]["image"]])
                page.locator("label", has_text="Keep" if truth[sha] == "keep" else "Remove").first.click()
                page.keyboard.press("Control+Enter")
                actions["single"] += 2
                _wait_answered(ann, t["id"])
            for t in sorted(tasks["grid"], key=lambda t: t["id"]):
                page.goto(f"{labelstudio.url}/projects/{projects[('grid', 'ann')]}/data?task={t['id']}")
                seen = _task_images(page, [t["data"][f"img{i}"] for i in range(24)])
                for i, sha in enumerate(seen):
                    if truth[sha] == "remove":
                        page.keyboard.press(KEYS[i])
                        actions["grid"] += 1
                page.keyboard.press("Control+Enter")
                actions["grid"] += 1
                _wait_answered(ann, t["id"])
            browser.close()
    finally:
        httpd.shutdown()
    per_image = {k: v / 96 for k, v in actions.items()}
    print(f"\nactions per image: one-image tasks {per_image['single']:.2f}, grid tasks {per_image['grid']:.3f} "
          f"({len(remove)} of 96 images removed)")
    assert per_image["grid"] <= 0.3 and per_image["single"] >= 2

    pull_mod.pull(p)
    single, grid = _stats_of(p, "single"), _stats_of(p, "grid")
    assert len(single[0]) == len(grid[0]) == 192
    assert {(k, n): lab for (k, n), lab in single[0].items() if n == "ann"} == {
        (f"filter:{s}", "ann"): truth[s] for s in shas}                  # the person's answers, as given
    assert single[0] == grid[0] and single[1] == grid[1] and single[2] == grid[2]
