"""The model registry and the hash embedder: did-you-mean errors, bad specs, plugins by registration and by
entry point, a light import, the fake embedder, the embedding cache and zero-shot tagging. (Real families on
tiny random-init models: tests/integration/models/.)"""
from __future__ import annotations

import hashlib
import io
import subprocess
import sys
from importlib import metadata

import numpy as np
import pytest
from PIL import Image

from cultura.errors import CulturaError, UnknownName
from cultura.models import registry as model_registry
from cultura.models.embedders import (
    Embedder,
    FakeEmbedder,
    ModelCapabilityError,
    cache_size,
    clear_cache,
    embed_images_cached,
    embed_texts_cached,
    get_embedder,
    register_embedder,
    unregister_embedder,
    zero_shot,
)
from cultura.models.embedders import registry as reg


def img(color, size=(40, 30), mode="RGB"):
    return Image.new(mode, size, color)


def assert_unit_rows(v, n):
    assert v.dtype == np.float32 and v.ndim == 2 and v.shape[0] == n
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


# -- registry --------------------------------------------------------------------------------------------
def test_unknown_family_names_the_closest_and_lists_all():
    with pytest.raises(UnknownName) as e:
        get_embedder("opnclip:ViT-B-32/openai")
    msg = str(e.value)
    assert msg.startswith("Unknown embedder family 'opnclip'. Did you mean 'openclip'?")
    for fam in ("fake", "hf", "openai", "openclip", "st"):
        assert fam in msg


def test_bad_specs_are_clear():
    with pytest.raises(CulturaError, match="non-empty string"):
        get_embedder("")
    with pytest.raises(CulturaError, match="key=value"):
        get_embedder("fake:32")
    with pytest.raises(CulturaError, match="Unknown fake embedder option"):
        get_embedder("fake:size=3")
    with pytest.raises(CulturaError, match="batch_size"):
        get_embedder("fake", batch_size=0)


def test_plugin_registration_and_default_family():
    class Const(Embedder):
        family = "const"
        identity = "const:1"

        def _embed_text_batch(self, texts):
            return np.ones((len(texts), 3))

    register_embedder("const", lambda rest, **kw: Const(**kw))
    try:
        v = get_embedder("const").embed_texts(["a", "b"])
        np.testing.assert_allclose(v, np.full((2, 3), 1 / np.sqrt(3)), rtol=1e-6)
        with pytest.raises(ModelCapabilityError):
            get_embedder("const").embed_images([img("red")])
    finally:
        unregister_embedder("const")
    # a config value without a family prefix, read with a default family
    assert get_embedder("dim=4", default_family="fake").identity == "fake:dim=4"
    e = get_embedder("fake")
    assert get_embedder(e) is e


def test_entry_point_plugins_are_loaded(monkeypatch):
    ep = metadata.EntryPoint(name="plugfake", value="cultura.models.embedders.fake:from_spec",
                             group=reg.ENTRY_POINT_GROUP)
    monkeypatch.setattr(model_registry.metadata, "entry_points",
                        lambda group: [ep] if group == reg.ENTRY_POINT_GROUP else [])
    monkeypatch.setattr(reg.EMBEDDERS, "_entry_points_loaded", False)
    try:
        assert "plugfake" in reg.available_embedders()
        assert get_embedder("plugfake:dim=5").embed_texts(["x"]).shape == (1, 5)
    finally:
        unregister_embedder("plugfake")


def test_import_is_light():
    code = ("import sys, cultura.models.embedders as m; m.get_embedder('fake').embed_texts(['x']); "
            "print(sorted(k for k in ('torch', 'open_clip', 'transformers', 'sentence_transformers') "
            "if k in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- fake ------------------------------------------------------------------------------------------------
def test_fake_is_deterministic_normalised_and_one_row_per_input():
    e = get_embedder("fake:dim=32")
    a = e.embed_images([img("red"), img("blue"), img("red")])
    assert_unit_rows(a, 3)
    assert a.shape == (3, 32)
    np.testing.assert_array_equal(a[0], a[2])
    assert abs(float(a[0] @ a[1])) < 0.9
    b = get_embedder("fake:dim=32").embed_images([img("red")])  # a fresh instance, a fresh image object
    np.testing.assert_array_equal(a[0], b[0])
    t = e.embed_texts(["tea", "茶", "tea", ""])
    assert_unit_rows(t, 4)
    np.testing.assert_array_equal(t[0], t[2])
    assert e.stats == {"image_calls": 1, "images": 3, "text_calls": 1, "texts": 4}
    assert e.embed_texts([]).shape == (0, 32)
    assert get_embedder("fake:dim=32,seed=1").identity == "fake:dim=32,seed=1"
    assert not np.allclose(get_embedder("fake:dim=32,seed=1").embed_texts(["tea"]), t[0])
    with pytest.raises(CulturaError, match="strings"):
        e.embed_texts([1])


def test_fake_batches_and_progress():
    e = get_embedder("fake:dim=8", batch_size=3, progress=True)
    v = e.embed_texts([f"t{i}" for i in range(10)])
    assert_unit_rows(v, 10)
    assert e.stats["text_calls"] == 4
    np.testing.assert_array_equal(v, get_embedder("fake:dim=8").embed_texts([f"t{i}" for i in range(10)]))


class WesternBias(FakeEmbedder):
    """A planted-bias fake: images marked western lean towards the text 'western'."""

    variant = "western-bias"

    def image_vector(self, im):
        v = super().image_vector(im)
        if im.info.get("western"):
            v = v + 10 * self.text_vector("western")
        return v


def test_planted_bias_hook():
    e = WesternBias(dim=16)
    w = img("red")
    w.info["western"] = True
    vecs = e.embed_images([w, img("red")])
    txt = e.embed_texts(["western"])[0]
    assert vecs[0] @ txt > 0.9 > abs(vecs[1] @ txt)
    assert e.identity == "fake-western-bias:dim=16"


# -- cache -----------------------------------------------------------------------------------------------
def _store_image(project, im):
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    data = buf.getvalue()
    sha = hashlib.sha256(data).hexdigest()
    rel = f"blobs/{sha[:2]}/{sha}.png"
    (project.root / rel).parent.mkdir(parents=True, exist_ok=True)
    (project.root / rel).write_bytes(data)
    project.db["images"].insert({"sha256": sha, "path": rel, "format": "png", "width": im.width,
                                 "height": im.height, "bytes": len(data), "created_at": "2024-01-01T00:00:00"})
    return sha


def test_cache_images_rerun_computes_nothing_and_keeps_order(project):
    shas = [_store_image(project, img(c)) for c in ("red", "green", "blue", "white")]
    e = get_embedder("fake:dim=16", batch_size=2)
    first = embed_images_cached(project, e, shas, chunk_size=3)
    assert_unit_rows(first, 4)
    assert e.stats["images"] == 4 and e.stats["image_calls"] == 3  # chunks of 3 → batches 2+1, then 1
    direct = get_embedder("fake:dim=16").embed_images([img(c) for c in ("red", "green", "blue", "white")])
    np.testing.assert_array_equal(first, direct)
    e.reset_stats()
    order = [shas[3], shas[0], shas[3], shas[2]]
    again = embed_images_cached(project, e, order)
    assert e.stats["images"] == 0 and e.stats["image_calls"] == 0
    np.testing.assert_array_equal(again, first[[3, 0, 3, 2]])
    size = cache_size(project)
    assert size["rows"] == 4 and size["bytes"] == 4 * 16 * 4
    assert size["models"]["fake:dim=16"] == {"rows": 4, "bytes": 256, "image": 4, "text": 0}
    other = get_embedder("fake:dim=8")
    embed_images_cached(project, other, shas[:1])
    assert other.stats["images"] == 1 and cache_size(project)["rows"] == 5
    assert clear_cache(project, "fake:dim=16") == 4
    assert cache_size(project)["rows"] == 1
    embed_images_cached(project, e, shas[:2])
    assert e.stats["images"] == 2
    assert clear_cache(project) == 3 and cache_size(project) == {"rows": 0, "bytes": 0, "models": {}}


def test_cache_texts_and_loaders(project):
    e = get_embedder("fake:dim=8")
    texts = ["tea", "茶", "rice", "tea"]
    a = embed_texts_cached(project, e, texts)
    assert e.stats["texts"] == 3
    b = embed_texts_cached(project.db, e, list(reversed(texts)))  # a bare Database works for texts
    assert e.stats["texts"] == 3
    np.testing.assert_array_equal(b, a[::-1])
    assert embed_texts_cached(project, e, []).shape == (0, 8)
    # a load= function instead of images.path
    ims = {"k1": img("red"), "k2": img("blue")}
    v = embed_images_cached(project.db, e, ["k2", "k1"], load=ims.__getitem__)
    np.testing.assert_array_equal(v, e.embed_images([ims["k2"], ims["k1"]]))
    with pytest.raises(CulturaError, match="not in the images table"):
        embed_images_cached(project, e, ["0" * 64])


# -- zero-shot -------------------------------------------------------------------------------------------
class Oracle(FakeEmbedder):
    """Images carry their true label in ``info``; an image's vector is the text vector of its prompt."""

    variant = "oracle"

    def image_vector(self, im):
        return self.text_vector(f"a photo of a {im.info['label']}")


def test_zero_shot():
    e = Oracle(dim=64)
    a, b = img("red"), img("blue")
    a.info["label"], b.info["label"] = "tea", "rice"
    out = zero_shot(e, [a, b], ["rice", "tea", "noodles"], top_k=2)
    assert [r[0][0] for r in out] == ["tea", "rice"] and all(len(r) == 2 for r in out)
    full = zero_shot(e, [a], ["rice", "tea", "noodles"], top_k=10)[0]
    assert len(full) == 3 and abs(sum(s for _, s in full) - 1) < 1e-5
    raw = zero_shot(e, [a], ["tea", "rice"], softmax=False)[0]
    assert raw[0] == ("tea", pytest.approx(1.0, abs=1e-5)) and -1 <= raw[1][1] <= 1
    pre = zero_shot(e, [], ["rice", "tea"], image_embeddings=e.embed_images([a]), top_k=1)
    assert pre == [[("tea", pytest.approx(1.0, abs=1e-4))]]
    with pytest.raises(CulturaError, match="template"):
        zero_shot(e, [a], ["tea"], template="a photo")
    with pytest.raises(CulturaError, match="at least one label"):
        zero_shot(e, [a], [])
