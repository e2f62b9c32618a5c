"""``cultura annotate serve-images`` serves the project's blobs and nothing else (a real server on 127.0.0.1),
each as bytes a browser draws."""
from __future__ import annotations

import io

import httpx
import numpy as np
from PIL import Image, features

from cultura.annotate.images import serve_in_thread
from cultura.curate.importers import store_image
from tests.fakes.labelstudio import add_images
from tests.fakes.real_photos import photos, turned


def test_serve_images_serves_only_blobs(project):
    sha = add_images(project, "rice", "JP", 1)[0]
    rel = project.db["images"].get(sha)["path"]
    (project.root / "secret.txt").write_text("no")
    httpd, base = serve_in_thread(project.blobs)
    try:
        r = httpx.get(f"{base}/{rel}")
        assert r.status_code == 200 and r.headers["content-type"] == "image/png"
        for bad in ["/secret.txt", "/blobs/../secret.txt", f"/blobs/zz/{sha}.png", "/cultura.db"]:
            assert httpx.get(base + bad).status_code == 404
    finally:
        httpd.shutdown()


def test_serve_images_answers_tiff_and_avif_with_bytes_a_browser_draws(project):
    """A TIFF blob (and an AVIF one where this Pillow decodes AVIF: elsewhere the downloader refuses AVIF)
    is answered as JPEG of the picture a browser would show (an EXIF-turned TIFF upright); a format every
    browser draws is answered as stored."""
    chelsea = photos()["chelsea"]                                       # 451 x 300

    def encoded(fmt, im=chelsea, **kw):
        buf = io.BytesIO()
        im.save(buf, fmt, **kw)
        return buf.getvalue()

    blobs = {"tiff": encoded("TIFF"), "turned_tiff": turned(chelsea, 6, "TIFF"), "jpeg": encoded("JPEG", quality=90)}
    if features.check("avif"):
        blobs["avif"] = encoded("AVIF", quality=90)
    rel = {k: project.db["images"].get(store_image(project, data))["path"] for k, data in blobs.items()}
    assert rel["tiff"].endswith(".tif") and (not features.check("avif") or rel["avif"].endswith(".avif"))
    httpd, base = serve_in_thread(project.blobs)
    try:
        for kind in ["tiff", "turned_tiff", "avif"]:
            if kind not in rel:
                continue
            r = httpx.get(f"{base}/{rel[kind]}")
            assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg", (kind, r.status_code)
            with Image.open(io.BytesIO(r.content)) as im:
                assert im.format == "JPEG" and im.size == chelsea.size, kind
                diff = np.abs(np.asarray(im.convert("RGB"), dtype=float) - np.asarray(chelsea, dtype=float))
                assert diff.mean() < 6, (kind, diff.mean())
            head = httpx.head(f"{base}/{rel[kind]}")
            assert head.status_code == 200 and int(head.headers["content-length"]) == len(r.content)
        r = httpx.get(f"{base}/{rel['jpeg']}")
        assert r.headers["content-type"] == "image/jpeg" and r.content == blobs["jpeg"]
    finally:
        httpd.shutdown()
