"""The image downloader against the local trap server: every trap's status and reason, retries, the address
policy (allow_hosts, DNS to private addresses, each redirect hop), content-addressed blobs, idempotent reruns,
duplicates and the orphan sweep."""
from __future__ import annotations

import asyncio
import hashlib
import time
from pathlib import Path

import httpx
import pytest

from cultura.annotate.server import free_port
from cultura.curate import download as dl
from cultura.curate import fetch_one
from cultura.curate import safety
from cultura.curate.blobs import sweep_blobs
from cultura.db.blobs import store_blob
from cultura.errors import CulturaError
from cultura.project import init_project
from tests.fakes.image_server import image_bytes, image_server  # noqa: F401 (fixture)


@pytest.fixture
def proj(tmp_path, image_server):  # noqa: F811
    p = init_project(tmp_path / "p", countries=["US", "JP"])
    s = p.config.download
    s.allow_hosts = [image_server.host_port]
    # generous enough that a busy machine never times out a local image (no test assumes a fast machine);
    # the /slow trap stalls far longer than read_timeout
    s.read_timeout = 5.0
    s.connect_timeout = 5.0
    s.total_timeout = 120.0
    s.backoff_base = 0.01
    s.max_attempts = 2
    s.max_bytes = 1_000_000
    s.max_pixels = 1_000_000
    yield p
    p.close()


def add(p, urls):
    p.db["candidates"].insert_all([{"url": u, "status": "pending"} for u in urls])


def row(p, url):
    return p.db.execute("SELECT status, reason, detail, http_status, sha256, attempts FROM candidates "
                        "WHERE url = ?", [url]).fetchone()


def run(p, **kw):
    kw.setdefault("progress", False)
    return dl.download_candidates(p, **kw)


TRAPS = {
    "/img/1.jpg": ("downloaded", None),
    "/img/2.png": ("downloaded", None),
    "/plain/3.jpg": ("downloaded", None),          # served as text/plain: we trust sniffing, not headers
    "/redirect?to=/img/9.jpg": ("downloaded", None),
    "/chain/3": ("downloaded", None),
    "/flaky500/a": ("downloaded", None),
    "/404": ("failed", "http_404"),
    "/html": ("failed", "html"),
    "/html-as-jpeg": ("failed", "html"),
    "/svg": ("failed", "svg"),
    "/truncated.jpg": ("failed", "truncated"),
    "/bomb.png": ("failed", "too_many_pixels"),
    "/img/10.jpg?w=1200&h=1000": ("failed", "too_many_pixels"),   # above max_pixels, below Pillow's limit
    "/tiny.png": ("failed", "too_small"),
    "/slow?s=60": ("failed", "timeout"),
    "/big?n=3000000": ("failed", "too_large"),
    "/biglen?n=3000000": ("failed", "too_large"),
    "/chain/7": ("failed", "too_many_redirects"),
    "/always503": ("failed", "too_many_retries"),
    "/noai.jpg": ("skipped", "robots_noai"),
    "/noimageai.jpg": ("skipped", "robots_noai"),
    "/redirect-metadata": ("skipped", "blocked_address"),
}


def test_every_trap_gets_its_status_and_reason(proj, image_server, tmp_path):  # noqa: F811
    closed = free_port()
    proj.config.download.allow_hosts.append(f"127.0.0.1:{closed}")
    local = tmp_path / "local.jpg"
    local.write_bytes(image_bytes(12))
    urls = {image_server.url(k): v for k, v in TRAPS.items()}
    urls.update({
        local.as_uri(): ("downloaded", None),
        (tmp_path / "missing.jpg").as_uri(): ("failed", "file_missing"),
        "ftp://example.com/a.jpg": ("failed", "bad_url"),
        f"http://127.0.0.1:{closed}/x.jpg": ("failed", "connection_error"),
    })
    add(proj, urls)
    summary = run(proj, workers=16)
    got = {u: row(proj, u)[:2] for u in urls}
    assert got == urls
    assert summary["processed"] == len(urls)
    assert summary["by_status"]["downloaded"] == sum(v[0] == "downloaded" for v in urls.values())
    for reason in summary["by_reason"]:
        assert reason in dl.REASONS
    # every failure has a human detail; policy refusals are 'skipped' as REASONS says
    for u, (status, reason) in urls.items():
        r = row(proj, u)
        if reason:
            assert r[2] and dl.REASONS[reason][0] == status
    assert row(proj, image_server.url("/404"))[3] == 404
    assert row(proj, image_server.url("/flaky500/a"))[5] == 2          # one retry
    assert "169.254.169.254" in row(proj, image_server.url("/redirect-metadata"))[2]
    run_row = proj.db.execute("SELECT status, summary FROM runs WHERE stage = 'download'").fetchone()
    assert run_row[0] == "done"


def test_retry_after_is_honoured(proj, image_server):  # noqa: F811
    s = proj.config.download
    s.max_attempts = 3
    url = image_server.url("/flaky429/k?after=1")

    async def go():
        async with dl.make_client(s) as client:
            t = time.monotonic()
            r = await dl.fetch_image(client, url, s)
            return r, time.monotonic() - t

    r, elapsed = asyncio.run(go())
    assert r.ok and r.attempts == 2
    assert image_server.hits["/flaky429/k"] == 2
    assert elapsed >= 0.95          # waited the announced second, not the 10 ms back-off


def test_retry_after_longer_than_allowed_gives_up_at_once(proj, image_server):  # noqa: F811
    s = proj.config.download
    s.max_attempts = 5
    s.retry_after_max = 30
    url = image_server.url("/always503?after=3600")
    add(proj, [url])
    run(proj)
    status, reason, detail, http_status, _, attempts = row(proj, url)
    assert (status, reason, http_status, attempts) == ("failed", "too_many_retries", 503, 1)
    assert "Retry-After" in detail and image_server.hits["/always503"] == 1


def test_loopback_needs_allow_hosts(proj, image_server):  # noqa: F811
    proj.config.download.allow_hosts = []
    url = image_server.url("/img/1.jpg")
    add(proj, [url])
    run(proj)
    status, reason, detail, *_ = row(proj, url)
    assert (status, reason) == ("skipped", "blocked_address")
    assert "loopback" in detail and "allow_hosts" in detail
    assert image_server.hits["/img/1.jpg"] == 0          # never contacted


def test_public_name_resolving_to_private_address_is_blocked(proj, monkeypatch):
    monkeypatch.setattr(safety, "resolve_host",
                        lambda host, port: {"evil.example.com": ["10.1.2.3"],
                                            "mixed.example.com": ["93.184.215.14", "192.168.0.7"]}[host])
    urls = ["http://evil.example.com/a.jpg", "https://mixed.example.com/b.jpg"]
    add(proj, urls)
    run(proj)
    for u, ip in zip(urls, ["10.1.2.3", "192.168.0.7"]):
        status, reason, detail, *_ = row(proj, u)
        assert (status, reason) == ("skipped", "blocked_address") and ip in detail


def test_connection_goes_to_the_checked_address(proj, image_server, monkeypatch):  # noqa: F811
    """The address that passed the check is the one connected to (no second DNS lookup)."""
    calls = []

    def fake(host, port):
        calls.append(host)
        return ["127.0.0.1"]

    monkeypatch.setattr(safety, "resolve_host", fake)
    name = f"images.example.com:{image_server.port}"
    proj.config.download.allow_hosts.append(name)
    url = f"http://{name}/img/21.jpg"
    add(proj, [url])
    run(proj)
    assert row(proj, url)[0] == "downloaded" and calls == ["images.example.com"]


def test_each_redirect_hop_is_rechecked(proj, image_server, monkeypatch):  # noqa: F811
    monkeypatch.setattr(safety, "resolve_host", lambda host, port: ["127.0.0.1"])
    target = f"http://sneaky.example.com:{image_server.port}/img/1.jpg"   # resolves to loopback, not allowed
    url = image_server.url(f"/redirect?to={target}")
    add(proj, [url])
    run(proj)
    status, reason, detail, *_ = row(proj, url)
    assert (status, reason) == ("skipped", "blocked_address") and "sneaky.example.com" in detail
    assert image_server.hits["/redirect"] == 1 and image_server.hits["/img/1.jpg"] == 0


def test_plain_httpx_client_is_checked_too(proj, image_server):  # noqa: F811
    s = proj.config.download.model_copy(update={"allow_hosts": []})

    async def go():
        async with httpx.AsyncClient() as client:
            return await dl.fetch_image(client, image_server.url("/img/1.jpg"), s)

    r = asyncio.run(go())
    assert (r.status, r.reason) == ("skipped", "blocked_address") and image_server.hits["/img/1.jpg"] == 0


def test_blobs_are_content_addressed_and_rerun_is_a_noop(proj, image_server):  # noqa: F811
    urls = [image_server.url(f"/img/{i}.jpg") for i in range(30, 36)] + [image_server.url("/img/36.png")]
    add(proj, urls)
    first = run(proj)
    assert first["by_status"] == {"downloaded": 7} and first["new_images"] == 7
    for sha, path, fmt, w, h, nbytes in proj.db.execute(
            "SELECT sha256, path, format, width, height, bytes FROM images"):
        ext = "png" if fmt == "png" else "jpg"
        assert path == f"blobs/{sha[:2]}/{sha}.{ext}"
        data = (proj.root / path).read_bytes()
        assert hashlib.sha256(data).hexdigest() == sha and len(data) == nbytes and (w, h) == (320, 240)
    for u in urls:
        assert row(proj, u)[4] is not None
    hits = sum(image_server.hits.values())
    again = run(proj)
    assert again["candidates"] == 0 and again["processed"] == 0
    assert sum(image_server.hits.values()) == hits
    assert proj.db["images"].count == 7


def test_same_bytes_at_two_urls_make_one_image(proj, image_server):  # noqa: F811
    urls = [image_server.url(p) for p in ("/dup/a.jpg", "/dup/b.jpg", "/country/US/11.jpg", "/country/JP/11.jpg",
                                          "/img/11.jpg")]
    add(proj, urls)
    summary = run(proj)
    assert summary["by_status"] == {"downloaded": 5}
    assert proj.db["images"].count == 2 and summary["new_images"] == 2
    shas = [row(proj, u)[4] for u in urls]
    assert shas[0] == shas[1] and shas[2] == shas[3] == shas[4] and shas[0] != shas[2]
    files = [p for p in (proj.root / "blobs").glob("??/*") if p.is_file()]
    assert len(files) == 2


def test_retry_failed_reprocesses_failed_candidates(proj, image_server):  # noqa: F811
    proj.config.download.max_attempts = 1
    url = image_server.url("/flaky500/once")
    add(proj, [url])
    run(proj)
    assert row(proj, url)[:2] == ("failed", "too_many_retries")
    assert run(proj)["candidates"] == 0          # failed ones wait for retry_failed
    run(proj, retry_failed=True)
    status, reason, _, http_status, sha, attempts = row(proj, url)
    assert (status, reason, http_status, attempts) == ("downloaded", None, 200, 2) and sha


def test_sweep_removes_tmp_and_orphans_only(proj):
    sha, rel = store_blob(proj, image_bytes(50), "jpeg")
    orphan_sha, orphan_rel = store_blob(proj, image_bytes(51), "jpeg")
    proj.db["images"].insert({"sha256": sha, "path": rel, "format": "jpeg", "width": 320, "height": 240,
                              "bytes": 1, "status": "ok", "created_at": "x"})
    tmp = proj.root / "blobs" / ".tmp"
    (tmp / "leftover.part").write_bytes(b"half")
    keep = proj.root / "blobs" / "README.txt"
    keep.write_text("not a blob")
    assert sweep_blobs(proj) == {"tmp_removed": 1, "orphans_removed": 1}
    assert (proj.root / rel).exists() and not (proj.root / orphan_rel).exists() and keep.exists()
    assert store_blob(proj, image_bytes(50), "jpeg") == (sha, rel)      # idempotent


def test_second_downloader_is_refused(proj):
    import fcntl
    proj.blobs.mkdir(exist_ok=True)
    with open(proj.blobs / ".download.lock", "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        with pytest.raises(dl.DownloadLocked, match="Another download"):
            run(proj)


def test_credentials_in_urls_are_not_recorded(proj, image_server):  # noqa: F811
    url = image_server.url("/redirect?to=http://user:secret@169.254.169.254/x")
    add(proj, [url])
    run(proj)
    status, reason, detail, *_ = row(proj, url)
    assert reason == "blocked_address" and "secret" not in detail
    assert fetch_one._redact("https://u:p@h.example:8443/a?b=1") == "https://h.example:8443/a?b=1"


def test_fetch_image_on_its_own(proj, image_server, tmp_path):  # noqa: F811
    s = proj.config.download

    async def go():
        async with dl.make_client(s) as client:
            return await asyncio.gather(*(dl.fetch_image(client, image_server.url(p), s)
                                          for p in ("/img/60.jpg", "/404")))

    ok, missing = asyncio.run(go())
    assert ok.ok and ok.format == "jpeg" and ok.data == image_bytes(60)
    assert ok.sha256 == hashlib.sha256(ok.data).hexdigest() and (ok.width, ok.height) == (320, 240)
    assert (missing.status, missing.reason, missing.http_status) == ("failed", "http_404", 404)
    sha, rel = store_blob(proj, ok.data, ok.format)
    assert Path(proj.root / rel).read_bytes() == ok.data and sha == ok.sha256


def test_decode_in_processes_gives_the_same_rows_as_threads(tmp_path, image_server):  # noqa: F811
    """The validating decode in decode processes (large downloads: they also write the blobs) applies the very
    same checks (every trap gets its reason) and stores the same hashes and blob files as the thread path."""
    urls = [image_server.url(k) for k in ("/img/1.jpg", "/img/2.png", "/html", "/svg", "/truncated.jpg",
                                           "/bomb.png", "/tiny.png", "/img/10.jpg?w=1200&h=1000", "/img/3.jpg")]
    out = []
    for processes in (0, 2):
        p = init_project(tmp_path / f"p{processes}", countries=["US", "JP"])
        s = p.config.download
        s.allow_hosts, s.max_pixels, s.backoff_base = [image_server.host_port], 1_000_000, 0.01
        add(p, urls)
        summary = run(p, workers=4, decode_processes=processes)
        assert summary["processed"] == len(urls)
        out.append(([row(p, u)[:2] + row(p, u)[4:5] for u in urls],
                    p.db.execute("SELECT sha256, path, phash, dhash, phash_centre, phash_variants, phash_fine "
                                 "FROM images ORDER BY sha256").fetchall()))
        for sha, path, *_ in out[-1][1]:
            assert hashlib.sha256((p.root / path).read_bytes()).hexdigest() == sha
        assert sorted(p.blobs.glob("??/*")) and not list((p.blobs / ".tmp").glob("*"))
        p.close()
    assert out[0] == out[1]
    assert all(r[6] for r in out[0][1])  # the fine hashes too, from the one decode
    assert {r[1] for r in out[0][0]} >= {None, "html", "svg", "truncated", "too_many_pixels", "too_small"}
    assert all(len(r[5]) == 48 for r in out[0][1]) and len(out[0][1]) == 3   # three 64-bit views: mirror, centre, flip


def test_a_decode_process_that_dies_costs_only_the_body_it_was_decoding(tmp_path, image_server):  # noqa: F811
    """A decoder crash on one body (here: the worker killed while that body waits in it) refuses that body as
    corrupt, in words; the body queued behind it is decoded by a new worker, which writes its blob. That body is
    a real photograph of 1.6 MB, more than the socket holds: it is still being sent when the worker dies."""
    import io
    import os
    import signal

    from cultura.curate.decode_workers import decode_workers
    from tests.fakes.real_photos import photos

    big = io.BytesIO()
    photos()["coffee"].resize((1200, 800)).save(big, "PNG")
    first, second = image_bytes(1), big.getvalue()
    assert len(second) > 1 << 20

    async def go():
        async with decode_workers(1, tmp_path, {"max_pixels": 1_000_000, "min_side": 1}) as pool:
            await pool.validate(image_bytes(2), None)  # started: one worker, idle
            worker = pool.workers[0].process
            os.kill(worker.pid, signal.SIGSTOP)
            a = asyncio.ensure_future(pool.validate(first, "image/jpeg"))
            b = asyncio.ensure_future(pool.validate(second, "image/png"))
            while len(pool.workers[0].waiting) < 2:  # both bodies sent to the stopped worker
                await asyncio.sleep(0.01)
            os.kill(worker.pid, signal.SIGKILL)
            results = await asyncio.gather(a, b, return_exceptions=True)
            assert pool.workers[0].process.pid != worker.pid and pool.workers[0].process.is_alive()
            return results

    died, survived = asyncio.run(go())
    assert isinstance(died, dl._Failure) and died.reason == "corrupt" and "decoder process died" in died.detail
    info, rel = survived
    assert info.sha256 == hashlib.sha256(second).hexdigest() and (tmp_path / rel).read_bytes() == second


def test_decode_processes_must_not_be_negative(proj):
    add(proj, ["http://example.com/a.jpg"])
    with pytest.raises(CulturaError, match="decode_processes"):
        run(proj, decode_processes=-1)


def test_a_worker_fetches_its_next_url_while_the_last_body_is_validated(proj, image_server, monkeypatch):  # noqa: F811
    """Validation runs off the connection. With validation held, 2 workers still fetch all 4 URLs
    (with validation on the connection they would stop at 2); released, every candidate ends exactly once."""
    import threading

    urls = [image_server.url(f"/img/{40 + i}.jpg") for i in range(4)]
    add(proj, urls)
    hold = threading.Event()
    real = dl.sniff_image

    def held(data, **kw):
        hold.wait(300)  # a guard against a hang only
        return real(data, **kw)

    monkeypatch.setattr(dl, "sniff_image", held)
    fetched = lambda: sum(image_server.hits[f"/img/{40 + i}.jpg"] for i in range(4))  # noqa: E731
    out = {}

    async def go():
        async def release_when_all_fetched():
            deadline = time.monotonic() + 300  # a guard against a hang only
            try:
                while fetched() < 4 and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                out["fetched_while_held"] = fetched()
            finally:
                hold.set()

        watcher = asyncio.ensure_future(release_when_all_fetched())
        try:
            out["summary"] = await dl.adownload_candidates(proj, workers=2, progress=False, decode_processes=0)
        finally:
            hold.set()
            await watcher

    asyncio.run(go())
    assert out["fetched_while_held"] == 4
    assert out["summary"]["by_status"] == {"downloaded": 4}
    assert [row(proj, u)[0] for u in urls] == ["downloaded"] * 4
    assert proj.db.execute("SELECT count(*) FROM images").fetchone()[0] == 4
