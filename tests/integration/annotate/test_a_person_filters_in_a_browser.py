"""A person in headless Chromium filters the same 48 images as one-image tasks and as grid tasks: the grid needs
far fewer actions per image, and the per-image labels, agreement and Dawid-Skene results are the same.

The browser is driven as a person works: look at the task's pictures, click a choice or press a key, submit.
What a person sees (the editor ready, a box ticked, the answer on its way) is what the test waits for; an
action the editor did not take (a key pressed before it listened) is done again, as a person would, and counted.
"""
from __future__ import annotations

import json
import os
import re
import time

import pytest

from cultura.annotate import annotators as ann_mod, pull as pull_mod, push as push_mod
from cultura.annotate.aggregate import aggregate
from cultura.annotate.grid import KEYS, grid_result
from cultura.annotate.kinds import get_kind
from cultura.annotate.people import server_row
from cultura.annotate.report import agreement_report, campaigns
from tests.fakes.labelstudio import add_images, labelstudio, stop_annotator_servers  # noqa: F401
from tests.fakes.ls_annotator import AnnotatorSession
from tests.integration.annotate.test_grid_tasks_in_label_studio import (_email, _labels_by_item,  # noqa: F401
                                                                        blindproject)

pytestmark = pytest.mark.labelstudio

CHROMIUM = "/usr/bin/chromium"
SHA = re.compile(r"[0-9a-f]{64}")
GRID = 24
N = 48          # images: two grids of 24, or 48 one-image tasks
#: guards a hang only; every wait below waits for a state
HANG_MS = 600_000
LOAD_FAILED = "There was an issue loading URL"
#: the editor's Submit button (its label in the data manager's editor, and in the editor alone)
SUBMIT = 'button[aria-label="Submit current annotation"], button[aria-label="submit"]'
#: the editor of this task is ready for a person: its store holds the task, an annotation is open and the Submit
#: button can be pressed (Label Studio binds the hotkeys when it builds the store)
READY = """(id) => { const h = window.Htx; const sel = h && h.annotationStore && h.annotationStore.selected;
  const submit = document.querySelector('""" + SUBMIT + """');
  return !!(h && h.task && String(h.task.id) === String(id) && sel && submit && !submit.disabled); }"""
#: the choices the open annotation holds for a control, lower case (what the ticked boxes say; a result holds a
#: choice's alias, "remove", where the config gives one)
CHOSEN = """(name) => { const sel = window.Htx.annotationStore.selected;
  const r = sel.results.find(r => r.from_name && r.from_name.name === name);
  return r && r.value && r.value.choices ? r.value.choices.map(c => String(c).toLowerCase()) : []; }"""
#: the editor took the submit: Label Studio marks the open annotation the moment Ctrl+Enter or Submit reaches it
#: (or it is already saved, or the editor moved on)
SUBMITTING = """(id) => { const h = window.Htx; const sel = h && h.annotationStore && h.annotationStore.selected;
  return !(h && h.task && String(h.task.id) === String(id) && sel) || !!sel.submissionStarted || sel.pk != null; }"""


def _stats_of(project, campaign: str) -> tuple[dict, dict, dict]:
    """Per-image labels (item key, annotator), agreement numbers and Dawid-Skene decisions and skills."""
    db = project.db
    labels = _labels_by_item(db, campaign)
    rep = agreement_report(project, campaign)[0]
    agreement = {k: v for k, v in rep.items() if k not in ("campaign", "throughput", "workload")}
    decided, prob, skills = aggregate(db, campaigns(db, campaign)[0], "dawid-skene", "nominal")
    return labels, agreement, {"decided": decided, "probability": prob, "skills": skills}


def _wait_answered(session, task_id: int) -> None:
    deadline = time.monotonic() + HANG_MS / 1000
    while not session.get(f"/api/tasks/{task_id}/annotations").json():
        assert time.monotonic() < deadline, f"task {task_id} was never submitted"
        time.sleep(0.2)


def _open(page, url: str, task_id: int, images: list[str]) -> list[str]:
    """Open a task and look at it: wait until the editor is ready and every picture has loaded; returns their
    sha256 in cell order. On a busy machine the editor's first fetch of an image can give up and show Label
    Studio's load error: a person reloads the page, and so does this."""
    loaded = f"""{json.dumps(images)}.every(u => [...document.querySelectorAll("img")].some(
        x => x.getAttribute("src") === u && x.complete && x.naturalWidth > 0))"""
    page.goto(url)
    for _ in range(5):
        page.wait_for_function(f"() => ({loaded}) || document.body.innerText.includes({json.dumps(LOAD_FAILED)})",
                               timeout=HANG_MS)
        if page.evaluate(f"() => {loaded}"):
            page.wait_for_function(READY, arg=task_id, timeout=HANG_MS)
            # the data manager may still be fetching the task (and then rebuild the open annotation, dropping
            # what was ticked): a person starts once the page has settled
            page.wait_for_load_state("networkidle", timeout=HANG_MS)
            page.wait_for_function(READY, arg=task_id, timeout=HANG_MS)
            return [SHA.search(u).group(0) for u in images]
        page.reload()
    raise AssertionError(f"the editor could not load the task's images: {images[:2]}")


def _until(page, act, check: str, arg=None, *, tries: int = 5) -> int:
    """Do ``act`` until the editor shows ``check``; returns how many times it was done. Playwright returns from a
    click or key press once the page has handled the event and Label Studio updates its store in that handler,
    so a check right after tells whether the action was taken (no waiting on time)."""
    for n in range(1, tries + 1):
        act()
        if page.evaluate(check, arg):
            return n
    raise AssertionError(f"the editor never showed {check!r} after {tries} tries")


def _submit(page, task_id: int) -> int:
    """Ctrl+Enter, as a person submits; if the editor did not take it, the Submit button (counted)."""
    page.keyboard.press("Control+Enter")
    if page.evaluate(SUBMITTING, task_id):
        return 1
    return 1 + _until(page, lambda: page.locator(SUBMIT).first.click(), SUBMITTING, task_id)


def test_a_person_in_a_browser_filters_48_images_as_grids_with_far_fewer_actions_and_the_same_results(
        blindproject, labelstudio):
    """One annotator in headless Chromium looks at every image and keeps or removes it, once as one-image tasks
    (a click on Keep or Remove, then Ctrl+Enter) and once as grids of 24 (a key per image to remove, then
    Ctrl+Enter); a second annotator gives the same answers through the API in both campaigns."""
    if not os.path.exists(CHROMIUM):
        pytest.skip("chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright    # a test dependency (pyproject's "test" extra)

    from cultura.annotate.images import serve_in_thread

    p, db = blindproject, blindproject.db
    shas = sorted(add_images(p, "rice", "JP", N))
    remove = {s for i, s in enumerate(shas) if i % 10 == 3}          # 5 of 48 to remove
    truth = {s: "remove" if s in remove else "keep" for s in shas}
    for n in ("ann", "bob"):
        ann_mod.add_annotator(p, n, email=_email(p, n), country="JP")
        ann_mod.set_password(p, n, f"pw-{n}-123456")
    ids = {r["name"]: r["id"] for r in db["annotators"].rows}
    httpd, base = serve_in_thread(p.blobs)
    sessions = {}
    try:
        push_mod.push(p, "filter", batch="single", overlap=2, image_base=base)
        push_mod.push(p, "filter", batch="grid", overlap=2, grid=GRID, image_base=base)
        projects = {(c, n): pid for c, n, pid in db.execute(
            "SELECT c.name, an.name, p.ls_project_id FROM campaign_projects p JOIN campaigns c ON c.id = p.campaign_id "
            "JOIN annotators an ON an.id = p.annotator_id")}
        url = {n: server_row(p, ids[n])["url"] for n in ids}
        sessions = {n: AnnotatorSession.login(url[n], _email(p, n), f"pw-{n}-123456") for n in ids}

        bob = sessions["bob"]           # answers through the API, the same in both shapes
        for t in bob.my_tasks():
            if t["data"]["item_key"].startswith("grid:"):
                keys = [t["data"][f"key{i}"] for i in range(GRID)]
                bob.answer(t["id"], grid_result("filter", [truth[k.split(":")[1]] if k else None for k in keys]), 30.0)
            else:
                bob.answer(t["id"], get_kind("filter").result_for(truth[t["data"]["item_key"].split(":")[1]]), 4.0)

        ann = sessions["ann"]
        tasks = {c: ann.tasks(projects[(c, "ann")]) for c in ("single", "grid")}
        assert len(tasks["single"]) == N and len(tasks["grid"]) == N // GRID
        actions = {"single": 0, "grid": 0}
        extra = {"single": 0, "grid": 0}      # actions done again because the editor did not take them
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                "--disable-dev-shm-usage"])
            page = browser.new_page(viewport={"width": 1600, "height": 1200})
            page.set_default_timeout(HANG_MS)
            page.goto(f"{url['ann']}/user/login/")
            page.fill("input[name=email]", _email(p, "ann"))
            page.fill("input[name=password]", "pw-ann-123456")
            page.click("button[type=submit]")
            page.wait_for_url(lambda u: "/user/login" not in u, timeout=HANG_MS)
            for t in sorted(tasks["single"], key=lambda t: t["id"]):
                # opening the next task is Label Studio's doing after a submit, not the person's: not counted
                (sha,) = _open(page, f"{url['ann']}/projects/{projects[('single', 'ann')]}/data?task={t['id']}",
                               t["id"], [t["data"]["image"]])
                choice = "Keep" if truth[sha] == "keep" else "Remove"
                picked = f"() => ({CHOSEN})('decision').includes({json.dumps(choice.lower())})"
                n = _until(page, lambda: page.locator("label", has_text=choice).first.click(), picked)
                if not page.evaluate(picked):      # looked over before submitting: picked again if it is gone
                    n += _until(page, lambda: page.locator("label", has_text=choice).first.click(), picked)
                m = _submit(page, t["id"])
                actions["single"] += n + m
                extra["single"] += n + m - 2
                _wait_answered(ann, t["id"])
            for t in sorted(tasks["grid"], key=lambda t: t["id"]):
                seen = _open(page, f"{url['ann']}/projects/{projects[('grid', 'ann')]}/data?task={t['id']}",
                             t["id"], [t["data"][f"img{i}"] for i in range(GRID)])
                for i, sha in enumerate(seen):
                    if truth[sha] == "remove":
                        n = _until(page, lambda: page.keyboard.press(KEYS[i]),
                                   f"() => ({CHOSEN})('rm{i}').includes('remove')")
                        actions["grid"] += n
                        extra["grid"] += n - 1
                # before submitting, a person looks over the page: a mark that is not there is made again
                for _ in range(5):
                    marked = page.evaluate(f"() => [...Array({GRID}).keys()].map(i => ({CHOSEN})('rm' + i)"
                                           ".includes('remove'))")
                    wrong = [i for i, sha in enumerate(seen) if marked[i] != (truth[sha] == "remove")]
                    if not wrong:
                        break
                    for i in wrong:
                        page.keyboard.press(KEYS[i])
                    actions["grid"] += len(wrong)
                    extra["grid"] += len(wrong)
                assert not wrong, f"marks the editor never kept: {wrong}"
                m = _submit(page, t["id"])
                actions["grid"] += m
                extra["grid"] += m - 1
                _wait_answered(ann, t["id"])
            browser.close()
    finally:
        httpd.shutdown()
        for s in sessions.values():
            s.close()
        stop_annotator_servers(p)
    per_image = {k: v / N for k, v in actions.items()}
    print(f"\nactions per image: one-image tasks {per_image['single']:.2f}, grid tasks {per_image['grid']:.3f} "
          f"({len(remove)} of {N} images removed; done again because the editor missed them: {extra})")
    assert per_image["grid"] <= 0.3 and per_image["single"] >= 2

    pull_mod.pull(p)
    single, grid = _stats_of(p, "single"), _stats_of(p, "grid")
    assert len(single[0]) == len(grid[0]) == 2 * N
    assert {(k, n): lab for (k, n), lab in single[0].items() if n == "ann"} == {
        (f"filter:{s}", "ann"): truth[s] for s in shas}                  # the person's answers, as given
    assert single[0] == grid[0] and single[1] == grid[1] and single[2] == grid[2]
