"""No dead ends that force a new project (issue 20 item 5), through the CLI on real photographs.

- a URL skipped because its host was not allowed is fetched once ``download.allow_hosts`` lists it (set with
  ``cultura config set``), and ``--retry-failed`` re-examines policy skips (still refused while not allowed);
- ``cultura config get/set`` validate exactly like the file and keep its comments;
- ``cultura images tag --overwrite`` retags (a plain rerun with a new ``--top-k`` says how), and the build's
  "every cell short of images" names the tags as the cause when every image carries every concept's tag.
"""
from __future__ import annotations

import functools
import http.server
import json
import threading

import pytest
from click.testing import CliRunner
from PIL import Image

from cultura.cli import cli
from cultura.cli.demo import COUNTRIES, PLAN, TERMS, real_photos


class Run:
    def __init__(self, proj):
        self.proj, self.runner = proj, CliRunner()

    def __call__(self, *args, ok=True):
        res = self.runner.invoke(cli, ["--project", str(self.proj), *args], env={"HF_HUB_OFFLINE": "1"},
                                 catch_exceptions=False)
        assert ok is None or (res.exit_code == 0) == ok, f"cultura {' '.join(args)}:\n{res.output}"
        return res.output

    def json(self, *args, ok=True):
        return json.loads(self(*args, "--json", ok=ok))


@pytest.fixture
def photo_server(tmp_path):
    """Real photographs (scikit-image) served over HTTP on 127.0.0.1 (a private address: refused by default)."""
    import skimage.data as skd  # deferred: heavy, only the photographs need it

    www = tmp_path / "www"
    www.mkdir()
    for name in ("coffee", "chelsea", "astronaut"):
        Image.fromarray(getattr(skd, name)()).convert("RGB").save(www / f"{name}.jpg", quality=90)
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # not mixed into the CLI output under test
            pass

    handler = functools.partial(Quiet, directory=str(www))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_policy_skip_is_re_examined_when_allow_hosts_changes(tmp_path, photo_server):
    proj = tmp_path / "proj"
    assert CliRunner().invoke(cli, ["init", str(proj), "--countries", "US,JP"]).exit_code == 0
    run = Run(proj)
    toml = proj / "cultura.toml"
    toml.write_text("# my notes: keep me\n" + toml.read_text(), encoding="utf-8")
    urls = tmp_path / "urls.jsonl"
    urls.write_text("".join(json.dumps({"url": f"http://{photo_server}/{n}.jpg", "concept": c, "country": k}) + "\n"
                            for n, c, k in (("coffee", "breakfast", "US"), ("chelsea", "pet", "JP"),
                                            ("astronaut", "pet", "US"))), encoding="utf-8")
    assert run.json("images", "search", "--provider", f"urls:{urls}")["results"] == 3
    first = run.json("images", "download")
    assert first["by_status"] == {"skipped": 3} and first["by_reason"] == {"blocked_address": 3}
    # an explicit retry re-examines the policy skips, and the policy (unchanged) still refuses them
    again = run.json("images", "download", "--retry-failed")
    assert again["reexamined_skips"] == 3 and again["by_reason"] == {"blocked_address": 3}
    assert run.json("images", "download")["candidates"] == 0          # nothing pending: no network I/O

    # the policy changes through the CLI, validated like the file; comments kept
    bad = run.json("config", "set", "download.allow_host", photo_server, ok=False)
    assert "unknown key 'download.allow_host'" in bad["error"] and "download.allow_hosts" in bad["error"]
    bad = run.json("config", "set", "download.workers", "many", ok=False)
    assert "download.workers" in bad["error"] and "Nothing was written" in bad["error"]
    assert run.json("config", "get", "download.allow_hosts")["value"] == []
    res = run.json("config", "set", "download.allow_hosts", photo_server)
    assert res == {"key": "download.allow_hosts", "old": [], "value": [photo_server]}
    assert toml.read_text(encoding="utf-8").startswith("# my notes: keep me\n")
    assert run("config", "get", "download.allow_hosts").strip() == json.dumps([photo_server])

    fetched = run.json("images", "download")
    assert fetched["reexamined_skips"] == 3 and fetched["by_status"] == {"downloaded": 3}
    assert fetched["new_images"] == 3
    assert run.json("images", "failures") == []


def test_retag_with_overwrite_and_the_build_names_the_tags(tmp_path):
    photos = tmp_path / "photos"
    planted = real_photos(photos)
    proj = tmp_path / "proj"
    assert CliRunner().invoke(cli, ["init", str(proj), "--countries", ",".join(COUNTRIES)]).exit_code == 0
    run = Run(proj)
    run("concepts", "add", *PLAN)
    (tmp_path / "terms.tsv").write_text("concept\tcountry\tterm\n" + "".join(
        f"{k}\t{cc}\t{t}\n" for k, v in TERMS.items() for cc, t in v.items()), encoding="utf-8")
    run("concepts", "set-term", "--from", str(tmp_path / "terms.tsv"))
    run("images", "search", "--provider", f"folder:{photos}")
    assert run.json("images", "download")["new_images"] == planted["distinct"]

    # the default top-3 tags with 3 concepts: every image carries every concept's tag
    tiny = ("--method", "clip", "--clip-model", "openclip:cultura-tiny")
    t = run.json("images", "tag", *tiny)
    assert t["done"] == planted["distinct"] and t["tags"] == 3 * planted["distinct"]
    refused = run("build", "association", "--allow-unreviewed", "--allow-random-tags", ok=False)
    assert "short of images" in refused and "The tags are the cause" in refused
    assert "cultura images tag --overwrite --top-k 1" in refused

    # a plain rerun with a new --top-k does nothing, and says how to retag
    again = run.json("images", "tag", *tiny, "--top-k", "1")
    assert again["images"] == 0 and "--overwrite" in again["note"]
    over = run.json("images", "tag", *tiny, "--top-k", "1", "--overwrite")
    assert over["done"] == planted["distinct"] and over["tags"] == planted["distinct"]   # one tag each, replaced
    listed = run.json("images", "list")
    assert all(len([x for x in r["tags"].split(", ") if x]) == 1 for r in listed)
    out = run("build", "association", "--allow-unreviewed", "--allow-random-tags", ok=None)
    assert "The tags are the cause" not in out
