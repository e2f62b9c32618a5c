"""Late-interaction (MaxSim) scoring: equal to its definition with ragged token counts, and the retrieval suites
score a multi-vector model by it."""
from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from cultura.errors import CulturaError
from cultura.models.embedders import get_embedder
from cultura.models.embedders.multivector import (late_similarities, maxsim_scores,
                                                  pairwise_maxsim)

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


def test_maxsim_equals_the_definition_with_ragged_token_counts():
    rng = np.random.default_rng(0)
    qs = [rng.standard_normal((int(n), 5)) for n in rng.integers(1, 7, size=9)]
    ds = [rng.standard_normal((int(n), 5)) for n in rng.integers(1, 11, size=13)]
    want = np.array([[sum(max(float(qi @ dj) for dj in d) for qi in q) for d in ds] for q in qs])
    np.testing.assert_allclose(maxsim_scores(qs, ds, block=4), want, rtol=1e-5)
    np.testing.assert_allclose(pairwise_maxsim(qs, ds[:9]), np.diag(want[:, :9]), rtol=1e-5)
    with pytest.raises(CulturaError, match="dimensions"):
        maxsim_scores(qs, [rng.standard_normal((2, 4))])


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
