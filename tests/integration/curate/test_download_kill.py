"""kill -9 the downloader mid-run (kill -9, then Ctrl-C), rerun to completion: every candidate downloaded, every content
stored exactly once, every blob file has a row and every row a file, no temporary leftovers; in both check modes
(with the header check every image also has its open ``undecoded`` flag), and split over two processes (the
parent killed: its processes stop on their own, and hold the project until they have)."""
from __future__ import annotations

import fcntl
import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from cultura.curate.download import download_candidates
from cultura.project import Project, init_project
from tests.fakes.image_server import ImageServer, image_bytes

N_DISTINCT = 170
N_DUPES = 30   # the same bytes at a second URL (one image found for two countries)
#: A safety net for a hung child only, never a budget: the test waits for states (images committed), however
#: slowly a busy machine starts the child (a fresh CI run once needed more than 30 s for the first image).
HANG_GUARD = 600

CHILD = ("import sys; from cultura.project import Project; "
         "from cultura.curate.download import download_candidates; "
         "download_candidates(Project(sys.argv[1]), progress=False, processes=int(sys.argv[2]))")


def _count_images(db_path) -> int:
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=60)
    try:
        return con.execute("SELECT count(*) FROM images").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        con.close()


def _wait_for_the_lock(root) -> None:
    """Until no process of a killed download holds the project (they stop on their own once orphaned)."""
    t0 = time.monotonic()
    with open(root / "blobs" / ".download.lock", "a+") as f:
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)
                return
            except BlockingIOError:
                assert time.monotonic() - t0 < HANG_GUARD, "the killed download's processes never stopped"
                time.sleep(0.01)


def _start_and_kill(root, db_path, at_least: int, sig=signal.SIGKILL, processes: int = 1) -> int:
    """Run the downloader in a child process and send ``sig`` once ``at_least`` images are committed."""
    # SIGINT at its default in the child: a job started in the background by a non-interactive shell (a CI
    # script, nohup … &) inherits SIGINT ignored, and then Ctrl-C would never reach the downloader
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(root), str(processes)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < HANG_GUARD:
            if proc.poll() is not None:
                raise AssertionError(f"downloader exited early ({proc.returncode}): "
                                     f"{proc.stderr.read().decode()[-2000:]}")
            n = _count_images(db_path)
            if n >= at_least:
                os.kill(proc.pid, sig)
                proc.wait(timeout=HANG_GUARD)  # Ctrl-C: the child finishes its run row first
                _wait_for_the_lock(root)
                return _count_images(db_path) if sig == signal.SIGINT else n
            time.sleep(0.01)
        raise AssertionError(f"downloader committed fewer than {at_least} images in {HANG_GUARD} s (hung?)")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()


@pytest.mark.parametrize("check, processes", [("decode", 1), ("header", 1), ("header", 2)])
def test_kill_9_then_rerun_leaves_a_consistent_store(tmp_path, check, processes):
    # 0.2 s per response: a full run takes >= 5 s of the server's own time, so the child is still running when
    # the parent (slow on a busy machine) sees the images it waits for; only the order of states matters
    with ImageServer(latency=0.2) as srv, ImageServer(latency=0.2, host="127.0.0.2") as other:
        p = init_project(tmp_path / "p", countries=["US", "JP"])
        s = p.config.download
        s.allow_hosts = [srv.host_port, other.host_port]
        s.workers, s.per_host = 8, 8
        s.read_timeout, s.backoff_base = 5.0, 0.01
        s.check = check
        p.save_config()
        seeds = list(range(1000, 1000 + N_DISTINCT))
        # two hosts (each URL's copy at the other one): two processes get one each
        urls = ([(srv, other)[k % 2].url(f"/img/{k}.jpg") for k in seeds]
                + [(other, srv)[k % 2].url(f"/country/JP/{k}.jpg") for k in seeds[:N_DUPES]])
        p.db["candidates"].insert_all([{"url": u, "status": "pending"} for u in urls])
        expected = {hashlib.sha256(image_bytes(k)).hexdigest() for k in seeds}
        p.close()

        first = _start_and_kill(p.root, p.db_path, at_least=30, processes=processes)
        second = _start_and_kill(p.root, p.db_path, at_least=first + 40, sig=signal.SIGINT,   # Ctrl-C
                                 processes=processes)
        assert 30 <= first < second < N_DISTINCT, (first, second)

        # leftovers a kill can leave between "file renamed into place" and "row committed", planted for sure
        blobs = p.root / "blobs"
        (blobs / ".tmp").mkdir(exist_ok=True)
        (blobs / ".tmp" / "deadbeef.part").write_bytes(b"half a file")
        orphan = hashlib.sha256(b"orphan").hexdigest()
        (blobs / orphan[:2]).mkdir(exist_ok=True)
        (blobs / orphan[:2] / f"{orphan}.jpg").write_bytes(b"orphan")

        proj = Project(p.root)
        summary = download_candidates(proj, progress=False, processes=processes)
        assert summary["processes"] == processes
        assert summary["swept"]["orphans_removed"] >= 1 and summary["swept"]["tmp_removed"] >= 1
        db = proj.db
        statuses = dict(db.execute("SELECT status, count(*) FROM candidates GROUP BY status").fetchall())
        assert statuses == {"downloaded": len(urls)}
        image_rows = {sha: path for sha, path in db.execute("SELECT sha256, path FROM images")}
        assert set(image_rows) == expected and len(image_rows) == N_DISTINCT
        cand_shas = [r[0] for r in db.execute("SELECT sha256 FROM candidates")]
        assert set(cand_shas) == expected
        # every row has its file with the right bytes, every blob file has its row
        for sha, path in image_rows.items():
            assert hashlib.sha256((proj.root / path).read_bytes()).hexdigest() == sha
        files = {f"blobs/{f.parent.name}/{f.name}" for f in blobs.glob("??/*") if f.is_file()}
        assert files == set(image_rows.values())
        assert not any((blobs / ".tmp").iterdir())
        undecoded = {r[0] for r in db.execute("SELECT sha256 FROM image_flags "
                                              "WHERE flag = 'undecoded' AND status = 'open'")}
        hashed = {r[0] for r in db.execute("SELECT sha256 FROM images WHERE phash IS NOT NULL")}
        assert (undecoded, hashed) == ((set(), expected) if check == "decode" else (expected, set()))
        runs = [r[0] for r in db.execute("SELECT status FROM runs WHERE stage = 'download' ORDER BY id")]
        assert runs == ["interrupted", "interrupted", "done"]
        errors = [r[0] for r in db.execute("SELECT error FROM runs WHERE stage = 'download' ORDER BY id")]
        # the killed run is marked by the next start, with the reason; Ctrl-C finished its own run row
        assert errors[0].startswith("interrupted: process ") and "ended before finishing" in errors[0]
        assert errors[1] == "interrupted"
        # a further rerun is a no-op
        assert download_candidates(proj, progress=False)["candidates"] == 0
        proj.close()
