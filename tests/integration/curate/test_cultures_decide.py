"""One rule for a photo found for several cultures, through the CLI on real photographs.

The cat (scikit-image's chelsea) is found for JP and, as a half-size copy, for US; the coffee photo is found
byte-identical for BR and US. Two reviewers answer the dedup review through Label Studio's API (their own
logins, ``completed_by``): they keep the full-size cat. That decides which copy stays, never which culture: the
culture questions stay open and the build is refused with the commands that decide them. Three annotators then
rate relevance through Label Studio: the US link of the cat (found only through the dropped copy) is asked of
the kept copy and kept, and the coffee keeps BR only (US rated 2). Near copy and byte-identical copy follow the
same rule."""
from __future__ import annotations

import uuid

import pytest
from click.testing import CliRunner
from PIL import Image

from cultura.annotate.kinds import get_kind
from cultura.cli import cli
from cultura.benchmark.build import load_pool
from cultura.project import Project
from tests.fakes.cli_runner import ProjectCli
from tests.fakes.labelstudio import labelstudio  # noqa: F401

pytestmark = pytest.mark.labelstudio


def _photos(root):
    # deferred: scikit-image is heavy and only the photographs need it
    import skimage.data as skd

    def save(a, cc, concept, name):
        (root / cc / concept).mkdir(parents=True, exist_ok=True)
        Image.fromarray(a).convert("RGB").save(root / cc / concept / name, quality=92)

    cat = skd.chelsea()
    save(cat, "JP", "pet", "cat.jpg")
    small = Image.fromarray(cat).resize((cat.shape[1] // 2, cat.shape[0] // 2))
    (root / "US" / "pet").mkdir(parents=True)
    small.save(root / "US" / "pet" / "cat-small.jpg", quality=92)            # planted near copy, another country
    save(skd.coffee(), "BR", "breakfast", "coffee.jpg")
    (root / "US" / "breakfast").mkdir(parents=True)
    (root / "US" / "breakfast" / "coffee.jpg").write_bytes((root / "BR" / "breakfast" / "coffee.jpg").read_bytes())
    save(skd.astronaut(), "US", "pet", "astronaut.jpg")
    save(skd.rocket(), "BR", "pet", "rocket.jpg")
    save(skd.camera(), "JP", "breakfast", "camera.jpg")


def _answer(labelstudio, db_path, campaign, label_for):
    """Every task of ``campaign`` answered through Label Studio's API by the annotator it was given to."""
    import sqlite3

    con = sqlite3.connect(db_path)
    rows = con.execute(
        """SELECT a.ls_task_id, an.name, an.ls_user_id, i.sha256, i.country FROM assignments a
           JOIN annotators an ON an.id = a.annotator_id JOIN annotation_items i ON i.id = a.item_id
           JOIN campaigns c ON c.id = i.campaign_id WHERE c.name = ? AND a.purpose = 'annotate'
           AND a.ls_task_id IS NOT NULL""", [campaign]).fetchall()
    con.close()
    client = labelstudio.connection().client
    kind = {"dedup-review": "dedup-review", "relevance": "relevance"}[campaign]
    for task, name, uid, sha, cc in rows:
        client.annotations.create(task, result=get_kind(kind).result_for(label_for(name, sha, cc)),
                                  completed_by=uid, lead_time=3.0)
    return {r[1] for r in rows}


def test_one_culture_rule_for_near_and_byte_identical_copies(tmp_path, labelstudio):
    photos = tmp_path / "photos"
    _photos(photos)
    proj = tmp_path / "proj"
    env = {"LABEL_STUDIO_URL": labelstudio.url, "LABEL_STUDIO_API_KEY": labelstudio.api_key,
           "HF_HUB_OFFLINE": "1", "OPENAI_API_KEY": None, "OPENAI_API_KEY_FILE": None}
    run = ProjectCli(proj, env)
    assert CliRunner().invoke(cli, ["init", str(proj), "--countries", "JP,US,BR"], env=env).exit_code == 0
    run("concepts", "add", "pet", "breakfast")
    assert run.json("images", "search", "--provider", f"folder:{photos}")["results"] == 7
    assert run.json("images", "download")["new_images"] == 6          # the byte-identical coffee is one image
    run.json("images", "dedup")
    flags = {f["sha256"]: f for f in run.json("images", "flags")}
    assert len(flags) == 3                                            # cat, its copy, the coffee
    assert sorted(f["countries"] for f in flags.values()) == [["BR", "US"], ["JP", "US"], ["JP", "US"]]
    coffee = next(s for s, f in flags.items() if f["countries"] == ["BR", "US"])
    cluster = run.json("images", "clusters")
    assert {c["method"] for c in cluster} == {"phash", "dhash"}       # the same pair, found by both hashes
    cat, cat_small = [m["sha256"] for m in cluster[0]["members"]]     # representative (full size) first
    assert len(cat) == len(cat_small) == 64 and {cat, cat_small} <= set(flags)

    tag = uuid.uuid4().hex[:6]
    for name, cc in (("aiko", "JP"), ("ted", "US"), ("bia", "BR")):
        run("annotate", "annotators", "add", name, "--email", f"{name}.{tag}@example.org", "--country", cc,
            "--languages", "en")
    base = ("--image-base", "http://127.0.0.1:9/blobs/")

    # ---- the dedup review, two reviewers through Label Studio: keep the full-size cat
    assert run.json("annotate", "push", "dedup-review", "--overlap", "2", "--annotators", "aiko,ted", *base)[
        "items"] == 1
    assert _answer(labelstudio, proj / "cultura.db", "dedup-review", lambda *a: "keep:1") == {"aiko", "ted"}
    assert run.json("annotate", "pull")["new"] == 2
    adj = {a["campaign"]: a for a in run.json("annotate", "adjudicate")}
    assert adj["dedup-review"]["decided"] == 1 and adj["dedup-review"]["culture_questions_open"] == 3
    assert "3 culture questions still open" in " ".join(run("annotate", "adjudicate").split())
    out = {r["sha256"]: r for r in run.json("images", "list", "--pool", "out")}
    assert (out[cat_small]["pool"], out[cat_small]["reason"]) == ("out", "duplicate_dropped")
    assert out[cat]["reason"] == "culture_conflict" and "no culture decision" in out[cat]["detail"]
    # which copy stays was decided; which culture was not: every question is still open
    assert set(f["sha256"] for f in run.json("images", "flags")) == set(flags)
    refused = run("build", "association", "--allow-unreviewed", ok=False)
    assert "no culture decision" in refused and "cultura images flags --resolve" in refused \
        and "cultura annotate push relevance" in refused
    # a person may only keep countries the photo was found for (its own or its dropped copy's)
    bad = run("images", "flags", "--resolve", cat, "--cultures", "BR", "--reason", "looks Brazilian", ok=False)
    assert "not found for BR" in bad

    # ---- relevance, one native annotator per country through Label Studio
    rel = run.json("annotate", "push", "relevance", "--overlap", "1", *base)
    items = {(r[0], r[1]) for r in Project(proj).db.execute(
        "SELECT sha256, country FROM annotation_items WHERE kind = 'relevance'").fetchall()}
    assert (cat, "US") in items                       # the dropped copy's culture is asked of the kept copy
    assert rel["tasks_created"] > 0

    def score(name, sha, cc):
        if sha == coffee and cc == "US":
            return "2"                                # the coffee is rated not American
        return "5" if cc in flags.get(sha, {}).get("countries", [cc]) else "1"

    _answer(labelstudio, proj / "cultura.db", "relevance", score)
    run("annotate", "pull")
    text = run("annotate", "adjudicate", "--campaign", "relevance")
    lines = text.strip().splitlines()                 # readable at 80 columns, one sentence per line
    assert lines[0].startswith("relevance (relevance): rule median") and max(map(len, lines)) <= 80
    assert any("decided by the ratings" in ln for ln in lines) and any("open: nothing" in ln for ln in lines)
    assert run.json("images", "flags") == []          # every flagged country rated: decided
    decided = {f["sha256"]: f for f in run.json("images", "flags", "--status", "resolved")}
    assert {decided[s]["resolved_by"] for s in (cat, coffee)} == {"relevance review relevance"}

    project = Project(proj)
    pool = load_pool(project, allow_unreviewed=True)
    assert pool.cultures(cat) == {"JP", "US"}         # the near copy's US link kept (rated), not lost
    assert pool.cultures(coffee) == {"BR"}            # the byte-identical copy: the same rule, US rated 2
    assert pool.excluded[cat_small] == "duplicate_dropped"
    stats = run.json("build", "stats")
    assert {c["code"]: c["samples"] for c in stats["countries"]}["US"] == 2    # the cat + the astronaut

    # ---- a person changes the decision: the cat stands for Japan only
    res = run.json("images", "flags", "--resolve", cat, "--cultures", "JP", "--reason", "a Japanese cat")
    assert res["resolved"] == 1 and res["cultures"] == ["JP"]
    assert load_pool(Project(proj), allow_unreviewed=True).cultures(cat) == {"JP"}
    # a dedup rerun keeps the decision (the pairs did not grow)
    run.json("images", "dedup")
    assert run.json("images", "flags") == []
    assert load_pool(Project(proj), allow_unreviewed=True).cultures(cat) == {"JP"}
