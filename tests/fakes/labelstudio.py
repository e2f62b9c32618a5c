"""Session fixture: one real Label Studio on a free loopback port for the whole test session.

The executable comes from ``LABEL_STUDIO_BIN``, ``PATH`` or the repo's ``.venv-ls``; tests marked
``labelstudio`` are skipped with a reason when none is found. A fresh data dir migrates for ~45 s, so the
first run keeps a migrated copy in ``.cache/labelstudio-seed/`` (gitignored) and later sessions start in ~7 s.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes.sockets import pump

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / ".cache" / "labelstudio-seed"


def _executable() -> str | None:
    for c in (os.environ.get("LABEL_STUDIO_BIN"), shutil.which("label-studio"),
              str(REPO / ".venv-ls" / "bin" / "label-studio")):
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    return None


@dataclass
class LabelStudioServer:
    url: str
    api_key: str
    username: str
    password: str
    data_dir: Path
    proc: subprocess.Popen

    def connection(self):
        from cultura.annotate.server import Connection
        return Connection(self.url, self.api_key)


def _snapshot(data_dir: Path, creds: dict) -> None:
    """Keep a consistent copy of a migrated data dir (sqlite backup API) as the seed for later sessions. Test
    workers running side by side take turns (a lock file), and a seed already there is kept."""
    SEED.parent.mkdir(parents=True, exist_ok=True)
    with open(SEED.parent / "labelstudio-seed.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ((SEED / "creds.json").exists() and (SEED / "label_studio.sqlite3").exists()):
            _write_snapshot(data_dir, creds)


def _write_snapshot(data_dir: Path, creds: dict) -> None:
    tmp = SEED.with_name(SEED.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    src = sqlite3.connect(data_dir / "label_studio.sqlite3")
    dst = sqlite3.connect(tmp / "label_studio.sqlite3")
    with dst:
        src.backup(dst)
    src.close()
    dst.close()
    (tmp / "creds.json").write_text(json.dumps(creds))
    shutil.rmtree(SEED, ignore_errors=True)
    tmp.rename(SEED)


def _personal_seed(exe: str) -> None:
    """Annotators' own servers start from cultura's seed cache: keep it in the checkout's .cache (never the
    home folder), filled from the test seed (every account locked, no token) when empty."""
    from cultura.annotate.server import adopt_seed, seed_cache

    os.environ.setdefault("CULTURA_CACHE_DIR", str(REPO / ".cache" / "cultura"))
    cache = seed_cache(exe)
    if cache is not None and not (cache / "label_studio.sqlite3").exists():
        with open(SEED.parent / "labelstudio-seed.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (cache / "label_studio.sqlite3").exists():
                adopt_seed(SEED, cache)


def servers_under(base: str | Path) -> list[int]:
    """Pids of the ``label-studio start`` processes whose ``--data-dir`` lies under ``base`` (read from /proc)."""
    base = str(Path(base).resolve())
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            argv = (d / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if not any(a.endswith("label-studio") for a in argv) or "start" not in argv or "--data-dir" not in argv:
            continue
        i = argv.index("--data-dir") + 1
        if i < len(argv) and (argv[i] == base or argv[i].startswith(base + os.sep)):
            out.append(int(d.name))
    return out


def stop_servers_under(base: str | Path) -> list[int]:
    """Stop every Label Studio whose data dir lies under ``base`` (a test's annotator servers run in sessions
    of their own and would outlive the test run); returns their pids."""
    from cultura.annotate.server import stop_process

    pids = servers_under(base)
    for pid in pids:
        stop_process(pid)
    return pids


def stop_annotator_servers(project) -> None:
    """Stop every annotator's own Label Studio a test's project started."""
    from cultura.annotate.people import stop_all

    stop_all(project)


@pytest.fixture(scope="session")
def labelstudio(tmp_path_factory):
    """A running Label Studio (``.url``, ``.api_key``); stopped at the end of the session."""
    from cultura.annotate.server import free_port, launch, seeded_credentials, stop_process, wait_ready

    exe = _executable()
    if exe is None:
        pytest.skip("no label-studio executable (set LABEL_STUDIO_BIN or run 'make setup' to create .venv-ls)")
    data = tmp_path_factory.mktemp("labelstudio")
    creds, seeded = seeded_credentials(data, SEED, "admin@cultura-tests.local")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = data / "server.log"
    proc = launch(exe, data, port, username=creds["username"], password=creds["password"],
                  token=creds["api_key"], log_path=log)
    try:
        wait_ready(url, creds["api_key"], proc, timeout=300, log_path=log)
        if not seeded:
            _snapshot(data, creds)
        _personal_seed(exe)
        yield LabelStudioServer(url, creds["api_key"], creds["username"], creds["password"], data, proc)
    finally:
        stop_process(proc.pid)


# ------------------------------------------------------------------------------------- test data

def add_images(project, concept: str, country: str, n: int, *, seed: int = 0, language: str = "en") -> list[str]:
    """Create ``n`` small Pillow images found by a query for ``concept`` in ``country``: rows in concepts,
    queries, candidates, search_results and images, blobs on disk. Returns their sha256 in order."""
    import io

    from PIL import Image

    from cultura.db.blobs import store_blob
    from cultura.db import now

    db = project.db
    t = now()
    cid = db.execute("SELECT id FROM concepts WHERE name = ?", [concept]).fetchone()
    if cid is None:
        cid = db["concepts"].insert({"name": concept, "source": "manual", "created_at": t}).last_pk
    else:
        cid = cid[0]
    db["queries"].insert({"concept_id": cid, "country": country, "language": language, "kind": "english",
                          "text": f"{concept} {country}", "created_at": t}, ignore=True)
    qid = db.execute("SELECT id FROM queries WHERE concept_id = ? AND country = ? AND text = ?",
                     [cid, country, f"{concept} {country}"]).fetchone()[0]
    shas = []
    for i in range(n):
        img = Image.new("RGB", (32, 24), ((seed * 37 + i * 53) % 256, (i * 91 + len(concept)) % 256,
                                          (seed * 11 + hash(country) % 200) % 256))
        buf = io.BytesIO()
        img.save(buf, "PNG")
        sha, rel = store_blob(project, buf.getvalue(), "png")
        url = f"http://images.invalid/{concept}/{country}/{seed}/{i}.png"
        cand = db["candidates"].insert({"url": url, "status": "downloaded", "sha256": sha, "updated_at": t}).last_pk
        rank = db.execute("SELECT COALESCE(MAX(rank), 0) + 1 FROM search_results WHERE query_id = ?",
                          [qid]).fetchone()[0]
        db["search_results"].insert({"query_id": qid, "provider": "test", "rank": rank, "candidate_id": cand,
                                     "url": url, "found_at": t})
        db["images"].insert({"sha256": sha, "path": rel, "format": "png", "width": 32, "height": 24,
                             "bytes": len(buf.getvalue()), "created_at": t}, ignore=True)
        shas.append(sha)
    return shas


def add_cluster(project, shas: list[str]) -> int:
    """An open duplicate cluster over ``shas`` (first = representative)."""
    from cultura.db import now

    db = project.db
    run = db["dedup_runs"].insert({"method": "phash", "scope": "global", "created_at": now()}).last_pk
    cid = db["dup_clusters"].insert({"run_id": run, "method": "phash", "scope": "global",
                                     "representative": shas[0], "size": len(shas), "created_at": now()}).last_pk
    db["dup_members"].insert_all([{"cluster_id": cid, "sha256": s, "distance": float(i)}
                                  for i, s in enumerate(shas)])
    return cid


class TcpProxy:
    """A loopback TCP forwarder in front of Label Studio that a test can cut (as if the server stopped) and
    restore on the same port."""

    def __init__(self, target_port: int):
        import socket
        import threading

        self._socket, self._threading = socket, threading
        self.target_port = target_port
        self.port = None
        self._conns: list = []
        self._listener = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        s = self._socket.socket()
        s.setsockopt(self._socket.SOL_SOCKET, self._socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port or 0))
        s.listen(64)
        self.port = s.getsockname()[1]
        self._listener = s
        self._threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def _accept(self, s) -> None:
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            try:
                u = self._socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                c.close()
                continue
            self._conns += [c, u]
            for a, b in ((c, u), (u, c)):
                self._threading.Thread(target=pump, args=(a, b), daemon=True).start()

    def stop(self) -> None:
        """Refuse new connections and drop open ones."""
        if self._listener is not None:
            try:
                self._listener.shutdown(self._socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        for c in self._conns:
            try:
                c.close()
            except OSError:
                pass
        self._conns.clear()
