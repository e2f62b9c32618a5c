"""Every long stage says how far it is: each method of the front door that takes a progress reporter (enumerated
from the handles, so a new long stage without a case here fails) tells it events, down to a finished one, so the
command line's reporter can draw a bar on a terminal and print lines and a summary elsewhere. (The reporter's
drawing: tests/unit/test_machine_output.py.)"""
from __future__ import annotations

import inspect

import pytest
from PIL import Image

import cultura
from cultura.progress import Event
from tests.fakes.benchmark_world import make_benchmarks


def _progress_methods(p) -> set[str]:
    out = set()
    for handle in ("concepts", "images", "annotate", "benchmarks", "imports", "evaluate", "view"):
        h = getattr(p, handle, None)
        for name in dir(h):
            attr = getattr(h, name, None)
            if not name.startswith("_") and callable(attr):
                try:
                    if "progress" in inspect.signature(attr).parameters:
                        out.add(f"{handle}.{name}")
                except (TypeError, ValueError):
                    continue
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


def test_every_stage_that_takes_a_reporter_has_a_case(curated):
    p, _ = curated
    assert _progress_methods(p) <= set(CASES) | set(EVALUATED), \
        f"add a case for {sorted(_progress_methods(p) - set(CASES) - set(EVALUATED))}"


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
