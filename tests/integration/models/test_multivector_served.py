"""The multi-vector family served over HTTP, scored by MaxSim."""
from __future__ import annotations


import numpy as np
import pytest
from PIL import Image

from cultura.models.embedders import get_embedder
from cultura.models.embedders.multivector import (MultiVectorEmbedder, maxsim_scores,
                                                  text_tokens_cached)
from tests.unit.models.test_multivector import DIM, _Handler, _tokens, multi_server  # noqa: F401 - shared with the unit tests


def _img(color) -> Image.Image:
    return Image.new("RGB", (8, 8), color)


def test_openai_multi_vector_family_scores_by_maxsim(multi_server, project):
    e = get_embedder("openai-multi:colqwen-tiny", batch_size=2)
    assert isinstance(e, MultiVectorEmbedder) and e.late_interaction
    assert e.identity == "openai-multi:colqwen-tiny" and e.info["scoring"].startswith("MaxSim")
    toks = e.embed_text_tokens(["a red train", "bus"])
    assert [t.shape for t in toks] == [(3, DIM), (1, DIM)]
    np.testing.assert_allclose(np.linalg.norm(toks[0], axis=1), 1, rtol=1e-5)
    imgs = e.embed_image_tokens([_img("red"), _img("blue")])
    assert imgs[0].shape == (3, DIM)
    # MaxSim by hand from the server's raw token vectors
    raw_q = np.asarray(_tokens("a red train"))
    raw_q /= np.linalg.norm(raw_q, axis=1, keepdims=True)
    assert maxsim_scores(toks[:1], imgs[:1])[0, 0] == pytest.approx(
        float((raw_q @ imgs[0].T).max(axis=1).sum()), rel=1e-5)
    # the single-vector view is the mean of the tokens, normalised
    pooled = e.embed_texts(["a red train"])[0]
    np.testing.assert_allclose(pooled, toks[0].mean(0) / np.linalg.norm(toks[0].mean(0)), rtol=1e-5)
    # instructions reach the tokens and the identity
    ins = get_embedder("openai-multi:colqwen-tiny#text=@agnostic")
    assert ins.identity.startswith("openai-multi:colqwen-tiny#instr=")
    ins.embed_text_tokens(["bus"])
    assert multi_server.requests[-1]["input"][0].endswith("\nbus")
    # token matrices are cached per identity: a rerun asks the server nothing
    n = len(multi_server.requests)
    a = text_tokens_cached(project, e, ["a red train", "bus", "a red train"])
    b = text_tokens_cached(project, e, ["bus", "a red train"])
    assert len(multi_server.requests) == n + 1
    np.testing.assert_array_equal(a[0], b[1])
    assert [x.shape for x in a] == [(3, DIM), (1, DIM), (3, DIM)]
