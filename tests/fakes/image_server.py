"""A local image server with trap routes, for the downloader's tests and benchmark (127.0.0.1 only).

Use the ``image_server`` pytest fixture (function-scoped: fresh hit counters per test), or start one by hand:
``with ImageServer(latency=0.2) as srv: srv.url("/img/1.jpg")``; or as a separate process (benchmarks):
``python tests/image_server.py --latency 0.2`` prints ``PORT <n>`` and serves until killed.
Only the standard library and Pillow are needed (importable without cultura).

Routes (every route also takes ``?delay=SECONDS`` to add latency before answering):

====================================  =================================================================
``/img/<seed>.jpg`` ``.png``          a generated image (``?w=&h=`` size, default 320x240; ``?q=`` JPEG quality)
``/plain/<seed>.jpg``                 a JPEG served as ``text/plain`` (accepted: bytes are sniffed, not headers)
``/country/<CC>/<seed>.jpg``          the same bytes as ``/img/<seed>.jpg`` (one image found for two countries)
``/dup/a.jpg`` ``/dup/b.jpg``         identical bytes at two URLs
``/variant/<seed>/<kind>.jpg``        near duplicates of ``/img/<seed>.jpg``: resized, reencoded, cropped
``/404``                              404 Not Found
``/flaky429/<key>``                   429 with ``Retry-After: <after>`` (``?after=1``) ``?fails=1`` times, then a JPEG
``/flaky500/<key>``                   500 ``?fails=1`` times, then a JPEG
``/always503``                        503 forever (``Retry-After`` from ``?after=`` when given)
``/slow``                             headers and a few bytes, then sleeps ``?s=3`` seconds (read timeout)
``/big``                              ``?n=`` bytes (default 25 MB) of a JPEG-looking body, no Content-Length
``/biglen``                           as ``/big`` but with an honest Content-Length
``/html``, ``/html-as-jpeg``          an HTML page (as text/html; as image/jpeg)
``/svg``                              an SVG image (image/svg+xml)
``/truncated.jpg``                    the first 60 % of a JPEG
``/bomb.png``                         30000x30000 single-colour PNG (~100 kB): a decompression bomb
``/noai.jpg`` ``/noimageai.jpg``      a JPEG with ``X-Robots-Tag: noai`` / ``googlebot: noindex, noimageai``
``/tiny.png``                         a 16x16 PNG (below min_side)
``/redirect?to=<path-or-url>``        302 to ``to``
``/redirect-metadata``                302 to http://169.254.169.254/latest/meta-data
``/chain/<n>``                        a chain of ``n`` redirects ending at a JPEG
``/slowchain/<n>?delay=S``            as ``/chain/<n>``, each hop answering after ``S`` seconds
``/gzip/bomb`` ``/deflate/bomb``      ``?n=`` bytes (default 64 MB) of zeros, gzip / deflate encoded (~64 kB)
``/gzip/img.jpg``                     a JPEG sent with ``Content-Encoding: gzip`` (accepted)
``/encoding/br``                      a body labelled ``Content-Encoding: br`` (never asked for)
``/tall.png``                         a 64 x 1,000,000 PNG (~9 kB; passes the pixel cap, extreme aspect ratio)
``/signed/<seed>.jpg?…``              a JPEG only for a request target issued by ``srv.signed(path)``, byte for
                                      byte (a signed URL: any re-encoding or redaction of it is a 403)
====================================  =================================================================

Every request target is recorded as received in ``srv.targets`` (the path and query, unparsed), and its
``Authorization`` header (or ``None``) in ``srv.authorizations``.

``make_image(seed, size)`` draws a deterministic picture whose content differs visibly per seed;
``planted_duplicates()`` lists the near-duplicate routes for the dedup tests.
"""
from __future__ import annotations

import collections
import functools
import gzip
import hashlib
import io
import random
import struct
import threading
import time
import urllib.parse
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from PIL import Image, ImageDraw

DEFAULT_SIZE = (320, 240)


def make_image(seed: int, size: tuple[int, int] = DEFAULT_SIZE) -> Image.Image:
    """A deterministic RGB picture for ``seed``: a two-colour gradient and a dozen random shapes.

    Different seeds give visibly (and perceptually-hash) different pictures; the same seed and size give
    the same pixels on every machine.
    """
    rng = random.Random(seed)
    w, h = size
    c1 = [rng.randrange(256) for _ in range(3)]
    c2 = [rng.randrange(256) for _ in range(3)]
    horizontal = rng.random() < 0.5
    steps = w if horizontal else h
    grad = Image.new("RGB", (steps, 1))
    grad.putdata([tuple(int(a + (b - a) * i / max(steps - 1, 1)) for a, b in zip(c1, c2)) for i in range(steps)])
    img = grad.resize((w, h)) if horizontal else grad.transpose(Image.Transpose.ROTATE_90).resize((w, h))
    draw = ImageDraw.Draw(img)
    for _ in range(12):
        x0, y0 = rng.uniform(-0.2, 1.0) * w, rng.uniform(-0.2, 1.0) * h
        x1, y1 = x0 + rng.uniform(0.1, 0.6) * w, y0 + rng.uniform(0.1, 0.6) * h
        colour = tuple(rng.randrange(256) for _ in range(3))
        shape = rng.choice(("ellipse", "rectangle", "polygon"))
        if shape == "ellipse":
            draw.ellipse((x0, y0, x1, y1), fill=colour)
        elif shape == "rectangle":
            draw.rectangle((x0, y0, x1, y1), fill=colour)
        else:
            draw.polygon([(rng.uniform(0, w), rng.uniform(0, h)) for _ in range(3)], fill=colour)
    return img


def encode(img: Image.Image, fmt: str = "JPEG", **kw) -> bytes:
    buf = io.BytesIO()
    if fmt == "JPEG":
        kw.setdefault("quality", 90)
    img.save(buf, fmt, **kw)
    return buf.getvalue()


@functools.lru_cache(maxsize=4096)
def image_bytes(seed: int, fmt: str = "JPEG", w: int = DEFAULT_SIZE[0], h: int = DEFAULT_SIZE[1],
                quality: int = 90) -> bytes:
    """Encoded bytes of ``make_image(seed, (w, h))`` (cached)."""
    kw = {"quality": quality} if fmt == "JPEG" else {}
    return encode(make_image(seed, (w, h)), fmt, **kw)


@functools.lru_cache(maxsize=64)
def variant_bytes(seed: int, kind: str) -> bytes:
    """Near duplicates of ``image_bytes(seed)``: ``resized`` (half size), ``reencoded`` (JPEG quality 60),
    ``cropped`` (5 % off each side), ``same`` (identical bytes)."""
    img = make_image(seed)
    w, h = img.size
    if kind == "same":
        return image_bytes(seed)
    if kind == "resized":
        return encode(img.resize((w // 2, h // 2), Image.Resampling.LANCZOS))
    if kind == "reencoded":
        return encode(img, quality=60)
    if kind == "cropped":
        dx, dy = w // 20, h // 20
        return encode(img.crop((dx, dy, w - dx, h - dy)))
    raise KeyError(kind)


VARIANT_KINDS = ("resized", "reencoded", "cropped")


def planted_duplicates(seed: int = 7) -> dict[str, list[str]]:
    """Routes of planted duplicates: ``exact`` (same bytes at two URLs) and ``near`` (the original and its
    resized / re-encoded / cropped copies)."""
    return {"exact": ["/dup/a.jpg", "/dup/b.jpg"],
            "near": [f"/img/{seed}.jpg"] + [f"/variant/{seed}/{k}.jpg" for k in VARIANT_KINDS]}


@functools.lru_cache(maxsize=1)
def bomb_png(side: int = 30000) -> bytes:
    """A valid ``side`` x ``side`` 1-bit greyscale PNG of one colour, zlib-compressed to ~100 kB."""
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    row = b"\x00" + b"\x00" * ((side + 7) // 8)
    comp = zlib.compressobj(9)
    block = row * 1000
    parts = [comp.compress(block) for _ in range(side // 1000)]
    parts.append(comp.compress(row * (side % 1000)))
    parts.append(comp.flush())
    ihdr = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"".join(parts)) + chunk(b"IEND", b""))


@functools.lru_cache(maxsize=4)
def encoded_zeros(n: int, encoding: str) -> bytes:
    """``n`` zero bytes compressed as ``gzip`` or ``deflate`` (zlib-wrapped): a compression bomb."""
    comp = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | (16 if encoding == "gzip" else 0))
    block = b"\x00" * (1 << 20)
    parts = [comp.compress(block) for _ in range(n >> 20)]
    parts += [comp.compress(b"\x00" * (n & ((1 << 20) - 1))), comp.flush()]
    return b"".join(parts)


@functools.lru_cache(maxsize=1)
def tall_png(w: int = 64, h: int = 1_000_000) -> bytes:
    """A valid ``w`` x ``h`` greyscale PNG of one colour (a thin strip: few pixels, extreme aspect ratio)."""
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    comp = zlib.compressobj(9)
    row = b"\x00" + b"\x80" * w
    parts = [comp.compress(row * 10000) for _ in range(h // 10000)] + [comp.compress(row * (h % 10000)), comp.flush()]
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"".join(parts)) + chunk(b"IEND", b"")


HTML = b"<!DOCTYPE html><html><head><title>Not an image</title></head><body><p>Hello</p></body></html>"
SVG = (b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="400" height="400">'
       b'<rect width="400" height="400" fill="red"/></svg>')
METADATA_URL = "http://169.254.169.254/latest/meta-data"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, body: bytes = b"", ctype: str = "image/jpeg", headers: dict | None = None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str):
        self._send(302, b"", "text/plain", {"Location": location})

    def do_GET(self):
        srv = self.server.owner
        with srv.lock:  # requests being answered at once (a client's per-host limit is checked against it)
            srv.active += 1
            srv.peak = max(srv.peak, srv.active)
        try:
            self._route()
        finally:
            with srv.lock:
                srv.active -= 1

    def _route(self):  # noqa: C901 - a routing table
        parsed = urllib.parse.urlsplit(self.path)
        path, q = parsed.path, dict(urllib.parse.parse_qsl(parsed.query))
        srv = self.server.owner
        with srv.lock:
            srv.targets.append(self.path)
            srv.authorizations.append(self.headers.get("Authorization"))
            srv.hits[path] += 1
            nth = srv.hits[path]
        delay = float(q.get("delay", srv.latency))
        if delay:
            time.sleep(delay)
        parts = [p for p in path.split("/") if p]
        try:
            if parts[:1] == ["img"] and len(parts) == 2:
                seed, ext = parts[1].rsplit(".", 1)
                fmt = "PNG" if ext == "png" else "JPEG"
                body = image_bytes(int(seed), fmt, int(q.get("w", DEFAULT_SIZE[0])), int(q.get("h", DEFAULT_SIZE[1])),
                                   int(q.get("q", 90)))
                return self._send(200, body, "image/png" if fmt == "PNG" else "image/jpeg")
            if parts[:1] == ["plain"]:
                return self._send(200, image_bytes(int(parts[1].split(".")[0])), "text/plain")
            if parts[:1] == ["country"] and len(parts) == 3:
                return self._send(200, image_bytes(int(parts[2].split(".")[0])))
            if parts[:1] == ["dup"]:
                return self._send(200, image_bytes(424242))
            if parts[:1] == ["variant"] and len(parts) == 3:
                return self._send(200, variant_bytes(int(parts[1]), parts[2].split(".")[0]))
            if path == "/404":
                return self._send(404, b"not found", "text/plain")
            if parts[:1] in (["flaky429"], ["flaky500"]):
                if nth <= int(q.get("fails", 1)):
                    if parts[0] == "flaky429":
                        return self._send(429, b"slow down", "text/plain", {"Retry-After": q.get("after", "1")})
                    return self._send(500, b"oops", "text/plain")
                return self._send(200, image_bytes(hash_seed(path)))
            if path == "/always503":
                extra = {"Retry-After": q["after"]} if "after" in q else {}
                return self._send(503, b"unavailable", "text/plain", extra)
            if path == "/slow":
                self.send_response(200)
                self.send_header("Content-Type", "image/jpeg")
                self.send_header("Content-Length", "100000")
                self.end_headers()
                self.wfile.write(image_bytes(1)[:100])
                self.wfile.flush()
                time.sleep(float(q.get("s", 3)))
                self.close_connection = True
                return
            if path in ("/big", "/biglen"):
                n = int(q.get("n", 25_000_000))
                self.send_response(200)
                self.send_header("Content-Type", "image/jpeg")
                if path == "/biglen":
                    self.send_header("Content-Length", str(n))
                else:
                    self.send_header("Connection", "close")
                self.end_headers()
                head = image_bytes(1)
                self.wfile.write(head[:1000])
                sent, block = 1000, b"\x00" * 65536
                try:
                    while sent < n:
                        chunk = block[: n - sent]
                        self.wfile.write(chunk)
                        sent += len(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True
                return
            if path == "/html":
                return self._send(200, HTML, "text/html; charset=utf-8")
            if path == "/html-as-jpeg":
                return self._send(200, HTML, "image/jpeg")
            if path == "/svg":
                return self._send(200, SVG, "image/svg+xml")
            if path == "/truncated.jpg":
                body = image_bytes(3)
                return self._send(200, body[: int(len(body) * 0.6)])
            if path == "/bomb.png":
                return self._send(200, bomb_png(), "image/png")
            if path == "/noai.jpg":
                return self._send(200, image_bytes(4), headers={"X-Robots-Tag": "noai"})
            if path == "/noimageai.jpg":
                return self._send(200, image_bytes(5), headers={"X-Robots-Tag": "googlebot: noindex, noimageai"})
            if path == "/tiny.png":
                return self._send(200, image_bytes(6, "PNG", 16, 16), "image/png")
            if path == "/redirect":
                return self._redirect(q.get("to", "/img/1.jpg"))
            if path == "/redirect-metadata":
                return self._redirect(METADATA_URL)
            if parts[:1] == ["slowchain"] and len(parts) >= 2:
                left = int(parts[1])
                return self._redirect(f"/slowchain/{left - 1}?delay={delay}" if left > 0 else "/img/8.jpg")
            if parts[:1] in (["gzip"], ["deflate"]) and parts[1:] == ["bomb"]:
                return self._send(200, encoded_zeros(int(q.get("n", 64 << 20)), parts[0]), "image/png",
                                  {"Content-Encoding": parts[0]})
            if path == "/gzip/img.jpg":
                return self._send(200, gzip.compress(image_bytes(9)), "image/jpeg", {"Content-Encoding": "gzip"})
            if path == "/encoding/br":
                return self._send(200, b"\x1b\x00\x00", "image/jpeg", {"Content-Encoding": "br"})
            if path == "/tall.png":
                return self._send(200, tall_png(), "image/png")
            if parts[:1] == ["signed"] and len(parts) == 2:
                if self.path not in srv.issued:
                    return self._send(403, b"signature does not match", "text/plain")
                return self._send(200, image_bytes(int(parts[1].split(".")[0])))
            if parts[:1] == ["chain"] and len(parts) >= 2:
                left = int(parts[1])
                return self._redirect(f"/chain/{left - 1}" if left > 0 else "/img/8.jpg")
            return self._send(404, b"no such route", "text/plain")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


def hash_seed(text: str) -> int:
    """A stable seed from a string (``hash()`` is salted per process)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True
    owner: "ImageServer"


class ImageServer:
    """The trap server on ``127.0.0.1:<free port>``. ``latency`` seconds are added to every response."""

    def __init__(self, latency: float = 0.0, host: str = "127.0.0.1", port: int = 0):
        self.latency = latency
        bomb_png()  # built once per process (0.5 s) so that the first request for it is not slow
        self.hits: collections.Counter = collections.Counter()
        self.targets: list[str] = []
        self.authorizations: list[str | None] = []
        self.issued: set[str] = set()
        self.active = self.peak = 0  # requests being answered now, and the most at once
        self.lock = threading.Lock()
        self._httpd = _Server((host, port), _Handler)
        self._httpd.owner = self
        self.host, self.port = self._httpd.server_address[:2]
        self._thread: threading.Thread | None = None

    @property
    def host_port(self) -> str:
        """``"127.0.0.1:PORT"``, as listed in ``download.allow_hosts``."""
        return f"{self.host}:{self.port}"

    def url(self, path: str) -> str:
        return f"http://{self.host_port}{path if path.startswith('/') else '/' + path}"

    def signed(self, path: str, *, signing_key: str = "image-server", **params: str) -> str:
        """A signed URL for ``path`` (``/signed/<seed>.jpg``): ``params`` then a ``token`` (an HMAC over them
        with ``signing_key``, base64 with its ``+``, ``/`` and ``=`` percent-encoded as cloud signers write
        them). Only that exact request target is served; anything else under ``/signed/`` is a 403."""
        import base64
        import hmac

        query = "&".join(f"{k}={v}" for k, v in params.items())
        mac = hmac.new(signing_key.encode(), f"{path}?{query}".encode(), "sha256").digest()
        token = urllib.parse.quote(base64.b64encode(mac).decode(), safe="")
        target = f"{path}?{query + '&' if query else ''}token={token}"
        with self.lock:
            self.issued.add(target)
        return self.url(target)

    def start(self) -> "ImageServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True, name="image-server")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "ImageServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


try:
    import pytest
except ImportError:  # pragma: no cover - used as a plain script by the benchmark
    pytest = None

if pytest is not None:
    @pytest.fixture
    def image_server():
        """A running :class:`ImageServer` (fresh hit counters); stopped after the test."""
        with ImageServer() as srv:
            yield srv


def main(argv=None) -> None:
    import argparse
    ap = argparse.ArgumentParser(description="Serve the cultura test images on 127.0.0.1.")
    ap.add_argument("--latency", type=float, default=0.0, help="seconds added to every response")
    ap.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    ap.add_argument("--warm", type=int, default=0, help="encode /img/0.jpg … /img/N-1.jpg before serving")
    args = ap.parse_args(argv)
    for seed in range(args.warm):
        image_bytes(seed)
    srv = ImageServer(latency=args.latency, port=args.port)
    print(f"PORT {srv.port}", flush=True)
    try:
        srv._httpd.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
