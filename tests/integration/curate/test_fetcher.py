"""The downloader's own HTTP/1.1 client (curate/fetcher.py): HTTPS with certificate and host-name checks (a
certificate failure not retried), keep-alive reuse per host, a keep-alive connection the server closed, the
address policy on connect, response headers up to 100 KiB however they arrive, and a server that closes without
answering named in words. (Proxies: test_download_through_a_proxy.py.)"""
from __future__ import annotations

import asyncio
import ssl

import pytest

from cultura.config import DownloadSection
from cultura.curate import download as dl
from cultura.curate import fetcher, safety
from tests.fakes.image_server import image_bytes
from tests.fakes.tls import tls_files, tls_server  # noqa: F401 (fixtures)


def settings(*allow) -> DownloadSection:
    return DownloadSection(allow_hosts=list(allow), max_attempts=1, connect_timeout=60, read_timeout=60,
                           total_timeout=120)


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
    assert (r.status, r.reason) == ("failed", "tls_error") and "does not verify" in r.detail
    assert tls_server.hits["/img/1.jpg"] == 0

    monkeypatch.setattr(fetcher, "ssl_context", lambda: trusting)
    r = fetch(f"https://images.test:{port}/img/1.jpg", settings(f"images.test:{port}"))
    assert r.ok and r.format == "jpeg" and r.final_url == f"https://images.test:{port}/img/1.jpg"
    assert r.nbytes == len(image_bytes(1))

    # the same server by its address: the certificate does not name it (no IP in it), so it is refused
    r = fetch(f"https://127.0.0.1:{port}/img/2.jpg", settings(f"127.0.0.1:{port}"))
    assert (r.status, r.reason) == ("failed", "tls_error") and "mismatch" in r.detail.lower()
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


def fetch_from_raw_server(respond, **kw):
    """Fetch ``/a.jpg`` from a local server that reads the request and runs ``respond(reader, writer)``."""
    async def go():
        async def handle(reader, writer):
            try:
                await reader.readuntil(b"\r\n\r\n")
                await respond(reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        s = DownloadSection(allow_hosts=[f"127.0.0.1:{port}"], connect_timeout=60, read_timeout=60,
                            total_timeout=120, **{"max_attempts": 1, **kw})
        async with server, dl.make_client(s) as client:
            return await dl.fetch_image(client, f"http://127.0.0.1:{port}/a.jpg", s)
    return asyncio.run(go())


def many_headers(n_bytes: int) -> bytes:
    """``n_bytes`` of ``X-Filler-<i>: …`` header lines (a CDN's long Set-Cookie and tracing headers)."""
    lines, size, i = [], 0, 0
    while size < n_bytes:
        line = b"X-Filler-%d: %s\r\n" % (i, b"v" * 1000)
        lines.append(line)
        size += len(line)
        i += 1
    return b"".join(lines)


def test_40_kib_of_response_headers_arriving_in_pieces_are_read():
    """h11's own limit (16 KiB) failed headers that arrive in pieces; httpx and curl read them."""
    body, headers = image_bytes(12), many_headers(40 * 1024)

    async def respond(reader, writer):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\n" + headers[:20 * 1024])
        await writer.drain()
        await asyncio.sleep(0.3)  # the first piece is read on its own: more than 16 KiB without the headers' end
        writer.write(headers[20 * 1024:] + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()

    r = fetch_from_raw_server(respond)
    assert r.ok and r.format == "jpeg", r


def test_headers_beyond_100_kib_and_a_server_that_closes_without_answering_fail_in_words():
    async def endless_headers(reader, writer):
        writer.write(b"HTTP/1.1 200 OK\r\n")
        for _ in range(4):
            writer.write(many_headers(40 * 1024))
            await writer.drain()

    r = fetch_from_raw_server(endless_headers)
    assert (r.status, r.reason) == ("failed", "connection_error"), r
    assert "more than 100 KiB of response headers" in r.detail and "buffer" not in r.detail.lower(), r.detail

    async def hang_up(reader, writer):
        pass  # reads the request, answers nothing, closes

    r = fetch_from_raw_server(hang_up, max_attempts=2, backoff_base=0.01)
    assert (r.status, r.reason, r.attempts) == ("failed", "connection_error", 2), r
    assert "the server closed the connection without a response" in r.detail
    assert "SERVER" not in r.detail and "state=" not in r.detail, r.detail   # no h11 internals


def test_a_certificate_failure_is_not_retried(tls_server, monkeypatch):  # noqa: F811
    port = tls_server.port
    monkeypatch.setattr(safety, "resolve_host", lambda host, p: ["127.0.0.1"] if host == "images.test" else [])
    s = DownloadSection(allow_hosts=[f"images.test:{port}"], max_attempts=3, backoff_base=0.01, connect_timeout=60,
                        read_timeout=60, total_timeout=120)
    r = fetch(f"https://images.test:{port}/img/1.jpg", s)
    assert (r.status, r.reason, r.attempts) == ("failed", "tls_error", 1), r
    assert "self-signed" in r.detail or "does not verify" in r.detail
