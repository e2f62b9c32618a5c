"""Importers: GlobalRG-style table, Crossmodal-3600-style captions, CAIRe-style ratings."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from click.testing import CliRunner

from cultura.cli import cli
from cultura.benchmark.build import build_benchmark, load_pool
from cultura.annotate.ratings import import_ratings
from cultura.curate.importers import DatasetImportError, import_captions, import_globalrg
from tests.fakes.world import tiny_png


@pytest.fixture
def globalrg(tmp_path):
    rng = np.random.default_rng(1)
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    rows = []
    for concept in ("breakfast", "dance", "wedding"):
        for country in ("Japan", "US", "thailand", "DE"):
            name = f"{concept}_{country}.png"
            (imgs / name).write_bytes(tiny_png(rng))
            rows.append({"image": name, "region": country, "concept": concept})
    (imgs / "broken.jpg").write_bytes(b"not an image")
    rows += [{"image": "broken.jpg", "region": "Japan", "concept": "dance"},
             {"image": "dance_Japan.png", "region": "Atlantis", "concept": "dance"},
             {"image": "../escape.png", "region": "Japan", "concept": "dance"},
             {"image": "missing.png", "region": "Japan", "concept": "dance"}]
    table = tmp_path / "globalrg.csv"
    with open(table, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["image", "region", "concept"])
        w.writeheader()
        w.writerows(rows)
    return table, imgs


def test_globalrg_import_and_build(project, globalrg):
    table, imgs = globalrg
    r = import_globalrg(project, table, imgs)
    assert r["imported"] == 12 and r["failed"] == 4
    reasons = " ".join(f["reason"] for f in r["failures"])
    assert "not a readable image" in reasons and "Atlantis" in reasons and "not found" in reasons
    db = project.db
    assert db.execute("SELECT count(DISTINCT sha256) FROM image_links WHERE provider = 'import:globalrg'"
                      ).fetchone()[0] == 12
    for row in db.query("SELECT path FROM images"):
        assert (project.root / row["path"]).is_file() and row["path"].startswith("blobs/")
    again = import_globalrg(project, table, imgs)
    assert again.get("imported", 0) == 0 and again["already"] == 12
    assert db["search_results"].count == 12
    # the same builds work on imported images once native terms exist
    for cid, in db.execute("SELECT id FROM concepts").fetchall():
        for c in project.countries:
            db["terms"].insert({"concept_id": cid, "country": c.code, "language": c.language,
                                "term": f"t{cid}{c.code}", "source": "manual", "updated_at": "2025"},
                               replace=True)
    b = build_benchmark(project, "association", allow_unreviewed=True)
    assert b["n_items"] == 3 * 4


def test_captions_import(project, tmp_path):
    rng = np.random.default_rng(2)
    imgs = tmp_path / "xm"
    imgs.mkdir()
    lines = []
    for i in range(3):
        (imgs / f"img{i}.jpg").write_bytes(tiny_png(rng))
        lines.append({"image/key": f"img{i}", "en": {"caption": [f"a photo {i}", f"another {i}"]},
                      "th": {"caption": [f"ภาพ {i}"]}})
    lines.append({"image_id": "img0", "captions": {"de": ["ein Foto"]}, "concept": "street",
                  "country": "DE"})
    lines.append({"image_id": "nope", "captions": {"de": ["x"]}})
    path = tmp_path / "captions.jsonl"
    path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines))
    r = import_captions(project, path, imgs)
    # img0 listed twice with different content: the second line (a German caption) is imported too, not
    # dropped as "already"; rerunning the same file imports nothing again
    assert r["imported"] == 4 and r["failed"] == 1 and r["captions"] == 3 * 3 + 1
    assert "already" not in r
    assert project.db["captions"].count == 10
    assert import_captions(project, path, imgs)["already"] == 4
    rows = project.db.execute("SELECT language, text FROM captions ORDER BY language, text").fetchall()
    assert ("th", "ภาพ 0") in rows


def test_ratings_import(project, globalrg, tmp_path):
    table, imgs = globalrg
    import_globalrg(project, table, imgs)
    path = tmp_path / "ratings.csv"
    path.write_text("image,country,score,annotator\n"
                    "dance_Japan.png,JP,2,a\n"
                    "dance_Japan.png,JP,3,b\n"
                    "wedding_US.png,US,5,a\n"
                    "wedding_US.png,US,4,b\n"
                    "unknown.png,US,4,a\n"
                    "wedding_US.png,US,9,c\n")
    r = import_ratings(project, path)
    assert r["decisions"] == 2 and r["failed"] == 2
    dec = {row["country"]: row for row in project.db.query(
        "SELECT * FROM decisions WHERE kind = 'relevance' AND superseded = 0")}
    assert dec["JP"]["value"] == 2.5 and dec["JP"]["rule"] == "import" and dec["US"]["value"] == 4.5
    again = import_ratings(project, path)
    assert again["unchanged"] == 2 and again.get("decisions", 0) == 0
    pool = load_pool(project, allow_unreviewed=True)
    assert pool.excluded[dec["JP"]["sha256"]] == "low_relevance"
    assert dec["US"]["sha256"] in pool.links


def test_bad_inputs(project, tmp_path):
    with pytest.raises(DatasetImportError, match="does not exist"):
        import_globalrg(project, tmp_path / "nope.csv", tmp_path)
    t = tmp_path / "t.csv"
    t.write_text("picture,where\nx.png,JP\n")
    with pytest.raises(DatasetImportError, match="no image column.*--image-column"):
        import_globalrg(project, t, tmp_path)
    r = CliRunner().invoke(cli, ["--project", str(project.root), "import", "globalrg", str(t), "--images",
                                 str(tmp_path), "--image-column", "picture", "--country-column", "where"])
    assert r.exit_code == 1 and "no concept column" in r.output
