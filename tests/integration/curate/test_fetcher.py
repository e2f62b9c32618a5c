"""The downloader's own HTTP/1.1 client (curate/fetcher.py): HTTPS with certificate and host-name checks,
keep-alive reuse per host, a keep-alive connection the server closed, and the address policy on connect."""
from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess

import pytest

from cultura.config import DownloadSection
from cultura.curate import download as dl
from cultura.curate import fetcher, safety
from tests.fakes.image_server import ImageServer, image_bytes


def settings(*allow) -> DownloadSection:
    return DownloadSection(allow_hosts=list(allow), max_attempts=1, connect_timeout=60, read_timeout=60,
                           total_timeout=120)


@pytest.fixture
def tls_files(tmp_path):
    """A self-signed certificate for the name ``images.test`` only (no IP address in it)."""
    if not shutil.which("openssl"):
        pytest.skip("openssl is needed to make a test certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                    "/CN=images.test", "-addext", "subjectAltName=DNS:images.test", "-keyout", str(key),
                    "-out", str(cert)], check=True, capture_output=True)
    return key, cert


@pytest.fixture
def tls_server(tls_files):
    key, cert = tls_files
    srv = ImageServer()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv._httpd.socket = ctx.wrap_socket(srv._httpd.socket, server_side=True)
    with srv:
        yield srv


def fetch(url, s, **kw):
    async def go():
        async with dl.make_client(s) as client:
            return await dl.fetch_image(client, url, s, **kw)
    return asyncio.run(go())


def test_https_checks_the_certificate_and_the_host_name(tls_server, tls_files, monkeypatch):
    port = tls_server.port
    monkeypatch.setattr(safety, "resolve_host", lambda host, p: ["127.0.0.1"] if host == "images.test" else [])
    trusting = ssl.create_default_context(cafile=str(tls_files[1]))

    # the certificate is not from a trusted CA: refused, and nothing was fetched
    r = fetch(f"https://images.test:{port}/img/1.jpg", settings(f"images.test:{port}"))
    assert (r.status, r.reason) == ("failed", "connection_error") and "CERTIFICATE_VERIFY_FAILED" in r.detail
    assert tls_server.hits["/img/1.jpg"] == 0

    monkeypatch.setattr(fetcher, "ssl_context", lambda: trusting)
    r = fetch(f"https://images.test:{port}/img/1.jpg", settings(f"images.test:{port}"))
    assert r.ok and r.format == "jpeg" and r.final_url == f"https://images.test:{port}/img/1.jpg"
    assert r.nbytes == len(image_bytes(1))

    # the same server by its address: the certificate does not name it (no IP in it), so it is refused
    r = fetch(f"https://127.0.0.1:{port}/img/2.jpg", settings(f"127.0.0.1:{port}"))
    assert (r.status, r.reason) == ("failed", "connection_error") and "mismatch" in r.detail.lower()
    assert tls_server.hits["/img/2.jpg"] == 0

    # the address policy comes first: without allow_hosts the loopback address is never contacted
    r = fetch(f"https://images.test:{port}/img/3.jpg", settings())
    assert (r.status, r.reason) == ("skipped", "blocked_address") and tls_server.hits["/img/3.jpg"] == 0


def test_keep_alive_reuses_one_connection_per_host(image_server, monkeypatch):
    connects = []
    real = fetcher.SafeClient._connect

    async def counting(self, scheme, host, port):
        connects.append((scheme, host, port))
        return await real(self, scheme, host, port)

    monkeypatch.setattr(fetcher.SafeClient, "_connect", counting)
    s = settings(image_server.host_port)

    async def go():
        async with dl.make_client(s) as client:
            return [await dl.fetch_image(client, image_server.url(f"/img/{i}.jpg"), s) for i in range(5)]

    results = asyncio.run(go())
    assert all(r.ok for r in results) and len({r.sha256 for r in results}) == 5
    assert connects == [("http", "127.0.0.1", image_server.port)]


def test_a_keep_alive_connection_the_server_closed_is_replaced():
    """The server answers with keep-alive, then closes the idle connection: the next request goes out on a
    new connection and succeeds (no failure row, no retry back-off)."""
    body = image_bytes(11)

    async def go():
        closed = asyncio.Event()
        connections = 0

        async def handle(reader, writer):
            nonlocal connections
            connections += 1
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n" % len(body)
                         + body)
            await writer.drain()
            writer.close()  # a keep-alive answer, then the server drops the connection
            await writer.wait_closed()
            closed.set()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        s = settings(f"127.0.0.1:{port}")
        async with server, dl.make_client(s) as client:
            first = await dl.fetch_image(client, f"http://127.0.0.1:{port}/a.jpg", s)
            await asyncio.wait_for(closed.wait(), 120)
            second = await dl.fetch_image(client, f"http://127.0.0.1:{port}/b.jpg", s)
        return first, second, connections

    first, second, connections = asyncio.run(go())
    assert first.ok and second.ok and second.attempts == 1
    assert connections == 2
