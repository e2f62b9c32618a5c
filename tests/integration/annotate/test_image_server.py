"""``cultura annotate serve-images`` serves the project's blobs and nothing else (a real server on 127.0.0.1)."""
from __future__ import annotations


import httpx

from cultura.annotate.images import serve_in_thread
from tests.fakes.labelstudio import add_images


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
