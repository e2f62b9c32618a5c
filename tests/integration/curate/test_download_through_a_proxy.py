"""Downloads through an HTTP proxy, as a university or company network requires: HTTP_PROXY/HTTPS_PROXY/NO_PROXY
from the environment (lower-case too), ``download.proxy`` winning over them, plain HTTP in absolute form, HTTPS
through CONNECT with the certificate still checked, proxy credentials in Proxy-Authorization and nowhere else,
the address policy still applied to every target, and a proxy the downloader cannot use refused in one
sentence."""
from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path

import pytest
from click.testing import CliRunner

from cultura.cli import cli
from cultura.config import DownloadSection
from cultura.curate import download as dl
from cultura.curate import fetcher, safety
from tests.fakes.image_server import image_server  # noqa: F401 (fixture)
from tests.fakes.proxy import ForwardProxy
from tests.fakes.tls import TLS_NAME, tls_files, tls_server  # noqa: F401 (fixtures)
from tests.integration.curate.test_signed_urls_are_requested_as_given import allow, candidates, files_holding

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy",
                   "no_proxy", "REQUEST_METHOD")
CANARY_PROXY_PASS = "canaryPROXYpass42x"


@pytest.fixture(autouse=True)
def no_proxy_environment(monkeypatch):
    """Each test sets the proxy variables it means (the machine running the tests may have its own)."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def download(root: Path, *extra: str):
    return CliRunner().invoke(cli, ["--project", str(root), "images", "download", "--json", *extra])


def with_candidates(project, srv, paths: list[str]) -> None:
    allow(project, srv)
    project.db["candidates"].insert_all([{"url": srv.url(p), "status": "pending"} for p in paths])


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
def test_plain_http_goes_through_the_environment_proxy_in_absolute_form(project, image_server, monkeypatch,
                                                                        variable):  # noqa: F811
    with_candidates(project, image_server, ["/img/1.jpg", "/img/2.png?w=300&h=200"])
    with ForwardProxy() as proxy:
        monkeypatch.setenv(variable, proxy.url)
        r = download(project.root)
        assert r.exit_code == 0, r.output
        assert [s for _, s, *_ in candidates(project.root)] == ["downloaded", "downloaded"], candidates(project.root)
        assert sorted(proxy.requests) == [f"GET {image_server.url('/img/1.jpg')}",
                                          f"GET {image_server.url('/img/2.png?w=300&h=200')}"]
    params = json.loads(project.db.execute("SELECT params FROM runs WHERE stage = 'download'").fetchone()[0])
    assert proxy.url.split("//")[1] in params["proxy"]


def test_https_goes_through_a_connect_tunnel_with_the_certificate_checked(tls_server, tls_files,  # noqa: F811
                                                                          monkeypatch):
    port = tls_server.port
    monkeypatch.setattr(safety, "resolve_host", lambda host, p: ["127.0.0.1"] if host == TLS_NAME else [])
    s = DownloadSection(allow_hosts=[f"{TLS_NAME}:{port}"], max_attempts=3, backoff_base=0.01,
                        connect_timeout=60, read_timeout=60, total_timeout=120)

    def fetch(path):
        async def go():
            async with dl.make_client(s) as client:
                return await dl.fetch_image(client, f"https://{TLS_NAME}:{port}{path}", s)
        return asyncio.run(go())

    with ForwardProxy(hosts={TLS_NAME: "127.0.0.1"}) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        # the tunnel carries TLS end to end: a certificate the client does not trust is refused, once
        r = fetch("/img/1.jpg")
        assert (r.status, r.reason, r.attempts) == ("failed", "tls_error", 1), r
        assert proxy.requests == [f"CONNECT {TLS_NAME}:{port}"] and tls_server.hits["/img/1.jpg"] == 0
        monkeypatch.setattr(fetcher, "ssl_context", lambda: ssl.create_default_context(cafile=str(tls_files[1])))
        r = fetch("/img/2.jpg")
        assert r.ok and r.format == "jpeg", r
        assert proxy.requests[1:] == [f"CONNECT {TLS_NAME}:{port}"] and tls_server.hits["/img/2.jpg"] == 1


def test_no_proxy_and_direct_bypass_the_proxy_and_download_proxy_wins_over_the_environment(
        project, image_server, monkeypatch):  # noqa: F811
    with_candidates(project, image_server, ["/img/1.jpg"])
    with ForwardProxy() as proxy:
        monkeypatch.setenv("http_proxy", proxy.url)
        monkeypatch.setenv("no_proxy", "localhost,127.0.0.1")
        assert download(project.root).exit_code == 0
        assert candidates(project.root)[0][1] == "downloaded" and proxy.requests == []
        # download.proxy = direct: no proxy even though the environment names one (and NO_PROXY is gone)
        monkeypatch.delenv("no_proxy")
        project.db["candidates"].insert({"url": image_server.url("/img/2.jpg"), "status": "pending"})
        r = CliRunner().invoke(cli, ["--project", str(project.root), "config", "set", "download.proxy", "direct"])
        assert r.exit_code == 0, r.output
        assert download(project.root).exit_code == 0
        assert candidates(project.root)[1][1] == "downloaded" and proxy.requests == []
        # download.proxy = the proxy, while the environment points at a port where nothing listens
        monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
        project.db["candidates"].insert({"url": image_server.url("/img/3.jpg"), "status": "pending"})
        r = CliRunner().invoke(cli, ["--project", str(project.root), "config", "set", "download.proxy", proxy.url])
        assert r.exit_code == 0, r.output
        assert download(project.root).exit_code == 0
        assert candidates(project.root)[2][1] == "downloaded"
        assert proxy.requests == [f"GET {image_server.url('/img/3.jpg')}"]


def test_proxy_credentials_go_in_proxy_authorization_and_nowhere_else(project, image_server, monkeypatch):  # noqa: F811
    with_candidates(project, image_server, ["/img/1.jpg", "/img/2.jpg"])
    with ForwardProxy(credentials=("crawler", CANARY_PROXY_PASS)) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)  # no credentials: the proxy says 407, and the row says why
        r = download(project.root)
        assert r.exit_code == 0, r.output
        _, status, reason, detail = candidates(project.root)[0]
        assert (status, reason) == ("failed", "proxy_error") and "credentials" in detail
        monkeypatch.setenv("HTTP_PROXY", proxy.url.replace("http://", f"http://crawler:{CANARY_PROXY_PASS}@"))
        r = download(project.root, "--retry-failed")
        assert r.exit_code == 0, r.output
        assert [s for _, s, *_ in candidates(project.root)] == ["downloaded", "downloaded"]
        assert proxy.authorizations[-2:] == [proxy.expected_authorization] * 2
        assert CANARY_PROXY_PASS not in r.output
    project.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert files_holding(project.root, CANARY_PROXY_PASS) == []


def test_every_target_is_still_address_checked_through_a_proxy(project, image_server, monkeypatch):  # noqa: F811
    """A proxy must not become a way into the user's own network: a loopback target not in allow_hosts is
    skipped before the proxy is asked for it."""
    project.db["candidates"].insert({"url": image_server.url("/img/1.jpg"), "status": "pending"})
    with ForwardProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        assert download(project.root).exit_code == 0
        assert candidates(project.root)[0][1:3] == ("skipped", "blocked_address") and proxy.requests == []


def test_a_proxy_the_downloader_cannot_use_is_one_sentence(project, image_server, monkeypatch):  # noqa: F811
    with_candidates(project, image_server, ["/img/1.jpg"])
    monkeypatch.setenv("HTTPS_PROXY", f"socks5://u:{CANARY_PROXY_PASS}@127.0.0.1:1080")
    r = download(project.root)
    assert r.exit_code == 1 and "HTTPS_PROXY" in r.output and "HTTP proxies only" in r.output, r.output
    assert "Traceback" not in r.output and CANARY_PROXY_PASS not in r.output
    assert candidates(project.root)[0][1] == "pending"
