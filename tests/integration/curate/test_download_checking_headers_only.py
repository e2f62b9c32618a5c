"""The download mode that checks headers only (``download.check = "header"``, ``images download --check header``,
``p.images.download(check="header")``): real JPEG, PNG and WebP photographs served over HTTP are stored without
decoding them, with no hashes and an open ``undecoded`` flag that keeps them out of the reviewed pool until
``images dedup`` decodes and hashes them (the same hashes the decoding download stores); a GIF, which has no cheap
end check, is decoded at download as in the decoding mode and is in the pool at once; a body whose pixels cannot
be decoded is stored, then flagged ``unreadable`` by dedup and kept out of the pool; truncated bodies and
oversized headers are refused at download, without a decode, with the reasons the decoding download uses;
reruns change nothing."""
from __future__ import annotations

import collections
import functools
import io
import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image, ImageFile

import cultura
from cultura.cli import cli
from cultura.curate.download import download_candidates
from cultura.curate.sniff import HASH_FIELDS
from cultura.errors import CulturaError
from cultura.project import Project, init_project
from tests.fakes import damaged_images as damaged
from tests.fakes.cli_runner import ProjectCli
from tests.fakes.file_server import FileServer, www  # noqa: F401 (fixture)
from tests.fakes.image_server import image_server  # noqa: F401 (fixture)
from tests.fakes.real_photos import encode, turned


@functools.lru_cache(maxsize=1)
def _pictures() -> dict[str, Image.Image]:
    import skimage.data as skd  # deferred: heavy, only the photographs need it

    return {n: Image.fromarray(getattr(skd, n)()).convert("L" if n in ("camera", "coins") else "RGB")
            for n in ("coffee", "chelsea", "camera", "rocket", "astronaut", "coins")}


def photo_bodies() -> dict[str, tuple[bytes, str, str]]:
    """``{file name: (bytes, concept, country)}``: real photographs in every allowed format a crawl meets,
    a copy at a second URL, a look-alike crop beside them, one stored turned (EXIF orientation 6), and a PNG
    whose pixels cannot be decompressed (``broken.png``). Copies share their original's (concept, country), so
    no culture question is raised."""
    pics = _pictures()
    coffee = pics["coffee"]
    w, h = coffee.size
    original = encode(coffee)
    return {
        "coffee.jpg": (original, "breakfast", "US"),
        "coffee-copy.jpg": (original, "breakfast", "US"),
        "coffee-crop.jpg": (encode(coffee.crop((w // 20, h // 20, w - w // 20, h - h // 20))), "breakfast", "US"),
        "chelsea-turned.jpg": (turned(pics["chelsea"], 6, quality=90), "pet", "JP"),
        "camera.png": (damaged.encoded(pics["camera"], "PNG"), "street", "JP"),
        "rocket.webp": (damaged.encoded(pics["rocket"], "WEBP", quality=85), "street", "US"),
        "astronaut.gif": (damaged.encoded(pics["astronaut"], "GIF"), "people", "US"),
        "broken.png": (damaged.damaged_idat(damaged.encoded(pics["coins"], "PNG")), "street", "JP"),
    }


def serve_photos(www: FileServer, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Every photo body served; returns the ``urls:`` file (JSONL: url, concept, country) and sha256 by name."""
    import hashlib

    lines, sha = [], {}
    for name, (data, concept, country) in photo_bodies().items():
        lines.append(json.dumps({"url": www.put(name, data), "concept": concept, "country": country}))
        sha[name] = hashlib.sha256(data).hexdigest()
    urls = tmp_path / "urls.jsonl"
    urls.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return urls, sha


def test_the_broken_png_opens_but_does_not_decode():
    """The fixture is what the tests below need: its header and its end marker are whole (a header check passes
    it), its pixels are not (a full load raises)."""
    data = photo_bodies()["broken.png"][0]
    assert data.endswith(damaged.png_chunk(b"IEND", b""))
    with Image.open(io.BytesIO(data)) as im:
        assert (im.format, im.size) == ("PNG", _pictures()["coins"].size)
        with pytest.raises(OSError):
            im.load()


def undecoded(sha: dict[str, str]) -> set[str]:
    """The images a header-checked download stores undecoded: all but the GIF (decoded at download)."""
    return set(sha.values()) - {sha["astronaut.gif"]}


def hash_rows(db) -> dict[str, dict]:
    return {r["sha256"]: r for r in db.query(f"SELECT sha256, width, height, {', '.join(HASH_FIELDS)} FROM images")}


def flag_states(rows) -> dict[tuple[str, str], str]:
    """``{(sha256, flag): status}`` of a flags listing."""
    return {(r["sha256"], r["flag"]): r["status"] for r in rows}


def pool_out(rows) -> dict[str, str]:
    """``{sha256: reason}`` of a ``--pool out`` listing."""
    return {r["sha256"]: r["reason"] for r in rows}


def cli_project(root: Path, allow: str, urls: Path) -> ProjectCli:
    assert CliRunner().invoke(cli, ["init", str(root), "--countries", "US,JP"]).exit_code == 0
    run = ProjectCli(root, env={"HF_HUB_OFFLINE": "1"})
    run.json("config", "set", "download.allow_hosts", allow)
    assert run.json("images", "search", "--provider", f"urls:{urls}")["results"] == len(photo_bodies())
    return run


def test_header_mode_through_the_cli_stores_undecoded_photos_that_dedup_hashes(tmp_path, www):
    urls, sha = serve_photos(www, tmp_path)
    images = set(sha.values())                                 # the copy is the original's sha256: 7 images
    readable = images - {sha["broken.png"]}
    later = undecoded(sha)
    run = cli_project(tmp_path / "header", www.host_port, urls)

    got = run.json("images", "download", "--check", "header")
    assert got["by_status"] == {"downloaded": len(sha)} and got["new_images"] == len(images)
    with cultura.open(tmp_path / "header") as p:
        stored = hash_rows(p.db)
    assert set(stored) == images
    for s in later:                                            # stored as found: no hash before dedup
        assert all(stored[s][c] is None for c in HASH_FIELDS), stored[s]
    assert all(stored[sha["astronaut.gif"]][c] for c in HASH_FIELDS)
    pics = _pictures()
    assert (stored[sha["coffee.jpg"]]["width"], stored[sha["coffee.jpg"]]["height"]) == pics["coffee"].size
    assert (stored[sha["broken.png"]]["width"], stored[sha["broken.png"]]["height"]) == pics["coins"].size
    # the displayed size, from the EXIF orientation the JPEG's header holds (stored 300 x 451, shown 451 x 300)
    turned_size = stored[sha["chelsea-turned.jpg"]]["width"], stored[sha["chelsea-turned.jpg"]]["height"]
    assert turned_size == pics["chelsea"].size
    assert flag_states(run.json("images", "flags")) == {(s, "undecoded"): "open" for s in later}
    assert pool_out(run.json("images", "list", "--pool", "out")) == {s: "undecoded" for s in later}
    assert {r["sha256"] for r in run.json("images", "list", "--pool", "in")} == {sha["astronaut.gif"]}

    run.json("images", "dedup")
    with cultura.open(tmp_path / "header") as p:
        hashed = hash_rows(p.db)
    for s in readable:
        assert all(hashed[s][c] for c in HASH_FIELDS), hashed[s]
    assert all(hashed[sha["broken.png"]][c] is None for c in HASH_FIELDS)
    # displayed size once decoded: the turned photo shows upright, as a browser shows it
    assert (hashed[sha["chelsea-turned.jpg"]]["width"], hashed[sha["chelsea-turned.jpg"]]["height"]) == \
        pics["chelsea"].size
    flags = flag_states(run.json("images", "flags", "--status", "all"))
    assert flags == {**{(s, "undecoded"): "resolved" for s in later}, (sha["broken.png"], "unreadable"): "open"}
    assert pool_out(run.json("images", "list", "--pool", "out")) == {sha["broken.png"]: "unreadable"}
    assert {r["sha256"] for r in run.json("images", "list", "--pool", "in")} == readable
    # the look-alike crop is found as a copy of its original, from the hashes dedup computed
    sets = [{m["sha256"] for m in c["members"]} for c in run.json("images", "clusters")]
    assert any({sha["coffee.jpg"], sha["coffee-crop.jpg"]} <= s for s in sets)

    # the decoding download refuses the same body at once, and stores the others
    decoding = cli_project(tmp_path / "decode", www.host_port, urls)
    got = decoding.json("images", "download", "--check", "decode")
    assert got["by_status"] == {"downloaded": len(sha) - 1, "failed": 1} and got["by_reason"] == {"corrupt": 1}
    [failure] = decoding.json("images", "failures")
    assert failure["url"].endswith("/broken.png") and (failure["status"], failure["reason"]) == ("failed", "corrupt")
    assert decoding.json("images", "flags", "--status", "all") == []


def api_project(root: Path, allow: str, urls: Path):
    p = cultura.init(root, countries=["US", "JP"])
    p.set_config("download.allow_hosts", [allow])
    assert p.images.search(f"urls:{urls}")["results"] == len(photo_bodies())
    return p


def test_header_mode_through_the_python_api_gives_the_hashes_of_the_decoding_download(tmp_path, www):
    urls, sha = serve_photos(www, tmp_path)
    images, later = set(sha.values()), undecoded(sha)
    with api_project(tmp_path / "header", www.host_port, urls) as header, \
            api_project(tmp_path / "decode", www.host_port, urls) as decode:
        with pytest.raises(CulturaError, match="decode.*header"):
            header.images.download(check="headers")
        got = header.images.download(check="header")
        assert got["by_status"] == {"downloaded": len(sha)} and got["new_images"] == len(images)
        assert pool_out(header.images.list(pool="out", frame=False)) == {s: "undecoded" for s in later}
        assert flag_states(header.images.flags(frame=False)) == {(s, "undecoded"): "open" for s in later}
        header.images.dedup()

        got = decode.images.download(check="decode")
        assert got["by_reason"] == {"corrupt": 1} and got["new_images"] == len(images) - 1
        decoded = hash_rows(decode.db)
        assert set(decoded) == images - {sha["broken.png"]}
        for s, r in decoded.items():                           # hashed at download: nothing below compares NULLs
            assert all(r[c] for c in HASH_FIELDS), r
        hashed = hash_rows(header.db)
        for s, r in decoded.items():                           # every hash column, and the displayed size
            assert hashed[s] == r, f"{s[:12]}: header mode + dedup {hashed[s]} != decoding download {r}"

        assert flag_states(header.images.flags(status=None, frame=False)) == {
            **{(s, "undecoded"): "resolved" for s in later}, (sha["broken.png"], "unreadable"): "open"}
        assert pool_out(header.images.list(pool="out", frame=False)) == {sha["broken.png"]: "unreadable"}
        assert {r["sha256"] for r in header.images.list(pool="in", frame=False)} == set(decoded)


# ------------------------------------------------------------------------------ refused from the header

def refused_bodies() -> dict[str, tuple[bytes, str]]:
    """``{file name: (bytes, reason)}``: bodies the header check must refuse, each for one reason."""
    pics = _pictures()
    jpeg = encode(pics["coffee"])
    return {
        "half.jpg": (damaged.cut(jpeg), "truncated"),                                   # no end-of-image marker
        "no-iend.png": (damaged.without_iend(damaged.encoded(pics["camera"], "PNG")), "truncated"),
        # a header claiming more pixels than max_pixels (below Pillow's own limit: the cap is cultura's)
        "claims.png": (damaged.png_claiming(9000, 9000), "too_many_pixels"),
        "claims.jpg": (damaged.jpeg_claiming(jpeg, 9000, 9000), "too_many_pixels"),
        "notes.jpg": (b"shopping list: rice, miso, nori\n" * 20, "not_image"),
    }


#: trap routes of tests/fakes/image_server.py and the reason each gets, in either mode
TRAPS = {"/truncated.jpg": "truncated", "/bomb.png": "too_many_pixels", "/tall.png": "extreme_aspect_ratio",
         "/tiny.png": "too_small", "/html": "html", "/html-as-jpeg": "html", "/svg": "svg"}


@pytest.fixture
def library_project(tmp_path, www, image_server):  # noqa: F811
    def make(name: str):
        p = init_project(tmp_path / name, countries=["US", "JP"])
        s = p.config.download
        s.allow_hosts = [www.host_port, image_server.host_port]
        s.max_pixels = 70_000_000          # the 64 x 1,000,000 strip passes it: refused for its aspect ratio
        s.read_timeout = s.connect_timeout = 60.0
        made.append(p)
        return p

    made: list = []
    yield make
    for p in made:
        p.close()


class Decodes:
    """Counts the pixel decodes Pillow runs in this process (every image file's decode goes through
    ``ImageFile.load``); the downloader validates in this process when ``decode_processes=0`` (a JPEG, PNG or
    WebP header on the event loop, any other body in a thread)."""

    def __init__(self, monkeypatch):
        self.formats, self.lock = collections.Counter(), threading.Lock()
        real = ImageFile.ImageFile.load

        def load(im, *a, **kw):
            with self.lock:
                self.formats[f"{im.format} {im.size[0]}x{im.size[1]}"] += 1
            return real(im, *a, **kw)

        monkeypatch.setattr(ImageFile.ImageFile, "load", load)


@pytest.mark.parametrize("processes", [0, 1], ids=["in-this-process", "in-decode-processes"])
def test_header_mode_refuses_truncated_and_oversized_bodies_without_decoding(
        library_project, www, image_server, monkeypatch, processes):  # noqa: F811
    """Every door of the validation (the event loop, a thread, a decode process) checks the header only;
    Pillow's decodes can be counted in this process, so its doors prove that nothing, photographs included,
    is decoded."""
    p = library_project("header")
    bodies = refused_bodies()
    expected = {www.put(name, data): reason for name, (data, reason) in bodies.items()}
    expected.update({image_server.url(route): reason for route, reason in TRAPS.items()})
    good = {www.put("rocket.jpg", encode(_pictures()["rocket"])): None, image_server.url("/img/1.jpg"): None}
    p.db["candidates"].insert_all([{"url": u, "status": "pending"} for u in [*expected, *good]])
    decodes = Decodes(monkeypatch)
    import cultura.curate.download as download

    writers, store = [], download.store_blob

    def recorded(*a, **kw):
        writers.append(threading.current_thread().name)
        return store(*a, **kw)

    monkeypatch.setattr(download, "store_blob", recorded)

    summary = download_candidates(p, check="header", decode_processes=processes, progress=False)
    if not processes:  # a decode process's decodes are not seen here: there the hash columns below say it
        assert decodes.formats == {}                           # not one body decoded, the photographs included
    assert summary["by_status"] == {"failed": len(expected), "downloaded": len(good)}
    rows = {r["url"]: r for r in p.db.query("SELECT url, status, reason, detail, sha256 FROM candidates")}
    assert {u: rows[u]["reason"] for u in expected} == expected
    for u in expected:                                         # a row with its status and a sentence; nothing stored
        assert rows[u]["status"] == "failed" and rows[u]["detail"] and rows[u]["sha256"] is None, rows[u]
    stored = {r["sha256"] for r in p.db.query("SELECT sha256 FROM images")}
    assert stored == {rows[u]["sha256"] for u in good}
    blobs = {f.stem for f in (p.root / "blobs").glob("??/*") if f.is_file()}
    assert blobs == stored
    flags = {(r["sha256"], r["flag"], r["status"]) for r in p.db.query("SELECT sha256, flag, status FROM image_flags")}
    assert flags == {(s, "undecoded", "open") for s in stored}
    assert all(r[c] is None for r in hash_rows(p.db).values() for c in HASH_FIELDS)
    if processes:
        return
    # hashed and written by the blob threads, off the event loop, and those are joined before the run returns:
    # no blob is written after its run row is closed
    assert len(writers) == len(good) and all(w.startswith("cultura-blobs") for w in writers), writers
    assert not [t.name for t in threading.enumerate() if t.name.startswith("cultura-blobs")]
    # the counter sees decodes where there are some: the decoding download of the same photographs
    q = library_project("decode")
    q.db["candidates"].insert_all([{"url": u, "status": "pending"} for u in good])
    assert download_candidates(q, check="decode", decode_processes=0, progress=False)["new_images"] == len(good)
    assert sum(decodes.formats.values()) >= len(good)


def test_a_webp_shorter_than_its_riff_size_is_truncated_in_header_mode(library_project, www):
    p = library_project("webp")
    webp = damaged.encoded(_pictures()["rocket"], "WEBP", quality=85)
    urls = [www.put("riff.webp", damaged.webp_with_wrong_riff_size(webp)), www.put("half.webp", damaged.cut(webp))]
    p.db["candidates"].insert_all([{"url": u, "status": "pending"} for u in urls])
    download_candidates(p, check="header", progress=False)
    rows = list(p.db.query("SELECT status, reason, sha256 FROM candidates"))
    assert all(r["status"] == "failed" and r["sha256"] is None for r in rows) and p.db["images"].count == 0
    assert [r["reason"] for r in rows] == ["truncated", "truncated"], rows


# ------------------------------------------------------------------------------------------- reruns

def test_reruns_of_header_download_and_dedup_change_nothing(tmp_path, www):
    urls, sha = serve_photos(www, tmp_path)
    images, later = set(sha.values()), undecoded(sha)
    run = cli_project(tmp_path / "p", www.host_port, urls)
    # a mode that does not exist is one sentence naming the two that do, before any request
    for bad in (run.json("images", "download", "--check", "pixels", ok=False),
                run.json("config", "set", "download.check", "pixels", ok=False)):
        assert "decode" in bad["error"] and "header" in bad["error"], bad
    assert sum(www.hits.values()) == 0
    # the mode from the configuration when the command names none
    assert run.json("config", "set", "download.check", "header")["value"] == "header"
    assert run.json("images", "download")["new_images"] == len(images)
    assert flag_states(run.json("images", "flags")) == {(s, "undecoded"): "open" for s in later}
    hits = sum(www.hits.values())

    def state():
        with cultura.open(tmp_path / "p") as p:
            return (hash_rows(p.db), p.db.execute("SELECT * FROM image_flags ORDER BY sha256, flag").fetchall(),
                    p.db.execute("SELECT id, status, reason, sha256, attempts FROM candidates ORDER BY id").fetchall())

    before = state()
    again = run.json("images", "download", "--check", "header")
    assert (again["candidates"], again["processed"], again["new_images"]) == (0, 0, 0)
    assert sum(www.hits.values()) == hits and state() == before

    run.json("images", "dedup")
    deduped = state()
    assert deduped[1] != before[1]                             # the first dedup did resolve and flag
    out = run.json("images", "list", "--pool", "out")
    assert pool_out(out) == {sha["broken.png"]: "unreadable"}

    run.json("images", "dedup")
    assert state() == deduped                                  # flags (their details and times too) and hashes
    assert run.json("images", "list", "--pool", "out") == out
    again = run.json("images", "download", "--check", "header")
    assert (again["candidates"], again["processed"]) == (0, 0)
    assert sum(www.hits.values()) == hits and state() == deduped  # no undecoded flag reopened by a download


def test_bytes_found_again_at_new_urls_after_dedup_reopen_no_flag(tmp_path, www):
    """An image dedup has decoded (or found unreadable) is not undecoded again when a later header-checked download
    finds its bytes at another URL: no flag is reopened that no later dedup would resolve."""
    urls, sha = serve_photos(www, tmp_path)
    run = cli_project(tmp_path / "p", www.host_port, urls)
    run.json("images", "download", "--check", "header")
    run.json("images", "dedup")
    settled = flag_states(run.json("images", "flags", "--status", "all"))
    assert settled[(sha["broken.png"], "unreadable")] == "open"

    bodies = photo_bodies()
    more = tmp_path / "more.jsonl"
    more.write_text("".join(json.dumps({"url": www.put(f"again-{name}", bodies[name][0]), "concept": bodies[name][1],
                                        "country": bodies[name][2]}) + "\n" for name in ("coffee.jpg", "broken.png")),
                    encoding="utf-8")                         # found for the same cell: no culture question
    assert run.json("images", "search", "--provider", f"urls:{more}")["results"] == 2
    got = run.json("images", "download", "--check", "header")
    assert got["by_status"] == {"downloaded": 2} and got["new_images"] == 0
    assert flag_states(run.json("images", "flags", "--status", "all")) == settled
    run.json("images", "dedup")
    assert flag_states(run.json("images", "flags", "--status", "all")) == settled


def test_bytes_a_decoding_download_finds_again_get_their_hashes_without_waiting_for_dedup(tmp_path, www):
    """Bytes stored undecoded by a header check and found again at another URL by a decoding download: that
    decode's hashes are kept (they are the ones dedup would compute) and the image is back in the pool at once;
    the images it did not find again still wait for dedup."""
    from cultura.curate.sniff import sniff_image

    urls, sha = serve_photos(www, tmp_path)
    later = undecoded(sha)
    run = cli_project(tmp_path / "p", www.host_port, urls)
    run.json("images", "download", "--check", "header")
    bodies = photo_bodies()
    again = ("chelsea-turned.jpg", "camera.png")
    more = tmp_path / "more.jsonl"
    more.write_text("".join(json.dumps({"url": www.put(f"again-{name}", bodies[name][0]), "concept": bodies[name][1],
                                        "country": bodies[name][2]}) + "\n" for name in again), encoding="utf-8")
    assert run.json("images", "search", "--provider", f"urls:{more}")["results"] == 2
    p = Project(run.project)
    raised = dict(p.db.execute("SELECT sha256, created_at FROM image_flags WHERE flag = 'undecoded'").fetchall())
    p.close()
    got = run.json("images", "download", "--check", "decode")
    assert got["by_status"] == {"downloaded": 2} and got["new_images"] == 0

    found = {sha[name] for name in again}
    assert found <= later
    flags = flag_states(run.json("images", "flags", "--status", "all"))
    assert flags == {**{(s, "undecoded"): "open" for s in later - found},
                     **{(s, "undecoded"): "resolved" for s in found}}
    assert pool_out(run.json("images", "list", "--pool", "out")) == {s: "undecoded" for s in later - found}
    p = Project(run.project)
    rows = hash_rows(p.db)
    for s in found:  # resolved as dedup resolves it: when and why it was raised kept, who resolved it added
        details, created = p.db.execute("SELECT details, created_at FROM image_flags WHERE sha256 = ? AND flag = ?",
                                        [s, "undecoded"]).fetchone()
        details = json.loads(details)
        assert details["stage"] == "download" and details["resolution"]["by"] == "download"
        assert created == raised[s] <= details["resolution"]["at"]
    p.close()
    for name in again:
        info = sniff_image(bodies[name][0], max_pixels=10**9, min_side=1)
        assert {c: rows[sha[name]][c] for c in ("width", "height", *HASH_FIELDS)} == {
            "width": info.width, "height": info.height, **{c: getattr(info, c) for c in HASH_FIELDS}}, name
    assert all(rows[s]["phash"] is None for s in later - found)
