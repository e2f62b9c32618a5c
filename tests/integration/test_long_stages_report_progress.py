"""Every long stage says how far it is: each method of the front door that takes a progress reporter (enumerated
from the handles and the handles they hold, ``p.annotate.server`` …, so a new long stage without a case here
fails) tells it events, down to a finished one, so the command line's reporter can draw a bar on a terminal and
print lines and a summary elsewhere. (The reporter's drawing: tests/unit/test_machine_output.py; the annotate
stages' counts: tests/unit/annotate/test_annotate_stages_report_progress.py.)"""
from __future__ import annotations

import inspect
import uuid

import pytest
from PIL import Image

import cultura
from cultura.annotate.annotators import add_annotator
from cultura.annotate.server import use_server
from cultura.progress import Event
from tests.fakes.benchmark_world import make_benchmarks
from tests.fakes.crowd_world import plant_campaign
from tests.fakes.labelstudio import add_images, labelstudio  # noqa: F401  (the session's Label Studio)


def _progress_methods(p) -> set[str]:
    out, seen = set(), {id(p)}  # a handle's .project leads back to p: not a handle of its own

    def walk(h, path: str) -> None:
        if id(h) in seen:  # a handle that refers back to one already walked
            return
        seen.add(id(h))
        for name in dir(h):
            if name.startswith("_"):
                continue
            attr = getattr(h, name, None)
            if not callable(attr) and type(attr).__module__.startswith("cultura.api"):
                walk(attr, f"{path}.{name}")  # a handle held by a handle: p.annotate.server, .annotators …
                continue
            if callable(attr):
                try:
                    if "progress" in inspect.signature(attr).parameters:
                        out.add(f"{path}.{name}")
                except (TypeError, ValueError):
                    continue

    for handle in ("concepts", "images", "annotate", "benchmarks", "imports", "evaluate", "view"):
        walk(getattr(p, handle, None), handle)
    return out


@pytest.fixture(scope="module")
def curated(tmp_path_factory):
    root = tmp_path_factory.mktemp("progress")
    photos = root / "photos"
    for cc in ("JP", "US"):
        for k in range(3):
            (photos / cc / "bus").mkdir(parents=True, exist_ok=True)
            Image.new("RGB", (96, 80), (40 * k, 90 if cc == "JP" else 200, 30)).save(photos / cc / "bus" / f"{k}.jpg")
    p = cultura.init(root / "project", countries="JP,US")
    return p, photos


def _search(p, photos, events):
    return p.images.search(f"folder:{photos}", progress=events.append)


CASES = {
    "images.search": _search,
    "images.download": lambda p, photos, ev: p.images.download(progress=ev.append),
    "images.dedup": lambda p, photos, ev: p.images.dedup(progress=ev.append),
    "images.tag": lambda p, photos, ev: p.images.tag("clip", model="fake", progress=ev.append),
}
EVALUATED = {
    "evaluate.run": lambda p, ev: p.evaluate.run("fake", "association", options={"n_resamples": 20,
                                                                                "projection": "none"},
                                                 limit=3, progress=ev.append),
    "evaluate.report": lambda p, ev: p.evaluate.report(progress=ev.append),
    "view.build": lambda p, ev: p.view.build(progress=ev.append),
}


#: On a planted campaign (the annotate tables written straight, no server).
ANNOTATED = {
    "annotate.agreement": lambda p, ev: p.annotate.agreement(progress=ev.append),
    "annotate.annotators.report": lambda p, ev: p.annotate.annotators.report(progress=ev.append),
    "annotate.adjudicate": lambda p, ev: p.annotate.adjudicate(progress=ev.append),
}
#: Against the session's real Label Studio.
IN_LABEL_STUDIO = {
    "annotate.server.start": lambda p, ev: p.annotate.server.start(progress=ev.append),
    "annotate.push": lambda p, ev: p.annotate.push("filter", overlap=1, progress=ev.append),
    "annotate.simulate": lambda p, ev: (p.annotate.push("filter", overlap=1),
                                        p.annotate.simulate("filter", progress=ev.append)),
    "annotate.pull": lambda p, ev: (p.annotate.push("filter", overlap=1), p.annotate.simulate("filter"),
                                    p.annotate.pull(progress=ev.append)),
}
ALL = {**CASES, **EVALUATED, **ANNOTATED, **IN_LABEL_STUDIO}


def test_every_stage_that_takes_a_reporter_has_a_case(curated):
    p, _ = curated
    found = _progress_methods(p)
    assert {"annotate.server.start", "annotate.annotators.report"} <= found  # the walk reaches held handles
    assert found <= set(ALL), f"add a case for {sorted(found - set(ALL))}"


def _told(events: list[Event], name: str) -> None:
    assert events, f"{name} told its reporter nothing"
    assert all(isinstance(e, Event) for e in events)
    assert any(e.finished for e in events), f"{name} never closed its task"


@pytest.mark.parametrize("name", list(CASES))
def test_a_curation_stage_tells_its_reporter(curated, name):
    p, photos = curated
    for earlier in list(CASES)[:list(CASES).index(name)]:  # the stages before it, silently
        CASES[earlier](p, photos, [])
    events: list[Event] = []
    CASES[name](p, photos, events)
    _told(events, name)


@pytest.mark.parametrize("name", list(EVALUATED))
def test_an_evaluation_stage_tells_its_reporter(tmp_path, name):
    p = cultura.init(tmp_path / "project", countries="JP,TH,US,DE")
    make_benchmarks(p.project if hasattr(p, "project") else p, n_concepts=3, descriptor=False)
    for earlier in list(EVALUATED)[:list(EVALUATED).index(name)]:
        EVALUATED[earlier](p, [])
    events: list[Event] = []
    EVALUATED[name](p, events)
    _told(events, name)


@pytest.mark.parametrize("name", list(ANNOTATED))
def test_an_annotation_stage_tells_its_reporter(project, name):
    plant_campaign(project, "filter", workers={"ana": 0.9, "ben": 0.8}, n_items=20)
    events: list[Event] = []
    ANNOTATED[name](cultura.open(project.root), events)
    _told(events, name)


@pytest.mark.labelstudio
@pytest.mark.parametrize("name", list(IN_LABEL_STUDIO))
def test_a_label_studio_stage_tells_its_reporter_and_what_it_waits_for(project, labelstudio, name):  # noqa: F811
    use_server(project, labelstudio.url, labelstudio.api_key)
    tag = uuid.uuid4().hex[:6]  # the session's server keeps its users: unique e-mails
    add_images(project, "rice", "JP", 3)
    for who in ("ann", "bob"):
        add_annotator(project, who, email=f"{who}.{tag}@example.org", country="JP")
    events: list[Event] = []
    IN_LABEL_STUDIO[name](cultura.open(project.root), events)
    _told(events, name)
    if name == "annotate.push":
        sent = [e for e in events if e.stage == "pushing filter to Label Studio"]
        assert sent[-1].finished and sent[-1].done == sent[-1].total == 3 and sent[-1].info == {"projects": "2/2"}
        waits = {e.stage for e in events if e.transient}
        assert any(w.startswith("waiting for Label Studio to import ") and "filter" in w for w in waits), waits
