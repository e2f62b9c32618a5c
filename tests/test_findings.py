"""Issue 14's findings, each pinned by a fast test (no Label Studio; the CLI walk in tests/test_walk.py goes
through all of them on real photographs)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cultura.annotate.items import dedup_items, image_url
from cultura.annotate.push import check_image_urls
from cultura.cli import cli
from cultura.config import parse_config
from cultura.benchmark.build import BuildError, build_benchmark, load_pool
from cultura.curate.dedup import list_flags, resolve_flags
from cultura.annotate.pool import image_exclusions
from cultura.errors import ConfigError, CulturaError
from cultura.models.tiny import is_random_init
from tests.fakes.world import decide, dup_cluster, make_world


def cli_run(project, *args):
    return CliRunner().invoke(cli, ["--project", str(project.root), *args])


# ------------------------------------------------------------------------------------ image URLs

def test_image_url_never_doubles_blobs():
    p = {"path": "blobs/ab/x.jpg", "url": "file:///tmp/x.jpg"}
    assert image_url(p, "http://127.0.0.1:8081") == "http://127.0.0.1:8081/blobs/ab/x.jpg"
    assert image_url(p, "http://127.0.0.1:8081/blobs/") == "http://127.0.0.1:8081/blobs/ab/x.jpg"
    assert image_url(p, None) == "file:///tmp/x.jpg"


def test_push_refuses_urls_a_browser_cannot_load():
    items = [{"payload": {"path": "blobs/ab/x.jpg", "url": "file:///tmp/x.jpg"}}]
    with pytest.raises(CulturaError, match="serve-images.*image_base_url"):
        check_image_urls(items, None)
    with pytest.raises(CulturaError, match="not an http"):
        check_image_urls(items, "file:///srv/blobs")
    check_image_urls(items, "http://127.0.0.1:8081")  # fine
    dedup = [{"payload": {"members": [{"path": "blobs/a.jpg", "url": "https://ex.org/a.jpg"},
                                      {"path": "blobs/b.jpg", "url": None}]}}]
    with pytest.raises(CulturaError, match="1 of 2"):
        check_image_urls(dedup, None)


def test_annotate_config_is_typed():
    cfg = parse_config({"annotate": {"image_base_url": "http://127.0.0.1:8081", "relevance_other_countries": 2}})
    assert cfg.annotate.image_base_url == "http://127.0.0.1:8081" and cfg.annotate.relevance_other_countries == 2
    with pytest.raises(ConfigError, match="image_base_url"):
        parse_config({"annotate": {"image_base_url": "file:///x"}})
    with pytest.raises(ConfigError, match="Did you mean 'image_base_url'"):
        parse_config({"annotate": {"image_base": "http://x"}})
    with pytest.raises(ConfigError, match="Valid keys here: association"):
        parse_config({"evaluate": {"bogus": {}}})


# ------------------------------------------------------------------------------------ flags and the pool

def test_flags_resolved_by_hand_survive_and_leave_the_pool(project):
    w = make_world(project, concepts=("bus",), per_cell=1)
    sha = w["images"][("bus", "JP")][0]
    project.db["image_flags"].insert({"sha256": sha, "flag": "culture_conflict", "status": "open",
                                      "details": json.dumps({"pairs": []}), "created_at": "2025-01-01"})
    assert image_exclusions(project.db)[sha] == "culture_conflict"
    res = cli_run(project, "images", "flags", "--resolve", sha[:10], "--reason", "both cultures apply", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["resolved"] == 1
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


def test_dedup_review_is_one_item_per_duplicate_set(project):
    w = make_world(project, concepts=("bus",), per_cell=3)
    a, b, c = w["images"][("bus", "JP")]
    c1 = dup_cluster(project, [a, b])       # say, pHash
    c2 = dup_cluster(project, [a, b, c])    # and dHash over the same copies
    [item] = dedup_items(project)
    assert item["payload"]["cluster_ids"] == [c1, c2]
    assert {m["sha256"] for m in item["payload"]["members"]} == {a, b, c}


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


# ------------------------------------------------------------------------------------ random-init models

def test_random_init_models_say_so():
    from cultura.models.embedders import get_embedder
    from cultura.models.scorers import get_scorer

    tiny = get_embedder("openclip:cultura-tiny")
    assert "random_init" in tiny.identity and tiny.info["random_init"] is True
    lm = get_scorer("hf:cultura-tiny-gpt2")
    assert is_random_init(lm.identity) and lm.info["random_init"] is True
    assert get_embedder("fake").info["random_init"] is False


def test_build_refuses_tags_of_a_random_model(project):
    w = make_world(project, per_cell=2)
    sha = w["images"][("bus", "JP")][0]
    project.db["image_tags"].insert({"sha256": sha, "tag": "food", "score": 0.9,
                                     "source": "clip:openclip:cultura-tiny/random_init@seed0", "created_at": "x"})
    with pytest.raises(BuildError, match="random-init.*allow-random-tags"):
        build_benchmark(project, "association", allow_unreviewed=True)
    b = build_benchmark(project, "association", allow_unreviewed=True, allow_random_tags=True)
    assert b["report"]["images"]["random_tag_sources"] == ["clip:openclip:cultura-tiny/random_init@seed0"]


# ------------------------------------------------------------------------------------ hints and errors

def test_country_hint_names_the_registry_file_and_alpha3(tmp_path):
    res = CliRunner().invoke(cli, ["init", str(tmp_path / "p"), "--countries", "US,JPN", "--json"])
    assert res.exit_code != 0
    err = json.loads(res.output)
    assert "Did you mean 'JP'" in err["error"] and "countries.toml" in err["error"]


def test_json_errors_and_literal_markup(project):
    res = cli_run(project, "build", "association", "--json")
    assert res.exit_code != 0 and json.loads(res.output)["type"] == "BuildError"
    from cultura.cli.console import columns_of, table, out
    assert columns_of([{"a": 1}, {"b": 2}]) == ["a", "b"]
    with out.capture() as cap:
        table("t", [{"what": "[evaluate.llm] llm = ..."}, {"note": "second row only"}])
    text = cap.get()
    assert "[evaluate.llm]" in text and "second row only" in text


def test_evaluate_refuses_unknown_options_and_models(project):
    make_world(project, per_cell=2)
    bad = cli_run(project, "evaluate", "run", "--model", "fake", "--suite", "latent", "--option", "bogus=1")
    assert bad.exit_code != 0 and "Unknown option bogus" in bad.output and "n_resamples" in bad.output
    assert project.db["eval_runs"].count == 0  # refused before anything ran
    res = cli_run(project, "evaluate", "run", "--model", "clip")
    assert res.exit_code != 0 and "Unknown embedder family 'clip'" in res.output
    assert project.db["eval_runs"].count == 1  # one failure, not one per suite


def test_set_term_from_file(project, tmp_path):
    make_world(project, concepts=("bus",), per_cell=1, terms=False)
    f = tmp_path / "terms.tsv"
    f.write_text("concept\tcountry\tterm\nbus\tJP\tバス\nbus\tTH\tรถเมล์\n", encoding="utf-8")
    res = cli_run(project, "concepts", "set-term", "--from", str(f), "--json")
    assert res.exit_code == 0, res.output and json.loads(res.output)["terms"] == 2
    terms = {r["country"]: r["term"] for r in project.db["terms"].rows}
    assert terms["JP"] == "バス" and terms["TH"] == "รถเมล์"
    f.write_text("concept\tcountry\tterm\nbus\tJP\tバス\nbus\tXX\tfoo\n", encoding="utf-8")
    bad = cli_run(project, "concepts", "set-term", "--from", str(f))
    assert bad.exit_code != 0 and "line 3" in bad.output


def test_images_exclude_include(project):
    w = make_world(project, concepts=("bus",), per_cell=1)
    sha = w["images"][("bus", "US")][0]
    res = cli_run(project, "images", "exclude", sha[:8], "--reason", "watermark", "--json")
    assert res.exit_code == 0 and json.loads(res.output)["sha256"] == [sha]   # full sha256s in --json (issue 20)
    assert image_exclusions(project.db)[sha] == "image_excluded"
    rows = json.loads(cli_run(project, "images", "list", "--pool", "out", "--json").output)
    assert [(r["reason"], r["detail"]) for r in rows] == [("image_excluded", "watermark")]   # code + detail
    assert cli_run(project, "images", "include", sha[:8]).exit_code == 0
    assert sha not in image_exclusions(project.db)


def test_undefined_kappa_says_why():
    from cultura.annotate.report import agreement_stats

    recs = [{"item_id": i, "annotator": a, "label": "keep", "value": None} for i in range(4) for a in "xy"]
    out = agreement_stats(recs, "nominal")
    assert out["percent_agreement"] == 1.0
    assert "same value" in out["fleiss_kappa_undefined"]
    assert all("do not vary" in p["why_undefined"] for p in out["pairwise_kappa"])


def test_a_suite_that_measured_nothing_is_not_done(project):
    from cultura.evaluate.runner import run_suite
    from cultura.evaluate.suites.registry import Suite, row
    from cultura.models.embedders import get_embedder

    def empty(project, embedder, *, benchmark=None, options):
        return [row("empty", "M_cr", float("nan"), n=0, details={"reason": "no trials",
                                                                 "excluded": {"missing_query": 12}})]
    rec = run_suite(project, get_embedder("fake"), Suite("empty", empty, "test"), from_all=True)
    assert rec.status == "skipped" and "cultura build queries" in rec.reason and "missing_query 12" in rec.reason
    assert project.db["eval_results"].count == 0
    rec = run_suite(project, get_embedder("fake"), Suite("empty", empty, "test"))
    assert rec.status == "failed"


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
