"""No row is lost at any input door: for every registered search provider (and the img2dataset reader), rows in
= rows stored + reject rows, each reject with its reason, and no URL is a download candidate unless a stored row
lists it. Each input holds a good row, a bad row and a row that repeats a (query, rank) pair where the provider
lets its input give ranks."""
import json

import pytest

from cultura.curate import concepts as C
from cultura.curate import search as S
from cultura.curate.search import QueryProvider, ingest_img2dataset, search_images


class _FakeDDGS:
    """ddgs answering every query with two good results, one URL that is not http(s), and one result more than
    asked for."""

    def images(self, query, **kw):
        slug = query.replace(" ", "_")
        return [{"image": f"https://img.example/{slug}/{i}.jpg", "title": "t"} for i in range(3)] + [
            {"image": "file:///etc/passwd"}]


class _RankedPlugin(QueryProvider):
    """A plugin whose answers carry their own ranks, one of them repeated."""

    name = "ranked"

    def search(self, query, per_query):
        slug = query["text"].replace(" ", "_")
        return [{"image": f"https://p.example/{slug}/a.jpg", "rank": 1},
                {"image": f"https://p.example/{slug}/b.jpg", "rank": 1},
                {"image": "not a url"}]


def _queried(project):
    C.add_concepts(project, ["bus"])
    for cc, term in {"JP": "バス", "TH": "รถเมล์", "DE": "Bus"}.items():
        C.set_term(project, "bus", cc, term)
    project.config.search.min_interval = 0
    return project


def _ddgs(project, tmp_path):
    _queried(project)
    return S.DDGSProvider(client_factory=_FakeDDGS, sleep=lambda s: None), 7 * 4


def _urls(project, tmp_path):
    f = tmp_path / "urls.jsonl"
    rows = [{"url": "https://a.example/1.jpg", "concept": "bus", "country": "JP", "query": "bus", "rank": 1},
            {"url": "https://a.example/2.jpg", "concept": "bus", "country": "JP", "query": "bus", "rank": 1},
            {"url": "https://a.example/3.jpg", "concept": "bus", "country": "JP", "query": "bus"},
            {"url": "https://a.example/4.jpg", "concept": "bus", "country": "XX"}]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    return f"urls:{f}", 5


def _folder(project, tmp_path):
    root = tmp_path / "photos"
    (root / "JP" / "bus" / "deeper").mkdir(parents=True)
    (root / "XX").mkdir()
    for p in ("JP/bus/a.jpg", "JP/bus/b.png", "JP/bus/notes.txt", "JP/stray.jpg", "top.jpg", "JP/bus/deeper/c.jpg"):
        (root / p).write_bytes(b"x")
    # rows: a.jpg, b.png (stored); notes.txt, stray.jpg, top.jpg, deeper/ and XX/ (rejected, deeper/ not read)
    return f"folder:{root}", 7


def _plugin(project, tmp_path):
    _queried(project)
    return _RankedPlugin(), 7 * 3


CASES = {"ddgs": _ddgs, "urls": _urls, "folder": _folder}


def test_every_registered_provider_has_a_case():
    S._load_plugins()
    assert set(S._PROVIDERS) <= set(CASES), f"add an input for {set(S._PROVIDERS) - set(CASES)} to CASES"


def _accounted(project, summary, rows_in):
    db = project.db
    assert summary["rows"] == rows_in == summary["stored"] + summary["rejected"], summary
    assert db["search_results"].count == summary["stored"]
    assert db["ingest_rejects"].count == summary["rejected"]
    assert all(r["reason"] for r in db["ingest_rejects"].rows)
    unlisted = db.execute("SELECT count(*) FROM candidates c WHERE c.status = 'pending' AND NOT EXISTS "
                          "(SELECT 1 FROM search_results sr WHERE sr.candidate_id = c.id)").fetchone()[0]
    assert unlisted == 0


@pytest.mark.parametrize("case", [*CASES, "plugin"])
def test_rows_in_equal_rows_stored_plus_rejects(project, tmp_path, case):
    provider, rows_in = (CASES.get(case) or _plugin)(project, tmp_path)
    summary = search_images(project, provider=provider, per_query=2, progress=False)
    _accounted(project, summary, rows_in)
    # a rerun stores nothing twice and loses nothing: the same accounting, with no new reject rows
    again = search_images(project, provider=provider, per_query=2, refresh=case == "ddgs", progress=False)
    if "rows" in again and again["rows"]:
        _accounted(project, again, rows_in)


def test_img2dataset_rows_in_equal_rows_stored_plus_rejects(project, tmp_path):
    shard = tmp_path / "out" / "00000"
    shard.mkdir(parents=True)
    for key, meta in {"0": {"status": "success", "concept": "bus", "country": "TH"},
                      "1": {"status": "failed_to_download", "error_message": "404"},
                      "2": {"status": "success", "concept": "bus", "country": "XX"}}.items():
        (shard / f"{key}.json").write_text(json.dumps({"url": f"https://x.example/{key}.jpg", "key": key, **meta}))
        (shard / f"{key}.jpg").write_bytes(key.encode())
    _accounted(project, ingest_img2dataset(project, tmp_path / "out"), 3)


def test_a_repeated_rank_is_a_reject_and_its_url_is_not_downloaded(project, tmp_path):
    f = tmp_path / "urls.jsonl"
    f.write_text(json.dumps({"url": "https://a.example/1.jpg", "concept": "bus", "country": "JP", "query": "bus",
                             "rank": 1}) + "\n" +
                 json.dumps({"url": "https://a.example/2.jpg", "concept": "bus", "country": "JP", "query": "bus",
                             "rank": 1}) + "\n")
    res = search_images(project, provider=f"urls:{f}", progress=False)
    assert (res["results"], res["stored"], res["rejected"]) == (1, 1, 1)
    assert [c["url"] for c in project.db["candidates"].rows] == ["https://a.example/1.jpg"]
    (reject,) = project.db["ingest_rejects"].rows
    assert reject["line"] == 2 and reject["reason"].startswith("repeats rank 1 of query 'bus' (row 1 has it)")
    # rows without a rank follow the largest rank given, never onto a rank another row holds
    f.write_text("".join(json.dumps({"url": f"https://b.example/{i}.jpg", "concept": "kite", "country": "JP",
                                     "query": "kite", **({"rank": 3} if i == 0 else {})}) + "\n" for i in range(3)))
    res = search_images(project, provider=f"urls:{f}", progress=False)
    assert (res["stored"], res["rejected"]) == (3, 0)
    assert sorted(r["rank"] for r in project.db.query(
        "SELECT rank FROM search_results sr JOIN queries q ON q.id = sr.query_id WHERE q.text = 'kite'")) == [3, 4, 5]


def test_listed_rows_join_the_project_query_of_the_same_text(project, tmp_path):
    C.add_concepts(project, ["bus"])
    C.set_term(project, "bus", "JP", "バス")
    C.build_queries(project)
    f = tmp_path / "urls.jsonl"
    f.write_text(json.dumps({"url": "https://a.example/1.jpg", "concept": "bus", "country": "JP",
                             "query": "bus Japan", "language": "en"}) + "\n" +
                 json.dumps({"url": "https://a.example/2.jpg", "concept": "bus", "country": "JP",
                             "query": "バス 日本"}) + "\n")
    before = project.db["queries"].count
    assert search_images(project, provider=f"urls:{f}", progress=False)["stored"] == 2
    assert project.db["queries"].count == before
    kinds = {r["kind"] for r in project.db.query(
        "SELECT q.kind FROM search_results sr JOIN queries q ON q.id = sr.query_id")}
    assert kinds == {"english", "native"}
