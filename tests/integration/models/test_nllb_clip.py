"""NLLB-CLIP encodes the language of each text (its tokenizer's source-language token)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from cultura.models.embedders import FakeEmbedder, embed_texts_cached, get_embedder
from tests.integration.models.test_multilingual_presets import WORDS


# -- NLLB-CLIP: the source-language token ------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_nllb_clip(tmp_path_factory):
    """open_clip's NLLB-CLIP architecture (M2M100 encoder text tower, cls pooler, linear projection) in tiny
    size, with an NLLB-200 tokenizer (its 200+ FLORES language tokens) over a small vocabulary."""
    from transformers import M2M100Config, NllbTokenizerFast

    root = tmp_path_factory.mktemp("nllb")
    tower = root / "tiny-nllb"
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for w in " ".join(WORDS).split():
        vocab.setdefault("▁" + w, len(vocab))
    tok = NllbTokenizerFast(vocab=vocab, merges=[])
    tok.save_pretrained(tower)
    M2M100Config(vocab_size=len(tok), d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                 decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                 pad_token_id=1, bos_token_id=0, eos_token_id=2).save_pretrained(tower)
    cfg = {"embed_dim": 16,
           "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "head_width": 16, "patch_size": 16},
           "text_cfg": {"hf_model_name": str(tower), "hf_tokenizer_name": str(tower), "hf_proj_type": "linear",
                        "hf_pooler_type": "cls_pooler", "context_length": 16}}
    path = root / "tiny-nllb-clip.json"
    path.write_text(json.dumps(cfg))
    return path


def test_nllb_clip_encodes_the_language_of_each_text(tiny_nllb_clip, project):
    e = get_embedder(f"openclip:{tiny_nllb_clip}")
    assert e.language_aware and e.info["default_language"] == "eng_Latn" and e.info["random_init"] is True
    tok = e.tokenizer.tokenizer
    ids = {}
    for lang in ("hi", "fa", None):
        e._embed_text_batch(["a photo"], language=lang)  # sets the tag as embedding does
        ids[lang] = e.tokenizer(["a photo"])[0].tolist()
    assert ids["hi"][0] == tok.convert_tokens_to_ids("hin_Deva")
    assert ids["fa"][0] == tok.convert_tokens_to_ids("pes_Arab")
    assert ids[None][0] == tok.convert_tokens_to_ids("eng_Latn") and ids["hi"][1:] == ids[None][1:]
    text = ["एक बिल्ली की तस्वीर"]
    hi, fa, default = (e.embed_texts(text, language=x) for x in ("hi", "fa", None))
    assert not np.allclose(hi, fa, atol=1e-4) and not np.allclose(hi, default, atol=1e-4)
    np.testing.assert_allclose(e.embed_texts(text, language="en"), default, atol=1e-6)
    np.testing.assert_allclose(e.embed_texts(text, language="hi"), hi, atol=1e-6)  # the tag is reset per call
    # the embedding cache keeps one vector per (language, text) for a language-aware model
    a = embed_texts_cached(project, e, text, language="hi")
    b = embed_texts_cached(project, e, text, language="fa")
    np.testing.assert_allclose(a, hi, atol=1e-6)
    np.testing.assert_allclose(b, fa, atol=1e-6)
    # a model that does not take a language ignores it (and shares one cache row)
    f = FakeEmbedder(dim=8)
    np.testing.assert_array_equal(embed_texts_cached(project, f, text, language="hi"),
                                  embed_texts_cached(project, f, text, language="fa"))
