"""One URL's network half for the downloader (:mod:`.download`): the body's bytes, or the reason there are none.

:func:`fetch_body` follows redirects by hand (each hop checked against the address policy of :mod:`.safety`),
streams the body under the byte cap (``Content-Encoding`` decoded by :class:`_Decoder`, never more than the cap
at a time), honours ``X-Robots-Tag: noai``/``noimageai`` and retries 408/425/429/5xx, timeouts and connection
errors with exponential back-off (``Retry-After`` up to ``retry_after_max``); a certificate that does not
verify is final. ``file://`` URLs are read from disk under the same cap. What it returns is a
:class:`FetchResult` whose ``status`` is ``'fetched'`` (bytes not yet validated: :mod:`.download` does that off
the connection) or a failure with a reason of :data:`REASONS` (the stage's closed set, the validating decode's
reasons included); details are written without secrets.
"""
from __future__ import annotations

import asyncio
import contextlib
import email.utils
import os
import random
import time
import urllib.parse
import urllib.request
import zlib
from dataclasses import dataclass, field

import httpx

from ..redact import display_url, scrub
from . import safety
from .fetcher import CertificateError, ProxyRefused, within
from .sniff import _Failure

__all__ = ["REASONS", "RETRY_STATUSES", "FetchResult", "fetch_body"]

#: The closed set of failure reasons: reason -> (candidate status, meaning).
REASONS: dict[str, tuple[str, str]] = {
    "http_404": ("failed", "the server answered 404 Not Found or 410 Gone"),
    "http_status": ("failed", "the server answered another non-success status (401, 403, 400, …)"),
    "too_many_retries": ("failed", "429/5xx persisted over max_attempts, or Retry-After exceeded retry_after_max"),
    "timeout": ("failed", "connect/read timeout or total_timeout on every attempt"),
    "connection_error": ("failed", "connection refused/reset, TLS handshake or protocol error on every attempt"),
    "tls_error": ("failed", "the server's TLS certificate does not verify (unknown CA, expired, another host "
                            "name): not retried"),
    "proxy_error": ("failed", "the proxy refused the request (407: it wants credentials; 403) or could not reach "
                              "the server (502/503/504, retried)"),
    "secret_not_stored": ("failed", "the URL carries a secret (token=, key=, a password…) the project does not "
                                    "store, and the urls: file it came from cannot be read again (nothing was "
                                    "requested)"),
    "dns_error": ("failed", "the host name does not resolve"),
    "bad_url": ("failed", "not an http(s) or file URL, or no host"),
    "bad_redirect": ("failed", "a redirect without Location or to a non-http(s) URL"),
    "too_many_redirects": ("failed", "more than max_redirects redirects"),
    "too_large": ("failed", "more than max_bytes (Content-Length, or counted while streaming after decoding "
                            "gzip/deflate: a compression bomb stops at the cap)"),
    "bad_encoding": ("failed", "a Content-Encoding other than gzip/deflate/identity, or a body that does not "
                               "decode"),
    "not_image": ("failed", "the bytes are not an image in an allowed format (or the body is empty)"),
    "html": ("failed", "the body is an HTML page"),
    "svg": ("failed", "the body is an SVG (vector) image"),
    "truncated": ("failed", "the image data ends early"),
    "corrupt": ("failed", "the image cannot be decoded"),
    "too_many_pixels": ("failed", "width x height above max_pixels (decompression bomb guard)"),
    "too_small": ("failed", "shorter side below min_side"),
    "extreme_aspect_ratio": ("failed", "longer side more than max_aspect_ratio times the shorter one (a thin "
                                       "strip that passes the pixel cap but blows up model preprocessing)"),
    "file_missing": ("failed", "a file:// URL whose file does not exist or cannot be read"),
    "blocked_address": ("skipped", "the host resolves to a loopback/private/link-local/multicast/reserved "
                                   "address not listed in download.allow_hosts"),
    "robots_noai": ("skipped", "X-Robots-Tag forbids AI use (noai / noimageai)"),
}


RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504, 507, 509, 520, 521, 522, 523, 524})


@dataclass
class FetchResult:
    """The outcome for one URL. ``data`` holds the bytes when ``status == 'downloaded'``."""
    url: str
    status: str                      # downloaded | failed | skipped ('fetched': bytes not yet validated)
    reason: str | None = None        # a key of REASONS when not downloaded
    detail: str | None = None
    final_url: str | None = None
    http_status: int | None = None
    content_type: str | None = None
    nbytes: int | None = None
    sha256: str | None = None
    format: str | None = None
    width: int | None = None
    height: int | None = None
    attempts: int = 0
    redirects: int = 0
    data: bytes | None = field(default=None, repr=False)
    hashes: tuple | None = None      # (phash, dhash, phash_centre, phash_variants, phash_fine) of the decode
    decoded: bool = True             # False: only the header was checked (download.check = "header")

    @property
    def ok(self) -> bool:
        return self.status == "downloaded"


def _redact(url: str) -> str:
    """The URL as it may be written to the database or logs (no user:password, no token=/key=… value):
    :func:`cultura.redact.display_url`, secrets found by their pattern (the environment's own were removed when
    the search stored the URL)."""
    return display_url(url, secrets=())


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds, lenient about decimals, or a date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _robots_noai(headers: httpx.Headers) -> str | None:
    for value in headers.get_list("x-robots-tag"):
        for token in value.replace(";", ",").split(","):
            word = token.split(":")[-1].strip().lower()  # "googlebot: noimageai" -> "noimageai"
            if word in ("noai", "noimageai"):
                return value.strip()
    return None


async def _hop(client, url: str, settings, parsed: httpx.URL | None = None):
    """One request: returns ``("redirect", location_url)`` or ``("body", bytes, response)``. ``url`` is sent as
    written (a string keeps a signed URL's bytes; see :func:`.fetcher.origin_target`); ``parsed``, its
    ``httpx.URL``, spares the downloader's own client a second parse."""
    kw = {"parsed": parsed} if parsed is not None and getattr(client, "_cultura_safe", False) else {}
    async with client.stream("GET", url, follow_redirects=False, **kw) as resp:
        status = resp.status_code
        ctype = resp.headers.get("content-type")
        if resp.is_redirect:
            loc = resp.headers.get("location")
            if not loc:
                raise _Failure("bad_redirect", f"HTTP {status} without Location", http_status=status)
            try:
                joined = str(resp.url.join(loc))
            except (httpx.InvalidURL, ValueError) as e:
                raise _Failure("bad_redirect", f"invalid Location: {e}", http_status=status) from None
            # an absolute Location (an API sending on to a signed bucket URL) is followed as written
            return "redirect", loc.strip() if _absolute_http(loc) else joined
        if status == 407:
            raise _Failure("proxy_error", "HTTP 407: the proxy wants credentials; put them in the environment's "
                           "proxy URL (HTTP_PROXY), as user:password@ before its host", http_status=status)
        if status in RETRY_STATUSES:
            raise _Failure("too_many_retries", f"HTTP {status}", http_status=status, content_type=ctype,
                           retryable=True, retry_after=_retry_after(resp.headers.get("retry-after")))
        if status in (404, 410):
            raise _Failure("http_404", f"HTTP {status}", http_status=status, content_type=ctype)
        if not 200 <= status < 300:
            raise _Failure("http_status", f"HTTP {status}", http_status=status, content_type=ctype)
        if settings.respect_robots_tag and (tag := _robots_noai(resp.headers)):
            raise _Failure("robots_noai", f"X-Robots-Tag: {tag}", http_status=status, content_type=ctype)
        declared = resp.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > settings.max_bytes:
            raise _Failure("too_large", f"Content-Length {declared} > max_bytes {settings.max_bytes}",
                           http_status=status, content_type=ctype, nbytes=int(declared))
        decoder = _Decoder(resp.headers.get("content-encoding"), http_status=status, content_type=ctype)
        buf = bytearray()
        async for chunk in resp.aiter_raw():  # raw bytes: decoded here, never more than the cap at a time
            buf += decoder.feed(chunk, settings.max_bytes - len(buf))
            if len(buf) > settings.max_bytes:
                raise _Failure("too_large", f"more than max_bytes {settings.max_bytes} while streaming"
                               f"{' (decoded)' if decoder.stages else ''}",
                               http_status=status, content_type=ctype, nbytes=len(buf))
        buf += decoder.feed(b"", settings.max_bytes - len(buf), final=True)
        if len(buf) > settings.max_bytes:
            raise _Failure("too_large", f"more than max_bytes {settings.max_bytes} while streaming (decoded)",
                           http_status=status, content_type=ctype, nbytes=len(buf))
        return "body", bytes(buf), resp


def _absolute_http(location: str) -> bool:
    loc = location.strip()
    return loc[:7].lower() == "http://" or loc[:8].lower() == "https://"


class _Decoder:
    """Content-Encoding decoding (gzip, deflate, stacked) that never produces more than ``cap + 1`` bytes
    per call: zlib's ``max_length`` stops inflating as soon as the output passes the cap, so a compression
    bomb costs at most ``max_bytes`` of memory, not its decoded size."""

    def __init__(self, header: str | None, **kw):
        self.kw = kw
        self.stages = []
        for enc in reversed([e.strip().lower() for e in (header or "").split(",") if e.strip()]):
            if enc == "identity":
                continue
            if enc in ("gzip", "x-gzip"):
                self.stages.append([zlib.decompressobj(zlib.MAX_WBITS | 16), enc, False])
            elif enc == "deflate":  # zlib-wrapped per RFC 9110; raw deflate is tried when that fails
                self.stages.append([zlib.decompressobj(zlib.MAX_WBITS), enc, False])
            else:
                raise _Failure("bad_encoding", f"Content-Encoding {enc!r} is not supported (only gzip, deflate)",
                               **kw)

    def feed(self, data: bytes, cap: int, *, final: bool = False) -> bytes:
        """Decode ``data`` through every stage; the result is longer than ``cap`` only when over it."""
        limit = max(cap, 0) + 1
        for stage in self.stages:
            d, enc, fed = stage
            try:
                out = d.decompress(data, limit)
            except zlib.error as e:
                if enc != "deflate" or fed:
                    raise _Failure("bad_encoding", f"the {enc} body does not decode ({e})", **self.kw) from None
                stage[:] = [zlib.decompressobj(-zlib.MAX_WBITS), "raw deflate", True]  # a server sending raw deflate
                try:
                    out = stage[0].decompress(data, limit)
                except zlib.error as e2:
                    raise _Failure("bad_encoding", f"the deflate body does not decode ({e2})", **self.kw) from None
                d = stage[0]
            stage[2] = stage[2] or bool(data)
            if final and len(out) < limit and not d.unconsumed_tail:
                out += d.flush()
            data = out
            if len(data) > cap:  # over the cap already: stop decoding here
                return data
        return data


async def _attempt(client, url: str, settings, pre_check: bool, slot) -> tuple[bytes, httpx.Response, int]:
    """One attempt: follow redirects by hand (each hop checked), stream the body under the byte cap.
    ``total_timeout`` bounds the whole attempt, every redirect hop included (not the waits for a per-host
    slot)."""
    current = url
    spent = 0.0  # seconds of network time used by this attempt so far
    for hop in range(settings.max_redirects + 1):
        try:
            u = httpx.URL(current)
        except httpx.InvalidURL as e:
            raise _Failure("bad_redirect" if hop else "bad_url", f"invalid URL: {e}") from None
        if u.scheme not in ("http", "https") or not u.host:
            raise _Failure("bad_redirect" if hop else "bad_url",
                           f"{'redirect to ' if hop else ''}unsupported URL {_redact(current)!r}")
        if pre_check:  # clients not made by make_client: check here (the safe client checks on connect)
            await safety.acheck_host(u.host, u.port or (443 if u.scheme == "https" else 80),
                                     settings.allow_hosts, timeout=settings.connect_timeout)
        async with (slot(u.host) if slot else contextlib.nullcontext()):
            left = settings.total_timeout - spent
            t0 = time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                out = await within(_hop(client, current, settings, u), left)
            except (TimeoutError, asyncio.TimeoutError):
                raise _Failure("timeout", f"total_timeout {settings.total_timeout:g}s exceeded after {hop} "
                               "redirect(s)" if hop else f"total_timeout {settings.total_timeout:g}s exceeded",
                               retryable=True) from None
            except httpx.RemoteProtocolError as e:
                if "location header" in str(e).lower():  # httpx parses Location even when not following
                    raise _Failure("bad_redirect", f"malformed redirect: {e}") from None
                raise
            finally:
                spent += time.monotonic() - t0
        if out[0] == "redirect":
            current = out[1]
            continue
        return out[1], out[2], hop
    raise _Failure("too_many_redirects", f"more than {settings.max_redirects} redirects (last: "
                   f"{_redact(current)})")


def _read_file(url: str, settings) -> bytes:
    p = urllib.parse.urlsplit(url)
    if p.netloc not in ("", "localhost"):
        raise _Failure("bad_url", f"file URL with a remote host {p.netloc!r}")
    path = urllib.request.url2pathname(p.path)
    try:
        st = os.stat(path)
        if not os.path.isfile(path):
            raise _Failure("file_missing", f"{path} is not a regular file")
        if st.st_size > settings.max_bytes:
            raise _Failure("too_large", f"{st.st_size} bytes > max_bytes {settings.max_bytes}", nbytes=st.st_size)
        with open(path, "rb") as f:
            data = f.read(settings.max_bytes + 1)
    except OSError as e:
        raise _Failure("file_missing", f"cannot read {path}: {e.strerror or e}") from None
    if len(data) > settings.max_bytes:
        raise _Failure("too_large", f"more than max_bytes {settings.max_bytes}", nbytes=len(data))
    return data


def _fail(url, e: _Failure, attempts, **kw) -> FetchResult:
    # a detail may quote a URL or a server's words: what reaches the database has no secret in it
    return FetchResult(url=url, status=REASONS[e.reason][0], reason=e.reason, detail=scrub(e.detail, secrets=()),
                       http_status=e.http_status, content_type=e.content_type, nbytes=e.nbytes,
                       attempts=attempts, **kw)


async def fetch_body(client, url: str, settings, *, slot=None) -> FetchResult:
    """The network half of :func:`.download.fetch_image`: the body's bytes, not yet validated (``status``
    ``'fetched'``, ``data`` set), or the failure. The stage validates them off the connection
    (:func:`.download._validate_body`)."""
    scheme = urllib.parse.urlsplit(url).scheme.lower() if url else ""
    if scheme == "file":
        try:
            data = await asyncio.to_thread(_read_file, url, settings)
        except _Failure as e:
            return _fail(url, e, 1)
        return FetchResult(url=url, status="fetched", final_url=url, nbytes=len(data), data=data, attempts=1)
    if scheme not in ("http", "https"):
        return _fail(url, _Failure("bad_url", f"unsupported URL scheme {scheme or '(none)'!r}"), 0)
    pre_check = not getattr(client, "_cultura_safe", False)
    attempts = 0
    while True:
        attempts += 1
        try:
            data, resp, hops = await _attempt(client, url, settings, pre_check, slot)
            break
        except _Failure as e:
            failure = e
        except safety.BlockedAddress as e:
            return _fail(url, _Failure("blocked_address", str(e)), attempts)
        except safety.DNSError as e:
            return _fail(url, _Failure("dns_error", str(e)), attempts)
        except CertificateError as e:  # the same certificate on the next attempt: no retry
            return _fail(url, _Failure("tls_error", str(e)), attempts)
        except ProxyRefused as e:
            failure = _Failure("proxy_error", str(e), retryable=e.status in RETRY_STATUSES)
        except (httpx.TimeoutException, asyncio.TimeoutError) as e:
            failure = _Failure("timeout", f"{type(e).__name__}: {e}" if str(e) else type(e).__name__,
                               retryable=True)
        except httpx.InvalidURL as e:
            return _fail(url, _Failure("bad_url", f"invalid URL: {e}"), attempts)
        except httpx.HTTPError as e:  # transport and protocol errors
            failure = _Failure("connection_error", f"{type(e).__name__}: {e}", retryable=True)
        if not failure.retryable:
            return _fail(url, failure, attempts)
        if attempts >= settings.max_attempts:
            failure.detail = f"{failure.detail} (after {attempts} attempts)"
            return _fail(url, failure, attempts)
        wait = failure.retry_after
        if wait is not None and wait > settings.retry_after_max:
            failure.reason = "too_many_retries"
            failure.detail = (f"{failure.detail}: Retry-After {wait:.0f}s exceeds retry_after_max "
                              f"{settings.retry_after_max:.0f}s")
            return _fail(url, failure, attempts)
        if wait is None:
            wait = min(settings.backoff_base * 2 ** (attempts - 1) * (0.5 + random.random()),
                       settings.retry_after_max)
        await asyncio.sleep(wait)
    return FetchResult(url=url, status="fetched", final_url=_redact(str(resp.url)), http_status=resp.status_code,
                       content_type=resp.headers.get("content-type"), nbytes=len(data), data=data,
                       attempts=attempts, redirects=hops)

