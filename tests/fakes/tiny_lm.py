"""A tiny random-initialised GPT-2 with a locally trained byte-level BPE tokenizer (no download), built once
per test session into a temporary folder. Fixture ``tiny_lm``: the folder path (use ``hf:<path>``)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory):
    from cultura.models.tiny import build_tiny_lm

    return build_tiny_lm(tmp_path_factory.mktemp("tiny-gpt2") / "model")
