"""``export --push-to-hub`` through huggingface_hub against a local Hub stand-in; its errors are one sentence
without the token."""
from __future__ import annotations

import json

import pytest

from tests.fakes.hub_server import FakeHub
from tests.integration.benchmark.test_export_hub_loads_in_datasets import _cli
from tests.unit.benchmark.test_export_hub import _photos, photos  # noqa: F401 - shared with the unit tests


@pytest.fixture
def fake_hub(monkeypatch):
    import huggingface_hub.constants as hc

    with FakeHub() as h:
        monkeypatch.setattr(hc, "HF_HUB_OFFLINE", False)   # the suite runs offline; this server is local
        monkeypatch.setenv("HF_ENDPOINT", h.url)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        yield h


def test_push_to_hub_through_huggingface_hub(photos, tmp_path, fake_hub):
    token = fake_hub.state.token
    r = _cli(photos, "export", str(tmp_path / "p"), "--push-to-hub", "lab/cultural-bench", "--private",
             "--json", env={"HF_TOKEN": token})
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res["hub"]["repo"] == "lab/cultural-bench" and res["hub"]["url"].endswith("/datasets/lab/cultural-bench")
    assert token not in r.output
    out = tmp_path / "p"
    local = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert fake_hub.state.repos["lab/cultural-bench"] == local
    assert fake_hub.state.private["lab/cultural-bench"] is True
    # the Croissant pushed names the page it was pushed to
    assert json.loads(local["croissant.json"])["url"] == res["hub"]["url"]
    paths = [q["path"] for q in fake_hub.state.requests]
    assert "/api/validate-yaml" in paths and "/api/repos/create" in paths
    assert all(q["auth"] == f"Bearer {token}" for q in fake_hub.state.requests)
    assert not any(token.encode() in q["body"] for q in fake_hub.state.requests)

    # a second export pushes to the existing repository
    r = _cli(photos, "export", str(tmp_path / "p2"), "--benchmark", "association",
             "--push-to-hub", "lab/cultural-bench", env={"HF_TOKEN": token})
    assert r.exit_code == 0, r.output
    assert "Pushed to lab/cultural-bench" in r.output and len(fake_hub.state.commits) == 2


def test_push_errors_are_one_sentence_without_the_token(photos, tmp_path, fake_hub):
    r = _cli(photos, "export", str(tmp_path / "a"), "--push-to-hub", "lab/x")
    assert r.exit_code == 1 and "HF_TOKEN" in r.output
    r = _cli(photos, "export", str(tmp_path / "b"), "--push-to-hub", "not a repo", env={"HF_TOKEN": "hf_x"})
    assert r.exit_code == 1 and "OWNER/NAME" in r.output
    wrong = "hf_wrong_secret_token_987"
    r = _cli(photos, "export", str(tmp_path / "c"), "--push-to-hub", "lab/x", env={"HF_TOKEN": wrong})
    assert r.exit_code == 1 and "The push to" in r.output and "HF_TOKEN" in r.output
    assert wrong not in r.output
    assert "lab/x" not in fake_hub.state.repos
