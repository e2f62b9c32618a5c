"""Hypothesis property tests over random small worlds: every trial obeys the role rules, no image twice in
a trial, no duplicate cluster twice in a trial, rebuilds are deterministic, and the report adds up."""
from __future__ import annotations

import tempfile
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from cultura.benchmark.build import EXCLUSION_REASONS, KINDS, BuildError, build_benchmark
from cultura.curate.cultures_decide import CulturesUndecided
from cultura.project import init_project
from tests.fakes.world import decide, dup_cluster, make_world, mention_queries

COUNTRIES = ["US", "JP", "TH", "DE"]


@st.composite
def worlds(draw):
    n_concepts = draw(st.integers(2, 4))
    countries = draw(st.lists(st.sampled_from(COUNTRIES), min_size=2, max_size=4, unique=True))
    return {
        "concepts": [f"c{i}" for i in range(n_concepts)],
        "countries": countries,
        "per_cell": draw(st.integers(0, 3)),
        "seed": draw(st.integers(0, 2**16)),
        "extra_tags": draw(st.integers(0, 4)),
        "conflicts": draw(st.integers(0, 2)),
        "dups": draw(st.integers(0, 2)),
        "reviewed": draw(st.booleans()),
        "kind": draw(st.sampled_from(sorted(KINDS))),
        "per_pair": draw(st.integers(1, 3)),
    }


def _populate(project, spec, rng):
    w = make_world(project, concepts=spec["concepts"], countries=spec["countries"], per_cell=spec["per_cell"],
                   seed=spec["seed"])
    shas = sorted(s for v in w["images"].values() for s in v)
    if not shas:
        return w
    db = project.db
    pick = lambda: shas[int(rng.integers(len(shas)))]  # noqa: E731
    for _ in range(spec["extra_tags"]):
        db["image_tags"].insert({"sha256": pick(), "tag": spec["concepts"][int(rng.integers(len(spec["concepts"])))],
                                 "source": "llm:x", "created_at": "2025"}, ignore=True)
    for _ in range(spec["conflicts"]):
        db["image_flags"].insert({"sha256": pick(), "flag": "culture_conflict", "status": "open",
                                  "created_at": "2025"}, ignore=True)
    for _ in range(spec["dups"]):
        dup_cluster(project, sorted({pick(), pick(), pick()}))
    if spec["reviewed"]:
        for s in shas:
            decide(project, "filter", s, label="remove" if rng.random() < 0.15 else "keep")
    return w


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=worlds())
def test_random_worlds(spec):
    import numpy as np

    rng = np.random.default_rng(spec["seed"])
    project = init_project(tempfile.mkdtemp() + "/p", countries=COUNTRIES)
    try:
        _populate(project, spec, rng)
        mention_queries(project, spec["countries"])
        db = project.db
        kw = dict(allow_unreviewed=True, per_pair=spec["per_pair"], seed=spec["seed"],
                  countries=spec["countries"])
        if db.execute("SELECT 1 FROM image_flags WHERE status = 'open' AND sha256 NOT IN (SELECT sha256 FROM "
                      "decisions WHERE kind = 'filter' AND label = 'remove')").fetchone():
            with pytest.raises(CulturesUndecided, match="--resolve"):   # open culture questions block
                build_benchmark(project, spec["kind"], **kw)
            assert db["benchmarks"].count == 0
            db.execute("UPDATE image_flags SET status = 'resolved'")   # decided: every found country kept
        try:
            b = build_benchmark(project, spec["kind"], **kw)
        except BuildError as e:  # a world where no trial fits: nothing is stored
            assert "No " in str(e) and db["benchmarks"].count == 0
            return
        b2 = build_benchmark(project, spec["kind"], **kw)
        assert b["content_hash"] == b2["content_hash"]

        names = {r[0]: r[1] for r in db.execute("SELECT id, name FROM concepts")}
        links = defaultdict(set)
        for sha, cid, k in db.execute("SELECT sha256, concept_id, country FROM image_links"):
            links[sha].add((cid, k))
        tags = defaultdict(set)
        for sha, t in db.execute("SELECT sha256, tag FROM image_tags"):
            tags[sha].add(t)
        bad = {r[0] for r in db.execute("SELECT sha256 FROM image_flags WHERE status = 'open'")}
        bad |= {r[0] for r in db.execute("SELECT sha256 FROM decisions WHERE kind = 'filter' AND label = 'remove'")}
        clusters = defaultdict(set)
        for cid, sha in db.execute("SELECT cluster_id, sha256 FROM dup_members"):
            clusters[sha].add(cid)
        roles = {r.name: r for r in KINDS[spec["kind"]]}

        items = db.execute("SELECT id, concept_id, query_country, descriptor_country FROM benchmark_items "
                           "WHERE benchmark_id = ?", [b["id"]]).fetchall()
        assert len(items) == b["n_items"]
        for iid, C, L, D in items:
            cands = db.execute("SELECT role, sha256, concept_id, country, position FROM benchmark_candidates "
                               "WHERE item_id = ?", [iid]).fetchall()
            assert sorted(c[4] for c in cands) == list(range(len(roles)))   # positions: a permutation
            cands = [c[:4] for c in sorted(cands, key=lambda c: list(roles).index(c[0]))]
            assert [c[0] for c in cands] == list(roles)
            shas = [c[1] for c in cands]
            assert len(set(shas)) == len(shas)                       # no image twice in a trial
            seen = set()
            for sha in shas:                                        # no duplicate cluster twice
                assert not (clusters[sha] & seen)
                seen |= clusters[sha]
            need = {"L": L, "D": D}
            for role_name, sha, c, k in cands:
                role = roles[role_name]
                assert sha not in bad
                assert (c, k) in links[sha]
                cultures = {x for _, x in links[sha]}
                assert (c == C) == role.same
                if role.require:
                    assert k == need[role.require]
                assert not cultures & {need[f] for f in role.forbid}
                if not role.same:
                    own = {names[x] for x, _ in links[sha]}
                    assert names[C] not in tags[sha] | own

        rep = b["report"]
        img, smp = rep["images"], rep["sampling"]
        assert img["total"] == img["eligible"] + sum(img["excluded"][r] for r in EXCLUSION_REASONS)
        assert img["total"] == len(links)
        assert smp["requested_trials"] == smp["built_trials"] + smp["missing_trials"]
        assert smp["built_trials"] == b["n_items"]
        assert sum(h["missing"] for h in smp["too_few_images"]) + smp["duplicate_conflicts"] == \
            smp["missing_trials"]
    finally:
        project.close()
