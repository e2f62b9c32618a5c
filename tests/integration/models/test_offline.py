"""A hub that cannot be reached fails at once in one sentence (no minute of download retries): when the hub's
host does not resolve, cultura switches the hub off for the process before loading a model by hub name."""
from __future__ import annotations

import pytest
from huggingface_hub import constants

from cultura.models.embedders import ModelUnavailable, get_embedder
from cultura.models.embedders import base


def test_unreachable_hub_switches_the_hub_off_and_names_the_alternatives(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")  # .invalid never resolves
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))        # nothing cached
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    base.hub_reachable.cache_clear()
    try:
        with pytest.raises(ModelUnavailable) as e:
            get_embedder("st:some-org/not-cached-model").embed_texts(["x"])
        assert "offline (HF_HUB_OFFLINE=1)" in str(e.value) and "local folder" in str(e.value)
        assert constants.HF_HUB_OFFLINE is True
    finally:
        base.hub_reachable.cache_clear()
