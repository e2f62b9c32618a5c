"""Serve the project's image blobs read-only to annotators' browsers (``cultura annotate serve-images``).

A small threaded HTTP server on 127.0.0.1 that answers only ``GET/HEAD /blobs/ab/<sha256>.<ext>`` for files
that exist under ``blobs/``; everything else is 404. Task data then points at
``http://127.0.0.1:PORT/blobs/...`` (set ``annotate.image_base_url`` or pass ``--image-base`` to push).
"""
from __future__ import annotations

import mimetypes
import re
import threading
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BLOB_RE = re.compile(r"^/blobs/([0-9a-f]{2})/([0-9a-f]{64})\.(jpg|jpeg|png|webp|gif|bmp|tiff)$")


class BlobHandler(BaseHTTPRequestHandler):
    server_version = "cultura-blobs"

    def __init__(self, *args, root: Path, **kwargs):
        self.root = root
        super().__init__(*args, **kwargs)

    def _file(self) -> Path | None:
        m = BLOB_RE.match(self.path.split("?", 1)[0])
        if not m or m.group(2)[:2] != m.group(1):
            return None
        p = self.root / m.group(1) / f"{m.group(2)}.{m.group(3)}"
        return p if p.is_file() else None

    def _send(self, body: bool) -> None:
        p = self._file()
        if p is None:
            self.send_error(404)
            return
        data = p.read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", mimetypes.guess_type(p.name)[0] or "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "public, max-age=31536000, immutable")
        self._cors()
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _cors(self) -> None:
        """Label Studio's editor fetches images with CORS (credentials included): echo the origin."""
        origin = self.headers.get("Origin")
        self.send_header("Access-Control-Allow-Origin", origin or "*")
        if origin:
            self.send_header("Access-Control-Allow-Credentials", "true")
            self.send_header("Vary", "Origin")

    def do_OPTIONS(self):  # noqa: N802
        self.send_response(204)
        self._cors()
        self.send_header("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", self.headers.get("Access-Control-Request-Headers") or "*")
        self.end_headers()

    def do_GET(self):  # noqa: N802
        self._send(True)

    def do_HEAD(self):  # noqa: N802
        self._send(False)

    def log_message(self, *args):  # quiet
        pass


def make_server(blobs: Path, port: int = 0, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A server for ``blobs`` (not started); ``server.server_address[1]`` is the port."""
    httpd = ThreadingHTTPServer((host, port), partial(BlobHandler, root=Path(blobs).resolve()))
    httpd.daemon_threads = True
    return httpd


def serve_in_thread(blobs: Path, port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    """Start a blob server in a daemon thread; returns (server, base URL). Stop with ``server.shutdown()``."""
    httpd = make_server(blobs, port)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"
