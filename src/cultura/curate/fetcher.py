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
about a fifth of that. It does less on purpose: no cookies, no redirects (the downloader follows them itself,
checking each hop), no HTTP/2, no content decoding (the downloader decodes under its byte cap).

What it does like httpx and curl:

- **proxies**: ``download.proxy``, else ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY``/``NO_PROXY`` from the
  environment (:mod:`.proxies`). A plain-HTTP request goes to the proxy in absolute form
  (``GET http://host/path``); an HTTPS one through a ``CONNECT host:port`` tunnel, with TLS to the target (its
  certificate checked against its name) inside it. Proxy credentials become ``Proxy-Authorization``;
- **the URL as given**: the request line carries the URL's path and query exactly as written (a signed URL's
  signature, its ``%2F`` and ``+``, byte for byte), except where a request line cannot carry a character
  (non-ASCII, spaces: then httpx's encoding); ``user:password@`` in a URL becomes ``Authorization: Basic``;
- **header limits as httpcore's**: response headers up to :data:`MAX_HEADER_BYTES` (100 KiB), however they are
  split across reads; more is an error in words, as is a server that closes without answering;
- **certificate failures are final**: :class:`CertificateError` (the downloader does not retry it).

Safety, as before:

- every connection is made by :meth:`SafeClient._connect`: the target host is resolved once and every address
  is checked by :func:`.safety.acheck_host` (loopback, private, link-local, multicast and reserved addresses are
  refused unless the exact ``host:port`` is in ``download.allow_hosts``), then the connection goes to a checked
  address (no second lookup). Through a proxy the check is the same (a proxy never carries a request to a
  refused address); the proxy itself is the user's choice and is not checked, and it looks the name up again
  (a downloader that can resolve no public name itself cannot use a proxy to reach one);
- HTTPS verifies the certificate against the URL's host name (SNI) with the verifying context of
  :func:`ssl_context` (certifi, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``);
- connect, read and write each have their timeout; a keep-alive connection is reused only for its own
  scheme, host and port, only within ``KEEPALIVE`` seconds and only when the server has not closed it.
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
import time

import h11
import httpx

from . import safety
from .proxies import Proxies, Proxy, basic_credentials, proxies_for

__all__ = ["SafeClient", "make_client", "ssl_context", "KEEPALIVE", "MAX_HEADER_BYTES", "CertificateError",
           "ProxyRefused"]

KEEPALIVE = 30.0          # seconds an idle connection is kept for its host
READ_CHUNK = 1 << 18      # bytes asked of the stream per read (asyncio reads up to 256 KiB a time)
MAX_HEADER_BYTES = 100 * 1024  # response headers (httpcore's limit; h11's own default is 16 KiB)
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
ACCEPT = "image/avif,image/webp,image/png,image/jpeg,image/*;q=0.8,*/*;q=0.5"
ACCEPT_ENCODING = "gzip, deflate"   # decoded by the downloader under its byte cap; br/zstd never asked for
_timeout = getattr(asyncio, "timeout", None)


class CertificateError(httpx.ConnectError):
    """The server's certificate does not verify (unknown CA, expired, another name): retrying cannot help."""

    @classmethod
    def of(cls, host: str, e: ssl.SSLCertVerificationError) -> "CertificateError":
        return cls(f"the certificate of {host} does not verify: {e.verify_message or e}")


class ProxyRefused(httpx.ProxyError):
    """The proxy answered a ``CONNECT`` with a status other than 2xx (``status``: that status)."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


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


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def origin_target(raw: str, url: httpx.URL) -> bytes:
    """The request target (``/path?query``) of the URL ``raw``, exactly as written there (without the
    fragment): a signed URL is checked by its server byte for byte, and a re-encoding (``%2f`` to ``%2F``, ``+``
    to ``%20``, a dropped ``?``) breaks its signature. Where the path or query holds a character a request line
    cannot carry (non-ASCII, spaces) or the URL is one parsers disagree on (a backslash), httpx's encoding of
    ``url`` (the parsed ``raw``) is used instead."""
    rest = raw.split("://", 1)[1] if "://" in raw else ""
    cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    tail = rest[cut:].split("#", 1)[0]
    if not tail.startswith("/"):
        tail = "/" + tail
    if "\\" in raw or any(not "!" <= c <= "~" for c in tail):
        return url.raw_path
    return tail.encode("ascii")


class _Conn:
    """One HTTP/1.1 connection: the streams, the h11 state machine, the raw socket (for the idle check), and
    ``forward``: the proxy that plain-HTTP requests on it go through (absolute-form targets), if any."""

    __slots__ = ("reader", "writer", "h11", "sock", "idle_since", "forward", "received", "eof", "answered")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, forward: Proxy | None = None):
        self.reader, self.writer = reader, writer
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEADER_BYTES)
        self.sock = writer.get_extra_info("socket")
        self.idle_since = 0.0
        self.forward = forward
        self.new_cycle()

    def new_cycle(self) -> None:
        """Before each request: nothing received for it yet (the messages of :meth:`_explain` depend on it)."""
        self.received, self.eof, self.answered = 0, False, False

    def reusable(self, now: float) -> bool:
        """Idle for less than :data:`KEEPALIVE` and not closed (nor sent anything) by the server meanwhile."""
        return now - self.idle_since < KEEPALIVE and not safety._socket_readable(self.sock)

    def close(self) -> None:
        transport = self.writer.transport
        if not transport.is_closing():
            transport.abort()

    def _explain(self, e: h11.RemoteProtocolError) -> str:
        """h11's complaint in the words of someone running a crawl."""
        text = str(e)
        if "buffer too long" in text.lower():
            return (f"the server sent more than {MAX_HEADER_BYTES // 1024} KiB of response headers (the most "
                    "accepted, as httpx and curl do)")
        if self.eof and not self.answered:
            if self.received == 0:
                return "the server closed the connection without a response"
            return "the server closed the connection in the middle of the response headers"
        if self.eof:
            return f"the server closed the connection before the body was complete ({text})"
        return text or "malformed HTTP response"

    async def next_event(self, read_timeout: float | None):
        """The next h11 event, reading from the socket as needed."""
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as e:
                raise httpx.RemoteProtocolError(self._explain(e)) from None
            if event is not h11.NEED_DATA:
                if type(event) is h11.Response:
                    self.answered = True
                return event
            try:
                data = await within(self.reader.read(READ_CHUNK), read_timeout)
            except (TimeoutError, asyncio.TimeoutError):
                raise httpx.ReadTimeout(f"no data for {read_timeout:g}s") from None
            except OSError as e:
                raise httpx.ReadError(f"{type(e).__name__}: {e}") from None
            self.received += len(data)
            self.eof = not data
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


async def _start_tls(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
    """TLS to ``host`` over the open stream (a proxy's ``CONNECT`` tunnel), certificate and name checked."""
    if hasattr(writer, "start_tls"):  # Python >= 3.11
        await writer.start_tls(ssl_context(), server_hostname=host)
        return
    loop = asyncio.get_running_loop()  # pragma: no cover - Python 3.10: what 3.11's StreamWriter.start_tls does
    protocol = writer.transport.get_protocol()
    await writer.drain()
    transport = await loop.start_tls(writer.transport, protocol, ssl_context(), server_hostname=host)
    writer._transport = transport
    protocol._transport = transport
    protocol._over_ssl = True


class SafeClient:
    """An HTTP/1.1 client whose every connection is address-checked (see the module docstring).

    ``max_connections`` requests run at once (the others wait); a use as ``async with`` closes the idle
    connections at the end, as :meth:`aclose` does. ``proxies``: :class:`.proxies.Proxies` (default: none).
    """

    _cultura_safe = True  # fetch_image skips its own pre-check for these clients

    def __init__(self, *, allow_hosts=(), user_agent: str, connect_timeout: float | None,
                 read_timeout: float | None, max_connections: int = 32, headers: dict | None = None,
                 proxies: Proxies | None = None):
        self.allow_hosts = list(allow_hosts)
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self.max_connections = max_connections
        self.user_agent = user_agent
        self.proxies = proxies or Proxies(direct=True)
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
        try:  # the target is checked even when a proxy carries the request
            ips = await safety.acheck_host(host, port, self.allow_hosts, timeout=self.connect_timeout)
        except (TimeoutError, asyncio.TimeoutError):
            raise httpx.ConnectTimeout(f"DNS lookup of {host!r} timed out") from None
        proxy = self.proxies.for_url(scheme, host, port)
        if proxy is not None:
            return await self._through(proxy, scheme, host, port)
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
            except ssl.SSLCertVerificationError as e:
                last = CertificateError.of(host, e)
            except OSError as e:  # refused, unreachable, TLS handshake errors
                last = httpx.ConnectError(f"{type(e).__name__}: {e}")
        raise last

    async def _through(self, proxy: Proxy, scheme: str, host: str, port: int) -> _Conn:
        """A connection to ``host:port`` through ``proxy``: the proxy's own for plain HTTP (absolute-form
        requests), a ``CONNECT`` tunnel with TLS to the target inside for HTTPS."""
        try:
            reader, writer = await within(asyncio.open_connection(proxy.host, proxy.port, limit=READ_CHUNK),
                                          self.connect_timeout)
        except (TimeoutError, asyncio.TimeoutError):
            raise httpx.ConnectTimeout(f"connecting to the proxy {proxy} timed out after "
                                       f"{self.connect_timeout:g}s") from None
        except OSError as e:
            raise httpx.ConnectError(f"cannot connect to the proxy {proxy}: {type(e).__name__}: {e}") from None
        if scheme == "http":
            return _Conn(reader, writer, forward=proxy)
        conn = _Conn(reader, writer)
        try:
            await self._tunnel(conn, proxy, host, port)
            await within(_start_tls(reader, writer, host), self.connect_timeout)
        except (TimeoutError, asyncio.TimeoutError):
            conn.close()
            raise httpx.ConnectTimeout(f"TLS to {host} through the proxy {proxy} timed out after "
                                       f"{self.connect_timeout:g}s") from None
        except ssl.SSLCertVerificationError as e:
            conn.close()
            raise CertificateError.of(host, e) from None
        except OSError as e:
            conn.close()
            raise httpx.ConnectError(f"TLS to {host} through the proxy {proxy}: {type(e).__name__}: {e}") from None
        except BaseException:
            conn.close()
            raise
        return _Conn(reader, writer)  # the tunnel's HTTP/1.1 starts afresh, inside TLS

    async def _tunnel(self, conn: _Conn, proxy: Proxy, host: str, port: int) -> None:
        """``CONNECT host:port`` on ``conn`` (to the proxy); returns once the proxy has opened the tunnel."""
        authority = _authority(host, port)
        headers = [("Host", authority), ("User-Agent", self.user_agent)]
        if proxy.authorization:
            headers.append(("Proxy-Authorization", proxy.authorization))
        h = conn.h11
        data = h.send(h11.Request(method="CONNECT", target=authority, headers=headers)) + h.send(h11.EndOfMessage())
        await self._write(conn, data)
        while True:
            event = await conn.next_event(self.read_timeout)
            if type(event) is h11.Response:
                break
            if type(event) is not h11.InformationalResponse:
                raise httpx.RemoteProtocolError(f"the proxy {proxy} sent {type(event).__name__} instead of an "
                                                "answer to CONNECT")
        status = event.status_code
        if not 200 <= status < 300:
            hint = ""
            if status == 407:
                hint = (": it wants credentials; put them in the environment's proxy URL (HTTPS_PROXY), as "
                        "user:password@ before its host" if not proxy.authorization else
                        ": it refused the credentials of the proxy URL")
            reason = event.reason.decode("latin-1", "replace")
            raise ProxyRefused(f"the proxy {proxy} answered {status} {reason} to CONNECT {authority}{hint}", status)

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
    async def _write(self, conn: _Conn, data: bytes) -> None:
        try:
            conn.writer.write(data)
            await within(conn.writer.drain(), self.read_timeout)
        except (TimeoutError, asyncio.TimeoutError):
            raise httpx.WriteTimeout(f"the request could not be sent within {self.read_timeout:g}s") from None
        except OSError as e:
            raise httpx.WriteError(f"{type(e).__name__}: {e}") from None

    async def _send(self, conn: _Conn, method: str, url: httpx.URL, target: bytes) -> Response:
        h = conn.h11
        conn.new_cycle()
        headers = [("Host", url.netloc)]
        if conn.forward is not None:  # through a proxy: the absolute URL, and the proxy's credentials
            target = url.scheme.encode("ascii") + b"://" + url.netloc + target
            if conn.forward.authorization:
                headers.append(("Proxy-Authorization", conn.forward.authorization))
        if url.userinfo:
            user, _, password = url.userinfo.decode("ascii").partition(":")
            headers.append(("Authorization", basic_credentials(user, password)))
        data = h.send(h11.Request(method=method, target=target, headers=[*headers, *self._headers]))
        data += h.send(h11.EndOfMessage())
        await self._write(conn, data)
        while True:
            event = await conn.next_event(self.read_timeout)
            if type(event) is h11.Response:
                return Response(url, event.status_code, httpx.Headers(event.headers), conn, self.read_timeout)
            if type(event) is not h11.InformationalResponse:  # 1xx: the real answer follows
                raise httpx.RemoteProtocolError(f"unexpected {type(event).__name__} before the response")

    @contextlib.asynccontextmanager
    async def stream(self, method: str, url, *, follow_redirects: bool = False, parsed: httpx.URL | None = None):
        """Send ``method url`` and yield the :class:`Response` with its body unread (``follow_redirects`` is
        accepted for httpx compatibility; redirects are never followed here). A ``url`` given as a string is
        requested with its path and query exactly as written (:func:`origin_target`); ``parsed``: the caller's
        ``httpx.URL(url)`` when it has one (parsing is a sizeable share of a request's CPU)."""
        raw = url if isinstance(url, str) else str(url)
        url = url if isinstance(url, httpx.URL) else parsed if parsed is not None else httpx.URL(url)
        if url.scheme not in ("http", "https") or not url.host:
            raise httpx.UnsupportedProtocol(f"not an http(s) URL: {url.scheme}://")
        target = origin_target(raw, url)
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
                        resp = await self._send(conn, method, url, target)
                    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                        # the server closed the idle connection as we reused it: once more on a new one
                        conn.close()
                        conn = None
                if conn is None:
                    conn = await self._connect(url.scheme, host, port)
                    resp = await self._send(conn, method, url, target)
                yield resp
            finally:
                if conn is not None:
                    self._release(key, conn, resp)


def make_client(settings, *, max_connections: int | None = None, proxies: Proxies | None = None) -> SafeClient:
    """A :class:`SafeClient` for :func:`.download.fetch_image`: address-checked connections, the proxy of
    ``download.proxy`` or the environment (:mod:`.proxies`), no cookies kept, the configured timeouts and user
    agent, redirects handled by the caller. ``max_connections`` defaults to ``settings.workers``; ``proxies``
    (default: :func:`.proxies.proxies_for` of ``download.proxy``) lets a caller that has read them already
    pass them on."""
    return SafeClient(allow_hosts=settings.allow_hosts, user_agent=settings.user_agent,
                      connect_timeout=settings.connect_timeout, read_timeout=settings.read_timeout,
                      max_connections=max_connections or settings.workers,
                      headers={"Accept": ACCEPT, "Accept-Encoding": ACCEPT_ENCODING},
                      proxies=proxies if proxies is not None else proxies_for(getattr(settings, "proxy", None)))
