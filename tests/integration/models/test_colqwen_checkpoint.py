"""The ColQwen family loads a tiny random-init checkpoint through ``from_pretrained``."""
from __future__ import annotations


import numpy as np
import pytest
from PIL import Image

from cultura.models.embedders import get_embedder
from cultura.models.embedders.multivector import (MultiVectorEmbedder, maxsim_scores)


def test_colqwen_family_loads_a_tiny_random_init_checkpoint_through_from_pretrained(tmp_path, monkeypatch):
    """The code path of 'colqwen:vidore/colqwen2.5-v0.2', on a tiny random-init ColQwen2 saved locally."""
    from skimage import data

    from cultura.models.embedders.base import ModelUnavailable
    from tests.fakes.tiny_colqwen import build_tiny_colqwen

    path = build_tiny_colqwen(tmp_path / "tiny-colqwen")
    e = get_embedder(f"colqwen:{path}", device="cpu", batch_size=2)
    assert isinstance(e, MultiVectorEmbedder) and e.late_interaction
    assert e.identity.startswith("colqwen:random-init:tiny-colqwen@")  # never passed off as a model
    assert e.info["architecture"] == "ColQwen2ForRetrieval" and e.info["random_init"] is True
    toks = e.embed_text_tokens(["a train", "bus temple wedding"])
    assert [t.shape[1] for t in toks] == [16, 16] and toks[0].shape[0] != toks[1].shape[0]  # padding dropped
    photos = [Image.fromarray(data.astronaut()[:120, :160]), Image.fromarray(data.coffee()[:100, :140])]
    imgs = e.embed_image_tokens(photos)
    assert all(m.shape[1] == 16 and m.shape[0] > 4 for m in imgs)
    np.testing.assert_allclose(np.linalg.norm(imgs[0], axis=1), 1, rtol=1e-4)
    s = maxsim_scores(toks, imgs)
    assert s.shape == (2, 2) and np.isfinite(s).all()
    again = get_embedder(f"colqwen:{path}", device="cpu").embed_text_tokens(["a train"])[0]
    np.testing.assert_allclose(again, toks[0], atol=1e-5)  # deterministic, batch-independent
    # a hub name offline is a clear error, not a download
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailable, match="offline"):
        get_embedder("colqwen:vidore/colqwen2.5-v0.2-not-cached", device="cpu")
