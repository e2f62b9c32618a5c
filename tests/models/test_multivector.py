"""Late-interaction (MaxSim) scoring and the multi-vector families: ColQwen-style models served through an
OpenAI-compatible endpoint (a local stub speaking the wire protocol: the code path of a real vLLM server)."""
from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from PIL import Image

from cultura.errors import CulturaError
from cultura.models.embedders import get_embedder
from cultura.models.embedders.multivector import (MultiVectorEmbedder, late_similarities, maxsim_scores,
                                                  pairwise_maxsim, text_tokens_cached)

DIM = 6


def _tokens(s: str) -> list[list[float]]:
    """A token matrix per input: one 6-d vector per word (texts) or 3 'patches' (images), hash-seeded."""
    parts = ["patch0", "patch1", "patch2"] if s.startswith("data:image/") or "|data:image/" in s else s.split()
    out = []
    for p in parts:
        seed = int.from_bytes(hashlib.sha256((s + "/" + p).encode() if p.startswith("patch") else p.encode())
                              .digest()[:8], "little")
        out.append(np.random.default_rng(seed).standard_normal(DIM).tolist())
    return out


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(req)
        if "messages" in req:
            parts = [p for m in req["messages"] for p in m["content"]]
            prefix = "".join(p["text"] + "|" for p in parts if p["type"] == "text")
            inputs = [prefix + p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
        else:
            inputs = req["input"]
        data = [{"object": "embedding", "index": i, "embedding": _tokens(s)} for i, s in enumerate(inputs)]
        body = json.dumps({"object": "list", "data": data[::-1], "model": req["model"],
                           "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def multi_server(monkeypatch):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.requests = []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{srv.server_address[1]}/v1")
    yield srv
    srv.shutdown()
    srv.server_close()


def _img(color) -> Image.Image:
    return Image.new("RGB", (8, 8), color)


def test_maxsim_equals_the_definition_with_ragged_token_counts():
    rng = np.random.default_rng(0)
    qs = [rng.standard_normal((int(n), 5)) for n in rng.integers(1, 7, size=9)]
    ds = [rng.standard_normal((int(n), 5)) for n in rng.integers(1, 11, size=13)]
    want = np.array([[sum(max(float(qi @ dj) for dj in d) for qi in q) for d in ds] for q in qs])
    np.testing.assert_allclose(maxsim_scores(qs, ds, block=4), want, rtol=1e-5)
    np.testing.assert_allclose(pairwise_maxsim(qs, ds[:9]), np.diag(want[:, :9]), rtol=1e-5)
    with pytest.raises(CulturaError, match="dimensions"):
        maxsim_scores(qs, [rng.standard_normal((2, 4))])


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


def test_retrieval_suites_score_a_multi_vector_model_by_maxsim(multi_server, project):
    from cultura.evaluate.common import per_trial_wins
    from cultura.evaluate.data import ASSOCIATION_ROLES, load_trials, resolve_benchmark
    from cultura.evaluate.suites import get_suite
    from cultura.evaluate.suites.retrieval.association import trial_similarities

    from tests.fakes.benchmark_world import make_benchmarks

    make_benchmarks(project, n_concepts=3, per_cell=1)
    e = get_embedder("openai-multi:colqwen-tiny")
    rows = get_suite("association").func(project, e, options={"n_resamples": 20, "projection": "none"})
    assert {r["metric"] for r in rows} >= {"M_cr", "M_lb", "SP"}
    bench = resolve_benchmark(project, None, "association")
    trials = load_trials(project, bench, ASSOCIATION_ROLES)
    sims = trial_similarities(project, e, trials)
    # one trial by hand: MaxSim of the query tokens with each candidate's patches
    q = e.embed_text_tokens([trials.texts[0]])[0]
    from cultura.models.embedders.multivector import image_tokens_cached

    cands = image_tokens_cached(project, e, list(trials.sha256[0]))
    np.testing.assert_allclose(sims[0], [float((q @ c.T).max(axis=1).sum()) for c in cands], rtol=1e-5)
    m_cr = next(r for r in rows if r["metric"] == "M_cr" and not r["group"])
    assert m_cr["value"] == pytest.approx(per_trial_wins(sims)[:, 0].mean())
    desc = get_suite("descriptor").func(project, e, options={"n_resamples": 20})
    assert any(r["metric"] == "drift_x100" for r in desc)
    prev = get_suite("prevalence").func(project, e, options={"n_resamples": 20, "ks": [2, 5], "pool": "queries"})
    assert any(r["metric"] == "dlbkl@5" for r in prev)
    # late_similarities agrees with the suites' pairwise scores
    full = late_similarities(project, e, trials.texts[:2], list(trials.sha256[0]))
    np.testing.assert_allclose(full[0], sims[0], rtol=1e-5)


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
