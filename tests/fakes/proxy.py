"""A forwarding HTTP proxy on 127.0.0.1, for the downloader's proxy tests (standard library only).

It speaks what corporate and university proxies speak: plain-HTTP requests in absolute form
(``GET http://host:port/path?q HTTP/1.1``, forwarded to the target with the path and query exactly as received)
and ``CONNECT host:port`` tunnels (``200 Connection established``, then bytes both ways: HTTPS goes through it
end to end, the proxy sees no plaintext). It records every request line it was given (:attr:`requests`) and
every ``Proxy-Authorization`` header (:attr:`authorizations`); with ``credentials=("user", "password")`` it
answers ``407`` to a request without them. ``hosts`` maps names the proxy resolves itself (a test certificate's
``images.test``) to addresses.

Use: ``with ForwardProxy() as proxy: ... proxy.url`` (``http://127.0.0.1:PORT``).
"""
from __future__ import annotations

import base64
import socket
import socketserver
import threading

from tests.fakes.sockets import pump


class _Handler(socketserver.BaseRequestHandler):
    server: "_Server"

    def _read_head(self, f) -> tuple[str, dict[str, str]] | None:
        line = f.readline(65537)
        if not line:
            return None
        headers: dict[str, str] = {}
        while True:
            h = f.readline(65537)
            if h in (b"\r\n", b"\n", b""):
                break
            name, _, value = h.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return line.decode("latin-1").rstrip("\r\n"), headers

    def _answer(self, status: str, extra: str = "") -> None:
        self.request.sendall(f"HTTP/1.1 {status}\r\n{extra}Content-Length: 0\r\n\r\n".encode("latin-1"))

    def handle(self):
        proxy = self.server.owner
        f = self.request.makefile("rb")
        while True:
            head = self._read_head(f)
            if head is None:
                return
            request_line, headers = head
            method, target, _ = request_line.split(" ", 2)
            with proxy.lock:
                proxy.requests.append(f"{method} {target}")
                proxy.authorizations.append(headers.get("proxy-authorization"))
            if proxy.credentials and headers.get("proxy-authorization") != proxy.expected_authorization:
                self._answer("407 Proxy Authentication Required", 'Proxy-Authenticate: Basic realm="test"\r\n')
                continue
            if method == "CONNECT":
                return self._tunnel(target)
            if not target.startswith("http://"):
                self._answer("400 Bad Request")
                return
            return self._forward(method, target, headers)

    def _connect(self, host: str, port: int) -> socket.socket:
        return socket.create_connection((self.server.owner.hosts.get(host, host), port), timeout=60)

    def _tunnel(self, authority: str) -> None:
        host, _, port = authority.rpartition(":")
        try:
            upstream = self._connect(host.strip("[]"), int(port))
        except OSError:
            self._answer("502 Bad Gateway")
            return
        self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        _relay(self.request, upstream)

    def _forward(self, method: str, target: str, headers: dict[str, str]) -> None:
        rest = target[len("http://"):]
        cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
        authority, path = rest[:cut], rest[cut:] or "/"
        if path.startswith("?"):
            path = "/" + path
        if authority.startswith("["):  # [::1]:8080
            host, _, port = authority[1:].partition("]")
            port = port.lstrip(":")
        else:
            host, _, port = authority.partition(":")
        try:
            upstream = self._connect(host, int(port or 80))
        except OSError:
            self._answer("502 Bad Gateway")
            return
        kept = {k: v for k, v in headers.items() if not k.startswith("proxy-") and k != "connection"}
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in kept.items())
        upstream.sendall((head + "Connection: close\r\n\r\n").encode("latin-1"))
        with upstream:  # the answer as it comes, then the connection ends (the client opens a new one)
            while chunk := upstream.recv(65536):
                self.request.sendall(chunk)


def _relay(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes."""
    t = threading.Thread(target=pump, args=(b, a), daemon=True)
    t.start()
    pump(a, b)
    t.join(60)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: "ForwardProxy"


class ForwardProxy:
    """The proxy on ``127.0.0.1:<free port>``; see the module docstring."""

    def __init__(self, *, credentials: tuple[str, str] | None = None, hosts: dict[str, str] | None = None):
        self.credentials = credentials
        self.expected_authorization = (
            "Basic " + base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()
            if credentials else None)
        self.hosts = dict(hosts or {})
        self.requests: list[str] = []
        self.authorizations: list[str | None] = []
        self.lock = threading.Lock()
        self._srv = _Server(("127.0.0.1", 0), _Handler)
        self._srv.owner = self
        self.port = self._srv.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "ForwardProxy":
        self._thread = threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True, name="forward-proxy")
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._srv.shutdown()
        self._srv.server_close()
