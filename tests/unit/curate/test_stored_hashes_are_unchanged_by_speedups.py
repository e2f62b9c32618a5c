"""Every stored hash of a real photograph is what it was before the decode worker was made cheaper.

The downloader's validating decode (:func:`cultura.curate.sniff.sniff_image`, run in the decode processes) and
dedup's own decode (:func:`cultura.curate.hashing.hash_images`) store pHash, dHash, the centre and variant
pHashes and the fine hashes; a speed-up must not move a single bit of them (a stored hash that changed would
split duplicates between old and new rows). ``EXPECTED`` holds, per image, a digest of the five hash strings
as the code computed them before those speed-ups, over real photographs at web sizes: JPEGs of several
qualities (reduced decode), PNGs (full decode, the resizes' reducing step), copies with a white frame (the
content box), grey, EXIF-turned and RGBA ones.
"""
from __future__ import annotations

import hashlib
import io

import numpy as np
import pytest
from cultura.curate import hashing, sniff
from PIL import Image, ImageOps

from tests.fakes import real_photos


def images() -> dict[str, bytes]:
    rng = np.random.default_rng(2026)
    pictures = list(real_photos.photos().values())
    out: dict[str, bytes] = {}
    for k, im in enumerate(real_photos.random_crops(pictures, 36, rng)):
        long = int(rng.integers(320, 2200))
        w, h = im.size
        im = im.resize((long, max(8, long * h // w)) if w >= h else (max(8, long * w // h), long),
                       Image.Resampling.LANCZOS)
        kind = k % 6
        buf = io.BytesIO()
        if kind == 0:
            im.save(buf, "PNG")
        elif kind == 1:
            im = ImageOps.expand(im, border=(im.width // 9, im.height // 7), fill="white")
            im.save(buf, "JPEG", quality=int(rng.integers(70, 96)))
        elif kind == 2:
            im.convert("L").save(buf, "JPEG", quality=85)
        elif kind == 3:
            buf.write(real_photos.turned(im, int(rng.integers(2, 9)), quality=88))
        elif kind == 4:
            rgba = im.convert("RGBA")
            rgba.putalpha(Image.linear_gradient("L").resize(im.size))
            rgba.save(buf, "PNG")
        else:
            im.save(buf, "JPEG", quality=int(rng.integers(60, 96)))
        out[f"{k:02d}-{('png', 'framed', 'grey', 'turned', 'rgba', 'jpeg')[kind]}"] = buf.getvalue()
    return out


def digest(hashes) -> str:
    return hashlib.sha256("|".join(str(h) for h in hashes).encode()).hexdigest()[:16]


def sniffed(data: bytes) -> str:
    info = sniff.sniff_image(data, max_pixels=50_000_000, min_side=1)
    return digest((info.phash, info.dhash, info.phash_centre, info.phash_variants, info.phash_fine))


def hashed(datas: list[bytes]) -> list[str]:
    from cultura.curate import confirm
    res = hashing.hash_images(datas, workers=1)
    assert not res.errors
    return [digest((p, d, c, v, f)) for p, d, c, v, f in zip(
        hashing.to_hex(res.phash), hashing.to_hex(res.dhash), hashing.to_hex(res.phash_centre),
        hashing.variants_to_hex(res.phash_variants), confirm.to_hex(res.fine))]


EXPECTED = {
    "00-png": "828d5bd683b121e3",
    "01-framed": "c83deb6da2d54205",
    "02-grey": "0293e07a77305523",
    "03-turned": "d6a132e081ce20e2",
    "04-rgba": "122a85e610ae4ddb",
    "05-jpeg": "69b8d0031dc1039b",
    "06-png": "bd597811086d59e3",
    "07-framed": "e4a92936ea53f8b1",
    "08-grey": "91783d69039ceca6",
    "09-turned": "d37dd5b9d4146c5e",
    "10-rgba": "849dc482e46cbcb5",
    "11-jpeg": "97b75830b95b1331",
    "12-png": "6d965b490a011fa1",
    "13-framed": "96ecf75d051aa9ec",
    "14-grey": "66c5aa4ce7aa7a20",
    "15-turned": "f90c2f053e119786",
    "16-rgba": "18b2218e637deaab",
    "17-jpeg": "19eacb06671739b2",
    "18-png": "98ae8eb2688d8a8b",
    "19-framed": "e1df155d7f8176a9",
    "20-grey": "b260808ad5c5a276",
    "21-turned": "a05c101c8deb08cf",
    "22-rgba": "2e0a327640b94b4d",
    "23-jpeg": "459b3e6103859432",
    "24-png": "25b86caa86f21a8d",
    "25-framed": "d8802f37252b6f71",
    "26-grey": "49f5fda5a54b7895",
    "27-turned": "a17e3e0152b6060f",
    "28-rgba": "21330fd471784d09",
    "29-jpeg": "fa4671c45e3ddc69",
    "30-png": "6f5435297741a109",
    "31-framed": "0277df5b93a36fcd",
    "32-grey": "0643add34b687f26",
    "33-turned": "db1d73b6deb3d697",
    "34-rgba": "c65be8e031add4ef",
    "35-jpeg": "8a0f8185138fbbea",
}


@pytest.fixture(scope="module")
def photographs() -> dict[str, bytes]:
    return images()


def test_the_downloaders_decode_stores_the_same_hashes_as_before(photographs):
    assert {name: sniffed(data) for name, data in photographs.items()} == EXPECTED


def test_dedups_decode_gives_the_same_hashes_as_the_downloaders(photographs):
    assert dict(zip(photographs, hashed(list(photographs.values())))) == EXPECTED


def test_the_decode_processes_store_the_same_hashes_as_before(photographs):
    """Through the downloader's own decode processes (one BLAS thread each, the body sent as raw bytes)."""
    import asyncio

    from cultura.curate.decode_workers import decode_workers

    async def run() -> dict[str, str]:
        async with decode_workers(1, None, {"max_pixels": 50_000_000, "min_side": 1}) as pool:
            out = {}
            for name, data in photographs.items():
                info, _ = await pool.validate(data, "image/jpeg")
                out[name] = digest((info.phash, info.dhash, info.phash_centre, info.phash_variants,
                                    info.phash_fine))
            return out

    assert asyncio.run(run()) == EXPECTED
