"""The pipeline on the bundled fixture world: init → concepts → terms → queries → search (urls: and folder:)
→ download → dedup → tag, with exact counts and reasons (the same run `make demo` starts with)."""
import hashlib
import json

import pytest
from click.testing import CliRunner

from cultura.cli import cli
from tests.fakes.drawn_world import CONCEPTS, COUNTRIES, PER_CELL, run_curation


@pytest.fixture(scope="module")
def curated(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipeline") / "proj"
    results = run_curation(root, say=lambda *a: None)
    return root, results


def test_counts_and_reasons(curated):
    root, r = curated
    cells = len(CONCEPTS) * len(COUNTRIES)
    assert r["queries"]["total"] == cells + len(CONCEPTS) * 3          # English for all, native for DE/JP/TH
    assert r["search_urls"] == {"rows": cells * PER_CELL + 8, "stored": cells * PER_CELL + 8, "rejected": 0,
                                "queries": cells, "skipped_queries": 0, "results": cells * PER_CELL + 8}
    assert r["search_folder"] == {"rows": 2, "stored": 2, "files": 2, "rejected": 0, "queries": 1, "results": 2}
    d = r["download"]
    # 80 world images + 4 planted copies + 2 folder files; the cross-country URL is one candidate
    assert d["by_status"] == {"downloaded": 86, "failed": 3}
    assert d["by_reason"] == {"http_404": 1, "html": 1, "too_small": 1}
    assert d["new_images"] == 85                                        # the exact copy is the same sha256
    s = r["status"]
    assert s["stages"]["images"] == {"ok": 85}
    assert s["failures"]["downloads"] == {"http_404": 1, "html": 1, "too_small": 1}


def test_duplicates_and_culture_conflict(curated):
    root, r = curated
    from cultura.project import Project

    p = Project(root)
    db = p.db
    www = root / "fixture-world" / "www"
    sha = {n: hashlib.sha256((www / n).read_bytes()).hexdigest() for n in
           ["bus-JP-0.jpg", "resized-bus-JP-0.jpg", "reencoded-bus-JP-0.jpg", "cropped-bus-JP-0.jpg",
            "copy-bus-JP-0.jpg", "kite-TH-1.jpg"]}
    assert sha["bus-JP-0.jpg"] == sha["copy-bus-JP-0.jpg"]
    near = {sha[n] for n in ["bus-JP-0.jpg", "resized-bus-JP-0.jpg", "reencoded-bus-JP-0.jpg", "cropped-bus-JP-0.jpg"]}
    clusters = {}
    for row in db.query("SELECT c.id, c.method, m.sha256 FROM dup_clusters c JOIN dup_members m ON m.cluster_id = c.id "
                        "WHERE c.status = 'open'"):
        clusters.setdefault((row["method"], row["id"]), set()).add(row["sha256"])
    phash = [m for (method, _), m in clusters.items() if method == "phash"]
    assert near in phash, f"pHash clusters: {phash}"
    # every planted near-duplicate is found, and nothing else is clustered with it
    assert all(m == near or not (m & near) for m in clusters.values())
    rep = db.execute("SELECT representative FROM dup_clusters WHERE id IN (SELECT cluster_id FROM dup_members "
                     "WHERE sha256 = ?) AND method = 'phash'", [sha["resized-bus-JP-0.jpg"]]).fetchone()[0]
    assert rep in (sha["bus-JP-0.jpg"], sha["reencoded-bus-JP-0.jpg"], sha["cropped-bus-JP-0.jpg"])
    flags = list(db["image_flags"].rows_where("flag = 'culture_conflict'"))
    assert [f["sha256"] for f in flags] == [sha["kite-TH-1.jpg"]]
    # the kite photo was found for TH and (through the cross-country URL) for JP: both pairs are named
    assert {p["country"] for p in json.loads(flags[0]["details"])["pairs"]} == {"JP", "TH"}
    # nothing was deleted: every downloaded candidate still points at an image row and a file
    for c in db.query("SELECT sha256 FROM candidates WHERE status = 'downloaded'"):
        img = db["images"].get(c["sha256"])
        assert (root / img["path"]).exists()
    p.close()


def test_tags_and_status_cli(curated):
    root, r = curated
    assert r["tag"]["images"] == 85 and r["tag"]["tags"] == 85 * 3
    res = CliRunner().invoke(cli, ["--project", str(root), "status", "--json"])
    assert res.exit_code == 0
    s = json.loads(res.stdout)
    jp = next(c for c in s["per_country"] if c["country"] == "JP")
    assert jp["images"] == len(CONCEPTS) * PER_CELL + 3 + 1   # + 3 near copies of bus-JP-0, + kite-TH-1
    res = CliRunner().invoke(cli, ["--project", str(root), "images", "failures", "--json"])
    assert {row["reason"] for row in json.loads(res.stdout)} == {"http_404", "html", "too_small"}
