"""The ``ray`` executor: embeddings and LM log-probabilities computed by Ray
actors on a local Ray (2 CPUs) equal the in-process ones bit for bit, land in the same cache tables (a local
rerun computes nothing), and the CLI's ``--executor ray`` reaches the Ray path. One Ray session for the module
(Ray starts slowly on a busy machine): the equivalence tests share it."""
from __future__ import annotations

import io
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from cultura.cli import cli
from cultura.db import now
from cultura.db.blobs import store_blob
from cultura.errors import ConfigError, CulturaError, UnknownName
from cultura.executor import Executor, current_executor, get_executor, use_executor
from cultura.models.embedders import embed_images_cached, embed_texts_cached, get_embedder
from cultura.models.embedders import cache as cache_mod
from cultura.models.scorers import get_scorer, score_cached
from cultura.project import Project, init_project

# one local Ray at a time: the tests that start one run on the same worker
pytestmark = pytest.mark.xdist_group("ray")


def ray_executor() -> Executor:
    """Two actors; every job on Ray however small; each actor with this process's torch threads (torch may
    round the last bit differently with another thread count: bit for bit means the same threads)."""
    import torch

    return Executor("ray", actors=2, min_items=0, threads=torch.get_num_threads())


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def real_photos(n: int = 10) -> list[Image.Image]:
    """Photographs shipped by scikit-image and scikit-learn (no download), shrunk to keep the test quick."""
    skdata = pytest.importorskip("skimage.data")
    from sklearn.datasets import load_sample_images

    ims = [Image.fromarray(getattr(skdata, name)()) for name in
           ("astronaut", "chelsea", "coffee", "rocket", "camera", "coins", "moon", "retina")]
    ims += [Image.fromarray(a) for a in load_sample_images().images]
    out = []
    for im in ims[:n]:
        im = im.convert("RGB")
        im.thumbnail((160, 160))
        out.append(im)
    return out


def photo_project(path, photos) -> tuple[object, list[str]]:
    p = init_project(path, countries=["US", "JP"])
    shas = []
    for k, im in enumerate(photos):
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=90)
        data = buf.getvalue()
        sha, rel = store_blob(p, data, "jpeg")
        p.db["images"].insert({"sha256": sha, "path": rel, "format": "jpeg", "width": im.width,
                               "height": im.height, "bytes": len(data), "created_at": now()}, pk="sha256")
        shas.append(sha)
    return p, shas


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Tiny random-init models saved to local folders/files, loaded by the same code as real ones: an open_clip
    model (weights file), a sentence-transformers model (folder) and a GPT-2 (folder)."""
    import open_clip
    import torch
    from tokenizers import Tokenizer, models as tok_models, pre_tokenizers, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    from cultura.models.embedders.openclip import register_model_configs
    from cultura.models.tiny import build_tiny_lm

    root = tmp_path_factory.mktemp("ray-models")
    register_model_configs()
    torch.manual_seed(3)
    clip = open_clip.create_model("cultura-tiny")
    weights = root / "tiny-clip.pt"
    torch.save(clip.state_dict(), weights)

    st = root / "tiny-st"
    tok = Tokenizer(tok_models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    corpus = ["a photo of tea", "a bowl of rice", "temple in Kyoto", "a hot dog in New York", "ramen"]
    tok.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"]))
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                            sep_token="[SEP]", model_max_length=32).save_pretrained(st)
    torch.manual_seed(4)
    BertModel(BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=2, intermediate_size=64, max_position_embeddings=40)
              ).eval().save_pretrained(st, safe_serialization=True)
    return {"clip": f"openclip:cultura-tiny/{weights}", "st": f"st:{st}", "lm": f"hf:{build_tiny_lm(root / 'lm')}"}


TEXTS = ["a photo of tea", "a bowl of rice", "temple in Kyoto", "a hot dog in New York", "ramen", "tea",
         "寿司", "ผัดไท"] * 2 + ["a photo of tea"]


def cached_rows(project, model):
    return project.db.execute("SELECT kind, key, dim, vector FROM embeddings WHERE model = ? ORDER BY kind, key",
                              [model]).fetchall()


def test_ray_embeddings_equal_in_process_ones_bit_for_bit(tmp_path, local_ray, models):
    photos = real_photos()
    here, shas = photo_project(tmp_path / "here", photos)
    there, shas2 = photo_project(tmp_path / "there", photos)
    assert shas == shas2
    for spec in (models["clip"], models["st"]):
        # several chunks (chunk_size 4, batch 3): every Ray group is the chunk a local run embeds in one go
        local = get_embedder(spec, batch_size=3, progress=False)
        on_ray = get_embedder(spec, batch_size=3, progress=False)
        assert local.identity == on_ray.identity and "@" in local.identity
        images = spec.startswith("openclip")
        a_txt = embed_texts_cached(here, local, TEXTS, chunk_size=4)
        with use_executor(ray_executor()):
            b_txt = embed_texts_cached(there, on_ray, TEXTS, chunk_size=4)
            if images:
                b_img = embed_images_cached(there, on_ray, shas + shas[:2], chunk_size=4)
        assert a_txt.dtype == b_txt.dtype == np.float32 and np.array_equal(a_txt, b_txt)
        assert on_ray.stats["texts"] == len(set(TEXTS))  # counted as computed, as a local run counts them
        if images:
            a_img = embed_images_cached(here, local, shas + shas[:2], chunk_size=4)
            assert np.array_equal(a_img, b_img) and on_ray.stats["images"] == len(shas)
        assert cached_rows(here, local.identity) == cached_rows(there, on_ray.identity)
        # the same cache tables: a rerun on this machine computes nothing
        again = get_embedder(spec, batch_size=3, progress=False)
        assert np.array_equal(embed_texts_cached(there, again, TEXTS), b_txt)
        if images:
            assert np.array_equal(embed_images_cached(there, again, shas), b_img[:len(shas)])
        assert again.stats["texts"] == again.stats["images"] == 0


def test_ray_lm_scores_equal_in_process_ones_bit_for_bit(tmp_path, local_ray, models):
    here = init_project(tmp_path / "here", countries=["US"])
    there = init_project(tmp_path / "there", countries=["US"])
    items = [(f"{who} ate [MASK] {when}.", food) for who in ("I", "My friend Hiroshi", "Emma")
             for when in ("today", "in Tokyo") for food in ("sushi", "pizza", "ผัดไท", "ramen")]
    items.append(("[MASK] is tasty.", "tea"))
    for mode in ("sentence", "prefix"):
        local = get_scorer(models["lm"], batch_size=4)
        on_ray = get_scorer(models["lm"], batch_size=4)
        a = score_cached(here, local, items, mode=mode)
        with use_executor(ray_executor()):
            b = score_cached(there, on_ray, items, mode=mode)
        assert np.array_equal(a, b, equal_nan=True) and np.isfinite(a).sum() >= len(items) - 1
        assert on_ray.stats["scored"] == local.stats["scored"] == len(items)
        again = get_scorer(models["lm"], batch_size=4)
        assert np.array_equal(score_cached(there, again, items, mode=mode), b, equal_nan=True)
        assert again.stats["scored"] == 0
    rows = ("SELECT model, mode, context_key, entity, logprob, n_tokens, status, reason FROM llm_scores "
            "ORDER BY mode, context_key, entity")
    assert here.db.execute(rows).fetchall() == there.db.execute(rows).fetchall()


def test_cli_executor_ray_embeds_on_ray_into_the_cache(tmp_path, local_ray, models, monkeypatch):
    """``cultura images dedup --method embedding --executor ray``: the embeddings are computed by Ray actors
    (the Ray map is called) and stored where a local run finds them."""
    root = tmp_path / "proj"
    p, shas = photo_project(root, real_photos(6))
    p.close()
    calls = []
    real = cache_mod.ray_map

    def spy(groups, actor, **kw):
        calls.append((actor.__name__, sum(len(g["keys"]) for g in groups), kw["executor"]))
        yield from real(groups, actor, **kw)

    monkeypatch.setattr(cache_mod, "ray_map", spy)
    toml = (root / "cultura.toml").read_text()
    assert "[ray]\n" in toml and "min_items = 256\n" in toml
    (root / "cultura.toml").write_text(toml.replace("[ray]\n", "[ray]\nactors = 2\n").replace("min_items = 256\n",
                                                                                              "min_items = 0\n"))
    res = CliRunner().invoke(cli, ["--project", str(root), "images", "dedup", "--method", "embedding",
                                   "--scope", "global", "--model", models["clip"], "--executor", "ray", "--json"])
    assert res.exit_code == 0, res.output
    assert [(c[0], c[1]) for c in calls] == [("EmbedActor", len(shas))]
    assert calls[0][2].is_ray and calls[0][2].actors == 2 and calls[0][2].min_items == 0  # [ray] of cultura.toml
    p = Project(root)
    emb = get_embedder(models["clip"])
    assert len(cached_rows(p, emb.identity)) == len(shas)
    embed_images_cached(p, emb, shas)
    assert emb.stats["images"] == 0
    # an image that cannot be read on a Ray worker: one clear error, as in a local run, nothing half-written
    bad = b"\xff\xd8 not a jpeg"
    sha, rel = store_blob(p, bad, "jpeg")
    p.db["images"].insert({"sha256": sha, "path": rel, "format": "jpeg", "width": 1, "height": 1,
                           "bytes": len(bad), "created_at": now()}, pk="sha256")
    with use_executor(ray_executor()), pytest.raises(CulturaError, match=f"On Ray: Image {sha} .* cannot be read"):
        embed_images_cached(p, get_embedder(models["clip"]), [*shas, sha])
    assert len(cached_rows(p, emb.identity)) == len(shas)


# -- errors (no Ray needed) ---------------------------------------------------------------------------------
def test_bad_executor_name_and_missing_ray_name_the_option(tmp_path, monkeypatch):
    with pytest.raises(UnknownName, match="Unknown executor 'spark'. Valid: local, ray") as e:
        get_executor("spark")
    assert e.value.param == "executor"
    assert current_executor().kind == "local"
    root = tmp_path / "proj"
    photo_project(root, real_photos(1))[0].close()  # one stored image: dedup has work to refuse
    runner = CliRunner()
    res = runner.invoke(cli, ["--project", str(root), "images", "dedup", "--executor", "spark"])
    assert res.exit_code != 0 and "--executor" in res.output and "spark" in res.output
    # a project whose cultura.toml names an unknown executor: the key is named
    cfg = root / "cultura.toml"
    text = cfg.read_text()
    assert '[evaluate]\nexecutor = "local"' in text
    cfg.write_text(text.replace('[evaluate]\nexecutor = "local"', '[evaluate]\nexecutor = "spark"'))
    with pytest.raises(ConfigError, match="'evaluate.executor'"):
        Project(root)
    cfg.write_text(text)
    # Ray missing: one sentence naming the option and the package, before any work starts
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ConfigError, match=r"pip install 'cultura\[ray\]'") as e:
        with use_executor("ray"):
            pass
    assert e.value.param == "executor"
    for args in (["images", "dedup", "--executor", "ray"], ["evaluate", "run", "--model", "fake", "--executor", "ray"],
                 ["images", "tag", "--method", "clip", "--executor", "ray"]):
        res = runner.invoke(cli, ["--project", str(root), *args])
        assert res.exit_code != 0 and "--executor: executor 'ray' needs Ray" in res.output, (args, res.output)


def test_an_actor_rebuilds_the_model_of_this_process_or_says_why():
    """``executor.rebuild``: the spec and options this process used build the actor's model; a model whose
    identity differs (other weights on a node) is one clear error; a pickled instance is used as it is."""
    from types import SimpleNamespace

    from cultura.errors import CulturaError
    from cultura.executor import rebuild

    made = []

    def make(spec, opts):
        made.append((spec, opts))
        return SimpleNamespace(identity=f"{spec}@{opts['rev']}")

    assert rebuild({"spec": "m", "options": {"rev": 1}}, "m@1", make).identity == "m@1"
    assert made == [("m", {"rev": 1})]
    with pytest.raises(CulturaError, match="built 'm@2', not 'm@1'.*same weights"):
        rebuild({"spec": "m", "options": {"rev": 2}}, "m@1", make)
    obj = SimpleNamespace(identity="x")
    assert rebuild({"object": obj}, "x", make) is obj and len(made) == 2
