"""Benchmark assembly: role rules, exclusions, versioning, determinism and bad input."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cultura.benchmark.build import KINDS, BuildError, build_benchmark, build_stats, get_benchmark, load_pool
from cultura.cli import cli
from cultura.curate.cultures_decide import CulturesUndecided
from cultura.errors import CulturaError
from tests.fakes.world import add_image, decide, dup_cluster, make_world, mention_queries

ROLE_ORDER = ["cr", "orlb", "or", "cdr", "lb", "ti"]


def _trials(project, bid):
    db = project.db
    out = {}
    for iid, key, cid, L, D in db.execute("SELECT id, item_key, concept_id, query_country, descriptor_country "
                                          "FROM benchmark_items WHERE benchmark_id = ?", [bid]):
        rows = db.execute("SELECT role, sha256, concept_id, country FROM benchmark_candidates "
                          "WHERE item_id = ?", [iid]).fetchall()
        out[key] = (cid, L, D, sorted(rows, key=lambda r: ROLE_ORDER.index(r[0])))  # positions are shuffled
    return out


def test_association_roles(project):
    w = make_world(project, per_cell=2)
    b = build_benchmark(project, "association", allow_unreviewed=True, per_pair=2, seed=3)
    assert b["n_items"] == 3 * 4 * 2
    for cid, L, D, cands in _trials(project, b["id"]).values():
        roles = {r: (sha, c, k) for r, sha, c, k in cands}
        assert list(roles) == ["cr", "lb", "ti"]
        assert roles["cr"][1] == cid and roles["cr"][2] != L
        assert roles["lb"][1] != cid and roles["lb"][2] == L
        assert roles["ti"][1] != cid and roles["ti"][2] != L
        assert len({v[0] for v in roles.values()}) == 3
    assert b["report"]["images"]["unreviewed_used"] == len(w["images"]) * 2


def test_descriptor_roles(project):
    make_world(project, per_cell=1)
    mention_queries(project)
    b = build_benchmark(project, "descriptor", allow_unreviewed=True)
    assert b["n_items"] == 3 * 4 * 3
    for cid, L, D, cands in _trials(project, b["id"]).values():
        roles = {r: (c, k) for r, sha, c, k in cands}
        assert list(roles) == [r.name for r in KINDS["descriptor"]]
        assert roles["cr"] == (cid, D) and roles["orlb"] == (cid, L)
        assert roles["or"][0] == cid and roles["or"][1] not in (L, D)
        assert roles["cdr"][0] != cid and roles["cdr"][1] == D
        assert roles["lb"][0] != cid and roles["lb"][1] == L
        assert roles["ti"][0] != cid and roles["ti"][1] not in (L, D)


def test_tag_rule_and_exclusions(project):
    w = make_world(project, concepts=("bus", "temple", "food"), countries=["US", "JP", "TH", "DE"], per_cell=1)
    db = project.db
    temple_jp = w["images"][("temple", "JP")][0]
    db["image_tags"].insert({"sha256": temple_jp, "tag": "bus", "score": 0.9, "source": "llm:x",
                             "created_at": "2025-01-01"})
    food_jp = w["images"][("food", "JP")][0]
    db["image_flags"].insert({"sha256": food_jp, "flag": "culture_conflict", "status": "open",
                              "created_at": "2025-01-01"})
    # an open culture question blocks the build, naming the commands that decide it
    with pytest.raises(CulturesUndecided, match="images flags --resolve"):
        build_benchmark(project, "association", allow_unreviewed=True)
    assert db["benchmarks"].count == 0
    db["images"].update(food_jp, {"status": "excluded"})  # taken out by hand instead: the question is moot
    b = build_benchmark(project, "association", allow_unreviewed=True)
    for cid, L, D, cands in _trials(project, b["id"]).values():
        shas = [c[1] for c in cands]
        assert food_jp not in shas
        if cid == w["concepts"]["bus"]:
            assert temple_jp not in shas[1:]
    rep = b["report"]
    assert rep["images"]["excluded"]["image_excluded"] == 1 and rep["images"]["excluded"]["culture_conflict"] == 0
    assert rep["sampling"]["tag_conflicts"]["bus"] == 1
    # bus × JP: the only lb candidate (temple_jp) carries a bus tag and food_jp is excluded → too few
    holes = {(h["concept"], h["query_country"], h["role"]) for h in rep["sampling"]["too_few_images"]}
    assert ("bus", "JP", "lb") in holes


def test_filter_decisions_and_duplicates(project):
    w = make_world(project, concepts=("bus", "temple", "food"), countries=["US", "JP", "TH"], per_cell=2)
    all_shas = [s for v in w["images"].values() for s in v]
    removed = w["images"][("bus", "US")][0]
    dropped = w["images"][("bus", "US")][1]
    for s in all_shas:
        decide(project, "filter", s, label="remove" if s == removed else "keep")
    decide(project, "dedup", dropped, label="drop")
    a, b2 = w["images"][("bus", "TH")][0], w["images"][("temple", "JP")][0]
    dup_cluster(project, [a, b2])
    b = build_benchmark(project, "association", per_pair=2, seed=1)
    ex = b["report"]["images"]["excluded"]
    assert ex["filter_removed"] == 1 and ex["duplicate_dropped"] == 1
    for cid, L, D, cands in _trials(project, b["id"]).values():
        shas = {c[1] for c in cands}
        assert removed not in shas and dropped not in shas
        assert not {a, b2} <= shas


def test_unreviewed_needs_flag(project):
    make_world(project, per_cell=1)
    with pytest.raises(BuildError, match="--allow-unreviewed"):
        build_benchmark(project, "association")
    # once some decisions exist, images without one are excluded as unreviewed
    sha = project.db.execute("SELECT sha256 FROM images LIMIT 1").fetchone()[0]
    decide(project, "filter", sha, label="keep")
    assert load_pool(project).report()["excluded"]["unreviewed"] == 12 - 1
    # a benchmark with no trials is not a benchmark: nothing is stored (it was once marked ready)
    with pytest.raises(BuildError, match="No association trial could be built"):
        build_benchmark(project, "association")
    assert project.db["benchmarks"].count == 0


def test_min_relevance(project):
    w = make_world(project, per_cell=1)
    low = w["images"][("bus", "JP")][0]
    decide(project, "relevance", low, value=2.0, country="JP")
    decide(project, "relevance", w["images"][("bus", "US")][0], value=4.5, country="US")
    pool = load_pool(project, allow_unreviewed=True)
    assert low not in pool.links and pool.excluded[low] == "low_relevance"
    pool = load_pool(project, allow_unreviewed=True, min_relevance=None)
    assert low in pool.links


def test_versioning_and_determinism(project):
    make_world(project, per_cell=3)
    b1 = build_benchmark(project, "association", allow_unreviewed=True, per_pair=2, seed=7)
    b2 = build_benchmark(project, "association", allow_unreviewed=True, per_pair=2, seed=7)
    b3 = build_benchmark(project, "association", allow_unreviewed=True, per_pair=2, seed=8)
    # identical inputs and seed: the existing version comes back, no v2 with the same content hash
    assert (b1["version"], b2["version"], b3["version"]) == (1, 1, 2)
    assert (b1["reused"], b2["reused"], b3["reused"]) == (False, True, False)
    assert b2["id"] == b1["id"] and project.db["benchmarks"].count == 2
    assert b1["content_hash"] == b2["content_hash"] != b3["content_hash"]
    b4 = build_benchmark(project, "association", allow_unreviewed=True, per_pair=2, seed=7, version=5)
    assert b4["version"] == 5 and not b4["reused"]    # an explicit new version is still built
    t1, t4 = _trials(project, b1["id"]), _trials(project, b4["id"])
    assert t1 == t4
    assert get_benchmark(project, "association@1")["id"] == b1["id"]
    assert get_benchmark(project, "association@2")["id"] == b3["id"]


def test_existing_version_is_refused(project):
    make_world(project, per_cell=1)
    build_benchmark(project, "association", name="x", version=1, allow_unreviewed=True)
    n = project.db["benchmark_items"].count
    with pytest.raises(BuildError, match="already exists.*version 2"):
        build_benchmark(project, "association", name="x", version=1, allow_unreviewed=True)
    assert project.db["benchmarks"].count == 1 and project.db["benchmark_items"].count == n


def test_a_seed_that_is_no_seed_is_one_sentence(project):
    make_world(project, per_cell=1)
    for seed in ("abc", -1, 2**64 + 1, 1.5):
        with pytest.raises(CulturaError, match="seed must be an integer from 0 to 4294967295"):
            build_benchmark(project, "association", seed=seed, allow_unreviewed=True)
    r = CliRunner().invoke(cli, ["--project", str(project.root), "build", "association", "--seed", "abc"])
    assert r.exit_code == 2 and "abc is not an integer from 0 to 4294967295." in r.output
    assert project.db["benchmarks"].count == 0


def test_missing_native_term_writes_nothing(project):
    make_world(project, per_cell=1)
    project.db.execute("DELETE FROM terms WHERE country = 'TH'")
    project.db.conn.commit()
    with pytest.raises(BuildError, match="cultura concepts translate.*set-term"):
        build_benchmark(project, "association", allow_unreviewed=True)
    assert project.db["benchmarks"].count == 0
    assert project.db["benchmark_items"].count == 0
    assert project.db["benchmark_queries"].count == 0


def test_multi_country_image_never_cr_for_its_culture(project):
    w = make_world(project, per_cell=1)
    bus_us = w["images"][("bus", "US")][0]
    # the same bytes found by the Japanese query too
    data = (project.root / project.db["images"].get(bus_us)["path"]).read_bytes()
    add_image(project, w["concepts"]["bus"], "JP", data, rank=9)
    b = build_benchmark(project, "association", allow_unreviewed=True, per_pair=3)
    for cid, L, D, cands in _trials(project, b["id"]).values():
        if L in ("JP", "US"):
            assert bus_us not in [c[1] for c in cands if c[0] in ("cr", "ti")]


def test_stats_and_cli(project):
    make_world(project, per_cell=2)
    s = build_stats(project, min_images=3)
    assert [c["samples"] for c in s["countries"]] == [6, 6, 6, 6]
    assert {c["concept"]: c["images"] for c in s["concepts"]} == {"bus": 8, "food": 8, "temple": 8}
    assert len(s["holes"]) == 12
    run = CliRunner()
    base = ["--project", str(project.root)]
    r = run.invoke(cli, base + ["build", "association", "--allow-unreviewed", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["n_items"] == 12
    r = run.invoke(cli, base + ["build", "association", "--name", "association", "--version", "1"])
    assert r.exit_code == 1 and "already exists" in r.output
    r = run.invoke(cli, base + ["build", "list", "--json"])
    assert json.loads(r.stdout)[0]["name"] == "association"
    r = run.invoke(cli, base + ["build", "stats", "--benchmark", "association@1", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["countries"]
    mention_queries(project)
    r = run.invoke(cli, base + ["build", "descriptor", "--allow-unreviewed"])
    assert r.exit_code == 0 and "Built" in r.output


def test_build_refuses_tags_of_a_random_model(project):
    w = make_world(project, per_cell=2)
    sha = w["images"][("bus", "JP")][0]
    project.db["image_tags"].insert({"sha256": sha, "tag": "food", "score": 0.9,
                                     "source": "clip:openclip:cultura-tiny/random_init@seed0", "created_at": "x"})
    with pytest.raises(BuildError, match="random-init.*allow-random-tags"):
        build_benchmark(project, "association", allow_unreviewed=True)
    b = build_benchmark(project, "association", allow_unreviewed=True, allow_random_tags=True)
    assert b["report"]["images"]["random_tag_sources"] == ["clip:openclip:cultura-tiny/random_init@seed0"]
