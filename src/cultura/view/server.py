"""``cultura view --serve``: the view over HTTP on 127.0.0.1 only, serving the view folder and nothing else.

Only ``GET``/``HEAD`` of a plain file under the view folder (the pages, ``view.css``, ``view.js``, ``ids.js``
and ``thumbs/``) is answered; a path that leaves the folder (``..``, an absolute path, an encoded slash, a
symlink out) or names a hidden file is a 404; a path no file can have (a NUL or other control character, bytes
that are not UTF-8, a name too long for the file system) is a 400. Either answer has a body, and no request
raises in the server. Nothing else of the project (the database, the blobs, secrets) is reachable.
"""
from __future__ import annotations

import http.server
import mimetypes
import posixpath
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..errors import CulturaError

HOST = "127.0.0.1"
TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
         ".js": "text/javascript; charset=utf-8", ".jpg": "image/jpeg", ".svg": "image/svg+xml",
         ".json": "application/json"}


class BadPath(ValueError):
    """A request path that no file can have."""


def resolve(root: Path, url_path: str) -> Path | None:
    """The file under ``root`` that ``url_path`` names, or None when it names anything else; :class:`BadPath`
    when no file can have that path (a control character, bytes that are not UTF-8, a name the file system
    refuses)."""
    raw = urlsplit(url_path).path
    if "\\" in raw or "%2f" in raw.lower() or "%5c" in raw.lower():
        return None
    try:
        path = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        raise BadPath("the path is not UTF-8") from None
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in path):
        raise BadPath("the path holds a control character")
    norm = posixpath.normpath("/" + path.lstrip("/"))
    if norm == "/":
        norm = "/index.html"
    parts = [p for p in norm.split("/") if p]
    if not parts or any(p.startswith(".") for p in parts):
        return None
    root = root.resolve()
    try:
        target = root.joinpath(*parts).resolve()
        if not target.is_relative_to(root) or not target.is_file() or target.suffix not in TYPES:
            return None
    except (OSError, ValueError) as e:  # a name too long, a loop of links: no file of the view
        raise BadPath(f"the file system refuses the path ({type(e).__name__})") from None
    return target


def _handler(root: Path):
    class Handler(http.server.BaseHTTPRequestHandler):
        server_version = "cultura-view"
        sys_version = ""

        def _send(self, head_only: bool) -> None:
            try:
                target = resolve(root, self.path)
                body = target.read_bytes() if target is not None else None
            except BadPath as e:
                self.send_error(400, "Bad path", f"No file of the view has this path: {e}.")
                return
            except OSError:  # removed or unreadable since it was resolved (a rerun of 'cultura view')
                target = None
            if target is None:
                self.send_error(404, "Not in the view")
                return
            self.send_response(200)
            self.send_header("Content-Type", TYPES.get(target.suffix) or mimetypes.guess_type(target.name)[0]
                             or "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            if not head_only:
                self.wfile.write(body)

        def do_GET(self):  # noqa: N802 (http.server's name)
            self._send(False)

        def do_HEAD(self):  # noqa: N802
            self._send(True)

        def log_message(self, format, *args):  # library code never prints
            pass

    return Handler


def make_server(root: Path, port: int = 0) -> http.server.ThreadingHTTPServer:
    """A server for the view in ``root`` bound to 127.0.0.1 (``port`` 0: a free one)."""
    if not (root / "index.html").is_file():
        raise CulturaError(f"{root} holds no view yet; run 'cultura view' first.", param="root")
    try:
        return http.server.ThreadingHTTPServer((HOST, port), _handler(root))
    except OSError as e:
        raise CulturaError(f"Cannot listen on {HOST}:{port} ({e.strerror}); choose another port.",
                           param="port") from None


def serve_in_thread(root: Path, port: int = 0) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Start the server in a daemon thread; returns it and its base URL (``httpd.shutdown()`` stops it)."""
    httpd = make_server(root, port)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://{HOST}:{httpd.server_address[1]}/"
