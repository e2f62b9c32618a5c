"""Joining a Ray cluster that cannot be joined is one sentence, at once: ``RAY_ADDRESS`` where nothing listens, a
server that closes every connection, and a real Ray cluster with token authentication (on by default in recent
Ray) reached without its token or with a wrong one — each answers ``cultura images tag --executor ray`` with exit
1 and one sentence naming ``RAY_ADDRESS`` and Ray's token settings, before Ray's retries (no retry warning is
printed) and without a traceback. A subprocess each: a command line as a user runs it, with no Ray of this test
process in the way."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading

import pytest

from tests import REPO

pytest.importorskip("ray")
# one local Ray at a time: the tests that start one run on the same worker
pytestmark = pytest.mark.xdist_group("ray")

TOKEN = "a" * 32
#: What Ray prints while it retries a cluster it cannot join.
RETRIES = ("Failed to connect to GCS", "Failed to get cluster ID", "rpc_client.h")


def _tag(project, ray_address: str, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    full.update({"RAY_ADDRESS": ray_address, "PYTHONPATH": str(REPO / "src"), **env})
    return subprocess.run([sys.executable, "-m", "cultura", "--project", str(project.root), "images", "tag",
                           "--executor", "ray"], env=full, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


def _one_sentence(r: subprocess.CompletedProcess, *words: str) -> str:
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and not any(w in r.stderr for w in RETRIES), r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("Error: --executor: ") and line.endswith("."), line
    for w in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", *words):
        assert w in line, (w, line)
    return line


def test_an_address_where_nothing_listens_is_one_sentence(project):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once closed: nothing listens there
    line = _one_sentence(_tag(project, f"127.0.0.1:{port}"), f"RAY_ADDRESS=127.0.0.1:{port}", "Cannot reach")
    assert "connection refused" in line


def test_a_server_that_closes_every_connection_is_not_a_ray_cluster(project):
    srv = socket.socket()
    try:
        # 127.0.0.2 (loopback too): Ray would replace 127.0.0.1 by this machine's network address
        srv.bind(("127.0.0.2", 0))
    except OSError:
        srv.close()
        pytest.skip("no 127.0.0.2 on this machine's loopback")
    srv.listen(8)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        port = srv.getsockname()[1]
        _one_sentence(_tag(project, f"127.0.0.2:{port}"), "answers as a Ray cluster", "connection was closed")
    finally:
        stop.set()
        srv.close()
        t.join(timeout=10)


HEAD = textwrap.dedent("""
    import sys, ray
    ctx = ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, _temp_dir=sys.argv[1])
    print("GCS", ctx.address_info["gcs_address"], flush=True)
    sys.stdin.read()  # until the test closes stdin
    ray.shutdown()
""")


@pytest.fixture
def token_cluster():
    """A local Ray head with token authentication (its own HOME and temp folder: no token of the user's is read
    or written), stopped when the test closes its stdin."""
    tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must fit in 107 bytes
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAY_")}, "HOME": tmp,
           "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN}
    head = subprocess.Popen([sys.executable, "-c", HEAD, os.path.join(tmp, "t")], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = head.stdout.readline()
        if not line.startswith("GCS "):
            pytest.fail(f"the Ray head did not start: {line!r}")
        yield line.split()[1]
    finally:
        head.stdin.close()
        try:
            head.wait(timeout=120)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


def test_a_cluster_with_token_authentication_names_the_token_settings(project, token_cluster):
    line = _one_sentence(_tag(project, token_cluster), "needs an authentication token", "RAY_AUTH_MODE=token")
    assert TOKEN not in line
    _one_sentence(_tag(project, token_cluster, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="b" * 32),
                  "refused this process's authentication token")
