"""Settings that go into every download request are checked when they are set, not when the first request
fails: ``download.user_agent`` (one line of printable ASCII, at most 1 KiB) and ``download.proxy`` ('direct' or
an http://host:port without credentials), by ``cultura config set`` (one sentence, nothing written) and when a
hand-edited ``cultura.toml`` is loaded."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from cultura.cli import cli
from cultura.config import load_config
from cultura.errors import ConfigError


def config_set(project, key: str, value: str):
    return CliRunner().invoke(cli, ["--project", str(project.root), "config", "set", key, value])


@pytest.mark.parametrize("value, words", [
    ("x\r\nY: 1", "line break"),
    ("crawler\x00", "control character"),
    ("crawler\tv1", "control character"),
    ("caf\u00e9-crawler/1.0", "non-ASCII"),
    ("x" * 50_000_000, "50,000,000 characters"),
    ("   ", "is empty"),
])
def test_a_user_agent_no_request_can_carry_is_refused_at_set(project, value, words):
    before = (project.root / "cultura.toml").read_text()
    r = config_set(project, "download.user_agent", value)
    assert r.exit_code == 1 and words in r.output, r.output[:500]
    assert "Nothing was written" in r.output and "Traceback" not in r.output
    assert len(r.output) < 1000  # the value is not echoed back whole
    assert (project.root / "cultura.toml").read_text() == before


def test_a_plain_user_agent_is_accepted(project):
    r = config_set(project, "download.user_agent", "my-lab-crawler/1.0 (+https://example.org/contact)")
    assert r.exit_code == 0, r.output
    assert load_config(project.root / "cultura.toml").download.user_agent.startswith("my-lab-crawler/1.0")


@pytest.mark.parametrize("value, words", [
    ("socks5://127.0.0.1:1080", "HTTP proxies only"),
    ("https://proxy.example:3128", "HTTP proxies only"),
    ("proxy.example:3128", "has no scheme"),
    ("http://crawler:canaryPROXYpw1@proxy.example:3128", "holds no secrets"),
    ("http://proxy.example:3128/path", "no path"),
    ("http://proxy.example:99999", "not a valid URL"),
    ("http://proxy example:3128", "no spaces"),
])
def test_a_proxy_the_downloader_cannot_use_is_refused_at_set(project, value, words):
    before = (project.root / "cultura.toml").read_text()
    r = config_set(project, "download.proxy", value)
    assert r.exit_code == 1 and words in r.output and "Traceback" not in r.output, r.output
    assert "canaryPROXYpw1" not in r.output
    assert (project.root / "cultura.toml").read_text() == before


@pytest.mark.parametrize("value", ["http://proxy.example:3128", "http://127.0.0.1:8888", "http://[::1]:3128",
                                   "direct"])
def test_a_usable_proxy_is_accepted(project, value):
    r = config_set(project, "download.proxy", value)
    assert r.exit_code == 0, r.output
    assert load_config(project.root / "cultura.toml").download.proxy == value


def test_a_hand_edited_file_is_checked_the_same_way(project):
    path = project.root / "cultura.toml"
    lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("user_agent")]
    at = lines.index("[download]") + 1
    path.write_text("\n".join([*lines[:at], 'user_agent = "x\\r\\nX-Injected: 1"', *lines[at:]]) + "\n")
    with pytest.raises(ConfigError, match=r"download\.user_agent.*line break"):
        load_config(path)
    r = CliRunner().invoke(cli, ["--project", str(project.root), "images", "download"])
    assert r.exit_code == 1 and "download.user_agent" in r.output and "Traceback" not in r.output, r.output
