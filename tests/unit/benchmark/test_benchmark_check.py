"""The one check of a benchmark version against the current state, on the fixture world: each later change that
makes a built version untrue is named, in words; export refuses such a version in one sentence unless asked to
export it as built (the card then says what changed); build never writes two members of one duplicate set."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

import cultura
from cultura.benchmark.build import build_benchmark, get_benchmark
from cultura.benchmark.export import export_benchmark
from cultura.benchmark.verify import NotSupported, check_benchmark
from cultura.cli import cli
from cultura.curate.query_edits import set_query
from cultura.curate.status import set_image_status
from tests.fakes.world import decide, dup_cluster, make_world, mention_queries


def _candidates(project, spec):
    b = get_benchmark(project, spec)
    return project.db.execute(
        "SELECT i.id, c.role, c.sha256, c.country FROM benchmark_candidates c JOIN benchmark_items i "
        "ON i.id = c.item_id WHERE i.benchmark_id = ? ORDER BY i.id, c.position", [b["id"]]).fetchall()


def _check(project, spec="association@1"):
    return check_benchmark(project, get_benchmark(project, spec))


@pytest.fixture
def built(project):
    w = make_world(project, per_cell=3)
    mention_queries(project)
    build_benchmark(project, "association", allow_unreviewed=True, per_pair=2)
    return project, w


def test_a_fresh_version_holds(built):
    project, _ = built
    res = _check(project)
    assert res["supported"] and res["changes"] == [] and res["message"] is None


@pytest.mark.parametrize("change, what, phrase", [
    ("exclude", "image_excluded", "excluded by hand"),
    ("filter", "filter_removed", "removed by the filter review"),
    ("dedup", "duplicate_dropped", "dropped by the dedup review"),
    ("question", "culture_conflict", "open culture question"),
    ("unreadable", "unreadable", "could not decode"),
    ("rating", "low_relevance", "rated below"),
    ("query", "queries_changed", "rewritten or withdrawn"),
])
def test_each_later_change_is_named_and_export_refuses_it(built, tmp_path, change, what, phrase):
    project, _ = built
    _, role, sha, country = _candidates(project, "association@1")[0]
    db = project.db
    if change == "exclude":
        set_image_status(project, [sha], exclude=True, reason="a watermark")
    elif change == "filter":
        for (s,) in db.execute("SELECT sha256 FROM images").fetchall():
            decide(project, "filter", s, label="remove" if s == sha else "keep")
    elif change == "dedup":
        decide(project, "dedup", sha, label="drop")
    elif change in ("question", "unreadable"):
        db["image_flags"].insert({"sha256": sha, "flag": "culture_conflict" if change == "question" else "unreadable",
                                  "status": "open", "created_at": "2025"})
    elif change == "rating":
        decide(project, "relevance", sha, value=1.0, country=country)
    else:
        q = db.execute("SELECT c.name, q.country FROM benchmark_query_snapshot q JOIN concepts c ON "
                       "c.id = q.concept_id WHERE variant = 'short' LIMIT 1").fetchone()
        set_query(project, q[0], q[1], "short", f"{q[0]} today")
    res = _check(project)
    assert not res["supported"]
    found = {c["what"]: c for c in res["changes"]}
    assert what in found and phrase in found[what]["text"]
    assert what == "queries_changed" or sha in found[what]["images"]
    with pytest.raises(NotSupported) as e:
        export_benchmark(project, tmp_path / "out", benchmarks=["association@1"])
    msg = str(e.value)
    assert msg.count(". ") == 0 and phrase in msg and "cultura build association --per-pair 2 --allow-unreviewed" \
        in msg and "--as-built" in msg
    assert not (tmp_path / "out").exists()


def test_every_reason_an_image_leaves_the_pool_is_named_in_words():
    """A reason the pool learns later must not leave a built version looking true."""
    from cultura.benchmark.eligible import EXCLUSION_REASONS
    from cultura.benchmark.verify import LEFT_POOL

    assert set(EXCLUSION_REASONS) <= set(LEFT_POOL)


def test_as_built_exports_the_version_and_the_card_says_what_changed(built, tmp_path):
    project, _ = built
    sha = _candidates(project, "association@1")[0][2]
    set_image_status(project, [sha], exclude=True, reason="a watermark")
    r = export_benchmark(project, tmp_path / "out", benchmarks=["association@1"], as_built=True)
    assert "excluded by hand" in r["changed_since_build"]["association@1"][0]
    card = (tmp_path / "out" / "README.md").read_text()
    assert "## Changed since the build" in card and "excluded by hand" in card
    # a version that still holds has no such section
    build_benchmark(project, "association", allow_unreviewed=True, per_pair=2)
    export_benchmark(project, tmp_path / "new", benchmarks=["association@2"])
    assert "Changed since the build" not in (tmp_path / "new" / "README.md").read_text()


def test_a_duplicate_set_is_one_photograph_across_trials(built):
    project, _ = built
    cands = _candidates(project, "association@1")
    a = cands[0]
    b = next(c for c in cands if c[0] != a[0] and c[2] != a[2])   # another trial, another image
    dup_cluster(project, [a[2], b[2]])
    res = _check(project)
    dup = next(c for c in res["changes"] if c["what"] == "duplicate_set")
    assert dup["count"] == 1 and set(dup["images"]) == {a[2], b[2]}
    # the rebuild holds one member of the set at most, whatever trial it is in
    new = build_benchmark(project, "association", allow_unreviewed=True, per_pair=2)
    shas = {c[2] for c in _candidates(project, f"association@{new['version']}")}
    assert len(shas & {a[2], b[2]}) <= 1 and _check(project, f"association@{new['version']}")["supported"]


def test_a_chain_of_clusters_is_one_set(built):
    project, w = built
    cands = _candidates(project, "association@1")
    a, b = cands[0][2], next(c[2] for c in cands if c[0] != cands[0][0] and c[2] != cands[0][2])
    outside = next(s for v in w["images"].values() for s in v if s not in {c[2] for c in cands})
    dup_cluster(project, [a, outside])      # a ~ outside ~ b: the pHash and the dHash cluster of one photograph
    dup_cluster(project, [outside, b])
    assert any(c["what"] == "duplicate_set" for c in _check(project)["changes"])


def test_build_check_command_and_front_door(built):
    project, _ = built
    runner = CliRunner()
    ok = runner.invoke(cli, ["--project", str(project.root), "build", "check", "association@1"])
    assert ok.exit_code == 0 and "still holds" in ok.output
    sha = _candidates(project, "association@1")[0][2]
    set_image_status(project, [sha], exclude=True, reason="a watermark")
    bad = runner.invoke(cli, ["--project", str(project.root), "build", "check", "association@1"])
    assert bad.exit_code == 1 and "no longer matches the current state" in bad.output
    p = cultura.open(project.root)
    assert p.benchmarks.check("association@1")["changes"][0]["what"] == "image_excluded"
    p.close()
