"""A benchmark you can vouch for, through the CLI on real photographs with planted copies
(scikit-image / scikit-learn samples written by :func:`cultura.cli.demo.real_photos`):

- completeness: a descriptor build makes the short descriptor queries a pattern can make, refuses with the
  command for the rest (German has no pattern), and export refuses an incomplete benchmark;
- balanced candidate positions (χ² against scipy, exact Latin-square counts), deterministic from the seed;
- versions that say what happened; a hash that ignores query variants the trials do not use;
- degenerate metrics (9 captions, k = 10) flagged in the result rows and the report.
"""
from __future__ import annotations

import json
import shutil
import sqlite3
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import chi2_contingency

from cultura.cli.demo import COUNTRIES, TERMS, real_photos
from cultura.curate.cues import mention_table
from tests.fakes.cli_runner import ProjectCli, demo_project

#: written by a person where the language has no pattern (German's is taken away in the test that needs one)
GERMAN_MENTIONS = {"US": "aus den Vereinigten Staaten", "JP": "aus Japan", "TH": "aus Thailand"}


def curated(root: Path, countries=COUNTRIES) -> Path:
    """A project curated through the CLI from the real photographs: concepts, native terms, folder search,
    download, dedup (the planted copies are clustered and flagged)."""
    photos = root / "photos"
    real_photos(photos)
    for cc in COUNTRIES:
        if cc not in countries:
            shutil.rmtree(photos / cc)
    proj = root / "project"
    run = demo_project(proj, photos, root / "terms.tsv", countries)
    assert run.json("images", "download")["new_images"] > 0
    run("images", "dedup")
    # a person decides each photo found for several cultures: here every found culture stays
    for f in run.json("images", "flags"):
        run("images", "flags", "--resolve", f["sha256"], "--cultures", ",".join(f["countries"]),
            "--reason", "checked by hand: the photo fits each culture it was found for")
    return proj


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    return curated(tmp_path_factory.mktemp("vouch"))


@pytest.fixture
def run(template, tmp_path):
    proj = tmp_path / "project"
    shutil.copytree(template, proj)
    return ProjectCli(proj)


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_descriptor_is_complete_or_refused_and_export_refuses_incomplete(run, tmp_path, monkeypatch):
    monkeypatch.delitem(mention_table()["mention"], "de")  # a language without a pattern
    refused = run("build", "descriptor", "--allow-unreviewed", ok=False)
    # ja, th and en have a pattern: build made those itself; German has none here, so build names the command
    assert "lack a query their suites need" in refused and "× DE" in refused
    assert "cultura build mention-queries" in refused and "cultura build set-query" in refused
    assert not run.json("build", "list")
    made = run.json("build", "list-queries", "--country", "JP")
    assert {q["variant"] for q in made if q["source"] == "pattern"} == {"mention_US", "mention_TH", "mention_DE"}
    for concept, terms in TERMS.items():
        for cc, phrase in GERMAN_MENTIONS.items():
            run("build", "set-query", concept, "DE", f"mention_{cc}", f"{terms['DE']} {phrase}")
    b = run.json("build", "descriptor", "--allow-unreviewed")
    assert b["n_items"] > 0 and b["status"] == "ready"
    out = tmp_path / "export"
    run("export", out, "--format", "jsonl")
    queries = {(q["concept"], q["country"], q["variant"]) for q in _jsonl(out / "queries.jsonl")}
    items = _jsonl(out / "items.jsonl")
    assert any(it["query_language"] == "de" for it in items)
    for it in items:   # every exported trial has its short descriptor query
        assert (it["concept"], it["query_country"], f"mention_{it['descriptor_country']}") in queries
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "| query mention_<CC> (required) | {0} | {0} |".format(len(items)) in card

    # a benchmark missing them (as built before this check existed) is never exported
    con = sqlite3.connect(run.project / "cultura.db")
    with con:
        con.execute("DELETE FROM benchmark_query_snapshot WHERE variant = 'mention_JP' AND country = 'DE'")
    con.close()
    msg = run("export", tmp_path / "again", ok=False)
    assert "descriptor@1 is incomplete" in msg and "cultura build mention-queries" in msg
    assert not (tmp_path / "again").exists()


def test_positions_are_balanced_seeded_and_recorded(run, tmp_path):
    b = run.json("build", "association", "--allow-unreviewed", "--seed", "7", "--per-pair", "2")
    out = tmp_path / "a"
    run("export", out, "--format", "jsonl")
    cands = _jsonl(out / "candidates.jsonl")
    counts = defaultdict(lambda: [0, 0, 0])
    by_item = defaultdict(dict)
    for c in cands:
        counts[c["role"]][c["position"]] += 1
        by_item[c["item_key"]][c["position"]] = c["role"]
    assert all(sorted(v) == [0, 1, 2] for v in by_item.values())          # each trial: a permutation
    n = len(by_item)
    for role in ("cr", "lb", "ti"):                                        # Latin-square blocks: exact balance
        assert max(counts[role]) - min(counts[role]) <= 1 and sum(counts[role]) == n
    assert {p for p, r in ((p, r) for v in by_item.values() for p, r in v.items()) if r == "cr"} == {0, 1, 2}
    table = np.array([counts[r] for r in sorted(counts)])
    res = chi2_contingency(table, correction=False)
    pos = b["report"]["positions"]
    assert pos["seed"] == 7 and pos["counts"] == {r: counts[r] for r in counts}
    assert pos["chi2"] == pytest.approx(res.statistic) and pos["p"] == pytest.approx(res.pvalue) and pos["p"] > 0.9
    # the items table lists roles in position order: the role column travels with each image
    for it in _jsonl(out / "items.jsonl"):
        assert [by_item[it["item_key"]][i] for i in range(3)] == it["roles"]
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "shuffled per trial from the benchmark seed (7" in card and "| role | position 0 |" in card

    # deterministic: the same seed gives the same positions, another seed others
    same = run.json("build", "association", "--allow-unreviewed", "--seed", "7", "--per-pair", "2",
                    "--version", "2")
    assert same["content_hash"] == b["content_hash"]
    assert same["message"] == "new v2: nothing changed since v1 (version 2 was asked for)"
    other = run.json("build", "association", "--allow-unreviewed", "--seed", "8", "--per-pair", "2")
    assert other["content_hash"] != b["content_hash"]


def test_versions_say_what_happened_and_hash_covers_what_trials_use(run):
    first = run("build", "association", "--allow-unreviewed")
    assert "association: new v1: first version" in first
    again = run("build", "association", "--allow-unreviewed")
    assert "association: reused v1 (nothing changed)" in again and "Reused association@1" in again
    h1 = run.json("build", "list")[0]["content_hash"]
    run("build", "mention-queries", "--method", "pattern")     # variants an association benchmark does not use
    after = run.json("build", "association", "--allow-unreviewed")
    assert after["reused"] and after["version"] == 1 and after["content_hash"] == h1
    assert after["message"] == "reused v1 (nothing changed)"
    changed = run("build", "association", "--allow-unreviewed", "--seed", "3")
    assert "association: new v2: seed 0 → 3" in changed
    snap = sqlite3.connect(run.project / "cultura.db").execute(
        "SELECT DISTINCT variant FROM benchmark_query_snapshot").fetchall()
    assert {v for (v,) in snap} == {"short"}


def test_degenerate_one_language_one_class_rows():
    from cultura.evaluate.data import CaptionPool
    from cultura.evaluate.suites.retrieval.prevalence import prevalence_rows

    pool = CaptionPool(source="captions", image_sha256=["a" * 64, "b" * 64], image_keys=np.array(["k", "k"]),
                       image_countries=["US", "US"], texts=["t0", "t1", "t2", "t3"],
                       languages=np.array(["en"] * 4), caption_keys=np.array(["k"] * 4), provenance={})
    top_idx = np.array([[0, 1], [2, 3]])
    rows = prevalence_rows(pool, top_idx, np.ones((2, 2)), ks=[2], tiers={}, n_resamples=10)
    why = {r["metric"]: r["details"].get("degenerate") for r in rows}
    assert "one language" in why["lbkl@2"] and "one language" in why["retrieval_share"]
    assert "one class" in why["acc@2"] and "one class" in why["ndcg@2"]
