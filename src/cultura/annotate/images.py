"""Serve the project's image blobs read-only to annotators' browsers (``cultura annotate serve-images``).

A small threaded HTTP server on 127.0.0.1 that answers only ``GET/HEAD /blobs/ab/<sha256>.<ext>`` for files
that exist under ``blobs/``; everything else is 404. Task data then points at
``http://127.0.0.1:PORT/blobs/...`` (set ``annotate.image_base_url`` or pass ``--image-base`` to push).

Every format the downloader accepts is shown: a format every browser draws (JPEG, PNG, GIF, WebP, BMP) is
served as stored, the others (TIFF, AVIF) converted on the fly to the picture a browser would show
(:func:`cultura.pixels.browser_bytes`: JPEG, or PNG when it has transparency).

CORS: the blobs are public to whoever reaches the port, so any page may read them anonymously
(``Access-Control-Allow-Origin: *``); credentialed requests are answered only for the trusted origins (the
project's Label Studio and loopback origins), never by reflecting an arbitrary ``Origin``.
"""
from __future__ import annotations

import functools
import re
import threading
import urllib.parse
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from PIL import Image

from .. import pixels
from ..bounds import PORT

#: Suffix (no dot) -> Pillow format of the formats this Pillow decodes: :data:`cultura.pixels.SUFFIXES`, the
#: suffixes the blob store writes (:data:`cultura.db.blobs.EXTENSIONS`) among them.
SUFFIX_FORMAT = {s[1:]: f for s, f in pixels.SUFFIXES.items() if f in pixels.ALLOWED_FORMATS}
BLOB_RE = re.compile(r"^/blobs/([0-9a-f]{2})/([0-9a-f]{64})\.(" + "|".join(sorted(SUFFIX_FORMAT)) + r")$")


@functools.lru_cache(maxsize=64)
def _converted(path: Path) -> tuple[bytes, str]:
    """A converted blob, kept: a blob never changes (its name is its content hash) and the editor asks
    again for the image of each task it shows."""
    return pixels.browser_bytes(path)


def drawn_by_browsers(path: str) -> bool:
    """Whether browsers draw the blob at ``path`` (``blobs/ab/<sha256>.<ext>``) as stored: False for the
    formats this server converts (TIFF, AVIF)."""
    fmt = _format(path)
    return fmt is None or fmt in pixels.BROWSER_FORMATS


def blob_response(path: Path) -> tuple[bytes, str]:
    """``(body, content type)`` served for the blob file ``path``: as stored for a format browsers draw,
    else converted (:func:`cultura.pixels.browser_bytes`)."""
    fmt = _format(path)
    if fmt in pixels.BROWSER_FORMATS:
        return path.read_bytes(), pixels.MIME[fmt]
    return _converted(path)


def _format(path) -> str | None:
    """The format a blob's suffix names (None: not one this Pillow decodes); the blob is not opened."""
    return SUFFIX_FORMAT.get(Path(path).suffix[1:].lower())


class BlobHandler(BaseHTTPRequestHandler):
    server_version = "cultura-blobs"

    def __init__(self, *args, root: Path, origins: frozenset = frozenset(), **kwargs):
        self.root = root
        self.origins = origins
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
        try:
            data, ctype = blob_response(p)
        except (*pixels.UNREADABLE, Image.DecompressionBombError) as e:
            self.send_error(500, f"the blob cannot be decoded ({type(e).__name__})")
            return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "public, max-age=31536000, immutable")
        self._cors()
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _cors(self) -> None:
        """Label Studio's editor fetches images with CORS: a trusted origin (the project's Label Studio, a
        loopback origin) is echoed with credentials allowed; any other origin gets ``*`` without credentials."""
        origin = self.headers.get("Origin")
        if origin and trusted_origin(origin, self.origins):
            self.send_header("Access-Control-Allow-Origin", origin)
            self.send_header("Access-Control-Allow-Credentials", "true")
        else:
            self.send_header("Access-Control-Allow-Origin", "*")
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


def _origin_of(url: str) -> str | None:
    try:
        p = urllib.parse.urlsplit(url.strip())
        port = p.port
    except ValueError:
        return None
    if p.scheme not in ("http", "https") or not p.hostname:
        return None
    host = f"[{p.hostname}]" if ":" in p.hostname else p.hostname
    default = {"http": 80, "https": 443}[p.scheme]
    return f"{p.scheme}://{host}" + (f":{port}" if port and port != default else "")


def trusted_origin(origin: str, origins=()) -> bool:
    """True for an origin listed in ``origins`` (URLs; compared as scheme://host[:port]) or a loopback
    origin (``http://127.0.0.1:*``, ``http://localhost:*``, ``http://[::1]:*``)."""
    o = _origin_of(origin)
    if o is None or o != origin.strip().rstrip("/"):
        return False
    host = urllib.parse.urlsplit(o).hostname
    if host in ("127.0.0.1", "localhost", "::1"):
        return True
    return o in {_origin_of(u) for u in origins}


def make_server(blobs: Path, port: int = 0, host: str = "127.0.0.1", *, origins=()) -> ThreadingHTTPServer:
    """A server for ``blobs`` (not started); ``server.server_address[1]`` is the port. ``origins``: URLs of
    the sites allowed to fetch with credentials besides loopback ones (e.g. a shared Label Studio)."""
    port = PORT.check(port, "port")
    httpd = ThreadingHTTPServer((host, port), partial(BlobHandler, root=Path(blobs).resolve(),
                                                      origins=frozenset(origins)))
    httpd.daemon_threads = True
    return httpd


def serve_in_thread(blobs: Path, port: int = 0, *, origins=()) -> tuple[ThreadingHTTPServer, str]:
    """Start a blob server in a daemon thread; returns (server, base URL). Stop with ``server.shutdown()``."""
    httpd = make_server(blobs, port, origins=origins)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"
