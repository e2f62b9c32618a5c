"""A URL skipped by the address policy is fetched once ``download.allow_hosts`` names its host (a local photo
server), through the CLI on real photographs: no dead end that forces a new project."""
from __future__ import annotations

import io
import json

import pytest
from click.testing import CliRunner
from PIL import Image

from cultura.cli import cli
from tests.fakes.cli_runner import ProjectCli
from tests.fakes.file_server import www  # noqa: F401 (fixture)


@pytest.fixture
def photo_server(www):
    """Real photographs (scikit-image) served over HTTP on 127.0.0.1 (a private address: refused by default)."""
    import skimage.data as skd  # deferred: heavy, only the photographs need it

    for name in ("coffee", "chelsea", "astronaut"):
        buf = io.BytesIO()
        Image.fromarray(getattr(skd, name)()).convert("RGB").save(buf, "JPEG", quality=90)
        www.put(f"{name}.jpg", buf.getvalue())
    return www.host_port


def test_policy_skip_is_re_examined_when_allow_hosts_changes(tmp_path, photo_server):
    proj = tmp_path / "proj"
    assert CliRunner().invoke(cli, ["init", str(proj), "--countries", "US,JP"]).exit_code == 0
    run = ProjectCli(proj, env={"HF_HUB_OFFLINE": "1"})
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
