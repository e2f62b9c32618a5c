"""Multilingual CLIP families and the seed papers' presets: M-CLIP by hub name from a local hub cache, its errors,
the presets naming their models, and ``cultura evaluate models``."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from PIL import Image

from cultura.errors import CulturaError, UnknownName
from cultura.models.embedders import ModelUnavailable, get_embedder
from tests.fakes.tiny_lm import wordlevel_tokenizer


WORDS = ["a photo of a cat", "ein Foto einer Katze", "une photo d'un chat", "猫 の 写真", "รูป แมว",
         "एक बिल्ली की तस्वीर", "عکس یک گربه"]


def _hub_snapshot(cache, repo: str, src) -> None:
    """Lay ``src``'s files out as the Hugging Face hub cache does (refs/main → snapshots/<commit>/)."""
    base = cache / ("models--" + repo.replace("/", "--"))
    commit = "0" * 40
    (base / "refs").mkdir(parents=True, exist_ok=True)
    (base / "refs" / "main").write_text(commit)
    shutil.copytree(src, base / "snapshots" / commit, dirs_exist_ok=True)


@pytest.fixture(scope="module")
def tiny_mclip(tmp_path_factory):
    """A tiny random M-CLIP (XLM-R text transformer + linear map to 32 dims, the cultura-tiny image tower's
    dimension), stored in a local hub cache as ``cultura-test/Tiny-MCLIP`` with its base ``cultura-test/tiny-xlmr``."""
    import torch
    from transformers import XLMRobertaConfig, XLMRobertaModel

    from cultura.models.embedders.mclip import save_mclip

    root = tmp_path_factory.mktemp("mclip")
    base = root / "tiny-xlmr"
    tok = wordlevel_tokenizer(base, WORDS, ["<s>", "<pad>", "</s>", "<unk>", "<mask>"], "<s> $A </s>",
                              bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>",
                              mask_token="<mask>")
    cfg = XLMRobertaConfig(vocab_size=len(tok), hidden_size=24, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=48, max_position_embeddings=40, pad_token_id=1, bos_token_id=0,
                           eos_token_id=2)
    cfg.save_pretrained(base)
    torch.manual_seed(0)
    transformer, proj = XLMRobertaModel(cfg), torch.nn.Linear(24, 32)
    folder = save_mclip(root / "Tiny-MCLIP", transformer, tok, proj, model_base="cultura-test/tiny-xlmr",
                        random_init=True)
    cache = root / "hub"
    _hub_snapshot(cache, "cultura-test/Tiny-MCLIP", folder)
    _hub_snapshot(cache, "cultura-test/tiny-xlmr", base)
    return {"cache": cache, "folder": folder, "transformer": transformer.eval(), "proj": proj.eval(),
            "tokenizer": tok, "root": root}


def test_mclip_by_hub_name_offline_matches_the_architecture(tiny_mclip, monkeypatch):
    import torch

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    e = get_embedder("mclip:cultura-test/Tiny-MCLIP+openclip:cultura-tiny", cache_dir=str(tiny_mclip["cache"]))
    assert e.identity.startswith("mclip:cultura-test/Tiny-MCLIP/random@")
    assert e.identity.endswith("+openclip:cultura-tiny/random_init@seed0")
    assert e.info["random_init"] is True and e.info["model_base"] == "cultura-test/tiny-xlmr"
    texts = ["a photo of a cat", "猫 の 写真 写真", "एक बिल्ली की तस्वीर"]
    got = e.embed_texts(texts)
    # the reference: Carlsson et al.'s forward (mean over the attention mask, then the linear map)
    enc = tiny_mclip["tokenizer"](texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = tiny_mclip["transformer"](**enc)[0]
        att = enc["attention_mask"]
        ref = tiny_mclip["proj"]((h * att.unsqueeze(2)).sum(1) / att.sum(1)[:, None]).numpy()
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    np.testing.assert_allclose(got, ref, atol=1e-5)
    ims = e.embed_images([Image.new("RGB", (40, 30), "red"), Image.new("RGB", (20, 20), "blue")])
    assert ims.shape == (2, 32) and e.dim == 32
    np.testing.assert_allclose(ims, get_embedder("openclip:cultura-tiny").embed_images(
        [Image.new("RGB", (40, 30), "red"), Image.new("RGB", (20, 20), "blue")]), atol=1e-5)
    # the same model from its folder (modelBase still resolved through the cache)
    local = get_embedder(f"mclip:{tiny_mclip['folder']}+openclip:cultura-tiny", cache_dir=str(tiny_mclip["cache"]))
    np.testing.assert_allclose(local.embed_texts(texts), got, atol=1e-6)


def test_mclip_errors_are_clear(tiny_mclip, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = str(tiny_mclip["cache"])
    with pytest.raises(CulturaError, match="no known image tower"):
        get_embedder("mclip:cultura-test/Tiny-MCLIP", cache_dir=cache)
    with pytest.raises(ModelUnavailable, match="offline"):
        get_embedder("mclip:M-CLIP/XLM-Roberta-Large-Vit-B-32", cache_dir=str(tmp_path))
    # a published name pairs with its own image tower (here not cached: the error names open_clip's weights)
    _hub_snapshot(tmp_path / "hub", "M-CLIP/XLM-Roberta-Large-Vit-B-32", tiny_mclip["folder"])
    _hub_snapshot(tmp_path / "hub", "cultura-test/tiny-xlmr", tiny_mclip["root"] / "tiny-xlmr")
    with pytest.raises(ModelUnavailable, match="openclip:ViT-B-32/openai"):
        get_embedder("mclip:M-CLIP/XLM-Roberta-Large-Vit-B-32", cache_dir=str(tmp_path / "hub"))
    with pytest.raises(CulturaError, match="projects to 32 dimensions"):
        get_embedder("mclip:cultura-test/Tiny-MCLIP+fake:dim=8", cache_dir=cache).embed_texts  # noqa: B018
    with pytest.raises(CulturaError, match="does not exist"):
        get_embedder(f"mclip:{tmp_path}/missing+openclip:cultura-tiny")
    bad = tmp_path / "bad"
    shutil.copytree(tiny_mclip["folder"], bad)
    (bad / "config.json").write_text(json.dumps({"model_type": "M-CLIP"}))
    with pytest.raises(CulturaError, match="lacks modelBase"):
        get_embedder(f"mclip:{bad}+openclip:cultura-tiny", cache_dir=cache)
    # the init-argument spelling of MCLIPConfig (transformerDimSize / imageDimSize) reads the same
    (bad / "config.json").write_text(json.dumps({"model_type": "M-CLIP", "modelBase": "cultura-test/tiny-xlmr",
                                                 "transformerDimSize": 24, "imageDimSize": 32}))
    ok = get_embedder(f"mclip:{bad}+openclip:cultura-tiny", cache_dir=cache)
    ref = get_embedder(f"mclip:{tiny_mclip['folder']}+openclip:cultura-tiny", cache_dir=cache)
    np.testing.assert_allclose(ok.embed_texts(["a photo of a cat"]), ref.embed_texts(["a photo of a cat"]), atol=1e-6)
    assert not ok.random_init  # the marker is gone with the config


# -- presets and `cultura evaluate models` ------------------------------------------------------------------
def test_presets_name_the_seed_models():
    from cultura.models.embedders import available_embedders
    from cultura.models.embedders.presets import PRESETS, get_preset

    for name in ("m-clip", "nllb-clip", "capivara-clip", "siglip2", "clip-vit-b32", "clip-vit-l14",
                 "openclip-vit-b32", "m-clip-b16plus"):
        p = get_preset(name)
        assert p.spec.split(":")[0] in available_embedders()
    assert PRESETS["nllb-clip"].spec == "openclip:nllb-clip-base/v1"
    assert PRESETS["capivara-clip"].spec == "openclip:hf-hub:hiaac-nlp/CAPIVARA"
    assert get_embedder("preset:cultura-tiny").identity == "openclip:cultura-tiny/random_init@seed0"
    with pytest.raises(UnknownName, match="Did you mean 'm-clip'"):
        get_embedder("preset:mclip")
    with pytest.raises(ModelUnavailable, match="offline"):
        get_embedder("preset:m-clip")


def test_evaluate_models_command_lists_needs_and_cache(tmp_path):
    from click.testing import CliRunner

    from cultura.cli import cli as main

    cache = tmp_path / "hub"
    snap = cache / "models--M-CLIP--XLM-Roberta-Large-Vit-L-14" / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    res = CliRunner().invoke(main, ["evaluate", "models", "--cache-dir", str(cache), "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.stdout)}
    assert {"m-clip", "nllb-clip", "capivara-clip", "siglip2", "clip-vit-b32", "cultura-tiny"} <= set(rows)
    assert "M-CLIP/XLM-Roberta-Large-Vit-L-14 (cached)" in rows["m-clip"]["hub"]
    assert "timm/vit_large_patch14_clip_224.openai (not cached)" in rows["m-clip"]["hub"]
    assert rows["m-clip"]["ready_offline"] is False and rows["cultura-tiny"]["ready_offline"] is True
    assert "facebook/nllb-200-distilled-600M" in rows["nllb-clip"]["hub"]
    assert rows["cultura-tiny"]["random_init"] is True and "003" in rows["m-clip"]["seeds"]
    res = CliRunner().invoke(main, ["evaluate", "models"])
    assert res.exit_code == 0 and "siglip2" in res.output and "preset:NAME" in res.output
