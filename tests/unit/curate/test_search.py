"""Search providers: ddgs (with an injected fake that replays recorded result dicts and rate-limits on
demand), urls: files, folder: trees, img2dataset ingest."""
import json

import pytest
from ddgs.exceptions import DDGSException, RatelimitException

from cultura.curate import concepts as C
from cultura.curate.search import DDGSProvider, RateLimiter, ingest_img2dataset, search_images
from cultura.errors import CulturaError

RECORDED = [  # the shape ddgs returns for DDGS().images(...)
    {"title": "Bus in Tokyo", "image": "https://img.example/jp-bus-1.jpg", "thumbnail": "https://tse.example/t1",
     "url": "https://news.example/tokyo-bus", "height": 768, "width": 1024, "source": "Bing"},
    {"title": "Bus", "image": "https://img.example/jp-bus-2.jpg", "thumbnail": "https://tse.example/t2",
     "url": "https://blog.example/bus", "height": 600, "width": 800, "source": "Bing"},
]


class FakeDDGS:
    """Stands in for ddgs.DDGS: recorded results, RatelimitException for the first `ratelimits` calls."""

    def __init__(self, ratelimits=0, fail_on=()):
        self.calls = []
        self.ratelimits = ratelimits
        self.fail_on = fail_on

    def images(self, query, **kw):
        self.calls.append((query, kw))
        if self.ratelimits > 0:
            self.ratelimits -= 1
            raise RatelimitException("https://duckduckgo.com/i.js 403 Ratelimit")
        if any(f in query for f in self.fail_on):
            raise DDGSException("engine exploded")
        return [dict(r, image=r["image"].replace("jp-bus", query.replace(" ", "_"))) for r in RECORDED]


@pytest.fixture
def queried(project):
    C.add_concepts(project, ["bus"])
    for cc, term in {"JP": "バス", "TH": "รถเมล์", "DE": "Bus"}.items():
        C.set_term(project, "bus", cc, term)
    C.build_queries(project)
    project.config.search.min_interval = 0
    return project


def test_ddgs_stores_every_field_and_rank_and_resumes(queried):
    fake = FakeDDGS()
    sleeps = []
    prov = DDGSProvider(client_factory=lambda: fake, sleep=sleeps.append)
    res = search_images(queried, provider=prov, per_query=2, progress=False)
    assert res == {"queries": 7, "done": 7, "failed": 0, "rows": 14, "stored": 14, "rejected": 0, "results": 14}
    q, kw = fake.calls[1]
    assert kw["region"] == "jp-jp" and kw["safesearch"] == "moderate" and kw["max_results"] == 2
    row = next(queried.db["search_results"].rows_where("rank = 2"))
    raw = json.loads(row["raw"])
    assert raw["source"] == "Bing" and row["width"] == 800 and row["source_page"] == "https://blog.example/bus"
    assert queried.db["candidates"].count == 14
    # rerun skips done queries; --refresh re-queries and does not duplicate anything
    search_images(queried, provider=prov, per_query=2, progress=False)
    assert len(fake.calls) == 7
    search_images(queried, provider=prov, per_query=2, refresh=True, progress=False)
    assert len(fake.calls) == 14 and queried.db["search_results"].count == 14


def test_ddgs_ratelimit_backoff_then_give_up_as_a_row(queried):
    queried.config.search.max_attempts = 3
    fake = FakeDDGS(ratelimits=2)
    sleeps = []
    prov = DDGSProvider(client_factory=lambda: fake, sleep=sleeps.append)
    res = search_images(queried, provider=prov, per_query=2, progress=False)
    assert res["done"] == 7 and res["failed"] == 0
    assert len(fake.calls) == 9  # two rate-limited attempts, then success
    assert len(sleeps) >= 2 and all(s >= 0 for s in sleeps)

    # every attempt rate-limited -> a failed row with the reason; five in a row, none answered, and the search
    # stops with one sentence instead of failing the rest one at a time; a rerun retries them
    queried.config.search.max_attempts = 2
    fake2 = FakeDDGS(ratelimits=10**6)
    with pytest.raises(CulturaError, match=r"the last 5 queries to ddgs all failed \(ratelimited.*2 left.*rerun"):
        search_images(queried, provider=DDGSProvider(client_factory=lambda: fake2, sleep=lambda s: None),
                      per_query=2, refresh=True, progress=False)
    assert len(fake2.calls) == 10
    failed = list(queried.db["searches"].rows_where("status = 'failed'"))
    assert len(failed) == 5 and failed[0]["error"].startswith("ratelimited")
    res = search_images(queried, provider=DDGSProvider(client_factory=lambda: FakeDDGS(), sleep=lambda s: None),
                        per_query=2, progress=False)
    assert res["queries"] == 5 and res["done"] == 5


def test_ddgs_other_errors_are_rows(queried):
    fake = FakeDDGS(fail_on=("バス",))
    res = search_images(queried, provider=DDGSProvider(client_factory=lambda: fake, sleep=lambda s: None),
                        per_query=2, progress=False)
    assert res["failed"] == 1 and res["done"] == 6
    row = next(queried.db["searches"].rows_where("status='failed'"))
    assert "engine exploded" in row["error"]


def test_rate_limiter_interval_and_jitter():
    t = [0.0]
    slept = []

    def sleep(s):
        slept.append(s)
        t[0] += s

    rl = RateLimiter(2.0, 1.0, 8.0, sleep=sleep, clock=lambda: t[0])
    rl.wait()
    rl.wait()
    assert slept == [2.0]
    delays = [rl.backoff(a) for a in (1, 2, 3, 10)]
    assert 0 <= delays[0] <= 1 and 0 <= delays[1] <= 2 and 0 <= delays[2] <= 4 and delays[3] <= 8


def test_urls_provider_keeps_bad_rows_with_reasons(project, tmp_path):
    f = tmp_path / "urls.jsonl"
    rows = [
        {"url": "https://a.example/1.jpg", "concept": "Bus", "country": "jp", "rank": 2, "title": "t"},
        {"url": "https://a.example/2.jpg", "concept": "bus", "country": "JP", "rank": 1},
        {"url": "https://a.example/1.jpg", "concept": "bus", "country": "TH", "language": "th", "query": "รถเมล์"},
        {"url": "ftp://x/3.jpg", "concept": "bus", "country": "JP"},
        {"url": "https://a.example/4.jpg", "concept": "bus", "country": "FR"},
        {"concept": "bus", "country": "JP"},
    ]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    res = search_images(project, provider=f"urls:{f}", progress=False)
    assert res == {"rows": 7, "stored": 3, "rejected": 4, "queries": 2, "skipped_queries": 0, "results": 3}
    reasons = sorted(r["reason"] for r in project.db["ingest_rejects"].rows)
    assert reasons[0] == "country FR is not a project country (DE, JP, TH, US)"
    assert "url is not http(s)" in reasons and "missing url" in reasons
    assert any(r.startswith("line 7 is not JSON") for r in reasons)
    assert project.db["candidates"].count == 2  # one URL found for two countries is one candidate
    ranks = [(r["url"], r["rank"]) for r in project.db.query(
        "SELECT sr.url, sr.rank FROM search_results sr JOIN queries q ON q.id = sr.query_id WHERE q.country='JP' "
        "ORDER BY rank")]
    assert ranks == [("https://a.example/2.jpg", 1), ("https://a.example/1.jpg", 2)]
    again = search_images(project, provider=f"urls:{f}", progress=False)
    assert again["queries"] == 0 and again["skipped_queries"] == 2
    with pytest.raises(CulturaError, match="does not exist"):
        search_images(project, provider=f"urls:{tmp_path}/nope.csv", progress=False)


def test_urls_provider_csv_and_parquet(project, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "u.csv").write_text("url,concept,country\nhttps://a.example/1.jpg,kite,US\n")
    pq.write_table(pa.table({"url": ["https://a.example/2.jpg"], "concept": ["kite"], "country": ["DE"]}),
                   tmp_path / "u.parquet")
    assert search_images(project, provider=f"urls:{tmp_path / 'u.csv'}", progress=False)["results"] == 1
    assert search_images(project, provider=f"urls:{tmp_path / 'u.parquet'}", progress=False)["results"] == 1
    with pytest.raises(CulturaError, match="unsupported file type"):
        (tmp_path / "u.txt").write_text("x")
        search_images(project, provider=f"urls:{tmp_path / 'u.txt'}", progress=False)


def test_folder_provider(project, tmp_path):
    root = tmp_path / "imgs"
    (root / "JP" / "street_food").mkdir(parents=True)
    (root / "JP" / "street_food" / "a.jpg").write_bytes(b"x")
    (root / "JP" / "street_food" / "notes.txt").write_text("x")
    (root / "XX" / "bus").mkdir(parents=True)
    res = search_images(project, provider=f"folder:{root}", progress=False)
    assert res == {"rows": 3, "stored": 1, "files": 1, "rejected": 2, "queries": 1, "results": 1}
    cand = next(project.db["candidates"].rows)
    assert cand["url"].startswith("file://") and cand["status"] == "pending"
    assert "street food" in {r["name"] for r in C.list_concepts(project)}


def test_img2dataset_ingest(project, tmp_path):
    shard = tmp_path / "out" / "00000"
    shard.mkdir(parents=True)
    (shard / "000000000.jpg").write_bytes(b"jpeg")
    (shard / "000000000.json").write_text(json.dumps({"url": "https://x.example/a.jpg", "key": "000000000",
                                                      "status": "success", "concept": "bus", "country": "TH"}))
    (shard / "000000001.json").write_text(json.dumps({"url": "https://x.example/b.jpg", "key": "000000001",
                                                      "status": "failed_to_download", "error_message": "404"}))
    res = ingest_img2dataset(project, tmp_path / "out")
    assert res == {"samples": 2, "rows": 2, "stored": 1, "rejected": 1, "results": 1}
    sr = next(project.db["search_results"].rows)
    assert sr["url"] == "https://x.example/a.jpg"
    assert next(project.db["ingest_rejects"].rows)["reason"] == "img2dataset: 404"
