"""The header check (``download.check = "header"``): a JPEG, PNG or WebP is accepted from its header and its end
without a decode, with the same format, displayed size and sha256 the decode gives; a body whose end is missing
is refused wherever it was cut; the caps hold without a decode. What it stores stays out of the reviewed pool
until dedup has decoded it, and an image dedup cannot decode stays out for good.
(Through the downloader, the CLI and the Python API: tests/integration/curate/test_download_checking_headers_only.py.)"""
from __future__ import annotations

import dataclasses
import json
import struct

import pytest
from PIL import Image

from cultura.annotate.pool import image_exclusions
from cultura.curate import sniff
from cultura.curate.dedup import dedup_images
from cultura.curate.images import UNDECODED, UNREADABLE
from tests.fakes import real_photos
from tests.fakes.damaged_images import damaged_idat, encoded
from tests.fakes.world import decide, make_world

CAPS = dict(max_pixels=89_478_485, min_side=64, max_aspect_ratio=20.0)


@pytest.fixture(scope="module")
def pictures():
    ph = real_photos.photos()
    return [ph[n] for n in ("astronaut", "coffee", "chelsea", "china")]


def bodies(pictures) -> dict[str, bytes]:
    out = {}
    for k, im in enumerate(pictures):
        out[f"jpeg{k}"] = encoded(im, "JPEG", quality=85)
        out[f"progressive{k}"] = encoded(im, "JPEG", quality=85, progressive=True)
        out[f"png{k}"] = encoded(im, "PNG")
        out[f"webp{k}"] = encoded(im, "WEBP", quality=80)
        out[f"turned{k}"] = real_photos.turned(im, 6 + k % 3)
    return out


def refused(data: bytes, **kw) -> str:
    with pytest.raises(sniff._Failure) as e:
        sniff.sniff_image(data, decode=False, **{**CAPS, **kw})
    return e.value.reason


def test_the_header_check_agrees_with_the_decode_on_what_it_reports(pictures):
    for name, data in bodies(pictures).items():
        full = sniff.sniff_image(data, **CAPS)
        head = sniff.sniff_image(data, decode=False, **CAPS)
        assert (head.format, head.width, head.height, head.sha256) == (
            full.format, full.width, full.height, full.sha256), name
        assert full.decoded and full.phash is not None, name
        assert not head.decoded and (head.phash, head.dhash, head.phash_centre, head.phash_variants,
                                     head.phash_fine) == (None,) * 5, name


def test_a_body_cut_anywhere_is_refused(pictures):
    for name, data in bodies(pictures).items():
        for share in (0.1, 0.5, 0.9, 0.999):
            cut = data[:int(len(data) * share)]
            assert refused(cut) in ("truncated", "corrupt"), (name, share)
        # the last bytes only: the end marker itself
        assert refused(data[:-2]) in ("truncated", "corrupt"), name


@pytest.mark.parametrize("fmt", ["JPEG", "MPO"])
def test_a_jpeg_end_marker_before_the_pixels_does_not_make_a_cut_body_whole(pictures, fmt):
    """A comment (or an EXIF thumbnail) before the scan may hold FF D9: only one after the scan counts. An MPO
    (a camera's stereo pair) too, whose reader seeks back to the file's start after opening."""
    kw = {"save_all": True, "append_images": [pictures[1]]} if fmt == "MPO" else {}
    data = encoded(pictures[0], fmt, quality=85, **kw)
    comment = b"\xff\xfe" + struct.pack(">H", 2 + 6) + b"x\xff\xd9xyz"
    marked = data[:2] + comment + data[2:]
    assert sniff.sniff_image(marked, decode=False, **CAPS).sha256  # whole: accepted
    # cut inside the first picture (an MPO cut in its second one shows its first whole, decoded or not)
    for share in (0.1, 0.25):
        assert refused(marked[:int(len(marked) * share)]) == "truncated", share


def test_bytes_after_a_jpeg_end_are_allowed_as_the_decode_allows_them(pictures):
    """A motion photo is a JPEG with a video appended after its end-of-image marker."""
    data = encoded(pictures[1], "JPEG", quality=85) + b"\x00\x00\x00\x18ftypmp42" + bytes(100_000)
    head = sniff.sniff_image(data, decode=False, **CAPS)
    assert head.format == "jpeg" and head.sha256 == sniff.sniff_image(data, **CAPS).sha256


def test_the_sha256_can_be_left_to_whoever_writes_the_blob(pictures):
    """The downloader hashes where it writes the blob, in a thread: ``digest=False`` changes nothing else."""
    for name, data in bodies(pictures).items():
        head = sniff.sniff_image(data, decode=False, **CAPS)
        bare = sniff.sniff_image(data, decode=False, digest=False, **CAPS)
        assert bare.sha256 is None and dataclasses.replace(bare, sha256=head.sha256) == head, name
        assert refused(data[:-2], digest=False) == refused(data[:-2]), name


def test_a_jpeg_end_found_at_the_last_bytes_is_the_end_a_search_finds(pictures):
    """Most bodies end with their end-of-image marker, found without searching the scan: every cut of a photo,
    with a comment holding FF D9 before its scan and bytes after its end, gets the answer of the search alone."""
    data = encoded(pictures[3], "JPEG", quality=60)
    comment = b"\xff\xfe" + struct.pack(">H", 2 + 4) + b"\xff\xd9\xff\xd9"
    tails = (b"", b"\x00" * 7, b"\xff\xd9")
    for body in (data, data[:2] + comment + data[2:]):
        start = sniff.jpeg_scan_start(body)
        for tail in tails:
            for cut in [*range(0, len(body), 997), *range(len(body) - 8, len(body) + 1)]:
                part = body[:cut] + tail
                s = sniff.jpeg_scan_start(part)
                searched = ("without a complete first scan header" if s is None else
                            None if part.find(b"\xff\xd9", s) != -1 else "without its end-of-image marker")
                assert sniff.incomplete(part, "jpeg") == searched, (cut, tail)
        assert sniff.incomplete(body, "jpeg") is None and start is not None


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP"])
def test_the_caps_hold_without_a_decode(pictures, fmt):
    im = pictures[2]
    assert refused(encoded(im, fmt), max_pixels=im.width * im.height - 1) == "too_many_pixels"
    assert refused(encoded(im.resize((40, 40)), fmt)) == "too_small"
    assert refused(encoded(im.resize((2100, 100)), fmt)) == "extreme_aspect_ratio"


@pytest.mark.parametrize("fmt", ["GIF", "BMP"])
def test_formats_without_a_cheap_end_check_are_decoded_anyway(pictures, fmt):
    info = sniff.sniff_image(encoded(pictures[3].convert("RGB"), fmt), decode=False, **CAPS)
    assert info.decoded and info.phash is not None


def damaged_png(im: Image.Image) -> bytes:
    """A PNG whose chunks, CRCs and IEND are intact but whose compressed pixels are not: the header check passes
    it, a decode fails."""
    return damaged_idat(encoded(im, "PNG"))


def test_the_damaged_png_of_these_tests_passes_the_header_and_fails_the_decode(pictures):
    data = damaged_png(pictures[0])
    assert not sniff.sniff_image(data, decode=False, **CAPS).decoded
    with pytest.raises(sniff._Failure) as e:
        sniff.sniff_image(data, **CAPS)
    assert e.value.reason in ("corrupt", "truncated")


RAISED = "2026-01-02T03:04:05+00:00"


def store_undecoded(project, data: bytes, concept_id: int, country: str) -> str:
    """What the downloader stores after a header check: the image row without hashes and its open flag."""
    from tests.fakes.world import add_image

    sha = add_image(project, concept_id, country, data)
    project.db.execute("INSERT INTO image_flags (sha256, flag, status, details, created_at) VALUES (?, ?, 'open', "
                       "?, ?)", [sha, UNDECODED, json.dumps({"stage": "download"}), RAISED])
    project.db.conn.commit()
    return sha


def flag_status(db, sha: str, flag: str):
    row = db.execute("SELECT status FROM image_flags WHERE sha256 = ? AND flag = ?", [sha, flag]).fetchone()
    return row[0] if row else None


def test_an_undecoded_image_is_out_of_the_pool_until_dedup_decodes_it(project, pictures):
    world = make_world(project, concepts=("bus",), per_cell=1)
    cid, country = world["concepts"]["bus"], world["countries"][0]
    good = store_undecoded(project, encoded(pictures[0], "JPEG", quality=85), cid, country)
    bad = store_undecoded(project, damaged_png(pictures[1]), cid, country)
    out = image_exclusions(project.db)
    assert out[good] == UNDECODED and out[bad] == UNDECODED

    dedup_images(project, methods=["sha256", "phash"])
    db = project.db
    assert flag_status(db, good, UNDECODED) == "resolved" and flag_status(db, good, UNREADABLE) is None
    assert db.execute("SELECT phash IS NOT NULL AND phash_fine IS NOT NULL FROM images WHERE sha256 = ?",
                      [good]).fetchone()[0] == 1
    assert flag_status(db, bad, UNDECODED) == "resolved" and flag_status(db, bad, UNREADABLE) == "open"
    out = image_exclusions(db)
    assert good not in out and out[bad] == UNREADABLE
    # resolved as a person resolves a flag: when and why it was raised kept, who resolved it and how added
    for sha, how in ((good, "decoded"), (bad, UNREADABLE)):
        details, raised = db.execute("SELECT details, created_at FROM image_flags WHERE sha256 = ? AND flag = ?",
                                     [sha, UNDECODED]).fetchone()
        details = json.loads(details)
        assert raised == RAISED and details["stage"] == "download"
        assert (details["resolution"]["by"], details["resolution"]["resolution"]) == ("dedup", how)
        assert details["resolution"]["at"] > RAISED

    # a second dedup changes neither flag, and the unreadable image stays out
    dedup_images(project, methods=["sha256", "phash"])
    assert (flag_status(db, good, UNDECODED), flag_status(db, bad, UNREADABLE)) == ("resolved", "open")
    assert image_exclusions(db).get(bad) == UNREADABLE


def test_any_dedup_decodes_what_a_header_check_stored(project, pictures):
    """Whatever its methods: the flag tells the user to run dedup, so a dedup by sha256 alone decodes too."""
    world = make_world(project, concepts=("bus",), per_cell=1)
    sha = store_undecoded(project, encoded(pictures[2], "PNG"), world["concepts"]["bus"], world["countries"][0])
    dedup_images(project, methods=["sha256"])
    assert flag_status(project.db, sha, UNDECODED) == "resolved" and sha not in image_exclusions(project.db)


def test_annotators_never_get_an_image_whose_bytes_are_not_known_good(project, pictures):
    """For every kind of annotation, and whatever else took the image out of the pool first (the pool gives
    one reason per image)."""
    from cultura.annotate.kinds import kinds
    from cultura.annotate.push import _out_of_pool

    world = make_world(project, concepts=("bus",), per_cell=1)
    cid, country = world["concepts"]["bus"], world["countries"][0]
    undecoded = store_undecoded(project, encoded(pictures[0], "JPEG", quality=85), cid, country)
    unreadable = store_undecoded(project, damaged_png(pictures[1]), cid, country)
    dropped_too = store_undecoded(project, damaged_png(pictures[3]), cid, country)
    dedup_images(project, methods=["sha256"])  # decodes: unreadable, and the good one resolved
    store_undecoded(project, encoded(pictures[2], "WEBP"), cid, country)
    decide(project, "dedup", dropped_too, label="drop")
    assert image_exclusions(project.db)[unreadable] == UNREADABLE
    out = {k: _out_of_pool(project.db, k) for k in kinds()}
    assert out and all({unreadable, dropped_too} <= o for o in out.values()), out
    undecoded_now = {s for s, r in image_exclusions(project.db).items() if r == UNDECODED}
    assert undecoded_now and all(undecoded_now <= o for o in out.values())
    assert all(undecoded not in o for o in out.values())  # decoded by the dedup: in the pool again


def test_an_unreadable_image_is_decoded_again_after_a_person_resolves_its_flag(project, pictures):
    """After an error that has passed (a full disk): resolved by hand it is back in the pool, the next dedup
    decodes it again, and bytes still unreadable are flagged again. The CLI and the Python API, one door each."""
    import cultura
    from click.testing import CliRunner

    from cultura.cli import cli

    world = make_world(project, concepts=("bus",), per_cell=1)
    cid, country = world["concepts"]["bus"], world["countries"][0]
    bad = store_undecoded(project, damaged_png(pictures[1]), cid, country)
    dedup_images(project, methods=["sha256"])
    assert image_exclusions(project.db)[bad] == UNREADABLE
    res = CliRunner().invoke(cli, ["--project", str(project.root), "images", "flags", "--resolve", bad[:12],
                                   "--flag", "unreadable", "--reason", "disk full"])
    assert res.exit_code == 0, res.output
    assert flag_status(project.db, bad, UNREADABLE) == "resolved" and bad not in image_exclusions(project.db)
    dedup_images(project, methods=["sha256"])
    assert flag_status(project.db, bad, UNREADABLE) == "open" and image_exclusions(project.db)[bad] == UNREADABLE

    p = cultura.open(project.root)
    assert p.images.resolve_flags(bad, reason="memory", flag="unreadable")["resolved"] == 1
    with pytest.raises(cultura.CulturaError, match="dedup"):
        p.images.resolve_flags(bad, reason="x", flag="undecoded")


def test_a_blob_the_disk_cannot_give_stops_dedup_and_leaves_the_image_undecided(project, pictures):
    """A file that cannot be read says nothing about the image: dedup stops with a sentence naming the file,
    the image is not flagged unreadable (which would take it out of the pool until a person looks), and once
    the file is readable again the next dedup decodes it. Bytes that do not decode are still a verdict."""
    import cultura

    world = make_world(project, concepts=("bus",), per_cell=1)
    cid, country = world["concepts"]["bus"], world["countries"][0]
    data = encoded(pictures[0], "JPEG", quality=85)
    sha = store_undecoded(project, data, cid, country)
    path = project.blob_path(project.db.execute("SELECT path FROM images WHERE sha256 = ?", [sha]).fetchone()[0])
    path.unlink()
    path.mkdir()  # the file system gives an error for it, whoever runs the tests (root reads any mode)
    with pytest.raises(cultura.CulturaError, match=f"Cannot read {path} .*fix the file or the disk"):
        dedup_images(project, methods=["sha256"])
    assert (flag_status(project.db, sha, UNDECODED), flag_status(project.db, sha, UNREADABLE)) == ("open", None)
    path.rmdir()
    path.write_bytes(data)
    dedup_images(project, methods=["sha256"])
    assert (flag_status(project.db, sha, UNDECODED), flag_status(project.db, sha, UNREADABLE)) == ("resolved", None)
    assert sha not in image_exclusions(project.db)


def test_hashing_tells_bytes_that_do_not_decode_from_a_file_that_cannot_be_read(tmp_path, pictures):
    import cultura
    from cultura.curate import hashing

    good, bad = tmp_path / "good.jpg", tmp_path / "bad.png"
    good.write_bytes(encoded(pictures[0], "JPEG", quality=85))
    bad.write_bytes(damaged_png(pictures[1]))
    res = hashing.hash_images([good, bad, bad.read_bytes()], workers=2)
    assert set(res.errors) == {1, 2} and res.phash[0] != 0
    with pytest.raises(cultura.CulturaError, match="Cannot read .*missing.png"):
        hashing.hash_images([good, tmp_path / "missing.png"], workers=2)
