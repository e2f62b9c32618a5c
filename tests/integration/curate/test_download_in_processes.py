"""A download split over processes by host (``--processes``) stores what one process stores, keeps the per-host
limit, and stops whole: a process that fails or dies fails the run and stops the others, a cancelled run stops
every process before it releases the project, and what was finished is kept for the rerun."""
from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

import cultura
from cultura.cli import cli
from cultura.curate import download as dl
from cultura.curate.download import download_candidates
from cultura.db.blobs import blob_writer
from cultura.errors import CulturaError
from cultura.project import Project, init_project
from tests.fakes.cli_runner import ProjectCli
from tests.fakes.file_server import FileServer
from tests.fakes.image_server import ImageServer, image_bytes
from tests.integration.curate import test_download_checking_headers_only as hdr

pytestmark = pytest.mark.skipif(not dl.shards.forkable(), reason="download processes are forked (Linux)")

HOSTS = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
PER_HOST = 2
#: a guard against a hang only (minutes), never a budget: the tests wait for states
HANG_GUARD = 600


@contextlib.contextmanager
def servers(latency: float):
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(ImageServer(latency=latency, host=h)) for h in HOSTS]


def urls_for(srvs) -> list[str]:
    """40 images per host, one of them also served by the two other hosts (the same bytes, fetched in other
    processes: one image row), and refusals."""
    urls = [s.url(f"/img/{1000 * k + i}.jpg") for k, s in enumerate(srvs) for i in range(40)]
    urls += [srvs[1].url("/img/7.jpg"), srvs[2].url("/img/7.jpg")]
    urls += [srvs[0].url("/html-as-jpeg"), srvs[1].url("/404"), srvs[2].url("/truncated.jpg")]
    return urls


def make_project(root, srvs, urls, **download) -> Project:
    assert CliRunner().invoke(cli, ["init", str(root), "--countries", "US,JP"]).exit_code == 0
    p = Project(root)
    s = p.config.download
    s.allow_hosts = [srv.host_port for srv in srvs]
    s.per_host, s.read_timeout, s.backoff_base, s.max_attempts = PER_HOST, 10.0, 0.01, 1
    for k, v in download.items():
        setattr(s, k, v)
    p.save_config()
    p.db["candidates"].insert_all([{"url": u, "status": "pending"} for u in urls])
    return p


def stored(p) -> dict:
    """What a download leaves: every candidate's outcome, the image rows, their files, the open flags."""
    db = p.db
    images = {r[0]: r[1:] for r in db.execute("SELECT sha256, format, width, height, bytes, path FROM images")}
    for sha, row in images.items():
        assert hashlib.sha256((p.root / row[-1]).read_bytes()).hexdigest() == sha
    files = {f"blobs/{f.parent.name}/{f.name}" for f in (p.root / "blobs").glob("??/*") if f.is_file()}
    assert files == {row[-1] for row in images.values()}          # every file has its row, every row its file
    return {"candidates": sorted(db.execute("SELECT url, status, reason, sha256 FROM candidates").fetchall(),
                                 key=lambda r: r[0]),
            "images": {sha: row[:-1] for sha, row in images.items()},
            "flags": sorted(db.execute("SELECT sha256, flag FROM image_flags WHERE status = 'open'").fetchall())}


def test_two_processes_store_what_one_stores_and_keep_the_per_host_limit(tmp_path):
    with servers(latency=0.02) as srvs:
        urls = urls_for(srvs)
        p = make_project(tmp_path / "split", srvs, urls)
        p.close()
        got = ProjectCli(tmp_path / "split", env={"HF_HUB_OFFLINE": "1"}).json(
            "images", "download", "--check", "header", "--processes", "2", "--workers", "6")
        assert got["processes"] == 2 and got["processed"] == len(urls)
        assert got["by_status"] == {"downloaded": len(urls) - 3, "failed": 3}
        assert got["new_images"] == 3 * 40
        assert all(s.peak <= PER_HOST for s in srvs), [s.peak for s in srvs]
        assert max(s.peak for s in srvs) == PER_HOST    # the limit was reached, so the check above means something
        for s in srvs:
            s.peak = 0

        one = make_project(tmp_path / "one", srvs, urls, check="header")
        summary = download_candidates(one, workers=6, progress=False, processes=1)
        assert summary["processes"] == 1
        with cultura.open(tmp_path / "split") as split:
            a = stored(split)
            params = split.db.execute("SELECT params FROM runs WHERE stage = 'download'").fetchone()[0]
        b = stored(one)
        assert a["images"] == b["images"] and a["flags"] == b["flags"]
        assert [r[1:] for r in a["candidates"]] == [r[1:] for r in b["candidates"]]
        assert {r[0] for r in a["flags"]} == set(a["images"])            # every header-checked image waits for dedup
        assert '"processes": 2' in params
        assert hashlib.sha256(image_bytes(7)).hexdigest() in a["images"]
        one.close()


def _wrapped(real, on_part):
    """``download_rows`` that calls ``on_part()`` instead in the process given the URLs of 127.0.0.2, once the
    other processes have committed an image (the processes are forked: they run the patched module)."""
    async def download_rows(project, rows, *args, **kwargs):
        if any("//127.0.0.2:" in r["url"] for r in rows):
            t0 = time.monotonic()
            while project.db.execute("SELECT count(*) FROM images").fetchone()[0] == 0:
                assert time.monotonic() - t0 < HANG_GUARD, "the other download processes never stored an image"
                await asyncio.sleep(0.01)
            on_part()
        return await real(project, rows, *args, **kwargs)
    return download_rows


def _no_space():
    raise OSError(28, "No space left on device")


def _killed():
    os.kill(os.getpid(), signal.SIGKILL)


def _open_files(root) -> list[str]:
    """The files under ``root`` this process has open (Linux)."""
    links = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
    return sorted(x for x in links if x.startswith(str(root)))


@pytest.mark.parametrize("how, error, says", [
    (_no_space, OSError, r"No space left on device"),
    (_killed, CulturaError, r"Download process \d died \(killed by SIGKILL\); what it had finished is saved"),
])
def test_a_process_that_fails_or_dies_fails_the_run_and_the_rerun_finishes(tmp_path, monkeypatch, how, error, says):
    with servers(latency=0.05) as srvs:
        urls = urls_for(srvs)
        p = make_project(tmp_path / "p", srvs, urls, check="header", workers=6)
        real = dl.download_rows
        monkeypatch.setattr(dl, "download_rows", _wrapped(real, how))
        at_fork: list[list[str]] = []
        real_check = dl.shards._no_connection_crosses

        def check(project):  # the last step before the processes are forked
            real_check(project)
            at_fork.append([os.path.relpath(f, p.root) for f in _open_files(p.root)])
        monkeypatch.setattr(dl.shards, "_no_connection_crosses", check)
        with pytest.raises(error, match=says):
            download_candidates(p, progress=False, processes=3)
        # no SQLite connection crossed the fork (its locks live in the process's memory, and the test's own
        # handle is the one the download ran on); the project lock, the blob lease and the run's lease did
        assert len(at_fork) == 1 and not [f for f in at_fork[0] if "cultura.db" in f], at_fork
        assert {"blobs/.download.lock", "blobs/.writers.lock"} <= set(at_fork[0]), at_fork
        status, err = p.db.execute("SELECT status, error FROM runs WHERE stage = 'download'").fetchone()
        assert status == "failed" and ("No space left on device" if how is _no_space else "died (killed") in err
        statuses = dict(p.db.execute("SELECT status, count(*) FROM candidates GROUP BY status").fetchall())
        assert statuses.get("pending", 0) >= 41              # the failed part's URLs, and what the others had left
        stored(p)                                            # what was finished is whole
        monkeypatch.setattr(dl, "download_rows", real)
        again = download_candidates(p, progress=False, processes=3)
        assert again["processes"] == 3
        assert dict(p.db.execute("SELECT status, count(*) FROM candidates GROUP BY status").fetchall()) == \
            {"downloaded": len(urls) - 3, "failed": 3}
        assert len(stored(p)["images"]) == 3 * 40
        p.close()


def test_a_cancelled_run_stops_every_process_before_it_lets_go_of_the_project(tmp_path):
    with servers(latency=0.05) as srvs:
        urls = urls_for(srvs)
        p = make_project(tmp_path / "p", srvs, urls, check="header", workers=3)

        async def cancel_midway():
            run = asyncio.ensure_future(dl.adownload_candidates(p, progress=False, processes=3))
            while p.db.execute("SELECT count(*) FROM images").fetchone()[0] < 6:   # some work committed
                await asyncio.sleep(0.02)
                assert not run.done(), run
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
            assert multiprocessing.active_children() == []    # every download process has ended
        asyncio.run(cancel_midway())
        status, err = p.db.execute("SELECT status, error FROM runs WHERE stage = 'download'").fetchone()
        assert (status, err) == ("interrupted", "interrupted")
        done = p.db.execute("SELECT count(*) FROM candidates WHERE status != 'pending'").fetchone()[0]
        assert 6 <= done < len(urls)
        stored(p)
        # no process is left writing: the next run takes the project at once (no DownloadLocked) and finishes
        again = download_candidates(p, progress=False, processes=3)
        assert again["processed"] == len(urls) - done
        assert len(stored(p)["images"]) == 3 * 40
        p.close()


def test_a_forked_process_holds_the_project_until_it_ends(tmp_path):
    """The lock and the blob writers' lease are given back by closing, never by LOCK_UN: a download process
    forked while they are held keeps them after the parent's scope ends (interrupted twice, say), so no other
    download starts and no sweep runs while it may still write."""
    p = init_project(tmp_path / "p", countries=["US"])
    go_r, go_w = os.pipe()
    with dl._project_lock(p), blob_writer(p):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child: holds what it inherited until told to go
            os.close(go_w)
            os.read(go_r, 1)
            os._exit(0)
    os.close(go_r)
    try:
        with pytest.raises(dl.DownloadLocked, match="Another download is running"):
            with dl._project_lock(p):
                pass
        with open(p.root / "blobs" / ".writers.lock", "a+") as f, pytest.raises(BlockingIOError):
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)   # what a sweep takes
    finally:
        os.write(go_w, b"x")
        os.waitpid(pid, 0)
        os.close(go_w)
    with dl._project_lock(p), open(p.root / "blobs" / ".writers.lock", "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)   # both free once the child has gone
    p.close()


def test_another_connection_open_in_the_process_is_one_sentence_before_any_fork(tmp_path):
    with servers(latency=0.0) as srvs:
        urls = urls_for(srvs)
        p = make_project(tmp_path / "p", srvs, urls, check="header")
        other = Project(p.root)
        other.db.execute("SELECT 1")    # a second handle on the same database, in use
        with pytest.raises(CulturaError, match=r"another connection open to .*cultura.db: close it \(p.close\(\)\) "
                                               r"or download with processes=1"):
            download_candidates(p, progress=False, processes=2)
        assert multiprocessing.active_children() == []
        assert p.db.execute("SELECT count(*) FROM candidates WHERE status = 'pending'").fetchone()[0] == len(urls)
        other.close()
        assert download_candidates(p, progress=False, processes=2)["processed"] == len(urls)
        p.close()


def test_a_decoding_download_in_processes_after_a_decode_pool_in_this_process(tmp_path):
    """Each download process starts its own decode processes, also when this process ran a pool before (its
    forkserver is this process's child: a forked download process cannot use it)."""
    with servers(latency=0.0) as srvs:
        urls = urls_for(srvs)
        first = make_project(tmp_path / "first", srvs, urls[:40], check="decode")
        assert download_candidates(first, progress=False, decode_processes=1)["processed"] == 40
        first.close()
        p = make_project(tmp_path / "p", srvs, urls, check="decode")
        got = download_candidates(p, progress=False, processes=2, decode_processes=2)
        assert got["processes"] == 2 and got["by_status"] == {"downloaded": len(urls) - 3, "failed": 3}
        images = stored(p)["images"]
        assert len(images) == 3 * 40 and stored(p)["flags"] == []
        hashed = p.db.execute("SELECT count(*) FROM images WHERE phash IS NOT NULL").fetchone()[0]
        assert hashed == len(images)          # decoded in the processes' own decode pools, hashes kept
        p.close()


def test_the_command_line_splits_a_large_header_checked_download_by_default(tmp_path):
    """`cultura images download --check header`, as a user runs it (its own process, progress on): from
    1,000 candidates on, one event loop per CPU, at most one per host."""
    n = dl.shards.PROCESSES_MIN
    with servers(latency=0.0) as srvs:
        p = make_project(tmp_path / "p", srvs, [srvs[i % 3].url(f"/img/{i}.jpg") for i in range(n)])
        p.close()
        out = subprocess.run([sys.executable, "-m", "cultura", "--project", str(tmp_path / "p"), "images", "download",
                              "--check", "header", "--json"], capture_output=True, text=True, timeout=600,
                             env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdin=subprocess.DEVNULL)
        assert out.returncode == 0, out.stderr[-2000:]
        got = json.loads(out.stdout)
        assert got["by_status"] == {"downloaded": n}
        assert got["processes"] == min(len(os.sched_getaffinity(0)), len(HOSTS)), got
        assert all(s.peak <= PER_HOST for s in srvs), [s.peak for s in srvs]


def test_real_photos_through_the_command_line_in_two_processes_as_in_one(tmp_path):
    """A user's path on real photographs (every format a crawl meets, a copy, a look-alike crop, a turned JPEG, a
    PNG that does not decode) served by two hosts: `images download --check header --processes 2`, then
    `images dedup`, leaves the images, hashes, flags, pool and duplicate sets that one process leaves."""
    bodies = hdr.photo_bodies()
    with contextlib.ExitStack() as stack:
        hosts = [FileServer(tmp_path / f"www{k}", host=h) for k, h in enumerate(HOSTS[:2])]
        for srv in hosts:
            stack.callback(srv.close)
        lines = [json.dumps({"url": hosts[k % 2].put(name, data), "concept": concept, "country": country})
                 for k, (name, (data, concept, country)) in enumerate(bodies.items())]
        urls = tmp_path / "urls.jsonl"
        urls.write_text("\n".join(lines) + "\n", encoding="utf-8")

        def run(name: str, processes: int) -> dict:
            cli = hdr.cli_project(tmp_path / name, json.dumps([s.host_port for s in hosts]), urls)
            got = cli.json("images", "download", "--check", "header", "--processes", processes)
            assert got["processes"] == processes and got["by_status"] == {"downloaded": len(bodies)}
            cli.json("images", "dedup")
            with cultura.open(tmp_path / name) as p:
                rows = hdr.hash_rows(p.db)
            return {"hashes": rows, "flags": hdr.flag_states(cli.json("images", "flags", "--status", "all")),
                    "out": hdr.pool_out(cli.json("images", "list", "--pool", "out")),
                    "sets": sorted(sorted(m["sha256"] for m in c["members"]) for c in cli.json("images", "clusters"))}

        two, one = run("two", 2), run("one", 1)
    assert two == one
    assert len(two["hashes"]) == len(bodies) - 1                   # the copy is one image
    assert list(two["out"].values()) == ["unreadable"]              # the PNG that does not decode, and nothing else
    assert any(len(s) >= 2 for s in two["sets"])                    # the look-alike crop joins its original
