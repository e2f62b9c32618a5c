"""The embedding dedup's pair search: exact and IVF searches, the automatic choice, the
``[dedup] embedding_index`` options and what the stored clusters record."""
from __future__ import annotations

import json

import numpy as np
import pytest
from cultura.config import load_config, parse_config
from cultura.curate import vector_search as vs
from cultura.errors import ConfigError

from tests.unit.curate.test_dedup import pictures, world  # noqa: F401  (fixtures)


def clustered(n: int, d: int = 64, *, per: int = 500, planted: float = 0.1, lo: float = 0.90, hi: float = 0.99,
              seed: int = 0):
    """Concept-clustered unit vectors (a shared direction, concept centres, sub-clusters, per-image noise)
    with ``planted`` of them replaced by a copy of another image of their concept at cosine ``lo``-``hi``.
    Returns (vectors, planted pairs (i, j) with i < j, their cosines)."""
    rng = np.random.default_rng(seed)
    k = max(1, n // per)
    unit = lambda a: a / np.linalg.norm(a, axis=-1, keepdims=True)
    mean = unit(rng.standard_normal(d))
    cent = unit(rng.standard_normal((k, d)))
    sub = unit(rng.standard_normal((k * 10, d)))
    concept = np.minimum(np.arange(n) // per, k - 1)
    w = rng.uniform(0.28, 0.5, (n, 1))
    x = 0.55 * mean + 0.5 * cent[concept] + 0.45 * sub[concept * 10 + rng.integers(0, 10, n)] \
        + w * unit(rng.standard_normal((n, d)))
    x = unit(x)
    m = int(n * planted)
    dst = rng.choice(n, m, replace=False)
    src = np.clip(concept[dst] * per + rng.integers(0, per, m), 0, n - 1)
    ok = ~np.isin(src, dst) & (src != dst)
    src, dst = src[ok], dst[ok]
    cos = rng.uniform(lo, hi, len(dst))
    u = rng.standard_normal((len(dst), d))
    u = unit(u - (u * x[src]).sum(1, keepdims=True) * x[src])
    x[dst] = cos[:, None] * x[src] + np.sqrt(1 - cos ** 2)[:, None] * u
    pairs = np.sort(np.stack([src, dst], 1), axis=1)
    return x.astype(np.float32), pairs, cos


def as_set(pairs) -> set:
    return set(map(tuple, np.asarray(pairs).tolist()))


def well_formed(pairs: np.ndarray) -> None:
    assert pairs.dtype == np.int64 and pairs.shape[1] == 2
    assert (pairs[:, 0] < pairs[:, 1]).all()
    assert len(as_set(pairs)) == len(pairs)
    assert (np.lexsort((pairs[:, 1], pairs[:, 0])) == np.arange(len(pairs))).all()


@pytest.fixture(scope="module")
def data():
    return clustered(6000)


def test_ivf_never_returns_a_pair_below_the_threshold(data):
    """Precision is exact: every IVF pair is a float32 product >= threshold, so a subset of the exact pairs;
    planted pairs just under the threshold are never returned, those just over are (when probed)."""
    x, planted, cos = data
    t = 0.95
    got = vs.ivf_cosine_pairs(x, t, nprobe=2)
    well_formed(got)
    assert len(got)
    sims = np.einsum("ij,ij->i", x[got[:, 0]], x[got[:, 1]])
    assert sims.min() >= t - 1e-6
    exact = vs.cosine_pairs(x, t)
    assert as_set(got) <= as_set(exact)
    below = as_set(planted[(cos < t - 1e-3)])
    assert below and not below & as_set(got)


def test_ivf_recall_on_planted_near_duplicates(data):
    """Recall against the exact search on concept-clustered data with near-copies at cosine 0.90-0.99, at the
    lowest threshold (hardest), with the default nprobe; and every planted pair over the threshold found."""
    x, planted, cos = data
    t = 0.90
    exact = as_set(vs.cosine_pairs(x, t))
    got = as_set(vs.ivf_cosine_pairs(x, t))
    assert got <= exact
    recall = len(got & exact) / len(exact)
    assert recall >= 0.99, recall  # measured 1.0 (nprobe 1, home cell only: 0.974)
    above = as_set(planted[cos >= t + 1e-4])
    assert len(above & got) / len(above) >= 0.99


def test_probing_every_cell_is_the_exact_search(data):
    x, _, _ = data
    n = 2000
    exact = vs.cosine_pairs(x[:n], 0.9)
    assert np.array_equal(vs.ivf_cosine_pairs(x[:n], 0.9, nlist=16, nprobe=16), exact)
    assert np.array_equal(vs.similar_pairs(x[:n], 0.9, index="ivf", nlist=16, nprobe=16), exact)


def test_rows_search_a_subset_in_place(data):
    x, _, _ = data
    rows = np.arange(1, 3000, 2)
    sub = np.ascontiguousarray(x[rows])
    assert np.array_equal(vs.cosine_pairs(x, 0.9, rows=rows), vs.cosine_pairs(sub, 0.9))
    assert np.array_equal(vs.ivf_cosine_pairs(x, 0.9, rows=rows, nprobe=3),
                          vs.ivf_cosine_pairs(sub, 0.9, nprobe=3))
    assert np.array_equal(vs.ivf_cosine_pairs(x, 0.9, rows=rows, nprobe=3),
                          vs.ivf_cosine_pairs(x, 0.9, rows=rows, nprobe=3))  # deterministic


def test_degenerate_inputs():
    one = np.ones((1, 4), dtype=np.float32) / 2
    for f in (vs.cosine_pairs, vs.ivf_cosine_pairs, vs.similar_pairs):
        assert f(np.zeros((0, 4), np.float32), 0.9).shape == (0, 2)
        assert f(one, 0.9).shape == (0, 2)
    same = np.tile(one, (5, 1))
    assert vs.ivf_cosine_pairs(same, 0.99).tolist() == [[a, b] for a in range(5) for b in range(a + 1, 5)]
    with pytest.raises(ValueError, match="2-D"):
        vs.ivf_cosine_pairs(np.zeros(4, np.float32), 0.9)
    with pytest.raises(ValueError, match="threshold"):
        vs.cosine_pairs(same, 1.5)


def test_auto_chooses_exact_up_to_the_limit_then_ivf(data, monkeypatch):
    x, _, _ = data
    assert vs.choose(vs.EXACT_MAX_ROWS) == "exact" and vs.choose(vs.EXACT_MAX_ROWS + 1) == "ivf"
    assert vs.choose(10, "ivf") == "ivf" and vs.choose(10**7, "exact") == "exact"
    calls = []
    real_exact, real_ivf = vs.cosine_pairs, vs.ivf_cosine_pairs
    monkeypatch.setattr(vs, "cosine_pairs", lambda *a, **k: calls.append("exact") or real_exact(*a, **k))
    monkeypatch.setattr(vs, "ivf_cosine_pairs", lambda *a, **k: calls.append("ivf") or real_ivf(*a, **k))
    vs.similar_pairs(x[:500], 0.95, exact_max_rows=500)
    vs.similar_pairs(x[:501], 0.95, exact_max_rows=500)
    vs.similar_pairs(x[:501], 0.95, index="exact", exact_max_rows=500)
    vs.similar_pairs(x[:50], 0.95, index="ivf")
    assert calls == ["exact", "ivf", "exact", "ivf"]


def test_auto_nlist():
    assert vs.auto_nlist(1_000_000) == 2048 and vs.auto_nlist(100_000) == 512
    assert vs.auto_nlist(10) == 1 and vs.auto_nlist(100) == 12


@pytest.mark.parametrize("index, nlist, nprobe, param", [
    ("hnsw", None, 8, "embedding_index"), ("auto", 0, 8, "embedding_nlist"), ("ivf", None, 0, "embedding_nprobe"),
    ("ivf", None, 2.5, "embedding_nprobe"), ("ivf", None, True, "embedding_nprobe"),
    ("ivf", 4, 8, "embedding_nprobe")])
def test_index_options_are_validated(index, nlist, nprobe, param):
    with pytest.raises(ConfigError, match=param) as e:
        vs.validate_index_options(index, nlist, nprobe)
    assert e.value.param == param


def test_config_keys(tmp_path):
    cfg = tmp_path / "cultura.toml"
    cfg.write_text('[dedup]\nembedding_index = "ivf"\nembedding_nlist = 64\nembedding_nprobe = 4\n')
    d = load_config(cfg).dedup
    assert (d.embedding_index, d.embedding_nlist, d.embedding_nprobe) == ("ivf", 64, 4)
    assert parse_config({}).dedup.embedding_index == "auto"
    cfg.write_text('[dedup]\nembedding_index = "hnsw"\n')
    with pytest.raises(ConfigError, match="embedding_index"):
        load_config(cfg)
    cfg.write_text('[dedup]\nembedding_nprobe = 0\n')
    with pytest.raises(ConfigError, match="embedding_nprobe"):
        load_config(cfg)


def test_dedup_records_the_index_and_finds_the_same_clusters(world):  # noqa: F811
    from cultura.curate.dedup import dedup_images
    from cultura.models.embedders import get_embedder

    p, _, _ = world
    emb = get_embedder("fake")
    found = {}
    for scope in ("global", "within-concept"):
        for index in ("exact", "ivf", "auto"):
            p.config.dedup.embedding_index = index
            p.config.dedup.embedding_nprobe = 2
            dedup_images(p, methods=["embedding"], embedder=emb, embedding_threshold=0.99, scope=scope,
                         progress=False)
            run_id, ptext = p.db.execute("SELECT id, params FROM dedup_runs WHERE method = 'embedding' "
                                         "ORDER BY id DESC").fetchone()
            params = json.loads(ptext)
            assert params["index"] == vs.index_params(index, None, 2)
            assert params["index"]["kind"] == index
            # this run's clusters (new params: every cluster it found is inserted under it)
            found[scope, index] = {(c, frozenset(m.split(","))) for c, m in p.db.execute(
                "SELECT c.concept_id, group_concat(m.sha256) FROM dup_clusters c JOIN dup_members m "
                "ON m.cluster_id = c.id WHERE c.run_id = ? GROUP BY c.id", [run_id])}
        assert found[scope, "exact"] == found[scope, "ivf"] == found[scope, "auto"] and found[scope, "exact"]
    assert params["index"]["exact_max_rows"] == vs.EXACT_MAX_ROWS and params["index"]["ivf"]["nprobe"] == 2


def test_dedup_rejects_bad_index_options_before_any_work(world):  # noqa: F811
    from cultura.curate.dedup import dedup_images

    p, _, _ = world
    p.config.dedup.embedding_nlist = 4
    p.config.dedup.embedding_nprobe = 8
    with pytest.raises(ConfigError, match="embedding_nprobe"):
        dedup_images(p, methods=["embedding"], embedder="fake", progress=False)
    assert p.db["dedup_runs"].count == 0
    with pytest.raises(Exception, match="embedding_index"):
        p.config.dedup.embedding_index = "flat"


def test_cache_scan_reads_the_same_rows_as_lookups(tmp_path, monkeypatch):
    """Many keys are read from the embedding cache by one scan (table or index range): same matrix as the
    IN (...) lookups, with repeated keys, misses computed and stored, damaged rows recomputed, and rows
    of other models or kinds ignored."""
    from cultura.db import open_db
    from cultura.models.embedders import cache, get_embedder

    db = open_db(str(tmp_path / "c.db"))
    e, other = get_embedder("fake:dim=8"), get_embedder("fake:dim=8,seed=3")
    texts = [f"t{i}" for i in range(40)]
    cache.embed_texts_cached(db, other, texts)              # another model's rows
    cache.embed_texts_cached(db, e, texts[:30])             # 30 of 40 cached
    db.execute("UPDATE embeddings SET vector = x'00000000' WHERE model = ? AND key = ?", [e.identity, cache.text_key("t3")])
    want = texts[::-1] + texts[:5]                           # repeats
    e.reset_stats()
    lookups = cache.embed_texts_cached(db, e, want)
    computed = e.stats["texts"]
    db.execute("UPDATE embeddings SET vector = x'00000000' WHERE model = ? AND key = ?", [e.identity, cache.text_key("t3")])
    db.execute("DELETE FROM embeddings WHERE model = ? AND key IN (?, ?)",
               [e.identity, cache.text_key("t35"), cache.text_key("t36")])
    e.reset_stats()
    monkeypatch.setattr(cache, "SCAN_MIN", 1)
    calls = []
    real = cache._scan
    monkeypatch.setattr(cache, "_scan", lambda *a: calls.append(a) or real(*a))
    assert np.array_equal(cache.embed_texts_cached(db, e, want), lookups)   # a table scan
    assert e.stats["texts"] == 3                                            # t3 (damaged), t35, t36
    db.execute("INSERT INTO embeddings (model, kind, key, dim, vector, created_at) SELECT 'filler', kind, "
               "key || model, dim, vector, created_at FROM embeddings")  # other models' rows: most of the table
    db.execute("INSERT INTO embeddings (model, kind, key, dim, vector, created_at) SELECT 'filler2', kind, "
               "key || model || 'x', dim, vector, created_at FROM embeddings")
    assert np.array_equal(cache.embed_texts_cached(db, e, want), lookups)   # the model's index range
    assert e.stats["texts"] == 3 and len(calls) == 2
    assert np.array_equal(cache.embed_texts_cached(db, e, want[:12]), lookups[:12])  # few of the model's rows:
    assert cache._scan(db, e.identity, "text", 12) is None                          # lookups, no scan
    assert computed == 11


def test_cli_embedding_index_option_is_recorded(world):  # noqa: F811
    """``cultura images dedup --embedding-index ivf`` reaches the search and its choice is recorded."""
    from click.testing import CliRunner

    from cultura.cli import cli

    p, _, _ = world
    root = str(p.root)
    p.close()
    r = CliRunner().invoke(cli, ["--project", root, "images", "dedup", "--method", "embedding", "--model",
                                 "fake", "--scope", "global", "--embedding-index", "ivf", "--json"])
    assert r.exit_code == 0, r.output
    from cultura.project import Project
    q = Project(root)
    try:
        (ptext,) = q.db.execute("SELECT params FROM dedup_runs WHERE method = 'embedding'").fetchone()
    finally:
        q.close()
    assert json.loads(ptext)["index"]["kind"] == "ivf"
    bad = CliRunner().invoke(cli, ["--project", root, "images", "dedup", "--embedding-index", "hnsw"])
    assert bad.exit_code != 0 and "hnsw" in bad.output
