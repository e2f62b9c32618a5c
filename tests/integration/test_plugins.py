"""docs/plugins.md is a working package: its file blocks are written out, built and installed (pip, offline,
into a folder of its own), and its embedder, suite and search provider are used from the command line and from
Python in processes that see the package — on real photographs served by a local gallery."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests import REPO
from tests.fakes import real_photos

DOC = REPO / "docs" / "plugins.md"
#: The gallery's photos: which (concept, country) words of a query find which photographs.
GALLERY = {("street", "united"): ["astronaut", "rocket"], ("street", "japan"): ["motorcycle"],
           ("cat", "united"): ["chelsea"], ("cat", "japan"): ["coffee", "china"]}


def doc_files() -> dict[str, str]:
    """The blocks of docs/plugins.md whose first line names a file of the package (``# path``)."""
    out = {}
    for block in re.findall(r"```(?:python|toml)\n(.*?)```", DOC.read_text("utf-8"), flags=re.S):
        first, _, body = block.partition("\n")
        m = re.fullmatch(r"# ([\w./-]+\.(?:py|toml))", first.strip())
        if m:
            out[m.group(1)] = block if m.group(1).endswith(".py") else body
    return out


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """The package built from the page and installed by pip into a folder (the folder goes on PYTHONPATH)."""
    root = tmp_path_factory.mktemp("plugin")
    for rel, text in doc_files().items():
        (root / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "src" / rel).write_text(text, "utf-8")
    site = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-build-isolation",
                    "--quiet", "--target", str(site), str(root / "src")], check=True, capture_output=True,
                   timeout=600)
    return site


class _Gallery(BaseHTTPRequestHandler):
    photos: dict[str, bytes] = {}

    def do_GET(self):  # noqa: N802 - the handler's name in http.server
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/search":
            q = urllib.parse.parse_qs(url.query)
            words = q["q"][0].lower().split()
            names = [n for (a, b), found in GALLERY.items() if a in words and b in words for n in found]
            names = names[: int(q["n"][0])]
            host = f"http://{self.headers['Host']}"
            body = json.dumps({"photos": [{"url": f"{host}/img/{n}.jpg", "title": n, "page": f"{host}/p/{n}"}
                                          for n in names]}).encode()
            self._send(200, "application/json", body)
        elif url.path.startswith("/img/") and url.path[5:-4] in self.photos:
            self._send(200, "image/jpeg", self.photos[url.path[5:-4]])
        else:
            self._send(404, "text/plain", b"not found")

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def gallery():
    photos = real_photos.photos()
    _Gallery.photos = {n: real_photos.encode(photos[n]) for names in GALLERY.values() for n in names}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Gallery)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _env(site: Path | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "CULTURA_PROJECT"}
    paths = [str(site)] if site else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def cultura(site: Path | None, *args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cultura", *map(str, args)], cwd=cwd, env=_env(site),
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)


def ok(proc: subprocess.CompletedProcess) -> dict | list:
    assert proc.returncode == 0, f"{proc.args}\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout) if proc.stdout.strip().startswith(("{", "[")) else {}


def test_the_page_holds_the_whole_package():
    assert set(doc_files()) == {"pyproject.toml", "cultura_hello/__init__.py", "cultura_hello/embedder.py",
                                "cultura_hello/suite.py", "cultura_hello/gallery.py"}


def test_without_the_plugin_its_names_are_unknown(tmp_path):
    ok(cultura(None, "init", tmp_path / "p", "--countries", "US,JP", cwd=tmp_path))
    proc = cultura(None, "evaluate", "run", "--model", "colours:", "--suite", "spread", cwd=tmp_path / "p")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "colours" in proc.stderr or "spread" in proc.stderr


def test_the_plugin_from_the_command_line(plugin_site, gallery, tmp_path):
    proj = tmp_path / "p"
    ok(cultura(plugin_site, "init", proj, "--countries", "US,JP", cwd=tmp_path))
    ok(cultura(plugin_site, "config", "set", "download.allow_hosts", gallery, cwd=proj))
    ok(cultura(plugin_site, "concepts", "add", "street", "cat", cwd=proj))
    for cc, term in (("street", "通り"), ("cat", "猫")):
        ok(cultura(plugin_site, "concepts", "set-term", cc, "JP", term, cwd=proj))
    found = ok(cultura(plugin_site, "images", "search", "--provider", f"gallery:http://{gallery}", "--json",
                       cwd=proj))
    # the English queries find the gallery's photos; the Japanese ones find nothing (and fail nothing)
    assert found["queries"] == 6 and found["failed"] == 0 and found["results"] == 6, found
    got = ok(cultura(plugin_site, "images", "download", "--json", cwd=proj))
    assert got["by_status"] == {"downloaded": 6}, got
    suites = ok(cultura(plugin_site, "evaluate", "suites", "--json", cwd=proj))
    assert "spread" in {s["suite"] for s in suites}
    runs = ok(cultura(plugin_site, "evaluate", "run", "--model", "colours:bins=4", "--suite", "spread",
                      "--option", "n_resamples=200", "--json", cwd=proj))
    assert [(r["suite"], r["status"]) for r in runs] == [("spread", "done")], runs
    results = ok(cultura(plugin_site, "evaluate", "results", "--suite", "spread", "--json", cwd=proj))
    by_country = {r["group"]["country"]: r for r in results}
    assert set(by_country) == {"US", "JP"}  # each country's three photographs
    for r in by_country.values():
        assert r["model"] == "colours:bins=4" and r["n"] == 3 and 0 < r["value"] < 2
        assert r["ci_low"] <= r["value"] <= r["ci_high"]


def test_the_plugin_from_python(plugin_site, gallery, tmp_path):
    script = f"""
import json, cultura
p = cultura.init({str(tmp_path / 'p')!r}, countries=["US"])
p.set_config("download.allow_hosts", {gallery!r})
p.concepts.add("street")
searched = p.images.search("gallery:http://{gallery}")
downloaded = p.images.download()
runs = p.evaluate.run("colours:", "spread", options={{"n_resamples": 100}})
res = p.evaluate.results(suite="spread", frame=False)
print(json.dumps({{"searched": searched["results"], "downloaded": downloaded["by_status"],
                  "status": [r.status for r in runs], "model": res[0]["model"], "n": res[0]["n"]}}))
"""
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=_env(plugin_site), capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == {"searched": 2, "downloaded": {"downloaded": 2},
                                                        "status": ["done"], "model": "colours:bins=4", "n": 2}
