"""The ``openai:`` embedder against a local ``/v1/embeddings`` server: texts and images, instructions per modality
in the identity and the cache key, errors in one sentence."""
from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from cultura.errors import CulturaError
from cultura.models.embedders import (ModelCapabilityError, ModelUnavailable,
                                     get_embedder)
from tests.unit.models.test_models import assert_unit_rows, img  # noqa: F401 - shared with the unit tests


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
