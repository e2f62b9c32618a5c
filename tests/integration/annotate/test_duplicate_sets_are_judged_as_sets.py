"""Duplicate sets judged as sets, through the CLI on real photographs, annotators answering through Label
Studio's API with their own logins.

Two planted sets of three copies each (the photograph, a half-size copy and a JPEG q=30 copy, each found for
another country) beside look-alikes that are not copies (two halves of one picture). The filter review removes
the cat's full-size photograph (the representative of its set) and the coffee's half-size copy (a plain member).
Then:

- ``push dedup-review`` sends both sets: the cat's set although its representative left the pool (two copies are
  still in it), and neither removed photograph reaches an annotator (checked on the tasks each annotator sees);
- a benchmark built before the review holds one member of each set at most, in one trial or across trials, and
  the one check finds nothing to refuse;
- once the reviewers keep one copy per set, the dropped copies leave the pool and the rebuilt benchmark holds.
"""
from __future__ import annotations

import hashlib
import json
import uuid

import pytest
from click.testing import CliRunner

from cultura.annotate.kinds import get_kind
from cultura.annotate.server import use_server
from cultura.cli import cli
from cultura.project import Project
from tests.fakes.cli_runner import ProjectCli
from tests.fakes.labelstudio import labelstudio  # noqa: F401
from tests.fakes.ls_annotator import AnnotatorSession
from tests.fakes.real_photos import copies, photos

pytestmark = pytest.mark.labelstudio

#: (country, concept) → photographs; the sets: chelsea (pet) and coffee (breakfast), their copies found elsewhere
PLACES = {("JP", "pet"): ["chelsea", "astronaut"], ("US", "pet"): ["rocket", "camera"],
          ("BR", "pet"): ["coins", "moon"], ("JP", "breakfast"): ["coffee", "clock"],
          ("US", "breakfast"): ["china", "flower"], ("BR", "breakfast"): ["hubble_left", "hubble_right"]}
COPIES = {("US", "pet"): ("chelsea", "resize_50"), ("BR", "pet"): ("chelsea", "jpeg_q30"),
          ("US", "breakfast"): ("coffee", "resize_50"), ("BR", "breakfast"): ("coffee", "jpeg_q30")}


def _sessions(labelstudio, emails):
    return {n: AnnotatorSession.login(labelstudio.url, e, f"pw-{n}-123456") for n, e in emails.items()}


def _shas_in(task: dict) -> set[str]:
    text = json.dumps(task["data"])
    return {s for s in ALL if s in text}


ALL: set[str] = set()


def test_duplicate_sets_are_reviewed_and_built_as_sets(tmp_path, labelstudio):
    pics = photos()
    root = tmp_path / "photos"
    sha = {}
    for (cc, concept), names in PLACES.items():
        (root / cc / concept).mkdir(parents=True)
        for n in names:
            data = copies(pics[n])["original"]
            (root / cc / concept / f"{n}.jpg").write_bytes(data)
            sha[n] = hashlib.sha256(data).hexdigest()
    for (cc, concept), (n, how) in COPIES.items():
        data = copies(pics[n])[how]
        (root / cc / concept / f"{n}-{how}.jpg").write_bytes(data)
        sha[f"{n}-{how}"] = hashlib.sha256(data).hexdigest()
    ALL.clear()
    ALL.update(sha.values())
    cat_set = {sha["chelsea"], sha["chelsea-resize_50"], sha["chelsea-jpeg_q30"]}
    coffee_set = {sha["coffee"], sha["coffee-resize_50"], sha["coffee-jpeg_q30"]}
    removed = {sha["chelsea"], sha["coffee-resize_50"]}   # the cat's representative, a plain member of the coffee's

    proj = tmp_path / "proj"
    env = {"LABEL_STUDIO_URL": labelstudio.url, "LABEL_STUDIO_API_KEY": labelstudio.api_key,
           "HF_HUB_OFFLINE": "1", "OPENAI_API_KEY": None, "OPENAI_API_KEY_FILE": None}
    assert CliRunner().invoke(cli, ["init", str(proj), "--countries", "JP,US,BR"], env=env).exit_code == 0
    # the session's Label Studio is the project's own server: annotators get blind accounts and passwords
    use_server(Project(proj), labelstudio.url, labelstudio.api_key, data_dir=labelstudio.data_dir)
    run = ProjectCli(proj, env)
    run("concepts", "add", "pet", "breakfast")
    for concept, terms in {"pet": {"JP": "ペット", "US": "pet", "BR": "animal de estimação"},
                           "breakfast": {"JP": "朝食", "US": "breakfast", "BR": "café da manhã"}}.items():
        for cc, term in terms.items():
            run("concepts", "set-term", concept, cc, term)
    run("images", "search", "--provider", f"folder:{root}")
    assert run.json("images", "download")["new_images"] == 16
    run.json("images", "dedup")
    sets = [{m["sha256"] for m in c["members"]} for c in run.json("images", "clusters")]
    assert {frozenset(s) for s in sets} == {frozenset(cat_set), frozenset(coffee_set)}   # look-alikes apart
    reps = {c["representative"] for c in run.json("images", "clusters")}
    assert sha["chelsea"] in reps and sha["coffee-resize_50"] not in reps

    tag = uuid.uuid4().hex[:6]
    emails = {n: f"{n}.{tag}@example.org" for n in ("aiko", "ted")}
    for n, cc in (("aiko", "JP"), ("ted", "US")):
        run("annotate", "annotators", "add", n, "--email", emails[n], "--country", cc)
        run("annotate", "annotators", "password", n, "--password", f"pw-{n}-123456")
    base = ("--image-base", "http://127.0.0.1:9/blobs/")
    people = _sessions(labelstudio, emails)

    # ---- the filter review, each annotator in their own account: remove the two photographs
    run.json("annotate", "push", "filter", "--overlap", "2", *base)
    spec = get_kind("filter")
    for s in people.values():
        tasks = s.my_tasks()
        assert len(tasks) == 16
        for t in tasks:
            (one,) = _shas_in(t)
            s.answer(t["id"], spec.result_for("remove" if one in removed else "keep"), 3.0)
    assert run.json("annotate", "pull")["new"] == 32
    run("annotate", "adjudicate", "--campaign", "filter")
    out = {r["sha256"]: r["reason"] for r in run.json("images", "list", "--pool", "out")}
    assert {s for s, r in out.items() if r == "filter_removed"} == removed

    # ---- before any dedup review: a build holds one member of each set at most
    flags = run.json("images", "flags")
    for f in flags:   # a person settles each culture question: every country it was found for
        run("images", "flags", "--resolve", f["sha256"][:16], "--cultures", ",".join(f["countries"]),
            "--reason", "found for each")
    run("build", "association", "--per-pair", "2")
    check = run.json("build", "check", "association@1")
    assert check["supported"], check["message"]
    db = Project(proj).db
    held = {r[0] for r in db.execute("SELECT DISTINCT sha256 FROM benchmark_candidates")}
    assert len(held & cat_set) <= 1 and len(held & coffee_set) <= 1 and not held & removed

    # ---- the dedup review: both sets sent, each with only the members still in the pool
    res = run.json("annotate", "push", "dedup-review", "--overlap", "2", *base)
    assert res["items"] == 2 and res["out_of_pool"] == 2
    spec = get_kind("dedup-review")
    seen = []
    for s in people.values():
        for t in s.my_tasks():
            if "cluster" not in t["data"]:
                continue
            members = _shas_in(t)
            seen.append(frozenset(members))
            assert not members & removed, "a photograph the filter review removed reached an annotator"
            s.answer(t["id"], spec.result_for("keep:1"), 4.0)
    assert sorted(map(sorted, set(seen))) == sorted(map(sorted, {frozenset(cat_set - removed),
                                                                 frozenset(coffee_set - removed)}))
    run("annotate", "pull")
    run("annotate", "adjudicate", "--campaign", "dedup-review")
    out = {r["sha256"]: r["reason"] for r in run.json("images", "list", "--pool", "out")}
    dropped = {s for s, r in out.items() if r == "duplicate_dropped"}
    assert len(dropped & cat_set) == 1 and len(dropped & coffee_set) == 1   # one copy kept per set
    # the version built before the review may hold a copy the review dropped: the one check says so
    check = json.loads(run("build", "check", "association@1", "--json", ok=not held & dropped))
    assert check["supported"] == (not held & dropped)
    assert check["supported"] or "dropped by the dedup review" in check["message"]
    new = run.json("build", "association", "--per-pair", "2")
    fresh = {r[0] for r in Project(proj).db.execute(
        "SELECT DISTINCT c.sha256 FROM benchmark_candidates c JOIN benchmark_items i ON i.id = c.item_id "
        "WHERE i.benchmark_id = ?", [new["id"]])}
    assert not fresh & (dropped | removed)
    assert run.json("build", "check", f"association@{new['version']}")["supported"]
    for s in people.values():
        s.close()
