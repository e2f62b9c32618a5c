"""A plain HTTP file server on 127.0.0.1 or another loopback address (one: the downloader refuses it unless
``download.allow_hosts`` names it): the bytes of the test's choosing at paths of its choosing, every request
counted. For the hostile cases (redirects, slow bodies, lying headers) see :mod:`tests.fakes.image_server`."""
from __future__ import annotations

import collections
import functools
import http.server
import threading
from pathlib import Path

import pytest


class FileServer:
    """Files under ``root`` served at ``http://HOST:PORT/<name>`` (``host``: a loopback address, 127.0.0.1 by
    default; another is another host to the downloader); ``hits``: requests by path. Every body is served as
    ``application/octet-stream``: the downloader sniffs bytes and never trusts a type."""

    def __init__(self, root: Path, host: str = "127.0.0.1"):
        self.root, self.hits = root, collections.Counter()
        root.mkdir(parents=True, exist_ok=True)
        hits = self.hits

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):  # not mixed into the CLI output under test
                pass

            def guess_type(self, path):
                return "application/octet-stream"

            def do_GET(self):
                hits[self.path] += 1
                super().do_GET()

        self.httpd = http.server.ThreadingHTTPServer((host, 0), functools.partial(Quiet, directory=str(root)))
        self.host_port = f"{host}:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def put(self, name: str, data: bytes) -> str:
        """Serve ``data`` at ``/<name>``; its URL."""
        (self.root / name).write_bytes(data)
        return f"http://{self.host_port}/{name}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def www(tmp_path):
    """A :class:`FileServer` over ``tmp_path / "www"`` for the test's duration."""
    srv = FileServer(tmp_path / "www")
    yield srv
    srv.close()
