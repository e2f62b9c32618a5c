"""The reviewed pool: culture questions leave it until decided (by hand or by relevance ratings), a decision
survives a dedup rerun, exclusions are a status with their reason, and build and the latent probe read one
pool."""
from __future__ import annotations

import json

from click.testing import CliRunner

from cultura.benchmark.build import load_pool
from cultura.cli import cli
from cultura.curate.dedup import list_flags, resolve_flags
from cultura.annotate.pool import image_exclusions
from tests.fakes.world import decide, dup_cluster, make_world


def cli_run(project, *args):
    return CliRunner().invoke(cli, ["--project", str(project.root), *args])


def test_flags_resolved_by_hand_survive_and_leave_the_pool(project):
    w = make_world(project, concepts=("bus",), per_cell=1)
    sha = w["images"][("bus", "JP")][0]
    project.db["image_flags"].insert({"sha256": sha, "flag": "culture_conflict", "status": "open",
                                      "details": json.dumps({"pairs": []}), "created_at": "2025-01-01"})
    assert image_exclusions(project.db)[sha] == "culture_conflict"
    res = cli_run(project, "images", "flags", "--resolve", sha[:10], "--reason", "both cultures apply", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["resolved"] == 1
    [f] = list_flags(project.db, status=None)
    assert f["status"] == "resolved" and f["resolved_by"] == "hand" and f["resolution"] == "both cultures apply"
    assert sha not in image_exclusions(project.db)
    assert cli_run(project, "images", "flags", "--resolve", sha[:10]).exit_code != 0  # a reason is required


def test_one_pool_for_build_and_latent(project):
    """Duplicates reviewers dropped leave build and the latent probe alike (breakfast n_WN = 6 was five copies
    of one photo)."""
    from cultura.evaluate.suites.latent.data import load_concept_sets

    w = make_world(project, concepts=("bus",), per_cell=3)
    keep, *copies = w["images"][("bus", "JP")]
    cid = dup_cluster(project, [keep, *copies])
    for s in copies:
        decide(project, "dedup", s, label="drop", cluster_id=cid)
    for s in [x for v in w["images"].values() for x in v]:
        decide(project, "filter", s, label="keep")
    pool = load_pool(project)
    assert all(pool.excluded[s] == "duplicate_dropped" for s in copies) and keep in pool.links
    sets, _, meta = load_concept_sets(project)
    assert meta["excluded"]["duplicate_dropped"] == 2
    assert not set(copies) & set(sets[0].sha256) and keep in sets[0].sha256


def test_resolve_flags_is_kept_by_a_dedup_rerun(project):
    from cultura.curate.dedup import dedup_images

    make_world(project, concepts=("bus",), per_cell=2)
    db = project.db
    # an image found for two countries
    sha = db.execute("SELECT sha256 FROM images ORDER BY sha256 LIMIT 1").fetchone()[0]
    from tests.fakes.world import add_image
    path = db.execute("SELECT path FROM images WHERE sha256 = ?", [sha]).fetchone()[0]
    cid = db.execute("SELECT id FROM concepts").fetchone()[0]
    other = [c.code for c in project.countries if c.code not in
             {r[0] for r in db.execute("SELECT country FROM image_links WHERE sha256 = ?", [sha])}][0]
    add_image(project, cid, other, project.blob_path(path).read_bytes(), rank=9)
    dedup_images(project, progress=False)
    assert sha in {f["sha256"] for f in list_flags(db)}
    resolve_flags(db, [sha], resolution="checked", by="test")
    dedup_images(project, progress=False)
    [f] = [f for f in list_flags(db, status=None) if f["sha256"] == sha]
    assert f["status"] == "resolved" and f["resolution"] == "checked"


def test_images_exclude_include(project):
    w = make_world(project, concepts=("bus",), per_cell=1)
    sha = w["images"][("bus", "US")][0]
    res = cli_run(project, "images", "exclude", sha[:8], "--reason", "watermark", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["sha256"] == [sha]   # full sha256s in --json
    assert image_exclusions(project.db)[sha] == "image_excluded"
    rows = json.loads(cli_run(project, "images", "list", "--pool", "out", "--json").output)
    assert [(r["reason"], r["detail"]) for r in rows] == [("image_excluded", "watermark")]   # code + detail
    assert cli_run(project, "images", "include", sha[:8]).exit_code == 0
    assert sha not in image_exclusions(project.db)


def test_relevance_ratings_resolve_a_culture_conflict(project):
    from cultura.annotate.decide import _resolve_rated_conflicts

    w = make_world(project, concepts=("bus",), per_cell=1)
    sha = w["images"][("bus", "JP")][0]
    pairs = [{"concept_id": 1, "concept": "bus", "country": "JP"}, {"concept_id": 1, "concept": "bus", "country": "US"}]
    project.db["image_flags"].insert({"sha256": sha, "flag": "culture_conflict", "status": "open",
                                      "details": json.dumps({"pairs": pairs}), "created_at": "2025-01-01"})
    decide(project, "relevance", sha, value=5.0, country="JP")
    assert _resolve_rated_conflicts(project.db, "relevance") == 0      # US not rated yet: still open
    decide(project, "relevance", sha, value=2.0, country="US")
    assert _resolve_rated_conflicts(project.db, "relevance") == 1
    [f] = list_flags(project.db, status="resolved")
    assert f["resolved_by"] == "relevance review relevance"
