"""Every image is decoded the way a browser shows it (cultura/pixels.py): EXIF orientation applied, 16-bit and
other modes turned into the 8-bit picture, transparency over white; ``folder:`` takes every allowed format
(TIFF, AVIF too), the stored size is the displayed one, a damaged file of an allowed format says so, the view's
thumbnails show the displayed picture, an old project's hashes are made again. (serve-images answering TIFF and
AVIF: tests/integration/annotate/test_image_server.py.)"""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image, ImageCms, features

from cultura import pixels
from cultura.annotate import images as image_server
from cultura.annotate.images import BLOB_RE, drawn_by_browsers
from cultura.annotate.push import check_image_urls
from cultura.cli import cli
from cultura.curate.dedup import dedup_images
from cultura.curate.importers import store_image
from cultura.curate import sniff
from cultura.curate.sniff import sniff_image
from cultura.db.blobs import blob_relpath
from cultura.errors import CulturaError
from cultura.models.embedders import embed_images_cached, get_embedder
from cultura.project import Project, init_project
from cultura.view.server import resolve
from cultura.view.thumbs import thumb_rel
from tests.fakes import real_photos
from tests.fakes.real_photos import STORED_AS, grey16, turned
from tests.unit.curate.test_dedup import Builder, clusters

pytest.importorskip("skimage.data")

AVIF = features.check("avif")


def encode(im: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def bad_crc_png(im: Image.Image) -> bytes:
    """A PNG whose header chunk's checksum is wrong (a damaged PNG, not another kind of file)."""
    data = bytearray(encode(im, "PNG"))
    data[29:33] = b"\0\0\0\0"  # IHDR's CRC: 8-byte signature, 4 length, 4 type, 13 data
    return bytes(data)


@pytest.fixture(scope="module")
def photos():
    ph = real_photos.photos()
    return {"coffee": ph["coffee"], "chelsea": ph["chelsea"], "rocket": ph["rocket"], "astronaut": ph["astronaut"],
            "china": ph["china"]}


# ------------------------------------------------------------------------------------------ the decode
def test_every_exif_orientation_shows_the_upright_picture_and_its_size(photos):
    im = photos["chelsea"]                                            # 451 x 300: a turn swaps the sides
    for o, how in STORED_AS.items():
        data = turned(im, o, "PNG")                                   # lossless: the pixels compare exactly
        shown = pixels.open_displayed(data)
        assert shown.size == im.size and np.array_equal(np.asarray(shown), np.asarray(im)), o
        assert sniff_image(data, max_pixels=10**8, min_side=1).width == im.width, o
    assert pixels.open_displayed(encode(im.transpose(STORED_AS[6]), "PNG")).size == (300, 451)  # no tag: as stored


def test_16_bit_grey_is_scaled_by_its_range_not_clipped_white(photos):
    grey = np.asarray(photos["coffee"].convert("L"))
    stored = Image.open(io.BytesIO(grey16(photos["coffee"])))
    assert stored.mode == "I;16" and np.asarray(stored.convert("L")).mean() > 250  # Pillow's own convert: white
    shown = np.asarray(pixels.open_displayed(grey16(photos["coffee"]), "L"))
    assert np.array_equal(shown, grey)                                 # exactly the 8-bit picture
    as_int = Image.fromarray(grey.astype(np.int32) * 257, "I")         # 32-bit integers holding 16-bit levels
    assert np.array_equal(np.asarray(pixels.displayed(as_int, "L")), grey)
    as_float = Image.fromarray(grey.astype(np.float32) / 255, "F")     # floats in [0, 1]
    assert np.abs(np.asarray(pixels.displayed(as_float, "L")).astype(int) - grey).max() <= 1
    wide = Image.fromarray(grey.astype(np.int32) * 1000 - 5000, "I")   # any other range: its own min to max
    got = np.asarray(pixels.displayed(wide, "L"))
    assert got.min() == 0 and got.max() == 255 and np.corrcoef(got.ravel(), grey.ravel())[0, 1] > 0.999


def test_transparency_is_drawn_over_white_and_other_modes_become_rgb(photos):
    im = photos["rocket"].resize((120, 80))
    rgba = im.convert("RGBA")
    rgba.putalpha(0)
    rgba.paste(im.crop((0, 0, 60, 80)), (0, 0))                      # left half opaque, right half see-through
    shown = np.asarray(pixels.open_displayed(encode(rgba, "PNG")))
    assert (shown[:, 60:] == 255).all() and np.array_equal(shown[:, :60], np.asarray(im)[:, :60])
    la = np.asarray(pixels.open_displayed(encode(rgba.convert("LA"), "PNG"), "L"))
    assert (la[:, 60:] == 255).all()
    pal = im.convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    pal.info["transparency"] = pal.getpixel((0, 0))
    shown = np.asarray(pixels.open_displayed(encode(pal, "PNG", transparency=pal.getpixel((0, 0)))))
    assert (shown[0, 0] == 255).all()
    assert pixels.displayed(rgba, "RGBA").mode == "RGBA"               # kept where the caller draws it itself
    cmyk = pixels.open_displayed(encode(im.convert("CMYK"), "JPEG", quality=95))
    assert cmyk.mode == "RGB" and np.abs(np.asarray(cmyk, dtype=int) - np.asarray(im, dtype=int)).mean() < 8
    to_lab = ImageCms.buildTransform(ImageCms.createProfile("sRGB"), ImageCms.createProfile("LAB"), "RGB", "LAB")
    lab = pixels.open_displayed(encode(ImageCms.applyTransform(im, to_lab), "TIFF"))  # a CIELab TIFF
    assert lab.mode == "RGB" and np.abs(np.asarray(lab, dtype=int) - np.asarray(im, dtype=int)).mean() < 2
    flat = pixels.displayed(Image.fromarray(np.full((4, 4), -7, np.int32), "I"), "L")  # one value, out of range
    assert np.asarray(flat).max() == 0


# ------------------------------------------------------------------------------------------ folder: → download
@pytest.fixture(scope="module")
def downloaded(tmp_path_factory, photos):
    """A ``folder:`` tree with every allowed format, copies a browser shows alike, and a damaged PNG, through
    ``cultura images search``, ``download``, ``dedup`` and ``view``."""
    root = tmp_path_factory.mktemp("pixels")
    tree = root / "photos" / "JP" / "street_food"
    tree.mkdir(parents=True)
    files = {"coffee.jpg": encode(photos["coffee"], "JPEG", quality=90),
             "coffee-turned.jpg": turned(photos["coffee"], 6, quality=90),
             "coffee-16bit.png": grey16(photos["coffee"]),
             "chelsea.jpg": encode(photos["chelsea"], "JPEG", quality=90),
             "chelsea.tif": encode(photos["chelsea"], "TIFF"),
             "china.jpg": encode(photos["china"], "JPEG", quality=90),
             "china-16bit.tiff": grey16(photos["china"]),
             "rocket.jpg": encode(photos["rocket"], "JPEG", quality=90),
             "astronaut.png": encode(photos["astronaut"], "PNG"),
             "damaged.png": bad_crc_png(photos["astronaut"])}
    if AVIF:
        files["rocket.avif"] = encode(photos["rocket"], "AVIF", quality=90)
    else:  # this Pillow cannot decode AVIF: a file with an AVIF signature is refused at download, saying so
        files["rocket.avif"] = b"\0\0\0\x1cftypavif\0\0\0\0avifmif1miaf" + b"\0" * 64
    for name, data in files.items():
        (tree / name).write_bytes(data)
    p = init_project(root / "proj", countries=["US", "JP"])

    def run(*args):
        r = CliRunner().invoke(cli, ["--project", str(p.root), *args, "--json"])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    out = {"search": run("images", "search", "--provider", f"folder:{root / 'photos'}"),
           "download": run("images", "download"), "dedup": run("images", "dedup"), "view": run("view")}
    rows = {r["url"].rsplit("/", 1)[-1]: r for r in p.db.query("SELECT * FROM candidates")}
    images = {r["sha256"]: r for r in p.db.query("SELECT * FROM images")}
    yield p, files, out, rows, images
    p.close()


def test_folder_takes_every_allowed_format(downloaded):
    p, files, out, rows, _ = downloaded
    assert out["search"]["rejected"] == 0 and out["search"]["results"] == len(files)
    assert set(pixels.SUFFIXES) >= {".tif", ".tiff", ".avif", ".bmp", ".webp", ".gif", ".jpeg"}
    for name in ["chelsea.tif", "china-16bit.tiff", "coffee-16bit.png", "coffee-turned.jpg"]:
        assert rows[name]["status"] == "downloaded", rows[name]
    if AVIF:
        assert rows["rocket.avif"]["status"] == "downloaded", rows["rocket.avif"]
    else:
        assert rows["rocket.avif"]["status"] == "failed" and "AVIF" in rows["rocket.avif"]["detail"]


def test_a_png_with_a_bad_checksum_is_a_damaged_png_not_a_stranger(downloaded):
    _, _, _, rows, _ = downloaded
    r = rows["damaged.png"]
    assert (r["status"], r["reason"]) == ("failed", "corrupt"), r
    assert r["detail"].startswith("damaged PNG:") and "checksum" in r["detail"], r["detail"]
    assert "not an image" not in r["detail"]


def test_avif_where_pillow_cannot_decode_it_is_refused_saying_so(monkeypatch, photos):
    """Where Pillow lacks AVIF (a build without libavif) it is not an allowed format, and an AVIF body is
    refused with a reason naming AVIF, not as an unknown file."""
    if not AVIF:
        pytest.skip("this Pillow cannot write the AVIF file to refuse")  # the folder: test covers this case
    monkeypatch.setattr(pixels, "ALLOWED_FORMATS", tuple(f for f in pixels.ALLOWED_FORMATS if f != "AVIF"))
    monkeypatch.setattr(sniff, "ALLOWED_FORMATS", pixels.ALLOWED_FORMATS)
    with pytest.raises(sniff._Failure) as e:
        sniff_image(encode(photos["rocket"], "AVIF"), max_pixels=10**8, min_side=1)
    assert e.value.reason == "not_image" and "AVIF image, which this Pillow cannot decode" in e.value.detail


def test_the_stored_size_is_the_displayed_size(downloaded, photos):
    _, _, _, rows, images = downloaded
    turned_row = images[rows["coffee-turned.jpg"]["sha256"]]
    assert (turned_row["width"], turned_row["height"]) == photos["coffee"].size == (600, 400)


def test_copies_a_browser_shows_alike_are_duplicates_and_the_others_stay_apart(downloaded):
    p, _, out, rows, _ = downloaded
    assert out["dedup"]["hash_failures"] == 0
    sha = {name: r["sha256"] for name, r in rows.items() if r["sha256"]}
    groups = [set(m) for m in clusters(p, "phash")] + [set(m) for m in clusters(p, "dhash")]
    together = {frozenset((a, b)) for g in groups for a in g for b in g if a != b}
    same = [("coffee.jpg", "coffee-turned.jpg"), ("coffee.jpg", "coffee-16bit.png"), ("chelsea.jpg", "chelsea.tif"),
            ("china.jpg", "china-16bit.tiff")] + ([("rocket.jpg", "rocket.avif")] if AVIF else [])
    assert [pair for pair in same if frozenset(sha[n] for n in pair) not in together] == []
    photo = {s: name.split(".")[0].split("-")[0] for name, s in sha.items()}
    assert all(photo[a] == photo[b] for a, b in map(tuple, together))  # the 16-bit copies were white: one cluster


def test_the_view_shows_every_format_as_the_browser_does(downloaded, photos):
    p, _, out, rows, _ = downloaded
    view = p.reports / "view"
    assert out["view"]["thumbnails_failed"] == 0

    def thumb(name):
        path = resolve(view, "/" + thumb_rel(rows[name]["sha256"]))  # the view's server answers this path
        assert path is not None, name
        with Image.open(path) as im:
            assert im.format == "JPEG"
            return np.asarray(im.convert("L"), dtype=float)

    original = thumb("coffee.jpg")
    for name in ["coffee-turned.jpg", "coffee-16bit.png"]:
        t = thumb(name)
        assert t.shape == original.shape and np.abs(t - original).mean() < 6, name  # upright, not white
    assert np.abs(thumb("chelsea.tif") - thumb("chelsea.jpg")).mean() < 6
    if AVIF:
        assert np.abs(thumb("rocket.avif") - thumb("rocket.jpg")).mean() < 6


def test_thumbnails_drawn_by_an_older_cultura_are_drawn_again(downloaded):
    p, _, _, rows, _ = downloaded
    view = p.reports / "view"
    stale = view / thumb_rel(rows["coffee-16bit.png"]["sha256"])
    Image.new("RGB", (192, 144), "white").save(stale, "JPEG")        # a 16-bit image, clipped white by then
    (view / "thumbs" / ".version").unlink()
    r = CliRunner().invoke(cli, ["--project", str(p.root), "view", "--json"])
    assert r.exit_code == 0, r.output
    with Image.open(stale) as im:
        assert np.asarray(im.convert("L")).mean() < 200
    again = CliRunner().invoke(cli, ["--project", str(p.root), "view", "--json"])
    assert json.loads(again.stdout)["thumbnails_made"] == 0


# ------------------------------------------------------------------------------------------ an older project
def test_an_older_projects_hashes_and_sizes_are_made_again_by_the_next_dedup(tmp_path, photos):
    """Hashes stored before the decode followed the browser (migration m011) are cleared on open, so the next
    dedup hashes every image from the displayed picture and stores its displayed size."""
    p = init_project(tmp_path / "p", countries=["US", "JP"])
    b = Builder(p)
    original, copy = (b.add(d, ("photo", "US")) for d in (encode(photos["coffee"], "JPEG", quality=90),
                                                          turned(photos["coffee"], 6, quality=90)))
    assert dedup_clusters(p) == {frozenset((original, copy))}
    # as an older cultura left the copy: its hashes of the sideways pixels, its stored (sideways) size
    p.db.execute("UPDATE images SET phash = '0123456789abcdef', width = 400, height = 600 WHERE sha256 = ?", [copy])
    p.db.execute("DELETE FROM _cultura_migrations WHERE name = 'm011_hashes_of_the_displayed_picture'")
    p.close()
    p = Project(p.root)
    assert p.db.execute("SELECT count(*) FROM images WHERE phash IS NOT NULL").fetchone()[0] == 0
    res = CliRunner().invoke(cli, ["--project", str(p.root), "images", "dedup", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["hashes_computed"] == 2, res.output
    assert (p.db["images"].get(copy)["width"], p.db["images"].get(copy)["height"]) == (600, 400)
    assert dedup_clusters(p) == {frozenset((original, copy))}
    p.close()


def dedup_clusters(p) -> set[frozenset]:
    dedup_images(p, methods=["phash"], progress=False)
    return set(clusters(p, "phash"))


def test_an_import_stores_the_displayed_size_and_hashes(project, photos):
    sha = store_image(project, turned(photos["chelsea"], 8, quality=90))
    row = project.db["images"].get(sha)
    assert (row["width"], row["height"]) == photos["chelsea"].size and row["phash"]


def test_embedders_see_the_picture_a_browser_shows(project, photos):
    """The embedding cache's loader (CLIP tags, embedding dedup, the suites) gets the displayed picture: the
    deterministic fake embedder, a hash of the pixels, gives a 16-bit grey copy and an EXIF-turned lossless
    copy the very vector of their 8-bit, upright originals."""
    im = photos["chelsea"]
    shas = [store_image(project, data) for data in (encode(im.convert("L"), "PNG"), grey16(im),
                                                    encode(im, "PNG"), turned(im, 6, "PNG"))]
    vectors = embed_images_cached(project, get_embedder("fake"), shas)
    assert np.array_equal(vectors[0], vectors[1]) and np.array_equal(vectors[2], vectors[3])
    assert not np.array_equal(vectors[0], vectors[2])


def test_a_vision_model_gets_a_format_it_takes_and_the_upright_picture(tmp_path, photos):
    im = photos["chelsea"]
    for name, data in {"a.jpg": turned(im, 6, quality=90), "b.tif": encode(im, "TIFF"), "c.png": grey16(im)}.items():
        (tmp_path / name).write_bytes(data)
        body, mime = pixels.browser_bytes(tmp_path / name, formats=pixels.MODEL_FORMATS, plain=True)
        with Image.open(io.BytesIO(body)) as got:                     # a plain decode: no EXIF, no 16-bit care
            assert mime == "image/jpeg" and got.size == im.size, name
            assert abs(np.asarray(got.convert("L")).mean() - np.asarray(im.convert("L")).mean()) < 3, name
    plain = encode(im, "JPEG", quality=90)
    (tmp_path / "d.jpg").write_bytes(plain)
    assert pixels.browser_bytes(tmp_path / "d.jpg", formats=pixels.MODEL_FORMATS, plain=True) == (plain, "image/jpeg")
    assert pixels.browser_bytes(tmp_path / "a.jpg")[0] == (tmp_path / "a.jpg").read_bytes()  # browsers turn it


# ------------------------------------------------------------------------------------------ annotation
def test_push_without_the_image_server_refuses_formats_browsers_do_not_draw():
    items = [{"payload": {"path": "blobs/ab/x.tif", "url": "https://example.org/x.tif"}},
             {"payload": {"path": "blobs/cd/y.jpg", "url": "https://example.org/y.jpg"}}]
    with pytest.raises(CulturaError, match=r"1 of 2 .*'blobs/ab/x.tif'.*serve-images"):
        check_image_urls(items, None)
    check_image_urls(items, "http://127.0.0.1:8081")  # the image server converts it
    check_image_urls(items[1:], None)


def test_the_image_server_knows_the_blob_of_every_allowed_format_by_its_suffix():
    """The image server and push read a blob's format from the suffix the blob store wrote (no decode): each
    allowed format's blob path is served, and converted exactly when browsers do not draw the format."""
    for fmt in pixels.ALLOWED_FORMATS:
        rel = blob_relpath("ab" + "0" * 62, fmt)
        assert BLOB_RE.match("/" + rel), rel
        assert drawn_by_browsers(rel) == (fmt in pixels.BROWSER_FORMATS), rel


def test_the_image_server_converts_a_blob_once(tmp_path, photos, monkeypatch):
    """Label Studio's editor asks again for the image of every task it shows: a TIFF is converted on the first
    request only, and a JPEG is never decoded."""
    tiff, jpeg = tmp_path / ("ab" + "0" * 62 + ".tif"), tmp_path / ("cd" + "0" * 62 + ".jpg")
    tiff.write_bytes(encode(photos["chelsea"], "TIFF"))
    jpeg.write_bytes(encode(photos["chelsea"], "JPEG", quality=90))
    real, converted = pixels.browser_bytes, []
    monkeypatch.setattr(pixels, "browser_bytes", lambda path, **kw: converted.append(path) or real(path, **kw))
    image_server._converted.cache_clear()
    try:
        first = image_server.blob_response(tiff)
        assert first[1] == "image/jpeg" and image_server.blob_response(tiff) == first
        assert image_server.blob_response(jpeg) == (jpeg.read_bytes(), "image/jpeg")
        assert converted == [tiff]
    finally:
        image_server._converted.cache_clear()
