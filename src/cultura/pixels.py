"""Pixels the way a browser shows them: the one place cultura turns stored image bytes into pixels.

An annotator judges the picture their browser draws, so every stage that looks at pixels (the perceptual
hashes of dedup, the stored width x height, the view's thumbnails, the images embedders and judges see, the
bytes the image server hands a browser) looks at that same picture:

- EXIF orientation is applied (:func:`PIL.ImageOps.exif_transpose`): a photo stored sideways with
  orientation 6 is upright, and its size is the displayed one (:func:`displayed_size`);
- every mode becomes 8-bit: 16-bit grey (``I;16``) is scaled by its 16-bit range (a browser keeps the high
  byte), never clipped at 255 (Pillow's ``convert("L")`` of ``I;16`` turns a photo white); 32-bit integer and
  float grey by the range their values occupy (:func:`eight_bit`); CMYK, YCbCr, CIELab, bilevel and palette
  images are converted to RGB (no ICC profile is applied);
- transparency (an alpha channel, a palette's or a colour's ``tRNS``) is drawn over white, the background of
  a page, unless the caller keeps it (``mode="RGBA"``).

Blobs stay the original bytes (their sha256 is their identity); only decoded pixels change. :data:`VERSION`
names this definition: it is part of the perceptual hashes' definition (:mod:`cultura.curate.hashing`).

Formats: :data:`ALLOWED_FORMATS` are the formats cultura accepts from the web and from folders (no exotic
decoder ever sees outside data), :data:`SUFFIXES` their file suffixes; :data:`BROWSER_FORMATS` are shown by
every browser as they are, the others (TIFF, AVIF) are served converted (:func:`browser_bytes`). A file that
starts like an allowed format but cannot be read is damaged, and :func:`damage` says how.
"""
from __future__ import annotations

import functools
import io
from pathlib import Path

import numpy as np
from PIL import Image, ImageCms, ImageOps, features

#: Names the decode below; part of :data:`cultura.curate.hashing.HASH_VERSION`.
VERSION = "browser1"

#: Pillow formats accepted from outside. AVIF only where this Pillow decodes it (a Pillow built with
#: libavif): elsewhere an AVIF file is refused at download with a reason saying so (:func:`undecodable`).
ALLOWED_FORMATS: tuple[str, ...] = ("JPEG", "PNG", "GIF", "WEBP", "BMP", "TIFF") + (
    ("AVIF",) if features.check("avif") else ())
#: The formats every browser draws as they are; the image server converts the others (TIFF, AVIF).
BROWSER_FORMATS = frozenset({"JPEG", "PNG", "GIF", "WEBP", "BMP"})
_FORMAT_SUFFIXES = {"JPEG": (".jpg", ".jpeg", ".jpe", ".jfif"), "PNG": (".png",), "GIF": (".gif",),
                    "WEBP": (".webp",), "BMP": (".bmp",), "TIFF": (".tif", ".tiff"), "AVIF": (".avif",)}
#: File suffix (lower case) -> Pillow format, for every format cultura takes (the ``folder:`` provider takes
#: these files; AVIF too where this Pillow cannot decode it: the downloader then refuses it with that reason).
SUFFIXES: dict[str, str] = {s: f for f, suffixes in _FORMAT_SUFFIXES.items() for s in suffixes}
MIME = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif", "WEBP": "image/webp", "BMP": "image/bmp",
        "TIFF": "image/tiff", "AVIF": "image/avif"}
#: The formats OpenAI-compatible vision models take as they are (:func:`browser_bytes` for a model).
MODEL_FORMATS = frozenset({"JPEG", "PNG", "GIF", "WEBP"})
#: JPEG quality of the images converted for a browser (:func:`browser_bytes`).
BROWSER_QUALITY = 90
#: What opening or decoding a file that cannot be read raises: ``OSError`` (unidentified, truncated),
#: ``ValueError`` and ``SyntaxError`` (a format plugin's parser on a malformed header). Pillow's
#: ``DecompressionBombError`` (far more pixels than its limit) is not among them: a caller that records it as
#: that image's failure adds it.
UNREADABLE: tuple[type[Exception], ...] = (OSError, ValueError, SyntaxError)

_ORIENTATION = 0x0112
_SWAPPED = frozenset({5, 6, 7, 8})  # orientations that turn the picture by 90 degrees
_ALPHA_MODES = frozenset({"RGBA", "LA", "PA", "RGBa", "La"})
_WIDE_MODES = frozenset({"I;16", "I;16L", "I;16B", "I;16N", "I", "F"})
_WHITE = (255, 255, 255)


# ---------------------------------------------------------------------------------------------- geometry
def orientation(im: Image.Image) -> int:
    """The EXIF orientation of an opened image (1 when absent or unreadable). A PNG whose ``eXIf`` chunk
    follows its pixels is decoded to find it: call this after the pixel-count checks."""
    try:
        value = im.getexif().get(_ORIENTATION, 1)
    except Exception:  # noqa: BLE001 - malformed EXIF is common on the web: the picture is shown unturned
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def displayed_size(size: tuple[int, int], turn: int) -> tuple[int, int]:
    """``size`` (width, height) of the stored pixels as shown with EXIF orientation ``turn``."""
    w, h = size
    return (h, w) if turn in _SWAPPED else (w, h)


# ---------------------------------------------------------------------------------------------- pixels
def has_alpha(im: Image.Image) -> bool:
    """Whether a browser would see through some of ``im`` (an alpha channel or a ``tRNS`` colour)."""
    return im.mode in _ALPHA_MODES or (im.mode in ("P", "L", "RGB", "1") and "transparency" in im.info)


def natural_mode(im: Image.Image) -> str:
    """``L`` for a grey picture of any depth without transparency, else ``RGB``: the mode of :func:`displayed`
    that loses nothing."""
    return "L" if (im.mode == "L" or im.mode in _WIDE_MODES) and not has_alpha(im) else "RGB"


def eight_bit(values: np.ndarray, *, sixteen_bit: bool) -> np.ndarray:
    """Grey values of any depth as uint8 the way they are shown. ``sixteen_bit`` (a ``I;16`` image): scaled
    by the 16-bit range (``round(v / 257)``: what a browser shows; an 8-bit picture stored as 16 bits comes
    back exactly). Otherwise (32-bit integers, floats) by the range the values lie in: [0, 1] floats,
    [0, 255], [0, 65535], or else their own minimum to maximum."""
    if sixteen_bit:
        return ((values.astype(np.uint32) * 255 + 32895) >> 16).astype(np.uint8)
    a: np.ndarray = values.astype(np.float32)
    finite = np.isfinite(a)
    if not finite.all():
        a = np.where(finite, a, 0).astype(np.float32)
    lo, hi = (float(a.min()), float(a.max())) if a.size else (0.0, 0.0)
    if lo >= 0 and hi <= 1 and values.dtype.kind == "f":
        a *= 255
    elif lo >= 0 and hi <= 255:
        pass
    elif lo >= 0 and hi <= 65535:
        a /= 257
    else:
        a = (a - lo) * (255 / (hi - lo) if hi > lo else 0.0)
    return np.clip(np.rint(a), 0, 255).astype(np.uint8)


def displayed(im: Image.Image, mode: str = "RGB") -> Image.Image:
    """The picture a browser shows for the opened image ``im``, 8-bit ``mode``: ``RGB``, ``L`` (the grey of
    that picture) or ``RGBA`` (transparency kept). Loads ``im`` (a JPEG may be drafted first) and may return
    ``im`` itself when nothing changes: copy it before closing its file."""
    if mode not in ("RGB", "L", "RGBA"):
        raise ValueError(f"mode must be RGB, L or RGBA, not {mode!r}")
    im.load()
    if orientation(im) != 1:
        im = ImageOps.exif_transpose(im)
    if im.mode in _WIDE_MODES:
        im = Image.fromarray(eight_bit(np.asarray(im), sixteen_bit=im.mode.startswith("I;16")), "L")
    elif im.mode == "LAB":  # CIELab TIFF: Pillow converts it only through a colour transform
        im = ImageCms.applyTransform(im, _lab_to_srgb())
    if im.mode == mode:
        return im
    if has_alpha(im):
        rgba = im.convert("RGBA") if im.mode != "La" else im.convert("LA").convert("RGBA")
        if mode == "RGBA":
            return rgba
        im = Image.new("RGB", rgba.size, _WHITE)
        im.paste(rgba, mask=rgba.getchannel("A"))
        return im if mode == "RGB" else im.convert("L")
    return im.convert(mode)


@functools.cache
def _lab_to_srgb():
    return ImageCms.buildTransform(ImageCms.createProfile("LAB"), ImageCms.createProfile("sRGB"), "LAB", "RGB")


def open_displayed(src, mode: str | None = "RGB", *, draft: tuple[int, int] | None = None,
                   formats=None) -> Image.Image:
    """Open ``src`` (a path, bytes or a file object) and return its :func:`displayed` picture, loaded and
    detached from the file. ``mode``: as for :func:`displayed`, or None for :func:`natural_mode` (a grey
    picture stays grey: what the embedders get). ``draft``: a JPEG is decoded at a reduced scale still at
    least this big (DCT scaling: most of the speed of a thumbnail). ``formats``: the Pillow formats tried
    (None: any; outside data is checked by the downloader's sniffing before it is stored). Raises
    :data:`UNREADABLE` (what Pillow raises) on unreadable data."""
    if isinstance(src, (bytes, bytearray, memoryview)):
        src = io.BytesIO(bytes(src))
    with Image.open(src, formats=formats) as im:
        mode = mode or natural_mode(im)
        if draft is not None and im.format == "JPEG":
            im.draft("L" if mode == "L" else "RGB", draft)
        out = displayed(im, mode)
        return out.copy() if out is im else out


def browser_bytes(path: str | Path, *, formats=BROWSER_FORMATS, plain: bool = False) -> tuple[bytes, str]:
    """``(body, content type)`` for the image file ``path``: its own bytes when its format is among
    ``formats`` (by default those every browser draws), else its :func:`displayed` picture as JPEG (PNG,
    transparency kept, when it has some). ``plain``: the reader decodes pixels as stored (a model server's
    Pillow ignores EXIF orientation, clips 16-bit grey white and drops transparency to black), so the
    picture is converted, over white, whenever its stored pixels are not what a browser shows. Raises
    :data:`UNREADABLE` for a file that cannot be read."""
    with Image.open(path, formats=ALLOWED_FORMATS) as im:
        if im.format in formats and not (plain and _drawn_otherwise(im)):
            return Path(path).read_bytes(), MIME[im.format]
        alpha = has_alpha(im) and not plain
        out = displayed(im, "RGBA" if alpha else "RGB")
        buf = io.BytesIO()
        if alpha:
            out.save(buf, "PNG")
            return buf.getvalue(), MIME["PNG"]
        out.save(buf, "JPEG", quality=BROWSER_QUALITY)
        return buf.getvalue(), MIME["JPEG"]


def _drawn_otherwise(im: Image.Image) -> bool:
    """Whether a decoder that ignores EXIF, depth and transparency draws ``im`` otherwise than a browser.
    Decodes ``im``: a damaged file raises here rather than at the model's server."""
    im.load()
    return im.mode in _WIDE_MODES or has_alpha(im) or orientation(im) != 1


# ---------------------------------------------------------------------------------------------- damage
def signature_format(data: bytes) -> str | None:
    """The format whose signature ``data`` starts with, among those cultura allows or knows (AVIF even where
    this Pillow cannot decode it), else None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if data.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "GIF"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    if data[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        return "TIFF"
    if data[4:8] == b"ftyp" and data[8:12] in (b"avif", b"avis"):
        return "AVIF"
    if data[:2] == b"BM" and len(data) >= 26 and int.from_bytes(data[14:18], "little") in (12, 40, 52, 56, 64,
                                                                                            108, 124):
        return "BMP"
    return None


def damage(data: bytes) -> str | None:
    """Why Pillow could not identify ``data`` when it starts like a format cultura allows, as a phrase
    (``"damaged PNG: broken PNG file (bad header checksum in b'IHDR')"``); None when it does not."""
    fmt = signature_format(data)
    if fmt is None or fmt not in ALLOWED_FORMATS:
        return None
    Image.init()
    factory = Image.OPEN.get(fmt, (None, None))[0]
    try:
        if factory is not None:
            factory(io.BytesIO(data), "")
    except Exception as e:  # noqa: BLE001 - the plugin's own complaint is the most precise account
        return f"damaged {fmt}: {e or type(e).__name__}"
    return f"damaged {fmt}: Pillow cannot identify it"


def undecodable(data: bytes) -> str | None:
    """A phrase for ``data`` that starts like a format this Pillow cannot decode (AVIF without libavif), else
    None."""
    fmt = signature_format(data)
    if fmt is None or fmt in ALLOWED_FORMATS:
        return None
    return f"an {fmt} image, which this Pillow cannot decode (install a Pillow built with {fmt} support)"
