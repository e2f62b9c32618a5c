"""``cultura view`` served and opened: the server binds loopback and serves only the view, ``--serve`` answers,
and every page loads in headless Chromium."""
from __future__ import annotations

import http.client
import io
import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, features

import cultura
from cultura.benchmark.export import collect
from cultura.curate.importers import store_image
from cultura.view.links import anchor
from cultura.view.server import resolve, serve_in_thread
from cultura.view.site import build_view
from cultura.view.thumbs import thumb_rel
from tests.fakes import real_photos
from tests.unit.view.test_view import _pages, photo_project  # noqa: F401 - shared with the unit tests


CHROMIUM = "/usr/bin/chromium"
SHOTS = Path(os.environ.get("CULTURA_VIEW_SHOTS", "")) if os.environ.get("CULTURA_VIEW_SHOTS") else None


def test_the_server_binds_loopback_and_serves_only_the_view(photo_project):
    p, world, _ = photo_project
    view = p.reports / "view"
    assert resolve(view, "/index.html") == (view / "index.html").resolve()
    assert resolve(view, "/") == (view / "index.html").resolve()
    for bad in ["/../cultura.db", "/..%2fcultura.db", "/%2e%2e/cultura.toml", "/thumbs/../../cultura.toml",
                "//etc/passwd", "/manifest.json/..", "/.hidden", "/thumbs\\..\\x", "/nope.html"]:
        target = resolve(view, bad)
        assert target is None or target.is_relative_to(view.resolve()), bad
    (view / "link.html").symlink_to(p.root / "cultura.toml")
    assert resolve(view, "/link.html") is None
    httpd, base = serve_in_thread(view)
    try:
        assert httpd.server_address[0] == "127.0.0.1"
        host, port = httpd.server_address
        for path, status in [("/index.html", 200), ("/view.css", 200), ("/../cultura.db", 404),
                             ("/%2e%2e/cultura.db", 404), ("/%2e%2e%2fcultura.db", 404),
                             ("/../blobs", 404), ("/link.html", 404)]:
            conn = http.client.HTTPConnection(host, port, timeout=30)
            conn.request("GET", path)
            r = conn.getresponse()
            body = r.read()
            assert r.status == status, (path, r.status)
            if status == 200:
                assert r.getheader("X-Content-Type-Options") == "nosniff" and body
            conn.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
        (view / "link.html").unlink()


def test_the_served_view_shows_tiff_and_avif_images_upright_as_jpeg(project):
    """The view's image route (``thumbs/``) answers a TIFF blob, an EXIF-turned TIFF and an AVIF one (where
    this Pillow decodes AVIF) with a JPEG thumbnail of the picture a browser shows."""
    chelsea = real_photos.photos()["chelsea"]                          # 451 x 300
    exif = Image.Exif()
    exif[0x0112] = 6
    blobs = [_encoded(chelsea, "TIFF"), _encoded(chelsea.transpose(Image.Transpose.ROTATE_90), "TIFF",
                                                 exif=exif.tobytes())]
    if features.check("avif"):
        blobs.append(_encoded(chelsea, "AVIF", quality=90))
    shas = [store_image(project, data) for data in blobs]
    build_view(project)
    httpd, base = serve_in_thread(project.reports / "view")
    try:
        for sha in shas:
            with urllib.request.urlopen(base + thumb_rel(sha), timeout=30) as r:
                assert r.headers["Content-Type"] == "image/jpeg"
                body = r.read()
            with Image.open(io.BytesIO(body)) as im:
                assert im.format == "JPEG" and im.size == (192, 128), im.size
                want = np.asarray(chelsea.resize(im.size).convert("L"), dtype=float)
                assert np.abs(np.asarray(im.convert("L"), dtype=float) - want).mean() < 8
    finally:
        httpd.shutdown()
        httpd.server_close()


def _encoded(im, fmt, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def test_cli_serve_binds_loopback_and_answers(photo_project):
    """``cultura view --serve --port 0`` in a subprocess: prints its 127.0.0.1 URL, serves the view, stops on
    SIGINT."""

    p, _, _ = photo_project
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(Path(cultura.__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-m", "cultura", "--project", str(p.root), "view", "--page-size", "5",
                             "--serve", "--port", "0", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True,
                            # SIGINT at its default: a background job of a non-interactive shell (CI) inherits it
                            # ignored, and Ctrl-C would never stop the server
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        lines = []
        for line in proc.stdout:  # the JSON summary, then the server runs
            lines.append(line)
            if line.startswith("}"):
                break
        info = json.loads("".join(lines))
        assert info["url"].startswith("http://127.0.0.1:") and info["url"].endswith("/index.html")
        with urllib.request.urlopen(info["url"], timeout=60) as r:
            assert r.status == 200 and b"cultura view" in r.read()
        try:
            urllib.request.urlopen(info["url"].replace("index.html", "../cultura.toml"), timeout=60)
            raise AssertionError("the project file was served")
        except urllib.error.HTTPError as e:
            assert e.code == 404
    finally:
        proc.send_signal(signal.SIGINT)
        try:  # read both pipes while waiting (a child blocked on a full pipe never exits); a hang guard only
            _, err = proc.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    assert proc.returncode == 0, err


# ------------------------------------------------------------------------------------------ in a real browser
def _browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return pytest.importorskip("playwright.sync_api").sync_playwright


def _check_page(page, url: str, errors: list) -> None:
    page.goto(url)
    page.wait_for_load_state("load")
    broken = page.evaluate("""() => Array.from(document.images).filter(
        i => !i.complete || i.naturalWidth === 0).map(i => i.getAttribute('src'))""")
    # lazy images below the fold load once scrolled to: scroll, then check every image decoded
    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
    page.wait_for_function("() => Array.from(document.images).every(i => i.complete)", timeout=180_000)
    broken = page.evaluate("""() => Array.from(document.images).filter(
        i => i.naturalWidth === 0).map(i => i.getAttribute('src'))""")
    assert not broken, (url, broken)
    assert page.evaluate("() => window.__pwned === undefined"), url
    assert not errors, (url, errors)


@pytest.mark.parametrize("scheme", ["file", "http"])
def test_every_page_loads_in_chromium(photo_project, tmp_path, scheme):
    """Every page of the view, from file:// and from the loopback server: no broken image, no console error,
    the planted duplicate set side by side, a trial's candidates in exported order, roles on demand."""
    sync_playwright = _browser()
    p, world, _ = photo_project
    view = p.reports / "view"
    httpd, base = serve_in_thread(view) if scheme == "http" else (None, view.as_uri() + "/")
    shots = SHOTS or tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                "--disable-dev-shm-usage"])
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.set_default_timeout(180_000)  # guards a hang only: a loaded machine is slow, not wrong
            errors, requests = [], []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            for name in _pages(view):
                _check_page(page, base + name, errors)
                if name in ("index.html", "pool.html", "dups-1.html", "flags-1.html", "bench-1-1.html",
                            "annotations-1.html", "cell-1-JP-1.html"):
                    page.screenshot(path=str(shots / f"{scheme}-{name}.png"), full_page=True)
            # nothing was fetched from anywhere else
            assert all(u.startswith(base) or u.startswith("data:") for u in requests), \
                [u for u in requests if not u.startswith(base)]

            # the planted duplicate set: the original and its copy side by side in one section
            page.goto(base + "go.html#" + anchor("cluster", world["cluster"]))
            page.wait_for_url(re.compile(r"dups-\d+\.html#cluster-"), timeout=180_000)
            section = page.locator(f"#cluster-{world['cluster']}")
            shas = section.locator("figure.img").evaluate_all("fs => fs.map(f => f.dataset.sha)")
            assert shas == [world["shas"]["coffee"], world["copy"]]
            boxes = [section.locator("figure.img").nth(i).bounding_box() for i in range(2)]
            assert abs(boxes[0]["y"] - boxes[1]["y"]) < 5 and boxes[1]["x"] > boxes[0]["x"] + boxes[0]["width"]
            assert "representative" in section.inner_text() and "drop" in section.inner_text()
            page.screenshot(path=str(shots / f"{scheme}-planted-duplicate.png"), full_page=True)

            # a trial: candidates in exported order, roles hidden until shown
            db = p.db
            bid = world["benchmark"]["id"]
            key, iid = db.execute("SELECT item_key, id FROM benchmark_items WHERE benchmark_id = ? "
                                  "ORDER BY item_key LIMIT 1 OFFSET 6", [bid]).fetchone()
            exported = [r[0] for r in db.execute("SELECT sha256 FROM benchmark_candidates WHERE item_id = ? "
                                                 "ORDER BY position", [iid])]
            row = next(r for r in collect(p)["items"] if r["item_key"] == key)
            assert row["images"] == exported
            name, version = world["benchmark"]["name"], world["benchmark"]["version"]
            page.goto(base + "go.html#" + anchor("trial", name, version, key))
            page.wait_for_url(re.compile(r"bench-\d+-2\.html#trial-"), timeout=180_000)
            trial = page.locator(f"[id='{anchor('trial', name, version, key)}']")
            assert trial.locator("li.cand").evaluate_all("cs => cs.map(c => c.dataset.sha)") == exported
            role = trial.locator(".role").first
            assert not role.is_visible()
            page.click("#toggle-roles")
            assert role.is_visible() and role.inner_text().split(" ·")[0] == row["roles"][0]
            assert trial.locator("q").first.get_attribute("lang") == row["query_language"]

            # filters: by query country, then by role (other candidates hidden)
            page.goto(base + "bench-1-1.html")
            page.select_option("select[name=country]", "JP")
            visible = page.locator("section.trial:visible")
            assert visible.count() >= 1
            assert set(visible.evaluate_all("ts => ts.map(t => t.dataset.country)")) == {"JP"}
            assert "country=JP" in page.locator("nav.pager a").first.get_attribute("href")
            # the filter names every page of the benchmark with a match (trials sorted by key: JP's are together)
            qcs = [r[0] for r in db.execute("SELECT query_country FROM benchmark_items WHERE benchmark_id = ? "
                                            "ORDER BY item_key", [bid])]
            want = sorted({i // 5 + 1 for i, cc in enumerate(qcs) if cc == "JP"})
            got = page.locator("#matches a").evaluate_all("as => as.map(a => a.getAttribute('href'))")
            assert got == [f"bench-{bid}-{n}.html?country=JP" for n in want]
            page.select_option("select[name=role]", "lb")
            assert set(page.locator("li.cand:visible").evaluate_all("cs => cs.map(c => c.dataset.role)")) == {"lb"}
            page.screenshot(path=str(shots / f"{scheme}-filtered.png"), full_page=True)
            page.goto(base + "bench-1-2.html?country=TH")
            assert set(page.locator("section.trial:visible").evaluate_all(
                "ts => ts.map(t => t.dataset.country)")) <= {"TH"}
            assert not errors, errors
            browser.close()
    finally:
        if httpd:
            httpd.shutdown()
            httpd.server_close()
