"""Signed and keyed image URLs (``?token=``, ``?key=``, a cloud signature, ``user:password@``): the server sees
the URL exactly as the ``urls:`` file gives it, on the first run, after a kill -9 and on ``--retry-failed``; the
project folder never holds the secret; a URL whose secret cannot be read again fails with its own reason and no
request; two rows that differ only in a secret are not merged silently."""
from __future__ import annotations

import json
import sqlite3
import urllib.parse
from pathlib import Path

from click.testing import CliRunner

from cultura.cli import cli
from cultura.project import Project
from cultura.redact import REDACTED
from tests.fakes.image_server import ImageServer, image_server  # noqa: F401 (fixture)
from tests.integration.curate.test_download_kill import _start_and_kill


def cli_run(project_root: Path, *args: str) -> str:
    r = CliRunner().invoke(cli, ["--project", str(project_root), *args])
    assert r.exit_code == 0, r.output
    return r.output


def write_urls(path: Path, urls: list[str]) -> Path:
    path.write_text("".join(json.dumps({"url": u, "concept": "bus", "country": "JP"}) + "\n" for u in urls))
    return path


def candidates(root: Path) -> list[tuple]:
    con = sqlite3.connect(root / "cultura.db")
    try:
        return con.execute("SELECT url, status, reason, detail FROM candidates ORDER BY id").fetchall()
    finally:
        con.close()


def files_holding(root: Path, secret: str) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and (secret.encode() in p.read_bytes()
                                or urllib.parse.quote(secret, safe="").encode() in p.read_bytes())]


def allow(project: Project, srv) -> None:
    project.config.download.allow_hosts = [srv.host_port]
    project.config.download.backoff_base = 0.01
    project.save_config()


def test_a_signed_url_reaches_the_server_byte_for_byte_and_never_the_project(project, image_server,  # noqa: F811
                                                                             tmp_path):
    allow(project, image_server)
    signed = [image_server.signed(f"/signed/{i}.jpg", expires="1893456000",
                                  **{"X-Amz-Credential": "AKIAEXAMPLE%2F20300101%2Fus-east-1", "w": "a+b"})
              for i in range(3)]
    keyed = image_server.signed("/signed/7.jpg", key="canaryKEYvalue123")   # ?key=… then &token=…
    urls = write_urls(tmp_path / "urls.jsonl", [*signed, keyed])
    cli_run(project.root, "images", "search", "--provider", f"urls:{urls}")
    stored = [u for u, *_ in candidates(project.root)]
    assert all(REDACTED in u and "token=" in u for u in stored), stored   # the display form, as before
    cli_run(project.root, "images", "download")
    assert [s for _, s, *_ in candidates(project.root)] == ["downloaded"] * 4, candidates(project.root)
    wanted = [u.split(image_server.host_port, 1)[1] for u in [*signed, keyed]]
    assert sorted(t for t in image_server.targets if t.startswith("/signed/")) == sorted(wanted)
    project.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    tokens = [urllib.parse.parse_qs(urllib.parse.urlsplit(u).query)["token"][0] for u in signed]
    for secret in [*tokens, "canaryKEYvalue123"]:
        assert files_holding(project.root, secret) == []


def test_a_password_in_an_image_url_is_sent_as_basic_auth_and_stored_nowhere(project, image_server,  # noqa: F811
                                                                            tmp_path):
    """``https://user:password@host/a.jpg`` is fetched the way curl and httpx fetch it (``Authorization: Basic``),
    read again from the urls: file like any secret; the project keeps ``https://host/a.jpg``."""
    import base64

    allow(project, image_server)
    urls = write_urls(tmp_path / "urls.jsonl", [image_server.url("/img/3.jpg").replace("//", "//lab:canaryPW9x@")])
    cli_run(project.root, "images", "search", "--provider", f"urls:{urls}")
    cli_run(project.root, "images", "download")
    (url, status, *_), = candidates(project.root)
    assert status == "downloaded" and url == image_server.url("/img/3.jpg")
    assert image_server.authorizations == ["Basic " + base64.b64encode(b"lab:canaryPW9x").decode()]
    project.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert files_holding(project.root, "canaryPW9x") == []


def test_a_redirect_to_a_signed_url_is_followed_as_written(project, image_server, tmp_path):  # noqa: F811
    allow(project, image_server)
    signed = image_server.signed("/signed/4.jpg", expires="1893456000")
    redirect = image_server.url("/redirect?to=" + urllib.parse.quote(signed, safe=""))
    urls = write_urls(tmp_path / "urls.jsonl", [redirect])
    cli_run(project.root, "images", "search", "--provider", f"urls:{urls}")
    cli_run(project.root, "images", "download")
    assert candidates(project.root)[0][1] == "downloaded"
    assert signed.split(image_server.host_port, 1)[1] in image_server.targets


def test_the_exact_url_survives_a_kill_and_a_rerun(tmp_path):
    """kill -9 mid-download, rerun in a new process: the rest is requested with its token, read again from the
    urls: file (the database has only the redacted form)."""
    with ImageServer(latency=0.2) as srv:
        root = tmp_path / "p"
        cli_run_init = CliRunner().invoke(cli, ["init", str(root), "--countries", "US,JP"])
        assert cli_run_init.exit_code == 0, cli_run_init.output
        p = Project(root)
        allow(p, srv)
        p.config.download.workers = p.config.download.per_host = 4
        p.save_config()
        urls = write_urls(tmp_path / "urls.jsonl", [srv.signed(f"/signed/{i}.jpg") for i in range(80)])
        cli_run(root, "images", "search", "--provider", f"urls:{urls}")
        p.close()
        _start_and_kill(root, root / "cultura.db", at_least=3)
        cli_run(root, "images", "download")
        rows = candidates(root)
        assert [s for _, s, *_ in rows] == ["downloaded"] * 80, rows
        assert all(t in srv.issued for t in srv.targets), "a request went out without its exact signature"


def test_a_secret_that_cannot_be_read_again_fails_without_a_request_until_the_file_is_back(
        project, image_server, tmp_path):  # noqa: F811
    allow(project, image_server)
    urls = write_urls(tmp_path / "urls.jsonl", [image_server.signed("/signed/5.jpg")])
    cli_run(project.root, "images", "search", "--provider", f"urls:{urls}")
    moved = urls.rename(tmp_path / "elsewhere.jsonl")
    out = cli_run(project.root, "images", "download", "--json")
    (url, status, reason, detail), = candidates(project.root)
    assert (status, reason) == ("failed", "secret_not_stored"), (status, reason, out)
    assert "--retry-failed" in detail and str(urls) in detail and REDACTED in url
    assert not [t for t in image_server.targets if t.startswith("/signed/")]   # nothing was requested
    # the file is back, regenerated with a fresh signature (signed URLs expire): that one is requested
    fresh = image_server.signed("/signed/5.jpg", signing_key="rotated")
    write_urls(urls, [fresh])
    moved.unlink()
    cli_run(project.root, "images", "download", "--retry-failed")
    assert candidates(project.root)[0][1] == "downloaded"
    assert image_server.targets[-1] == fresh.split(image_server.host_port, 1)[1]


def test_a_redacted_url_with_no_file_behind_it_is_not_requested(project, image_server):  # noqa: F811
    """A redacted URL from a web search or an earlier version (no urls: file recorded): a failed row that says
    why, and no request carrying ``[redacted]``."""
    allow(project, image_server)
    project.db["candidates"].insert({"url": image_server.url(f"/signed/6.jpg?token={REDACTED}"), "status": "pending"})
    cli_run(project.root, "images", "download")
    (_, status, reason, detail), = candidates(project.root)
    assert (status, reason) == ("failed", "secret_not_stored") and "web search" in detail
    assert image_server.targets == []


def test_urls_that_differ_only_in_a_secret_are_not_merged_silently(project, image_server, tmp_path):  # noqa: F811
    allow(project, image_server)
    urls = write_urls(tmp_path / "urls.jsonl", [image_server.url("/img/1.jpg?key=one"),
                                                image_server.url("/img/1.jpg?key=two")])
    out = json.loads(cli_run(project.root, "images", "search", "--provider", f"urls:{urls}", "--json"))
    assert out["rejected"] == 1
    (reason,) = [r[0] for r in project.db.execute("SELECT reason FROM ingest_rejects")]
    assert "differs from row 1 only in a secret" in reason
    cli_run(project.root, "images", "download")
    assert [s for _, s, *_ in candidates(project.root)] == ["downloaded"]
    assert image_server.targets == ["/img/1.jpg?key=one"]
