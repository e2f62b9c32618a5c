"""``cultura view``'s static site of a real-photo project: every page built, reruns that only add what changed,
stable addresses, escaping, placeholders, links for the report and the card. (Served and opened in Chromium:
tests/integration/view/test_view_in_a_browser.py.)"""
from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image

from cultura.cli import cli
from cultura.errors import CulturaError
from cultura.evaluate.report import pool_section
from cultura.project import init_project
from cultura.view.links import anchor, inspect_note, view_href
from cultura.view.site import build_view
from tests.fakes.photo_world import COUNTRIES, make_photo_world
from tests.fakes.world import add_image, make_world


@pytest.fixture(scope="module")
def photo_project(tmp_path_factory):
    """The real-photo project (with hostile web texts), its view built through the CLI."""
    p = init_project(tmp_path_factory.mktemp("view") / "proj", countries=COUNTRIES)
    world = make_photo_world(p, hostile=True)
    res = CliRunner().invoke(cli, ["--project", str(p.root), "view", "--page-size", "5", "--json"])
    assert res.exit_code == 0, res.output
    yield p, world, json.loads(res.stdout)
    p.close()


def _pages(view: Path) -> list[str]:
    return sorted(p.name for p in view.glob("*.html"))


def test_cli_builds_every_page_and_a_rerun_writes_nothing(photo_project):
    p, world, first = photo_project
    view = p.reports / "view"
    assert first["images"] == 13 and first["thumbnails_made"] == 13 and first["thumbnails_failed"] == 0
    assert first["trials"] == world["benchmark"]["n_items"] and first["clusters"] >= 1
    assert first["annotation_items"] == 1 and first["flags"] >= 1
    pages = _pages(view)
    assert {"index.html", "pool.html", "dups-1.html", "flags-1.html", "benchmarks.html", "annotations-1.html",
            "go.html"} <= set(pages)
    # 12 trials at 5 a page: three pages, each trial on exactly one
    bench = [n for n in pages if n.startswith("bench-")]
    assert len(bench) == 3
    thumbs = sorted((view / "thumbs").rglob("*.jpg"))
    assert len(thumbs) == 13 and all(max(Image.open(t).size) <= 192 for t in thumbs)
    stamps = {t: t.stat().st_mtime_ns for t in thumbs} | {view / n: (view / n).stat().st_mtime_ns for n in pages}
    again = build_view(p, page_size=5)
    assert again["thumbnails_made"] == 0 and again["thumbnails_cached"] == 13
    assert again["pages_written"] == 0 and again["pages_removed"] == 0
    assert {f: f.stat().st_mtime_ns for f in stamps} == stamps


def test_a_rerun_after_a_change_adds_only_that(tmp_path):
    p = init_project(tmp_path / "p", countries=COUNTRIES)
    make_photo_world(p)
    build_view(p)
    view = p.reports / "view"
    before = {f: f.stat().st_mtime_ns for f in view.rglob("*") if f.is_file()}
    img = Image.new("RGB", (64, 48), (200, 30, 30))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    cid = p.db.execute("SELECT id FROM concepts WHERE name = 'street'").fetchone()[0]
    sha = add_image(p, cid, "TH", buf.getvalue(), rank=5)
    res = build_view(p)
    assert res["thumbnails_made"] == 1 and res["thumbnails_cached"] == 13
    after = {f: f.stat().st_mtime_ns for f in view.rglob("*") if f.is_file()}
    changed = {f.name for f in after if before.get(f) != after[f]}
    # the new thumbnail, the cell that holds it, the pool and index counts, and the manifest: nothing else
    assert changed == {f"{sha}.jpg", f"cell-{cid}-TH-1.html", "pool.html", "index.html"}, changed
    # a smaller page size removes the pages no longer produced, and only those
    res = build_view(p, page_size=100)
    assert res["pages_removed"] == 0
    res = build_view(p, page_size=1)
    second = sorted(f.name for f in view.glob("*-2.html"))
    assert second
    res = build_view(p, page_size=100)
    assert res["pages_removed"] >= len(second) and not any((view / n).exists() for n in second)


def test_every_trial_cluster_and_flag_has_a_stable_address(photo_project):
    """The addresses the report links to (cultura.view.links) are the ones the view resolves (ids.js)."""
    p, world, _ = photo_project
    text = (p.reports / "view" / "ids.js").read_text("utf-8")
    ids = json.loads(text.removeprefix("window.CULTURA_IDS = ").rstrip().rstrip(";"))
    b = world["benchmark"]
    for (key,) in p.db.execute("SELECT item_key FROM benchmark_items WHERE benchmark_id = ?", [b["id"]]):
        assert ids[anchor("trial", b["name"], b["version"], key)].startswith(f"bench-{b['id']}-")
    for (cid,) in p.db.execute("SELECT id FROM dup_clusters WHERE status != 'superseded'"):
        assert ids[anchor("cluster", cid)] == "dups-1.html"
    for (sha,) in p.db.execute("SELECT sha256 FROM image_flags"):
        assert ids[anchor("flag", sha)] == "flags-1.html"
    html = pool_section(p).html
    assert 'href="view/pool.html"' in html and 'href="view/flags-1.html"' in html


def test_web_texts_are_escaped(photo_project):
    p, world, _ = photo_project
    view = p.reports / "view"
    raw = "\n".join((view / n).read_text("utf-8") for n in _pages(view))
    assert "<script>window.__pwned" not in raw
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in raw
    # the concept name (pool, cells, trials), the title, the comment and the URL all reached a page, escaped
    pool = (view / "pool.html").read_text("utf-8")
    assert "animal &lt;script&gt;" in pool
    assert "Tabby &lt;script&gt;" in raw and "not breakfast &lt;script&gt;" in raw
    assert "example.test/p?q=&lt;script&gt;" in raw
    # a javascript: URL is never a link
    assert "javascript:" not in " ".join(re.findall(r'href="([^"]*)"', raw))
    # every page's only scripts are the local ones
    assert set(re.findall(r'<script src="([^"]+)"', raw)) == {"view.js", "ids.js", "bench-1-index.js",
                                                            "annotations-index.js"}
    assert "<script>" not in raw.replace("<script src=", "")


def test_an_unreadable_blob_shows_a_placeholder_and_is_retried(tmp_path):
    p = init_project(tmp_path / "p", countries=["US", "JP"])
    w = make_world(p, concepts=("bus",), per_cell=2)
    gone = w["images"][("bus", "JP")][0]
    p.blob_path(p.db["images"].get(gone)["path"]).write_bytes(b"not an image")
    res = build_view(p)
    assert res["thumbnails_failed"] == 1 and res["thumbnails_made"] == 3
    cell = next((p.reports / "view").glob("cell-*-JP-1.html")).read_text("utf-8")
    assert 'src="missing.svg"' in cell and gone[:12] in cell
    assert build_view(p)["thumbnails_failed"] == 1  # retried on the next run, still reported


def test_links_for_the_report_and_the_card():
    assert view_href("cluster", 3) == "view/go.html#cluster-3"
    assert anchor("trial", "my bench", 2, "0-JP-1") == "trial-my_bench-v2-0-JP-1"
    assert anchor("flag", "ab" * 32) == "flag-" + "ab" * 32
    assert "cultura view" in inspect_note() and "reports/view/index.html" in inspect_note()


def test_page_size_is_validated(project):
    with pytest.raises(CulturaError, match="page_size"):
        build_view(project, page_size=0)
    # an empty project has a view too: every page, each saying what to run
    res = build_view(project)
    assert res["images"] == 0 and res["trials"] == 0
    view = project.reports / "view"
    assert "cultura images dedup" in (view / "dups-1.html").read_text("utf-8")
    assert "No benchmark built yet" in (view / "benchmarks.html").read_text("utf-8")


def test_who_decided_reads_as_words_not_a_python_structure():
    from cultura.view.data import _who

    assert _who({"ann": "keep:1", "bob": "drop"}) == "ann (keep:1), bob (drop)"
    assert _who(["ann", "bob"]) == "ann, bob" and _who("lead") == "lead" and _who(None) is None


def test_clusters_of_several_methods_sharing_a_copy_show_as_one_set(photo_project):
    """As the dedup review merges them: the pHash and the dHash cluster of the same copies are one set, each
    image listed once on the duplicate pages, and every cluster's address leads to its set."""
    p, _, _ = photo_project
    live = p.db.execute("SELECT id, method FROM dup_clusters WHERE status != 'superseded'").fetchall()
    assert len({m for _, m in live}) >= 2 and len(live) >= 2  # the planted copy is found by several methods
    view = p.reports / "view"
    html = "".join((view / n).read_text("utf-8") for n in _pages(view) if n.startswith("dups-"))
    sets = re.findall(r'data-cluster="(\d+)"', html)
    assert len(sets) < len(live)
    shown = re.findall(r'<section class="cluster".*?</section>', html, re.S)
    for sha, in p.db.execute("SELECT DISTINCT m.sha256 FROM dup_members m JOIN dup_clusters c ON c.id = "
                             "m.cluster_id WHERE c.status != 'superseded'"):
        assert sum(sha[:12] in s for s in shown) == 1, sha
    for cid, _ in live:
        assert f'id="{anchor("cluster", cid)}"' in html


def test_the_disagreements_pages_can_be_filtered_by_kind_campaign_country_and_state(photo_project):
    p, _, _ = photo_project
    view = p.reports / "view"
    html = (view / "annotations-1.html").read_text("utf-8")
    for name in ("kind", "campaign", "country", "state"):
        assert f'<select name="{name}">' in html
    sections = re.findall(r'<section class="item"[^>]*data-kind="([^"]*)"[^>]*data-state="([^"]*)"', html)
    assert sections and all(kind and state in ("adjudicated", "open disagreement") for kind, state in sections)
    # the index that names, for any filter, every page with a match
    text = (view / "annotations-index.js").read_text("utf-8")
    index = json.loads(text.removeprefix("window.CULTURA_ITEMS = ").rstrip().rstrip(";"))
    assert len(index) == len(sections) and {r["page"] for r in index} == {"annotations-1.html"}
    assert {r["kind"] for r in index} == {kind for kind, _ in sections}
