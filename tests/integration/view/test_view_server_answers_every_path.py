"""``cultura view --serve`` answers every request path, however malformed, with a status and a body and never an
exception in its log: a path no file can have (``%00``, a control character, bytes that are not UTF-8, a name too
long for the file system) is a 400, a path outside the view a 404."""
from __future__ import annotations

import http.client

import pytest

from cultura.view.server import BadPath, resolve, serve_in_thread
from cultura.view.site import build_view


@pytest.fixture
def served(project):
    build_view(project)
    view = project.reports / "view"
    httpd, _ = serve_in_thread(view)
    try:
        yield view, httpd.server_address
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize("path, status", [
    ("/%00", 400), ("/index.html%00", 400), ("/index.html%00.css", 400), ("/%0a", 400), ("/%1b%5b2J", 400),
    ("/%ff.html", 400), ("/%c3%28.html", 400), ("/" + "a" * 5000 + ".html", 400),
    ("/thumbs/" + "b" * 300 + ".jpg", 400), ("/nope.html", 404), ("/..%2f..%2fetc/passwd", 404),
    ("/index.html", 200), ("/caf%C3%A9.html", 404),
])
def test_every_path_gets_a_status_and_a_body_and_nothing_raises(served, capfd, path, status):
    view, (host, port) = served
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    conn.close()
    assert r.status == status and body, (path, r.status, body[:200])
    if status == 400:
        assert b"No file of the view has this path" in body
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception occurred" not in err, err


def test_resolve_says_which_paths_no_file_can_have(served):
    view, _ = served
    for bad in ("/%00", "/a%00b.html", "/%ff", "/" + "x" * 5000 + ".html"):
        with pytest.raises(BadPath):
            resolve(view, bad)
    assert resolve(view, "/index.html") == (view / "index.html").resolve()
