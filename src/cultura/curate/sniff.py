"""Sniffing: is a body an image the downloader accepts, and its hashes — the validating decode.

Content is trusted from its bytes, never from ``Content-Type``: :func:`sniff_image` opens the bytes with
Pillow restricted to :data:`ALLOWED_FORMATS` (no exotic decoder ever sees web data) and refuses HTML, SVG,
non-images, truncated or corrupt files (a file that starts like an allowed format but cannot be read is
``corrupt``, "damaged PNG: …", never "not an image"), decompression bombs (more than ``max_pixels``), images
whose shorter side is below ``min_side`` or whose aspect ratio is extreme, each with a reason of
:data:`cultura.curate.download.REASONS`. The one decode also gives the perceptual hashes
(:func:`cultura.curate.hashing.all_hashes_of_decoded`), the displayed size (EXIF orientation applied:
:mod:`cultura.pixels`) and the SHA-256. It is CPU work: the downloader runs it in its decode processes
(:mod:`.decode_workers`), or in a thread for a small download and for
:func:`cultura.curate.download.fetch_image`.

``decode=False`` is the header check (``download.check = "header"``): a JPEG, PNG or WebP is opened but not
decoded. The format, the caps and the displayed size come from its header; a body whose format's end is
missing (:func:`incomplete`) is ``truncated``. No hashes are computed, and :attr:`ImageInfo.decoded` is False.
Dedup decodes and hashes the image later, and marks an image it cannot decode ``unreadable``. Other formats
are rare on the web and have no such cheap end check, so they are decoded as in the default mode.
"""
from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass

from PIL import Image, ImageFile, UnidentifiedImageError

from .. import pixels
from . import hashing

#: Pillow formats accepted (others are never tried: no EPS/ghostscript, no exotic decoders on web data):
#: :data:`cultura.pixels.ALLOWED_FORMATS`, AVIF where this Pillow decodes it.
ALLOWED_FORMATS = pixels.ALLOWED_FORMATS

_HTML_MARKERS = (b"<!doctype html", b"<html", b"<head", b"<body", b"<meta", b"<title", b"<script")


@dataclass
class ImageInfo:
    """What sniffing learnt about valid image bytes."""
    format: str      # Pillow format, lower case ("jpeg", "png", …)
    width: int       # as displayed: EXIF orientation applied
    height: int
    sha256: str | None                # None only from ``sniff_image(..., digest=False)``
    phash: str | None = None          # perceptual hashes from the validating decode (curate/hashing.py)
    dhash: str | None = None
    phash_centre: str | None = None
    phash_variants: str | None = None
    phash_fine: str | None = None     # the fine hashes a duplicate pair is confirmed with (curate/confirm.py)
    decoded: bool = True              # False: the header was checked, the pixels were not (``decode=False``)


#: The perceptual hashes of :class:`ImageInfo`, named as the ``images`` columns that store them
HASH_FIELDS = ("phash", "dhash", "phash_centre", "phash_variants", "phash_fine")

#: Formats the header check (``decode=False``) leaves undecoded: those whose end can be found cheaply.
HEADER_ONLY_FORMATS = frozenset({"jpeg", "mpo", "png", "webp"})
_PNG_END = b"\x00\x00\x00\x00IEND\xaeB`\x82"  # the IEND chunk: length 0, type, CRC


class _Failure(Exception):
    def __init__(self, reason: str, detail: str, *, http_status=None, content_type=None, nbytes=None,
                 retryable: bool = False, retry_after: float | None = None):
        super().__init__(detail)
        self.reason, self.detail = reason, detail
        self.http_status, self.content_type, self.nbytes = http_status, content_type, nbytes
        self.retryable, self.retry_after = retryable, retry_after


def header_only(data: bytes) -> bool:
    """Whether the header check (``decode=False``) of ``data`` is a header check only: its signature is one of
    :data:`HEADER_ONLY_FORMATS` (a body of another kind, or not an image, may cost a decode or a refusal's
    probing)."""
    return (pixels.signature_format(data) or "").lower() in HEADER_ONLY_FORMATS


def jpeg_scan_start(data: bytes) -> int | None:
    """Where a JPEG's first scan's entropy-coded data starts (after its SOS segment), walking the segments
    from SOI; None when the bytes end or stop being segments first. (Pillow's file position after opening
    cannot be used: an MPO reader seeks back to the start.)"""
    i, n = 2, len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte before a marker
            i += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
            i += 2
            continue
        end = i + 2 + int.from_bytes(data[i + 2:i + 4], "big")
        if marker == 0xDA:
            return end if end <= n else None
        i = end
    return None


def incomplete(data: bytes, fmt: str) -> str | None:
    """What is missing from the end of the bytes of an image of format ``fmt`` (one of
    :data:`HEADER_ONLY_FORMATS`), as a phrase, or None when its end is there: a JPEG's end-of-image marker after
    its first scan (entropy-coded data never holds ``FF D9``; trailing bytes after it, a motion photo's video,
    are allowed), a PNG's ``IEND`` chunk. (A WebP shorter than its RIFF header declares is refused as
    ``truncated`` before Pillow opens it, in both modes.)"""
    if fmt in ("jpeg", "mpo"):
        start = jpeg_scan_start(data)
        if start is None:
            return "without a complete first scan header"
        if data.endswith(b"\xff\xd9") and start <= len(data) - 2:  # the usual end: no search through the scan
            return None
        return None if data.find(b"\xff\xd9", start) != -1 else "without its end-of-image marker"
    if fmt == "png":
        return None if data.rfind(_PNG_END) != -1 else "without its IEND chunk"
    return None  # a WebP: one shorter than its RIFF header declares is refused before it is opened


def validate_image(data: bytes, *, max_pixels: int, min_side: int = 1) -> ImageInfo:
    """:func:`sniff_image` for callers outside the downloader (imports): the same checks (allowed formats,
    pixel cap, truncation), raising ``ValueError("not a readable image (<reason>: <detail>)")``."""
    try:
        return sniff_image(data, max_pixels=max_pixels, min_side=min_side)
    except _Failure as e:
        raise ValueError(f"not a readable image ({e.reason}: {e.detail})") from None


def sniff_image(data: bytes, *, max_pixels: int, min_side: int, content_type: str | None = None,
                max_aspect_ratio: float | None = None, decode: bool = True, digest: bool = True) -> ImageInfo:
    """Validate image bytes (CPU work: call it in a thread). Raises ``_Failure`` with a reason of
    :data:`REASONS` (html, svg, not_image, too_many_pixels, too_small, truncated, corrupt). ``decode=False``:
    the header check of the module doc (no decode, no hashes, for :data:`HEADER_ONLY_FORMATS`); with
    ``digest=False`` as well, its ``sha256`` is left to the caller (None), who computes it where it writes the
    blob (the downloader: in a thread, off the event loop)."""

    n = len(data)
    if n == 0:
        raise _Failure("not_image", "empty body", nbytes=0)
    head = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n\x00").lower()
    ctype = (content_type or "").lower()
    if head.startswith(b"<"):
        if b"<svg" in head:
            raise _Failure("svg", "the body is SVG markup", nbytes=n)
        if any(m in head for m in _HTML_MARKERS):
            raise _Failure("html", "the body is an HTML page", nbytes=n)
        raise _Failure("not_image", "the body is text markup, not an image", nbytes=n)
    declared = int.from_bytes(data[4:8], "little") + 8
    if pixels.signature_format(data) == "WEBP" and n < declared:
        # Pillow cannot open a cut WebP at all ("could not create decoder object"): say what is wrong with it
        raise _Failure("truncated", f"WEBP of {n} bytes where its header declares {declared}", nbytes=n)
    try:
        im = Image.open(io.BytesIO(data), formats=ALLOWED_FORMATS)
    except Image.DecompressionBombError as e:
        raise _Failure("too_many_pixels", str(e), nbytes=n) from None
    except UnidentifiedImageError:
        if "svg" in ctype:
            raise _Failure("svg", f"not a raster image (served as {ctype})", nbytes=n) from None
        if "html" in ctype:
            raise _Failure("html", f"not an image (served as {ctype})", nbytes=n) from None
        damaged = pixels.damage(data)  # an allowed format, damaged: not "not an image"
        if damaged is not None:
            raise _Failure("corrupt", damaged, nbytes=n) from None
        raise _Failure("not_image", pixels.undecodable(data) or "not an image in an allowed format "
                       f"({', '.join(ALLOWED_FORMATS)})", nbytes=n) from None
    except (EOFError, OSError, SyntaxError, ValueError) as e:
        fmt = pixels.signature_format(data)
        raise _Failure("truncated" if isinstance(e, EOFError) else "corrupt",
                       f"damaged {fmt}: cannot read the image header: {e}" if fmt else
                       f"cannot read the image header: {e}", nbytes=n) from None
    with im:
        fmt = (im.format or "").lower()
        w, h = im.size
        if w * h > max_pixels:
            raise _Failure("too_many_pixels", f"{w}x{h} = {w * h} pixels > max_pixels {max_pixels}", nbytes=n)
        if min(w, h) < min_side:
            raise _Failure("too_small", f"{w}x{h}: shorter side below min_side {min_side}", nbytes=n)
        if max_aspect_ratio and max(w, h) > max_aspect_ratio * max(min(w, h), 1):
            raise _Failure("extreme_aspect_ratio", f"{w}x{h}: aspect ratio {max(w, h) / max(min(w, h), 1):.0f}:1 "
                           f"> max_aspect_ratio {max_aspect_ratio:g}", nbytes=n)
        if not decode and fmt in HEADER_ONLY_FORMATS:
            missing = incomplete(data, fmt)
            if missing:
                raise _Failure("truncated", f"{fmt.upper()} {missing}", nbytes=n)
            # a PNG's eXIf chunk may follow its pixels, and getexif would decode them to find it: only an
            # orientation the header holds is applied here (dedup stores the displayed size when it decodes)
            turn = pixels.orientation(im) if fmt in ("jpeg", "mpo") or "exif" in im.info else 1
            w, h = pixels.displayed_size((w, h), turn)
            return ImageInfo(format="jpeg" if fmt == "mpo" else fmt, width=w, height=h,
                             sha256=hashlib.sha256(data).hexdigest() if digest else None, decoded=False)
        try:
            hashing.prepare_decode(im)  # JPEG: the stream is still fully entropy-decoded, at reduced scale
            im.load()
        except Image.DecompressionBombError as e:
            raise _Failure("too_many_pixels", str(e), nbytes=n) from None
        except (EOFError, OSError) as e:
            truncated = isinstance(e, EOFError) or "truncated" in str(e).lower()
            raise _Failure("truncated" if truncated else "corrupt", f"damaged {fmt.upper()}: decode failed: {e}",
                           nbytes=n) from None
        except Exception as e:  # Pillow raises many types on malformed data: this is a data verdict
            raise _Failure("corrupt", f"damaged {fmt.upper()}: decode failed: {type(e).__name__}: {e}",
                           nbytes=n) from None
        w, h = pixels.displayed_size((w, h), pixels.orientation(im))  # read after the pixel checks: may decode
        try:
            hashes = hashing.all_hashes_of_decoded(im)  # decode once: dedup decodes nothing
        except Exception:  # noqa: BLE001 - a mode the hashes cannot use: dedup hashes it later
            hashes = (None, None, None, None, None)
    if ImageFile.LOAD_TRUNCATED_IMAGES and fmt in ("jpeg", "mpo") and b"\xff\xd9" not in data[-1024:]:
        raise _Failure("truncated", "JPEG without end-of-image marker", nbytes=n)
    if fmt == "mpo":
        fmt = "jpeg"
    return ImageInfo(format=fmt, width=w, height=h, sha256=hashlib.sha256(data).hexdigest(),
                     phash=hashes[0], dhash=hashes[1], phash_centre=hashes[2],
                     phash_variants=hashes[3], phash_fine=hashes[4])
