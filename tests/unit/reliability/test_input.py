"""Input is never silently dropped: importers key "already
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


# ------------------------------------------------------------------------------------------ names at the door
# one validator (cultura.names) for every name that enters a project; a refused name in a file is a
# reject row with its reason and never aborts the file.

HOSTILE_NAMES = [  # (name, the reason's words)
    ("bus\x00stop", "contains the control character U+0000"),
    ("bus\u202estop", "contains the bidirectional control character U+202E"),
    ("\u200b", "contains the invisible format character U+200B"),
    ("\u200d", "contains the zero-width joiner U+200D outside a word"),
    ("x" * 10_000_000, "is 10,000,000 characters long (at most 200)"),
    ("../../etc/passwd", "looks like a file path"),
    ("=HYPERLINK(\"http://evil.example\")", "starts with '=', which spreadsheets run as a formula"),
    ("@SUM(1+1)", "starts with '@', which spreadsheets run as a formula"),
]


def _cli(project, *args, **kw):
    return CliRunner().invoke(cli, ["--project", str(project.root), *args], **kw)


def _concepts(project):
    return sorted(r["name"] for r in project.db["concepts"].rows)


def test_nfc_and_nfd_cafe_are_one_concept_and_lookups_find_it(project):
    nfc, nfd = "caf\u00e9", "cafe\u0301"
    r = _cli(project, "concepts", "add", nfc, nfd, "  Caf\u00e9\t ", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["added"] == 1 and _concepts(project) == [nfc]
    r = _cli(project, "concepts", "set-term", nfd, "JP", "\u30ab\u30d5\u30a7")  # found through its NFD spelling
    assert r.exit_code == 0, r.output
    assert project.db.execute("SELECT term FROM terms WHERE country = 'JP'").fetchone()[0] == "\u30ab\u30d5\u30a7"


@pytest.mark.parametrize("name,reason", HOSTILE_NAMES[:4] + HOSTILE_NAMES[5:],
                         ids=["nul", "rlo", "zwsp", "zwj", "path", "formula", "at-formula"])
def test_concepts_add_refuses_a_hostile_name_with_one_sentence(project, name, reason):
    r = _cli(project, "concepts", "add", "rice", name)
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    assert f"{reason}; fix it in the input and rerun." in r.output, r.output
    assert _concepts(project) == []  # nothing of the command was written


def test_urls_rows_with_hostile_names_and_ranks_are_rejects_and_the_rest_is_ingested(project, tmp_path):
    rows = [{"url": f"https://a.example/{i}.jpg", "concept": name, "country": "JP"}
            for i, (name, _) in enumerate(HOSTILE_NAMES)]
    rows += [{"url": "https://a.example/r1.jpg", "concept": "bus", "country": "JP", "rank": 1e20},
             {"url": "https://a.example/r2.jpg", "concept": "bus", "country": "JP", "rank": 2**63},
             {"url": "https://a.example/r3.jpg", "concept": "bus", "country": "JP", "rank": 1e308},
             {"url": "https://a.example/r4.jpg", "concept": "bus", "country": "JP", "rank": -3},
             {"url": "https://a.example/r5.jpg", "concept": "bus", "country": "JP", "rank": "abc"},
             {"url": "https://a.example/ok1.jpg", "concept": "cafe\u0301", "country": "JP", "rank": 2},
             {"url": "https://a.example/ok2.jpg", "concept": "Caf\u00e9", "country": "JP", "rank": 1.0}]
    f = _jsonl(tmp_path / "urls.jsonl", rows)
    r = _cli(project, "images", "search", "--provider", f"urls:{f}", "--json")
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    out = json.loads(r.stdout)
    assert out["rejected"] == len(HOSTILE_NAMES) + 5 and out["results"] == 2, out
    got = {json.loads(x["raw"]).get("url"): x["reason"] for x in project.db["ingest_rejects"].rows}
    for i, (_, reason) in enumerate(HOSTILE_NAMES):
        assert got[f"https://a.example/{i}.jpg"] == f"concept name {reason}"
    assert got["https://a.example/r1.jpg"] == "rank 1e+20 is out of range (1 to 2,147,483,647)"
    assert got["https://a.example/r2.jpg"] == "rank 9223372036854775808 is out of range (1 to 2,147,483,647)"
    assert got["https://a.example/r3.jpg"] == "rank 1e+308 is out of range (1 to 2,147,483,647)"
    assert got["https://a.example/r4.jpg"] == "rank -3 is out of range (1 to 2,147,483,647)"
    assert got["https://a.example/r5.jpg"] == "rank 'abc' is not a whole number"
    assert _concepts(project) == ["caf\u00e9"]  # NFC and NFD rows: one concept, both results under it
    ranks = project.db.execute("SELECT sr.rank, sr.url FROM search_results sr ORDER BY sr.rank").fetchall()
    assert ranks == [(1, "https://a.example/ok2.jpg"), (2, "https://a.example/ok1.jpg")]
    raw = project.db.execute("SELECT max(length(raw)) FROM ingest_rejects").fetchone()[0]
    assert raw > 10_000_000  # the row is kept as it came (nothing is silently dropped), never as a concept
    # a CSV gives the same verdicts (its numbers arrive as text)
    csvf = tmp_path / "u.csv"
    csvf.write_text("url,concept,country,rank\nhttps://b.example/1.jpg,bus,JP,1e20\n"
                    "https://b.example/2.jpg,bus,JP,9223372036854775808\nhttps://b.example/3.jpg,bus,JP,3\n",
                    encoding="utf-8")
    out = json.loads(_cli(project, "images", "search", "--provider", f"urls:{csvf}", "--json").output)
    assert out["rejected"] == 2 and out["results"] == 1, out


def test_folder_and_img2dataset_names_pass_the_validator(project, tmp_path):
    root = tmp_path / "imgs"
    for name in ("bus", "=cmd", "bus\u202eexe", "cafe\u0301"):
        (root / "JP" / name).mkdir(parents=True)
        (root / "JP" / name / "a.jpg").write_bytes(name.encode())
    r = search_images(project, provider=f"folder:{root}", progress=False)
    assert r["results"] == 2 and r["rejected"] == 2, r
    assert sorted(x["reason"] for x in project.db["ingest_rejects"].rows) == [
        "folder concept name contains the bidirectional control character U+202E",
        "folder concept name starts with '=', which spreadsheets run as a formula"]
    assert _concepts(project) == ["bus", "caf\u00e9"]
    shard = tmp_path / "out" / "00000"
    shard.mkdir(parents=True)
    (shard / "000000000.jpg").write_bytes(b"x")
    (shard / "000000000.json").write_text(json.dumps({"url": "https://x.example/c.jpg", "status": "success",
                                                      "concept": "../../etc", "country": "JP"}))
    r = ingest_img2dataset(project, tmp_path / "out")
    assert r["rejected"] == 1 and r["results"] == 0
    assert project.db.execute("SELECT count(*) FROM ingest_rejects WHERE reason = "
                              "'concept name looks like a file path'").fetchone()[0] == 1


def test_importers_record_hostile_names_as_failed_rows(project, tmp_path):
    from cultura.evaluate.suites.attribution.caire import import_caire_universal
    from cultura.benchmark.releases import import_3xcm_images

    rng = np.random.default_rng(5)
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    names = ["ok rice", *[n for n, _ in HOSTILE_NAMES if len(n) < 1000]]
    for i in range(len(names)):
        (imgs / f"img{i}.png").write_bytes(tiny_png(rng))
    rows = [{"image": f"img{i}.png", "country": "JP", "concept": n} for i, n in enumerate(names)]
    want = sorted(f"concept name {r}" for n, r in HOSTILE_NAMES if len(n) < 1000)
    r = import_globalrg(project, _jsonl(tmp_path / "g.jsonl", rows), imgs)
    assert r["imported"] == 1 and r["failed"] == len(names) - 1, r
    assert sorted(f["reason"] for f in r["failures"]) == want
    r = import_3xcm_images(project, _jsonl(tmp_path / "x.jsonl", rows), images_dir=imgs)
    assert sorted(f["reason"] for f in r["failures"]) == want and r["failed"] == len(names) - 1, r
    caps = [{"image_id": f"img{i}", "captions": {"en": ["a photo"]}, "concept": n, "country": "JP"}
            for i, n in enumerate(names)]
    r = import_captions(project, _jsonl(tmp_path / "caps.jsonl", caps), imgs)
    assert sorted(f["reason"] for f in r["failures"]) == want, r
    uni = [{"image": f"img{i}.png", "concept": n, "country": "JP", "rater_country": "JP", "rating": 3}
           for i, n in enumerate(names)]
    r = import_caire_universal(project, _jsonl(tmp_path / "u.jsonl", uni), images=imgs)
    assert sorted(f["reason"] for f in r["failures"]) == want, r
    assert _concepts(project) == ["ok rice"]
    failed = project.db.execute("SELECT count(*) FROM import_rows WHERE status = 'failed'").fetchone()[0]
    assert failed >= 3 * (len(names) - 1)


def test_set_term_checks_terms_and_an_oversized_field_is_one_sentence(project, tmp_path):
    assert _cli(project, "concepts", "add", "bus").exit_code == 0
    r = _cli(project, "concepts", "set-term", "bus", "JP", "\u30d0\u202e\u30b9")
    assert r.exit_code == 1 and "term '\\u30d0\\u202e\\u30b9' contains the bidirectional control character " \
        "U+202E; fix it in the input and rerun." in r.output, r.output
    f = tmp_path / "terms.tsv"
    f.write_text("concept\tcountry\tterm\nbus\tJP\t" + "\u30d0" * 200_000 + "\n", encoding="utf-8")  # > 128 KiB
    r = _cli(project, "concepts", "set-term", "--from", str(f))
    assert r.exit_code == 1 and "Traceback" not in r.output and "_csv.Error" not in r.output, r.output
    assert "terms.tsv line 2: cannot be read as TSV (field larger than field limit (131072)); fix that line and " \
           "rerun." in " ".join(r.output.split()), r.output
    f.write_text("concept\tcountry\tterm\nbus\tJP\t\u30d0\u30b9\nbus\tTH\t=1+1\n", encoding="utf-8")
    r = _cli(project, "concepts", "set-term", "--from", str(f))
    assert r.exit_code == 1 and "terms.tsv line 3: The term '=1+1' starts with '='" in " ".join(r.output.split())
    assert project.db["terms"].count == 0  # checked first, nothing written
    f.write_text("concept\tcountry\tterm\ncafe\u0301\tJP\t\u30ab\u30d5\u30a7\n", encoding="utf-8")
    assert _cli(project, "concepts", "add", "caf\u00e9").exit_code == 0
    r = _cli(project, "concepts", "set-term", "--from", str(f), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["terms"] == 1, r.output


# ------------------------------------------------------------------------------------------ config and URLs

@pytest.mark.parametrize("text,sentence", [
    ("[download]\ntotal_timeout = inf\n", "'download.total_timeout': Input should be a finite number (got inf)"),
    ("[download]\ntotal_timeout = nan\n", "'download.total_timeout': Input should be a finite number (got nan)"),
    ("[tag]\nmin_score = -inf\n", "'tag.min_score': Input should be a finite number (got -inf)"),
    ("[evaluate]\nprevalence = { ks = " + "[" * 3000 + "]" * 3000 + " }\n",
     "arrays or tables are nested more than 32 levels deep (too deep to parse); flatten them and rerun."),
    ("[evaluate]\nprevalence = { ks = " + "[" * 40 + "]" * 40 + " }\n",
     "nests arrays or tables more than 32 levels deep; flatten it and rerun."),
    ("[llm]\nbase_url = \"http://[::1\"\n", "'llm.base_url': Value error, not a valid URL (Invalid IPv6 URL)"),
], ids=["inf", "nan", "-inf", "3000-deep", "40-deep", "base-url"])
def test_config_values_are_finite_shallow_and_parsed(project, text, sentence):
    (project.root / "cultura.toml").write_text("[project]\ncountries = [\"JP\", \"US\"]\n\n" + text)
    r = _cli(project, "status")
    assert r.exit_code == 1 and "Traceback" not in r.output and "RecursionError" not in r.output, r.output
    assert sentence in " ".join(r.output.split()), r.output


@pytest.mark.parametrize("url,problem", [("http://[::1", "Invalid IPv6 URL"),
                                         ("http://user:hunter22@[::1", "Invalid IPv6 URL"),
                                         ("localhost:8000/v1", "it is not http:// or https://"),
                                         ("http://h:99999/v1", "Port out of range 0-65535")])
def test_a_bad_openai_base_url_is_one_sentence(project, monkeypatch, url, problem):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-123456")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    r = _cli(project, "concepts", "generate", "--n", "3")
    text = " ".join(r.output.split())
    assert r.exit_code == 1 and "Traceback" not in r.output and "InvalidURL" not in r.output, r.output
    assert f"is not a valid URL ({problem}); set it to the server's http(s) base URL" in text, r.output
    assert text.count("OPENAI_BASE_URL") == 1 and "hunter22" not in text


def test_an_oversized_csv_field_is_a_reject_row_and_never_aborts_the_file(project, tmp_path):
    """A field over the csv module's 128 KiB limit (was a ``_csv.Error`` that refused the whole file): that line
    is a reject row / failed import row with its line number; the lines after it are read."""
    big = "x" * 200_000
    f = tmp_path / "urls.csv"
    f.write_text(f"url,concept,country\nhttps://a.example/1.jpg,bus,JP\nhttps://a.example/2.jpg,{big},JP\n"
                 "https://a.example/3.jpg,bus,JP\n", encoding="utf-8")
    r = _cli(project, "images", "search", "--provider", f"urls:{f}", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["rows"] == 3 and out["rejected"] == 1 and out["results"] == 2, out
    assert [x["reason"] for x in project.db["ingest_rejects"].rows] == [
        "line 3 cannot be read (field larger than field limit (131072))"]
    rng = np.random.default_rng(6)
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    for i in range(2):
        (imgs / f"img{i}.png").write_bytes(tiny_png(rng))
    g = tmp_path / "g.csv"
    g.write_text(f"image,country,concept\nimg0.png,JP,bus\nimg1.png,JP,{big}\nimg1.png,JP,rice\n", encoding="utf-8")
    r = _cli(project, "import", "globalrg", str(g), "--images", str(imgs), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["imported"] == 2 and out["failed"] == 1, out
    assert [x["reason"] for x in out["failures"]] == ["line 3 cannot be read (field larger than field limit (131072))"]


def test_label_studio_and_image_base_urls_are_parsed_with_a_sentence(project, monkeypatch):
    from tests.fakes.labelstudio import add_images

    add_images(project, "rice", "JP", 1)
    monkeypatch.setenv("LABEL_STUDIO_URL", "http://[::1")
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", "not-a-real-token-123456")
    r = _cli(project, "annotate", "pull")
    text = " ".join(r.output.split())
    assert r.exit_code == 1 and "Traceback" not in r.output and "InvalidURL" not in r.output, r.output
    assert "LABEL_STUDIO_URL 'http://[::1' is not a valid URL (Invalid IPv6 URL)" in text, r.output
    monkeypatch.delenv("LABEL_STUDIO_URL")
    r = _cli(project, "annotate", "push", "filter", "--image-base", "http://u:hunter22@[::1:8081")
    text = " ".join(r.output.split())
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    assert "--image-base: Image base 'http://[::1:8081' is not a valid URL (Invalid IPv6 URL)." in text, r.output
    assert "hunter22" not in text
    (project.root / "cultura.toml").write_text('[annotate]\nimage_base_url = "http://[::1"\n')
    r = _cli(project, "status")
    assert r.exit_code == 1 and "'annotate.image_base_url': Value error, must be an http:// or https:// URL" in \
        " ".join(r.output.split()), r.output
