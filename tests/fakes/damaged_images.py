"""Image bodies damaged the ways a web crawl meets them, built from real encodings, for the tests of the
downloader's header check (tests/integration/curate/test_download_checking_headers_only.py).

Each builder takes the bytes of a valid image and returns a copy whose damage is exactly one thing, so a test
can tell which check caught it:

- :func:`damaged_idat`: a PNG whose first ``IDAT`` chunk holds a zlib stream with a bad header, its CRC
  recomputed: the chunk structure and ``IEND`` are intact, so the header opens and the end marker is there,
  but the pixels cannot be decompressed;
- :func:`without_iend`: a PNG with every ``IDAT`` but no ``IEND`` chunk (a transfer cut just before the end);
- :func:`cut`: the first share of the bytes (a JPEG cut in half has no end-of-image marker);
- :func:`webp_with_wrong_riff_size`: a WebP whose RIFF size field says more bytes than the body holds;
- :func:`png_claiming` and :func:`jpeg_claiming`: a small picture whose header claims ``width x height``
  (the PNG's ``IHDR``, the JPEG's ``SOF`` frame): a decode would fail or read garbage, a header check sees
  only the size.
"""
from __future__ import annotations

import io
import struct
import zlib

from PIL import Image

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def encoded(im: Image.Image, fmt: str, **kw) -> bytes:
    """``im`` saved as ``fmt`` (Pillow's name: ``"PNG"``, ``"GIF"``, ``"WEBP"``, ``"JPEG"``)."""
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def png_chunk(tag: bytes, data: bytes) -> bytes:
    """One PNG chunk: length, tag, data and the CRC over tag and data."""
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


def png_chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    """``[(tag, data), …]`` of a PNG, in order."""
    if not png.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG")
    out, pos = [], len(PNG_SIGNATURE)
    while pos + 8 <= len(png):
        n = struct.unpack(">I", png[pos:pos + 4])[0]
        out.append((png[pos + 4:pos + 8], png[pos + 8:pos + 8 + n]))
        pos += 12 + n
    return out


def png_from_chunks(chunks: list[tuple[bytes, bytes]]) -> bytes:
    return PNG_SIGNATURE + b"".join(png_chunk(tag, data) for tag, data in chunks)


def damaged_idat(png: bytes) -> bytes:
    """``png`` with its first ``IDAT``'s zlib header made invalid (``78 00``: the header check fails), the
    chunk's CRC recomputed: a structurally whole PNG whose pixels cannot be decompressed."""
    chunks = png_chunks(png)
    i = next(k for k, (tag, _) in enumerate(chunks) if tag == b"IDAT")
    chunks[i] = (b"IDAT", b"\x78\x00" + chunks[i][1][2:])
    return png_from_chunks(chunks)


def without_iend(png: bytes) -> bytes:
    """``png`` without its ``IEND`` chunk (every pixel chunk kept)."""
    return png_from_chunks([(tag, data) for tag, data in png_chunks(png) if tag != b"IEND"])


def cut(data: bytes, share: float = 0.5) -> bytes:
    """The first ``share`` of ``data``."""
    return data[:int(len(data) * share)]


def webp_with_wrong_riff_size(webp: bytes, extra: int = 4096) -> bytes:
    """``webp`` whose RIFF size field claims ``extra`` more bytes than the body holds (the bytes unchanged)."""
    if webp[:4] != b"RIFF" or webp[8:12] != b"WEBP":
        raise ValueError("not a WebP")
    size = struct.unpack("<I", webp[4:8])[0]
    return webp[:4] + struct.pack("<I", size + extra) + webp[8:]


def png_claiming(width: int, height: int) -> bytes:
    """A PNG whose ``IHDR`` says ``width x height`` RGB but whose ``IDAT`` holds one row of pixels: valid chunk
    structure and ``IEND``, a few hundred bytes."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return png_from_chunks([(b"IHDR", ihdr), (b"IDAT", zlib.compress(b"\x00" + b"\x80" * 3 * width)),
                            (b"IEND", b"")])


def jpeg_claiming(jpeg: bytes, width: int, height: int) -> bytes:
    """``jpeg`` with the size in its baseline or progressive ``SOF`` frame header replaced (scan data and the
    end-of-image marker untouched)."""
    pos = 2
    while pos + 4 <= len(jpeg):
        if jpeg[pos] != 0xFF:
            raise ValueError(f"no JPEG marker at byte {pos}")
        marker = jpeg[pos + 1]
        length = struct.unpack(">H", jpeg[pos + 2:pos + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            # SOF: length(2) precision(1) height(2) width(2) …
            return jpeg[:pos + 5] + struct.pack(">HH", height, width) + jpeg[pos + 9:]
        pos += 2 + length
    raise ValueError("no SOF frame header")
