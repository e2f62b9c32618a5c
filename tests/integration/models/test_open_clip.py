"""open_clip through cultura: the tiny random-init model, unknown architectures and tags, a config file that does
not shadow the built-ins, an offline pretrained tag in one message, the embedding cache, and random-init models
saying so."""
from __future__ import annotations


import numpy as np
import pytest

from cultura.errors import CulturaError, UnknownName
from cultura.models.embedders import (
    ModelUnavailable,
    cache_size,
    embed_images_cached,
    get_embedder,
)
from cultura.models.tiny import is_random_init
from tests.unit.models.test_models import _store_image, assert_unit_rows, img  # noqa: F401 - shared with the unit tests


# -- open_clip -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny():
    return get_embedder("openclip:cultura-tiny")


def test_openclip_tiny(tiny):
    ims = [img("red", (100, 80)), img("blue", (20, 20)), img("white", (64, 64), "L")]
    v = tiny.embed_images(ims)
    assert_unit_rows(v, 3)
    assert v.shape == (3, 32)
    t = tiny.embed_texts(["a photo of a cat", "a photo of a temple"])
    assert_unit_rows(t, 2)
    assert tiny.identity == "openclip:cultura-tiny/random_init@seed0"
    assert tiny.info["architecture"] == "cultura-tiny" and tiny.info["seed"] == 0 and tiny.dim == 32
    again = get_embedder("openclip:cultura-tiny")  # random init under a fixed seed: deterministic
    np.testing.assert_allclose(again.embed_images(ims), v, atol=1e-5)
    other = get_embedder("openclip:cultura-tiny", seed=1)
    assert other.identity == "openclip:cultura-tiny/random_init@seed1"
    assert not np.allclose(other.embed_texts(["a photo of a cat"]), t[:1], atol=1e-3)


def test_openclip_unknown_architecture_and_tag():
    with pytest.raises(UnknownName, match="Did you mean 'cultura-tiny'"):
        get_embedder("openclip:cultura-tinny")
    with pytest.raises(UnknownName, match="Did you mean 'openai'"):
        get_embedder("openclip:ViT-B-32/opnai")
    with pytest.raises(CulturaError, match="does not exist"):
        get_embedder("openclip:/nonexistent/model.json")


def test_openclip_config_file_does_not_shadow_builtins(tmp_path):
    import open_clip

    from cultura.models.embedders.openclip import model_configs_dir

    shadow = tmp_path / "ViT-B-32.json"  # same stem as a built-in architecture
    shadow.write_text((model_configs_dir() / "cultura-tiny.json").read_text())
    e = get_embedder(f"openclip:{shadow}")
    assert e.identity.startswith("openclip:ViT-B-32#") and e.dim == 32
    assert open_clip.get_model_config("ViT-B-32")["embed_dim"] == 512
    bad = tmp_path / "bad.json"
    bad.write_text('{"embed_dim": 4}')
    with pytest.raises(CulturaError, match="needs the keys"):
        get_embedder(f"openclip:{bad}")


# -- offline failures -------------------------------------------------------------------------------------
def test_offline_pretrained_tag_gives_one_clear_message(tmp_path):
    with pytest.raises(ModelUnavailable) as e:
        get_embedder("openclip:ViT-B-32/openai", cache_dir=str(tmp_path))
    assert str(e.value) == (
        "Model 'openclip:ViT-B-32/openai' needs weights from the Hugging Face hub, which is offline "
        "(HF_HUB_OFFLINE=1). Download them once with network access, or use pretrained=None / a local path.")


def test_cache_with_openclip_tiny(project, tiny):
    shas = [_store_image(project, img(c, (70, 50))) for c in ("red", "navy")]
    tiny.reset_stats()
    a = embed_images_cached(project, tiny, shas)
    b = embed_images_cached(project, tiny, shas[::-1])
    assert tiny.stats["images"] == 2
    np.testing.assert_allclose(b, a[::-1])
    assert set(cache_size(project)["models"]) == {"openclip:cultura-tiny/random_init@seed0"}


def test_random_init_models_say_so():
    from cultura.models.embedders import get_embedder
    from cultura.models.scorers import get_scorer

    tiny = get_embedder("openclip:cultura-tiny")
    assert "random_init" in tiny.identity and tiny.info["random_init"] is True
    lm = get_scorer("hf:cultura-tiny-gpt2")
    assert is_random_init(lm.identity) and lm.info["random_init"] is True
    assert get_embedder("fake").info["random_init"] is False
