"""The prevalence suite streams caption vectors from the embedding cache into the top-k: the
results equal the in-memory computation exactly, and no step holds more than one block of caption vectors.

The "quarter" embedder's vectors have four entries of ±0.5 (unit norm exactly), so every cosine is a multiple
of 0.25 computed without rounding: ties are everywhere, and the reference (a stable descending sort of the
full similarity matrix) is exact whatever the block shapes.
"""
from __future__ import annotations

import hashlib
import io
import math
import tracemalloc

import numpy as np
import pytest
from cultura.db import now, transaction
from cultura.db.blobs import store_blob
from cultura.evaluate import common
from cultura.evaluate.common import embed_images, embed_texts, language_tiers
from cultura.evaluate.data import caption_pool
from cultura.evaluate.runner import load_results, run_suite
from cultura.evaluate.suites import get_suite
from cultura.evaluate.suites.retrieval import prevalence as prev
from cultura.evaluate.suites.retrieval.prevalence import (
    RunningTopK,
    prevalence_rows,
    topk_chunked,
)
from cultura.models.embedders import FakeEmbedder, text_key
from PIL import Image

LANGS = ("en", "ja", "th", "de", "sw")
OPTS = {"n_resamples": 50, "ks": [1, 5, 10, 25], "freq_k": 5}


class Quarter(FakeEmbedder):
    """Four entries of ±0.5 chosen by a hash of the input: exact products, many equal scores."""

    variant = "quarter"

    def vector_from_bytes(self, data: bytes) -> np.ndarray:
        h = hashlib.sha256(data).digest()
        v = np.zeros(self.fake_dim, dtype=np.float32)
        pos = np.random.default_rng(int.from_bytes(h[:8], "little")).choice(self.fake_dim, 4, replace=False)
        v[pos] = np.where(np.frombuffer(h[8:12], dtype=np.uint8) % 2 == 0, 0.5, -0.5)
        return v


def _png(i: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (4, 4), (i % 256, i // 256, 7)).save(buf, format="PNG")
    return buf.getvalue()


def caption_world(project, n_images: int = 30, per_lang: int = 3) -> list[str]:
    """Images (real PNG blobs, so the embedder computes them) with ``per_lang`` captions in each language;
    every seventh caption repeats another image's text (equal vectors, equal scores)."""
    db, ts, shas = project.db, now(), []
    with transaction(db):
        for i in range(n_images):
            data = _png(i)
            sha, rel = store_blob(project, data, "png")
            db["images"].insert({"sha256": sha, "path": rel, "format": "png", "width": 4, "height": 4,
                                 "bytes": len(data), "created_at": ts}, replace=True)
            shas.append(sha)
        j = 0
        for i, sha in enumerate(shas):
            for lang in LANGS:
                for c in range(per_lang):
                    text = f"image {i} {lang} caption {c}" if j % 7 else f"image {(i * 3) % n_images} {lang} caption 0"
                    db["captions"].insert({"image_sha256": sha, "language": lang, "idx": c, "text": text,
                                           "source": "import:test", "created_at": ts})
                    j += 1
    return shas


def in_memory_rows(project, embedder, options, *, reference: str):
    """The result rows computed the way the suite did before streaming: the whole caption matrix in memory."""
    pool = caption_pool(project)
    img = embed_images(project, embedder, pool.image_sha256)
    txt = embed_texts(project, embedder, pool.texts)
    k = min(max(options["ks"]), len(pool.texts))
    if reference == "full sort":
        full = img @ txt.T
        idx = np.argsort(-full, axis=1, kind="stable")[:, :k]
        val = np.take_along_axis(full, idx, axis=1)
    else:
        idx, val = topk_chunked(img, txt, k, query_chunk=options.get("image_chunk", 256),
                                doc_chunk=options.get("text_chunk", 16384))
    return prevalence_rows(pool, idx, val, ks=options["ks"], tiers=language_tiers(project, set(pool.languages)),
                           freq_k=options["freq_k"], n_resamples=options["n_resamples"])


def _nan(v) -> bool:
    return v is None or v == "nan" or (isinstance(v, float) and math.isnan(v))


def _same(rows_a, rows_b):
    assert len(rows_a) == len(rows_b)
    for a, b in zip(rows_a, rows_b):
        assert (a["metric"], a["group"], a["n"]) == (b["metric"], b["group"], b["n"])
        for key in ("value", "ci_low", "ci_high"):
            assert a[key] == b[key] or (_nan(a[key]) and _nan(b[key])), (a["metric"], key, a[key], b[key])
        assert {k: v for k, v in a["details"].items() if k != "provenance"} == \
            {k: v for k, v in b["details"].items() if k != "provenance"}


@pytest.mark.parametrize("chunks", [{"image_chunk": 7, "text_chunk": 40}, {"image_chunk": 256, "text_chunk": 3},
                                    {}])
def test_streamed_suite_equals_the_full_sort_of_the_in_memory_matrix(project, chunks):
    """Ties at the k-th place included: the kept captions are those with the lowest pool index, whatever the
    block shapes (the partition-based top-k kept an arbitrary one of the tied captions, so Acc/NDCG/LBKL
    could change with text_chunk)."""
    caption_world(project)
    emb = Quarter(dim=16)
    opts = {**OPTS, **chunks}
    rec = run_suite(project, emb, "prevalence", options=opts)       # first run: every vector is a cache miss
    assert rec.status == "done" and rec.n_embedded == 30 + len(set(caption_pool(project).texts))
    expected = in_memory_rows(project, emb, opts, reference="full sort")
    _same(load_results(project, suite="prevalence"), expected)
    again = get_suite("prevalence").func(project, emb, options=opts)  # rerun: every vector from the cache
    _same(again, expected)


def test_streamed_suite_equals_the_in_memory_top_k_on_gaussian_vectors(project):
    """Real-valued vectors: the streamed blocks give bit for bit the products of the in-memory matrix."""
    caption_world(project, n_images=25, per_lang=4)
    emb = FakeEmbedder(dim=32)
    opts = {**OPTS, "image_chunk": 8, "text_chunk": 64}
    rows = get_suite("prevalence").func(project, emb, options=opts)
    _same(rows, in_memory_rows(project, emb, opts, reference="chunked"))
    assert rows[0]["metric"] == "acc@1" and 0 < rows[0]["value"] <= 1


def test_running_top_k_is_the_stable_sort_prefix_with_ties():
    rng = np.random.default_rng(3)
    for _ in range(60):
        n_q, n_d, dim = rng.integers(1, 30), rng.integers(1, 300), rng.integers(1, 5)
        q = rng.integers(-2, 3, (n_q, dim)).astype(np.float32)
        d = rng.integers(-2, 3, (n_d, dim)).astype(np.float32)
        k = int(rng.integers(1, 40))
        idx, val = topk_chunked(q, d, k, query_chunk=int(rng.integers(1, 12)), doc_chunk=int(rng.integers(1, 90)))
        full = q @ d.T
        ref = np.argsort(-full, axis=1, kind="stable")[:, :min(k, n_d)]
        assert (idx == ref).all() and (val == np.take_along_axis(full, ref, axis=1)).all()
    q = rng.standard_normal((5, 4)).astype(np.float32)
    d = rng.standard_normal((50, 4)).astype(np.float32)
    d[[0, 3, 7]] = np.nan                      # zero vectors normalised: NaN scores rank last, never poison
    ref = np.argsort(-np.nan_to_num(q @ d.T, nan=-np.inf), axis=1, kind="stable")[:, :10]
    for dc in (2, 5, 50):
        assert (topk_chunked(q, d, 10, doc_chunk=dc)[0] == ref).all()
    with pytest.raises(ValueError, match="document order"):
        RunningTopK(q, 10, 3).add(5, d[:2])


def test_suite_reads_one_block_of_caption_vectors_at_a_time(project, monkeypatch):
    """No call asks the cache for more than CACHE_BLOCK captions, every block after the first is written into
    the first block's buffer, no similarity block exceeds image_chunk × text_chunk, and the whole-matrix reader
    is not used."""
    caption_world(project)
    emb = Quarter(dim=16)
    n_texts = len(caption_pool(project).texts)
    calls, products = [], []
    real_cached, real_merge = common.embed_texts_cached, RunningTopK._merge

    def spy_cached(project, embedder, texts, *, language=None, out=None, **kw):
        res = real_cached(project, embedder, texts, language=language, out=out, **kw)
        calls.append((len(texts), res))
        return res

    def spy_merge(self, sims, *a):
        products.append(sims.shape)
        return real_merge(self, sims, *a)

    def refuse(*a, **k):
        raise AssertionError("the prevalence suite read the whole caption matrix")

    monkeypatch.setattr(prev, "CACHE_BLOCK", 64)
    monkeypatch.setattr(common, "embed_texts_cached", spy_cached)
    monkeypatch.setattr(RunningTopK, "_merge", spy_merge)
    monkeypatch.setattr(common, "embed_texts", refuse)
    get_suite("prevalence").func(project, emb, options={**OPTS, "text_chunk": 16, "image_chunk": 7})
    assert [n for n, _ in calls] == [min(64, n_texts - s) for s in range(0, n_texts, 64)]
    assert len(calls) > 3
    first = calls[0][1]
    assert all(np.shares_memory(res, first) for _, res in calls[1:])
    assert max(p[0] for p in products) == 7 and max(p[1] for p in products) == 16
    assert sum(p[1] for p in products) == n_texts * math.ceil(30 / 7)  # every caption once per image chunk


def test_cold_cache_embeds_the_remaining_captions_in_one_job(project, monkeypatch):
    """A cold first run embeds the first block's captions, then all the others in one cache_texts call (one
    progress bar, one Ray job), and reads every later block from the cache: each caption embedded once."""
    caption_world(project)
    emb = Quarter(dim=16)
    pool = caption_pool(project)
    jobs = []
    real = common.cache_texts

    def spy(project, embedder, texts, **kw):
        jobs.append(len(texts))
        return real(project, embedder, texts, **kw)

    monkeypatch.setattr(prev, "CACHE_BLOCK", 64)
    monkeypatch.setattr(common, "cache_texts", spy)
    get_suite("prevalence").func(project, emb, options={**OPTS, "text_chunk": 16})
    assert jobs == [len(pool.texts) - 64]
    assert emb.stats["texts"] == len(set(pool.texts))
    get_suite("prevalence").func(project, emb, options={**OPTS, "text_chunk": 16})   # warm: no job at all
    assert jobs == [len(pool.texts) - 64] and emb.stats["texts"] == len(set(pool.texts))


def test_peak_traced_memory_stays_below_the_caption_matrix(project, monkeypatch):
    """tracemalloc sees every NumPy buffer: with the vectors cached, the suite's traced peak is a fraction of
    the caption matrix it would otherwise hold (deterministic: allocation sizes, not timing)."""
    dim, n_images, per_image = 1024, 40, 150
    db, ts = project.db, now()
    emb = FakeEmbedder(dim=dim)
    rng = np.random.default_rng(0)
    with transaction(db):
        shas = [hashlib.sha256(f"i{i}".encode()).hexdigest() for i in range(n_images)]
        db.conn.executemany("INSERT INTO images (sha256, path, format, width, height, bytes, created_at) "
                            "VALUES (?, 'blobs/x.png', 'png', 4, 4, 1, ?)", [(s, ts) for s in shas])
        vec = rng.standard_normal((n_images, dim)).astype(np.float32)
        vec /= np.linalg.norm(vec, axis=1, keepdims=True)
        db.conn.executemany("INSERT INTO embeddings VALUES (?, 'image', ?, ?, ?, ?)",
                            [(emb.identity, s, dim, v.tobytes(), ts) for s, v in zip(shas, vec)])
        caps = [(s, LANGS[c % len(LANGS)], c, f"caption {c} of {s[:8]}") for s in shas for c in range(per_image)]
        db.conn.executemany("INSERT INTO captions VALUES (?, ?, ?, ?, 'import:test', ?)",
                            [(*c, ts) for c in caps])
        vec = rng.standard_normal((len(caps), dim)).astype(np.float32)
        vec /= np.linalg.norm(vec, axis=1, keepdims=True)
        db.conn.executemany("INSERT INTO embeddings VALUES (?, 'text', ?, ?, ?, ?)",
                            [(emb.identity, text_key(c[3]), dim, v.tobytes(), ts) for c, v in zip(caps, vec)])
    matrix = len(caps) * dim * 4                                   # 6,000 × 1,024 × 4 B = 24.6 MB
    suite = get_suite("prevalence").func
    monkeypatch.setattr(prev, "CACHE_BLOCK", 500)
    tracemalloc.start()
    try:
        suite(project, emb, options={**OPTS, "text_chunk": 500, "image_chunk": 64})
        streamed = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        with monkeypatch.context() as m:       # the previous path: the whole caption matrix, then the top-k
            m.setattr(prev, "streamed_topk", lambda project, embedder, queries, texts, k, query_chunk, doc_chunk, **_:
                      topk_chunked(queries, embed_texts(project, embedder, texts), k, query_chunk=query_chunk,
                                   doc_chunk=doc_chunk))
            suite(project, emb, options={**OPTS, "text_chunk": 500, "image_chunk": 64})
        whole = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert whole > matrix                       # the in-memory path holds the matrix (the test can fail)
    assert streamed < 0.4 * matrix, (streamed / matrix)
