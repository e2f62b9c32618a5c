"""Where the project's rule and the seed papers meet: a query with no relevant document (undefined, not 0) and
the query language passed to text encoders (seed 000's suites; NLLB-CLIP encodes per language). The CAIRe
binarisation and the Wilcoxon r have their tests beside their code (test_attribution.py, test_stats.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import ndcg_score

from cultura.errors import CulturaError
from cultura.evaluate.data import CaptionPool
from cultura.evaluate.runner import run_evaluation
from cultura.evaluate.suites.retrieval.prevalence import prevalence_rows

from tests.fakes.benchmark_world import LANG, LanguageRecorder, make_benchmarks


def _pool():
    # three query images; image "c" has no caption in the pool (its concept has no caption)
    return CaptionPool(source="test", image_sha256=["a" * 64, "b" * 64, "c" * 64],
                       image_keys=np.array(["a", "b", "c"]), image_countries=["JP", "TH", "US"],
                       texts=["a en", "a ja", "b en", "b ja", "x en", "x ja"],
                       languages=np.array(["en", "ja", "en", "ja", "en", "ja"]),
                       caption_keys=np.array(["a", "a", "b", "b", "x", "x"]), provenance={})


def _ranked():
    # per query, the pool's captions in ranked order with descending scores
    idx = np.array([[0, 4, 1, 2, 3, 5], [4, 5, 2, 0, 1, 3], [4, 0, 5, 1, 2, 3]])
    val = np.tile(np.linspace(1.0, 0.5, 6), (3, 1))
    return idx, val


def test_a_query_without_a_relevant_document_is_undefined_not_zero():
    """Spec: "Undefined values are never silently 0". Image c has no relevant caption: its NDCG@k (IDCG = 0) and
    Acc@k are undefined, so it is left out of the mean and counted; sklearn's reading (0, averaged in) is the
    option no_relevant="zero", labelled as such."""
    idx, val = _ranked()
    rows = {r["metric"]: r for r in prevalence_rows(_pool(), idx, val, ks=[1, 5], tiers={}, freq_k=5,
                                                    n_resamples=20)}
    rel = np.array([[1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 0, 0]])  # a and b, the captions in pool order
    score = np.zeros((2, 6))
    for q in range(2):
        score[q, idx[q]] = val[q]
    for k in (1, 5):
        nd = rows[f"ndcg@{k}"]
        assert nd["n"] == 2 and nd["details"]["n_no_relevant"] == 1 and nd["details"]["no_relevant"] == "exclude"
        assert nd["value"] == pytest.approx(ndcg_score(rel, score, k=k))
    assert rows["acc@1"]["value"] == pytest.approx(0.5) and rows["acc@5"]["value"] == pytest.approx(1.0)
    assert rows["lbkl@5"]["n"] == 3  # LBKL needs no relevance: every query counts
    zero = {r["metric"]: r for r in prevalence_rows(_pool(), idx, val, ks=[5], tiers={}, freq_k=5,
                                                    n_resamples=20, no_relevant="zero")}
    assert zero["acc@5"]["n"] == 3 and zero["acc@5"]["value"] == pytest.approx(2 / 3)
    assert zero["acc@5"]["details"]["no_relevant"] == "zero"
    with pytest.raises(CulturaError, match="no_relevant"):
        prevalence_rows(_pool(), idx, val, ks=[5], tiers={}, no_relevant="skip")


def test_no_query_with_a_relevant_document_gives_nan_with_a_reason():
    pool = _pool()
    pool.caption_keys = np.array(["x"] * 6)
    idx, val = _ranked()
    rows = {r["metric"]: r for r in prevalence_rows(pool, idx, val, ks=[5], tiers={}, n_resamples=20)}
    assert math.isnan(rows["ndcg@5"]["value"]) and rows["ndcg@5"]["n"] == 0
    assert "none of the 3 query images has a relevant caption" in rows["ndcg@5"]["details"]["reason"]


def test_retrieval_suites_encode_each_query_in_its_language(project):
    """Seed 000's suites query in the country's language; NLLB-CLIP's text encoder takes the source language,
    so each query text must reach it with its own language (not the default eng_Latn for all)."""
    make_benchmarks(project)
    lang_of = {}
    for text, lang in project.db.execute("SELECT text, language FROM benchmark_queries"):
        lang_of.setdefault(text, set()).add(lang)
    e = LanguageRecorder(dim=16)
    recs = run_evaluation(project, [e], "prevalence,association,descriptor",
                          options={"n_resamples": 20, "projection": "pca", "ks": [5]})
    assert all(r.status == "done" for r in recs), [(r.suite, r.reason) for r in recs]
    assert e.seen and all(lang is not None for lang, _ in e.seen)
    assert {lang for lang, _ in e.seen} == set(LANG.values())
    wrong = [(lang, t) for lang, t in e.seen if t in lang_of and lang not in lang_of[t]]
    assert not wrong, wrong[:5]
