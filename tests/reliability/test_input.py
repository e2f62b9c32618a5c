"""Input is never silently dropped (issue 11, "Input never silently dropped"): importers key "already
imported" on content, urls:/folder: pick up what was added, bad rows are reject rows (once), a bad first row
never refuses the whole file, every provider validates its URLs, folder: stays inside its tree."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from cultura.cli import cli
from cultura.curate.importers import import_captions, import_globalrg
from cultura.curate.search import DDGSProvider, ingest_img2dataset, search_images
from cultura.curate.search import check_url
from tests.fakes.world import tiny_png


def _jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows),
                    encoding="utf-8")
    return path


def _rejects(project):
    return sorted((r["source"].split(":")[0], r["reason"]) for r in project.db["ingest_rejects"].rows)


# ------------------------------------------------------------------------------------------ importers

def test_a_second_different_captions_file_of_the_same_name_is_imported(project, tmp_path):
    rng = np.random.default_rng(3)
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    for i in range(5):
        (imgs / f"img{i}.png").write_bytes(tiny_png(rng))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = _jsonl(tmp_path / "a" / "captions.jsonl",
                   [{"image_id": f"img{i}", "captions": {"en": [f"a photo {i}"]}} for i in range(5)])
    second = _jsonl(tmp_path / "b" / "captions.jsonl",
                    [{"image_id": f"img{i}", "captions": {"de": [f"ein Foto {i}"]}} for i in range(5)])
    assert import_captions(project, first, imgs)["imported"] == 5
    r = import_captions(project, second, imgs)
    assert r.get("imported") == 5 and "already" not in r, r  # was {"already": 5}, nothing imported
    assert project.db.execute("SELECT count(*) FROM captions WHERE language = 'de'").fetchone()[0] == 5
    assert import_captions(project, second, imgs) == {"already": 5, "failures": []}  # content seen: skipped


def test_bad_jsonl_lines_are_failed_rows_and_never_refuse_the_file(project, tmp_path):
    rng = np.random.default_rng(4)
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    for i in range(2):
        (imgs / f"img{i}.png").write_bytes(tiny_png(rng))
    path = tmp_path / "captions.jsonl"
    good = [json.dumps({"image_id": f"img{i}", "captions": {"en": [f"photo {i}"]}}) for i in range(2)]
    path.write_bytes(b"[1, 2, 3]\nnull\n" + good[0].encode() + b"\n{\"image_id\": 7}\nnot json\n"
                     + good[1].encode() + b"\n")
    r = import_captions(project, path, imgs)
    assert r["imported"] == 2 and r["failed"] == 4
    reasons = sorted(f["reason"] for f in r["failures"])
    assert reasons == ["line 1 is JSON but not an object (a list)", "line 2 is JSON but not an object (null)",
                       "line 5 is not JSON (Expecting value)", "no captions"]
    stored = project.db.execute("SELECT count(*) FROM import_rows WHERE status = 'failed'").fetchone()[0]
    import_captions(project, path, imgs)  # rerun: the failed rows are not duplicated
    assert project.db.execute("SELECT count(*) FROM import_rows WHERE status = 'failed'").fetchone()[0] == stored == 4
    # a file that is not UTF-8 at all: one sentence, no traceback
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(b'{"image_id": "caf\xe9"}\n')
    r = CliRunner().invoke(cli, ["--project", str(project.root), "import", "captions", str(bad), "--images",
                                 str(imgs)])
    assert r.exit_code == 1 and "is not UTF-8" in r.output and "Traceback" not in r.output, r.output
    # a GlobalRG table whose first line is bad still imports the others
    table = tmp_path / "globalrg.jsonl"
    table.write_text("null\n" + json.dumps({"image": "img0.png", "region": "Japan", "concept": "dance"}) + "\n")
    r = import_globalrg(project, table, imgs)
    assert r["imported"] == 1 and r["failed"] == 1


# ------------------------------------------------------------------------------------------ urls: provider

def test_urls_rows_added_for_an_already_searched_cell_are_ingested(project, tmp_path):
    f = tmp_path / "urls.jsonl"
    rows = [{"url": f"https://a.example/{i}.jpg", "concept": "bus", "country": "JP"} for i in range(3)]
    _jsonl(f, rows)
    assert search_images(project, provider=f"urls:{f}", progress=False)["results"] == 3
    _jsonl(f, rows + [{"url": "https://a.example/new.jpg", "concept": "bus", "country": "JP"}])  # appended
    r = search_images(project, provider=f"urls:{f}", progress=False)
    assert r["results"] == 1 and r["queries"] == 1, r                                      # was queries: 0
    g = _jsonl(tmp_path / "more.jsonl", [{"url": "https://b.example/x.jpg", "concept": "bus", "country": "JP"}])
    assert search_images(project, provider=f"urls:{g}", progress=False)["results"] == 1   # a second file
    got = project.db.execute("SELECT c.url, sr.rank FROM search_results sr JOIN candidates c ON c.id = "
                             "sr.candidate_id ORDER BY sr.rank").fetchall()
    assert [u for u, _ in got][-2:] == ["https://a.example/new.jpg", "https://b.example/x.jpg"]
    assert [k for _, k in got] == [1, 2, 3, 4, 5]
    assert project.db.execute("SELECT n_results FROM searches").fetchone()[0] == 5
    again = search_images(project, provider=f"urls:{f}", progress=False)
    assert again["results"] == 0 and project.db["search_results"].count == 5


def test_urls_bad_rows_are_rejects_once_and_the_first_row_does_not_decide(project, tmp_path):
    f = tmp_path / "urls.jsonl"
    f.write_bytes(b"[1, 2, 3]\nnull\n" + json.dumps({"concept": "bus", "country": "JP"}).encode() + b"\n"
                  + b"{\"url\": \"https://a.example/x.jpg\", \"concept\": \"bus\", \"country\": \"JP\"\n"
                  + json.dumps({"url": "file:///etc/passwd", "concept": "bus", "country": "JP"}).encode() + b"\n"
                  + json.dumps({"url": "https://a.example/ok.jpg", "concept": 7, "country": "JP"}).encode() + b"\n")
    r = search_images(project, provider=f"urls:{f}", progress=False)
    assert r["rows"] == 6 and r["rejected"] == 5 and r["results"] == 1
    assert [reason for _, reason in _rejects(project)] == sorted([
        "line 1 is JSON but not an object (a list)", "line 2 is JSON but not an object (null)", "missing url",
        "line 4 is not JSON (Expecting ',' delimiter)", "url is not http(s)"])
    search_images(project, provider=f"urls:{f}", progress=False)
    assert project.db["ingest_rejects"].count == 5  # a rerun adds no reject rows
    csvf = tmp_path / "u.csv"
    csvf.write_bytes(b"url,concept,country\nhttps://a.example/\xe9.jpg,bus,JP\n")
    r = CliRunner().invoke(cli, ["--project", str(project.root), "images", "search", "--provider", f"urls:{csvf}"])
    assert r.exit_code == 1 and "is not UTF-8" in r.output and "Traceback" not in r.output, r.output


def test_non_utf8_config_is_one_sentence(project):
    (project.root / "cultura.toml").write_bytes(b"[project]\nname = \"caf\xe9\"\n")
    r = CliRunner().invoke(cli, ["--project", str(project.root), "status"])
    assert r.exit_code == 1 and "cultura.toml is not UTF-8 text" in r.output, r.output


# ------------------------------------------------------------------------------------------ folder: provider

def test_folder_picks_up_new_files_and_reruns_do_not_duplicate_rejects(project, tmp_path):
    root = tmp_path / "imgs"
    (root / "JP" / "bus").mkdir(parents=True)
    (root / "XX" / "bus").mkdir(parents=True)
    (root / "JP" / "bus" / "a.jpg").write_bytes(b"x")
    (root / "JP" / "bus" / "notes.txt").write_text("x")
    assert search_images(project, provider=f"folder:{root}", progress=False)["results"] == 1
    (root / "JP" / "bus" / "b.jpg").write_bytes(b"y")
    r = search_images(project, provider=f"folder:{root}", progress=False)   # no refresh
    assert r["results"] == 1 and project.db["candidates"].count == 2, r
    assert project.db["ingest_rejects"].count == 2  # XX and notes.txt, once each after two runs


def test_folder_does_not_follow_symlinks_out_of_its_tree(project, tmp_path):
    root = tmp_path / "imgs"
    (root / "JP" / "bus").mkdir(parents=True)
    outside = tmp_path / "secret"
    (outside / "bus").mkdir(parents=True)
    (outside / "bus" / "private.jpg").write_bytes(b"x")
    (root / "JP" / "bus" / "in.jpg").write_bytes(b"x")
    os.symlink(outside / "bus" / "private.jpg", root / "JP" / "bus" / "link.jpg")
    os.symlink(outside / "bus", root / "JP" / "kite")
    os.symlink(outside, root / "TH")
    os.symlink(root / "JP" / "bus" / "in.jpg", root / "JP" / "bus" / "inner-link.jpg")  # inside: fine
    r = search_images(project, provider=f"folder:{root}", progress=False)
    urls = [c["url"] for c in project.db["candidates"].rows]
    assert not any("secret" in u or "private" in u for u in urls) and len(urls) == 2
    assert r["rejected"] == 3
    assert {reason for _, reason in _rejects(project)} == {"symlink leads out of the folder (not followed)"}


def test_img2dataset_bad_sidecars_are_rejects(project, tmp_path):
    shard = tmp_path / "out" / "00000"
    shard.mkdir(parents=True)
    (shard / "000000000.json").write_text("[1, 2]")
    (shard / "000000001.json").write_bytes(b"{\"url\": \"\xff\"}")
    (tmp_path / "secret.jpg").write_bytes(b"x")
    os.symlink(tmp_path / "secret.jpg", shard / "000000002.jpg")
    (shard / "000000002.json").write_text(json.dumps({"url": "https://x.example/c.jpg", "status": "success",
                                                      "concept": "bus", "country": "JP"}))
    r = ingest_img2dataset(project, tmp_path / "out")
    assert r["rejected"] == 3 and r["results"] == 0
    ingest_img2dataset(project, tmp_path / "out")
    assert project.db["ingest_rejects"].count == 3
    assert "symlink out of the folder" in project.db.execute(
        "SELECT reason FROM ingest_rejects WHERE reason LIKE '%symlink%'").fetchone()[0]


# ------------------------------------------------------------------------------------------ one URL validator

class _FakeDDGS:
    def images(self, query, **kw):
        return [{"image": "file:///etc/passwd", "title": "a"}, {"image": "file:///nonexistent/x", "title": "b"},
                {"image": "javascript:alert(1)"}, {"image": "https://img.example/ok.jpg"}, "not a dict"]


def test_ddgs_results_pass_the_url_validator(project):
    from cultura.curate import concepts as C

    C.add_concepts(project, ["bus"])
    C.build_queries(project)
    project.config.search.min_interval = 0
    prov = DDGSProvider(client_factory=_FakeDDGS, sleep=lambda s: None)
    r = search_images(project, provider=prov, per_query=10, progress=False)
    urls = [c["url"] for c in project.db["candidates"].rows]
    assert urls == ["https://img.example/ok.jpg"]
    reasons = [x["reason"] for x in project.db.query("SELECT reason FROM ingest_rejects WHERE raw LIKE '%file:%'")]
    # the existing and the missing local file get the same reason: nothing is learnt about the disk
    assert reasons and set(reasons) == {"url is not http(s)"} and r["rejected"] >= 3


@pytest.mark.parametrize("url,reason", [
    ("https://a.example/x.jpg", None), ("http://a.example:8080/x", None),
    ("file:///etc/passwd", "url is not http(s)"), ("ftp://a/x", "url is not http(s)"),
    ("https:///x", "url has no host"), ("http://a.example:99999/x", "url cannot be parsed (Port out of range 0-65535)"),
    ("http://a.example/x y", "url contains whitespace or control characters"), ("", "missing url"), (None, "missing url"),
])
def test_check_url(url, reason):
    assert check_url(url) == reason
