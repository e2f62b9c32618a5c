"""The downloader's HTTP/1.1 client: every connection address-checked, keep-alive per host, little CPU.

:func:`make_client` returns a :class:`SafeClient`. It speaks HTTP/1.1 through `h11
<https://h11.readthedocs.io>`_ (the parser httpx itself uses) over asyncio streams, and gives the downloader
exactly what it used from ``httpx.AsyncClient``: ``client.stream("GET", url)`` yields a response with
``status_code``, ``headers`` (``httpx.Headers``), ``url`` (``httpx.URL``), ``is_redirect`` and ``aiter_raw()``;
errors are httpx's exception types (``ConnectError``, ``ConnectTimeout``, ``ReadTimeout``, ``ReadError``,
``WriteTimeout``, ``RemoteProtocolError``).

Why not httpx's own client: its request and response models, cookie extraction, auth and redirect machinery
and httpcore's pool bookkeeping cost about 0.8 ms of event-loop CPU per image, which on a busy 2-core machine
kept the downloader at 96 % of the ideal rate against img2dataset's 99 % (docs/scaling.md); this client costs
about a fifth of that. It does less on purpose: no proxies, no cookies, no redirects (the downloader follows them
itself, checking each hop), no HTTP/2, no content decoding (the downloader decodes under its byte cap).

Safety, as before:

- every connection is made by :meth:`SafeClient._connect`: the host is resolved once and every address is
  checked by :func:`.safety.acheck_host` (loopback, private, link-local, multicast and reserved addresses are
  refused unless the exact ``host:port`` is in ``download.allow_hosts``), then the connection goes to a checked
  address (no second lookup);
- HTTPS verifies the certificate against the URL's host name (SNI) with the verifying context of
  :func:`ssl_context` (certifi, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``);
- connect, read and write each have their timeout; a keep-alive connection is reused only for its own
  scheme, host and port, only within ``KEEPALIVE`` seconds and only when the server has not closed it.
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import time

import h11
import httpx

from . import safety

__all__ = ["SafeClient", "make_client", "ssl_context", "KEEPALIVE"]

KEEPALIVE = 30.0          # seconds an idle connection is kept for its host
READ_CHUNK = 1 << 18      # bytes asked of the stream per read (asyncio reads up to 256 KiB a time)
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
ACCEPT = "image/avif,image/webp,image/png,image/jpeg,image/*;q=0.8,*/*;q=0.5"
ACCEPT_ENCODING = "gzip, deflate"   # decoded by the downloader under its byte cap; br/zstd never asked for
_timeout = getattr(asyncio, "timeout", None)


async def within(aw, seconds: float | None):
    """Await ``aw`` under a deadline (``TimeoutError`` when it passes)."""
    if seconds is None:
        return await aw
    if _timeout is not None:  # Python >= 3.11: no extra task
        async with _timeout(seconds):
            return await aw
    return await asyncio.wait_for(aw, seconds)  # pragma: no cover - Python 3.10


@functools.lru_cache(maxsize=1)
def ssl_context():
    """httpx's verifying context (certifi, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``), built once per process
    (loading the CA bundle takes ~0.1 s)."""
    return httpx.create_ssl_context(verify=True, trust_env=True)


class _Conn:
    """One HTTP/1.1 connection: the streams, the h11 state machine, the raw socket (for the idle check)."""

    __slots__ = ("reader", "writer", "h11", "sock", "idle_since")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.h11 = h11.Connection(h11.CLIENT)
        self.sock = writer.get_extra_info("socket")
        self.idle_since = 0.0

    def reusable(self, now: float) -> bool:
        """Idle for less than :data:`KEEPALIVE` and not closed (nor sent anything) by the server meanwhile."""
        return now - self.idle_since < KEEPALIVE and not safety._socket_readable(self.sock)

    def close(self) -> None:
        transport = self.writer.transport
        if not transport.is_closing():
            transport.abort()

    async def next_event(self, read_timeout: float | None):
        """The next h11 event, reading from the socket as needed."""
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as e:
                raise httpx.RemoteProtocolError(str(e) or "malformed HTTP response") from None
            if event is not h11.NEED_DATA:
                return event
            try:
                data = await within(self.reader.read(READ_CHUNK), read_timeout)
            except (TimeoutError, asyncio.TimeoutError):
                raise httpx.ReadTimeout(f"no data for {read_timeout:g}s") from None
            except OSError as e:
                raise httpx.ReadError(f"{type(e).__name__}: {e}") from None
            self.h11.receive_data(data)  # b"" is the end of the stream: h11 then says whether that was early


class Response:
    """The part of ``httpx.Response`` the downloader reads, for a body streamed by :meth:`aiter_raw`."""

    __slots__ = ("url", "status_code", "headers", "_conn", "_read_timeout", "complete")

    def __init__(self, url: httpx.URL, status_code: int, headers: httpx.Headers, conn: _Conn,
                 read_timeout: float | None):
        self.url, self.status_code, self.headers = url, status_code, headers
        self._conn, self._read_timeout = conn, read_timeout
        self.complete = False

    @property
    def is_redirect(self) -> bool:
        """As httpx: a redirect status with a ``Location`` header."""
        return self.status_code in REDIRECT_STATUSES and "location" in self.headers

    async def aiter_raw(self):
        """The body's bytes as they arrive (still content-encoded), until the message ends."""
        while not self.complete:
            event = await self._conn.next_event(self._read_timeout)
            if type(event) is h11.Data:
                yield event.data  # bytes or a bytearray h11 already copied out of its buffer
            elif type(event) is h11.EndOfMessage:
                self.complete = True
            elif type(event) is h11.ConnectionClosed:  # pragma: no cover - h11 raises before this
                raise httpx.RemoteProtocolError("the server closed the connection mid-body")


class SafeClient:
    """An HTTP/1.1 client whose every connection is address-checked (see the module docstring).

    ``max_connections`` requests run at once (the others wait); a use as ``async with`` closes the idle
    connections at the end, as :meth:`aclose` does.
    """

    _cultura_safe = True  # fetch_image skips its own pre-check for these clients

    def __init__(self, *, allow_hosts=(), user_agent: str, connect_timeout: float | None,
                 read_timeout: float | None, max_connections: int = 32, headers: dict | None = None):
        self.allow_hosts = list(allow_hosts)
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self.max_connections = max_connections
        self._headers = [("User-Agent", user_agent), *(headers or {}).items()]
        self._idle: dict[tuple, list[_Conn]] = {}
        self._slots: asyncio.Semaphore | None = None
        self._closed = False

    async def __aenter__(self) -> "SafeClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()

    # ------------------------------------------------------------------------------------------ pool
    async def _connect(self, scheme: str, host: str, port: int) -> _Conn:
        try:
            ips = await safety.acheck_host(host, port, self.allow_hosts, timeout=self.connect_timeout)
        except (TimeoutError, asyncio.TimeoutError):
            raise httpx.ConnectTimeout(f"DNS lookup of {host!r} timed out") from None
        tls = scheme == "https"
        last: Exception = httpx.ConnectError(f"{host!r} resolves to no address")
        for ip in ips:
            try:
                reader, writer = await within(asyncio.open_connection(
                    ip, port, ssl=ssl_context() if tls else None, server_hostname=host if tls else None,
                    limit=READ_CHUNK), self.connect_timeout)
                return _Conn(reader, writer)
            except (TimeoutError, asyncio.TimeoutError):
                last = httpx.ConnectTimeout(f"connecting to {ip} port {port} timed out "
                                            f"after {self.connect_timeout:g}s")
            except OSError as e:  # refused, unreachable, TLS handshake or certificate errors
                last = httpx.ConnectError(f"{type(e).__name__}: {e}")
        raise last

    def _pooled(self, key: tuple) -> _Conn | None:
        conns = self._idle.get(key)
        now = time.monotonic()
        while conns:
            conn = conns.pop()
            if conn.reusable(now):
                return conn
            conn.close()
        return None

    def _release(self, key: tuple, conn: _Conn, resp: Response | None) -> None:
        h = conn.h11
        if (resp is not None and resp.complete and not self._closed
                and h.our_state is h11.DONE and h.their_state is h11.DONE):
            h.start_next_cycle()
            conn.idle_since = time.monotonic()
            self._idle.setdefault(key, []).append(conn)
        else:  # a body not read to its end, an error, or Connection: close
            conn.close()

    # ------------------------------------------------------------------------------------------ requests
    async def _send(self, conn: _Conn, method: str, url: httpx.URL) -> Response:
        h = conn.h11
        data = h.send(h11.Request(method=method, target=url.raw_path,
                                  headers=[("Host", url.netloc), *self._headers]))
        data += h.send(h11.EndOfMessage())
        try:
            conn.writer.write(data)
            await within(conn.writer.drain(), self.read_timeout)
        except (TimeoutError, asyncio.TimeoutError):
            raise httpx.WriteTimeout(f"the request could not be sent within {self.read_timeout:g}s") from None
        except OSError as e:
            raise httpx.WriteError(f"{type(e).__name__}: {e}") from None
        while True:
            event = await conn.next_event(self.read_timeout)
            if type(event) is h11.Response:
                return Response(url, event.status_code, httpx.Headers(event.headers), conn, self.read_timeout)
            if type(event) is not h11.InformationalResponse:  # 1xx: the real answer follows
                raise httpx.RemoteProtocolError(f"unexpected {type(event).__name__} before the response")

    @contextlib.asynccontextmanager
    async def stream(self, method: str, url, *, follow_redirects: bool = False):
        """Send ``method url`` and yield the :class:`Response` with its body unread (``follow_redirects`` is
        accepted for httpx compatibility; redirects are never followed here)."""
        url = url if isinstance(url, httpx.URL) else httpx.URL(url)
        if url.scheme not in ("http", "https") or not url.host:
            raise httpx.UnsupportedProtocol(f"not an http(s) URL: {url.scheme}://")
        host = url.raw_host.decode("ascii")
        port = url.port or (443 if url.scheme == "https" else 80)
        key = (url.scheme, host, port)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_connections)
        async with self._slots:
            conn = self._pooled(key)
            resp: Response | None = None
            try:
                if conn is not None:
                    try:
                        resp = await self._send(conn, method, url)
                    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                        # the server closed the idle connection as we reused it: once more on a new one
                        conn.close()
                        conn = None
                if conn is None:
                    conn = await self._connect(url.scheme, host, port)
                    resp = await self._send(conn, method, url)
                yield resp
            finally:
                if conn is not None:
                    self._release(key, conn, resp)


def make_client(settings, *, max_connections: int | None = None) -> SafeClient:
    """A :class:`SafeClient` for :func:`.download.fetch_image`: address-checked connections, no proxies from
    the environment, no cookies kept, the configured timeouts and user agent, redirects handled by the
    caller. ``max_connections`` defaults to ``settings.workers``."""
    return SafeClient(allow_hosts=settings.allow_hosts, user_agent=settings.user_agent,
                      connect_timeout=settings.connect_timeout, read_timeout=settings.read_timeout,
                      max_connections=max_connections or settings.workers,
                      headers={"Accept": ACCEPT, "Accept-Encoding": ACCEPT_ENCODING})
