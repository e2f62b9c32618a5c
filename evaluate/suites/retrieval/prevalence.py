"""Suite ``prevalence``: image→text retrieval over a multilingual caption pool (seed 000 §3.1, RQ1, App. D–G).

For every query image the pool's captions are ranked by cosine similarity; from the top k the suite reports
Acc@k, NDCG@k, LBKL@k and DLBKL@k (language-wise, uniform prior over all N pool languages) for k in
{5, 10, 25, 50, 99}, with bootstrap CIs over query images, plus the retrieval frequency of each language and
resource tier in the top ``freq_k`` and by rank (App. G, Figures 9–10).

The pool is an imported Crossmodal-3600-style caption set (each image's own captions are relevant) or the
project's own benchmark queries (the benchmark's images are the queries; captions of the same concept are
relevant). Top-k is computed in chunks (:func:`topk_chunked`), so 3,600 images × 260k captions needs memory
for one chunk of similarities, not the full matrix.

Options: ``ks`` (list), ``pool`` (auto|captions|queries), ``caption_source``, ``variants`` (query variants used
as captions, default ["short"]), ``freq_k`` (default 10), ``prior`` (uniform|pool), ``image_chunk``,
``text_chunk``, ``n_resamples``, ``seed``.
"""
from __future__ import annotations

import numpy as np

from ...metrics.retrieval import accuracy_at_k, dlbkl, lbkl, lbkl_per_query, ndcg_at_k, retrieval_frequency
from ..registry import Suite, row
from .report import render_prevalence
from ...common import mean_ci, embed_images, embed_texts, language_tiers
from ....models.embedders.multivector import (image_tokens_cached, is_late_interaction, maxsim_scores,
                                              text_tokens_cached)
from ...data import caption_pool

NAME = "prevalence"
DEFAULT_KS = (5, 10, 25, 50, 99)
PAD_SCORE = -10.0   # below any cosine: stands for relevant captions ranked beyond the kept top-K


def topk_chunked(queries: np.ndarray, docs: np.ndarray, k: int, *, query_chunk: int = 256,
                 doc_chunk: int = 16384) -> tuple[np.ndarray, np.ndarray]:
    """Indices and scores of the ``k`` highest inner products of each query row against ``docs``, best first.

    Memory: one ``query_chunk × doc_chunk`` block (float32 similarities negated in place, a partitioned copy
    and a mask: about 9 bytes a cell, ≈ 40 MB at the defaults) and the running top-k, never the full matrix.
    Equal scores are listed by document index; which of several documents tied at the k-th place is kept is
    arbitrary.

    >>> q = np.eye(3, dtype=np.float32); d = np.eye(3, dtype=np.float32)[[2, 0, 1]]
    >>> topk_chunked(q, d, 1, doc_chunk=2)[0].ravel().tolist()
    [1, 2, 0]
    """
    queries = np.asarray(queries, dtype=np.float32)
    docs = np.asarray(docs, dtype=np.float32)
    n_q, n_d = queries.shape[0], docs.shape[0]
    k = min(int(k), n_d)
    out_idx = np.empty((n_q, k), dtype=np.int64)
    out_val = np.empty((n_q, k), dtype=np.float32)
    for qs in range(0, n_q, query_chunk):
        q = queries[qs:qs + query_chunk]
        best_neg = np.zeros((q.shape[0], 0), dtype=np.float32)   # negated scores: smaller is better
        best_idx = np.zeros((q.shape[0], 0), dtype=np.int64)
        for ds in range(0, n_d, doc_chunk):
            neg = q @ docs[ds:ds + doc_chunk].T
            np.negative(neg, out=neg)
            kk = min(k, neg.shape[1])
            if kk < neg.shape[1]:
                part, vals = _block_topk(neg, kk)
            else:
                part = np.broadcast_to(np.arange(neg.shape[1]), neg.shape)
                vals = neg.copy()
            del neg
            cand_neg = np.concatenate([best_neg, vals], axis=1)
            cand_idx = np.concatenate([best_idx, part + ds], axis=1)
            if cand_neg.shape[1] > k:
                keep = np.argpartition(cand_neg, k - 1, axis=1)[:, :k]
                cand_neg = np.take_along_axis(cand_neg, keep, axis=1)
                cand_idx = np.take_along_axis(cand_idx, keep, axis=1)
            best_neg, best_idx = cand_neg, cand_idx
        order = np.lexsort((best_idx, best_neg), axis=1)
        out_val[qs:qs + query_chunk] = -np.take_along_axis(best_neg, order, axis=1)
        out_idx[qs:qs + query_chunk] = np.take_along_axis(best_idx, order, axis=1)
    return out_idx, out_val


def late_topk(project, embedder, sha256s, texts, k: int, *, image_chunk: int = 256
              ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`topk_chunked` for a late-interaction embedder: each image's ``k`` captions with the highest
    MaxSim score ``S(caption, image)`` (the caption's tokens as the query, as ColQwen scores), best first,
    equal scores by caption index. Token matrices come through the embedding cache."""
    txt = text_tokens_cached(project, embedder, texts)
    k = min(int(k), len(txt))
    idx_out, val_out = [], []
    for s in range(0, len(sha256s), image_chunk):
        imgs = image_tokens_cached(project, embedder, sha256s[s:s + image_chunk])
        scores = maxsim_scores(txt, imgs).T.astype(np.float32)          # images × captions
        order = np.lexsort((np.broadcast_to(np.arange(scores.shape[1]), scores.shape), -scores), axis=1)[:, :k]
        idx_out.append(order)
        val_out.append(np.take_along_axis(scores, order, axis=1))
    if not idx_out:
        return np.zeros((0, k), dtype=np.int64), np.zeros((0, k), dtype=np.float32)
    return np.concatenate(idx_out).astype(np.int64), np.concatenate(val_out)


def _block_topk(neg: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Column indices and values of the k smallest entries per row (unordered). Selects by value first
    (``np.partition`` on float32 is several times faster than ``np.argpartition``) and falls back to
    ``np.argpartition`` for a block where a tie at the k-th value makes a row hold more than k candidates."""
    kth = np.partition(neg, k - 1, axis=1)[:, k - 1:k]
    rows, cols = np.nonzero(neg <= kth)
    if rows.shape[0] == neg.shape[0] * k:
        part = cols.reshape(neg.shape[0], k).astype(np.int64)
        return part, np.take_along_axis(neg, part, axis=1)
    part = np.argpartition(neg, k - 1, axis=1)[:, :k]
    return part, np.take_along_axis(neg, part, axis=1)


def reduced_relevance(top_idx: np.ndarray, top_val: np.ndarray, image_keys, caption_keys,
                      k_max: int) -> tuple[np.ndarray, np.ndarray]:
    """Compact (queries × (K + pad)) relevance and score matrices equivalent, for every metric at k <= K, to
    the full (queries × pool) matrices: the kept top-K plus, per query, ``min(R_outside, k_max)`` relevant
    placeholders scored below any cosine (they only enter the ideal DCG). So ``ndcg_at_k`` and
    ``accuracy_at_k`` run on 3,600 × ~200 instead of 3,600 × 260k."""
    image_keys = np.asarray(image_keys)
    caption_keys = np.asarray(caption_keys)
    rel_top = (caption_keys[top_idx] == image_keys[:, None]).astype(float)
    keys, counts = np.unique(caption_keys, return_counts=True)
    n_rel = dict(zip(keys.tolist(), counts.tolist()))
    outside = np.array([n_rel.get(key, 0) for key in image_keys.tolist()]) - rel_top.sum(axis=1)
    pad_n = np.minimum(outside, k_max).astype(int)
    width = int(pad_n.max()) if pad_n.size else 0
    pad_rel = (np.arange(width)[None, :] < pad_n[:, None]).astype(float)
    y_true = np.concatenate([rel_top, pad_rel], axis=1)
    y_score = np.concatenate([top_val.astype(float), np.full(pad_rel.shape, PAD_SCORE)], axis=1)
    return y_true, y_score


def per_query_scores(y_true: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-query hit@k and NDCG@k on the compact matrices (columns already best first), for the bootstrap;
    their means equal :func:`accuracy_at_k` / :func:`ndcg_at_k` (tested, no ties assumed)."""
    top = y_true[:, :k]
    hit = (top.max(axis=1) > 0).astype(float)
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = (top * disc[:top.shape[1]]).sum(axis=1)
    ideal = np.minimum(y_true.sum(axis=1), k).astype(int)
    cum = np.concatenate([[0.0], np.cumsum(disc)])
    idcg = cum[ideal]
    ndcg = np.divide(dcg, idcg, out=np.zeros_like(dcg), where=idcg > 0)
    return hit, ndcg


def prevalence(project, embedder, *, benchmark=None, options: dict) -> list[dict]:
    """Run the prevalence suite (see the module docstring for the options)."""
    opts = dict(options or {})
    ks = sorted({int(k) for k in opts.get("ks", DEFAULT_KS)})
    seed = int(opts.get("seed", 0))
    n_res = int(opts.get("n_resamples", 1000))
    pool = caption_pool(project, pool=opts.get("pool", "auto"), benchmark=benchmark,
                        caption_source=opts.get("caption_source"), variants=tuple(opts.get("variants", ("short",))))
    k_max = min(max(ks), len(pool.texts))
    if is_late_interaction(embedder):  # ColQwen-style: MaxSim of caption tokens with image patches
        top_idx, top_val = late_topk(project, embedder, pool.image_sha256, pool.texts, k_max,
                                     image_chunk=int(opts.get("image_chunk", 256)))
    else:
        img = embed_images(project, embedder, pool.image_sha256)
        txt = embed_texts(project, embedder, pool.texts)
        top_idx, top_val = topk_chunked(img, txt, k_max, query_chunk=int(opts.get("image_chunk", 256)),
                                        doc_chunk=int(opts.get("text_chunk", 16384)))
    return prevalence_rows(pool, top_idx, top_val, ks=ks, tiers=language_tiers(project, set(pool.languages)),
                           freq_k=int(opts.get("freq_k", 10)), prior=opts.get("prior", "uniform"),
                           n_resamples=n_res, seed=seed)


def prevalence_rows(pool, top_idx, top_val, *, ks, tiers: dict, freq_k: int = 10, prior: str = "uniform",
                    n_resamples: int = 1000, seed: int = 0) -> list[dict]:
    """Result rows from the ranked top-K of every query image (separated from embedding for tests and the
    benchmark script)."""
    languages = sorted(set(pool.languages.tolist()))
    n_img = len(pool.image_sha256)
    k_max = top_idx.shape[1]
    y_true, y_score = reduced_relevance(top_idx, top_val, pool.image_keys, pool.caption_keys, k_max)
    ranked = pool.languages[top_idx]
    prior_arg = None
    if prior == "pool":
        vals, counts = np.unique(pool.languages, return_counts=True)
        mix = dict(zip(vals.tolist(), (counts / counts.sum()).tolist()))
        prior_arg = {lang: mix[lang] for lang in languages}
    common = {"pool": pool.source, "n_captions": len(pool.texts), "n_languages": len(languages),
              "prior": prior, "eps": 1e-9, "provenance": pool.provenance}
    rows = []
    for k in ks:
        if k > k_max:
            rows.append(row(NAME, f"acc@{k}", float("nan"), n=n_img,
                            details={**common, "reason": f"the pool holds only {k_max} captions (< k={k})"}))
            continue
        hit, ndcg_q = per_query_scores(y_true, k)
        per_q = {
            f"acc@{k}": (accuracy_at_k(y_true, y_score, k=k), hit),
            f"ndcg@{k}": (ndcg_at_k(y_true, y_score, k=k), ndcg_q),
            f"lbkl@{k}": (lbkl(ranked, languages, k=k, prior=prior_arg),
                          lbkl_per_query(ranked, languages, k=k, prior=prior_arg)),
            f"dlbkl@{k}": (dlbkl(ranked, languages, k=k, prior=prior_arg),
                           lbkl_per_query(ranked, languages, k=k, prior=prior_arg, discounted=True)),
        }
        for metric, (value, values) in per_q.items():
            lo, hi = mean_ci(values, n_resamples=n_resamples, seed=seed)
            rows.append(row(NAME, metric, value, ci_low=lo, ci_high=hi, n=n_img, details={**common, "k": k}))
    fk = min(freq_k, k_max)
    freq = retrieval_frequency(ranked, languages, k=fk, groups={lang: tiers.get(lang, "unknown")
                                                                 for lang in languages})
    pool_share = {lang: float(np.mean(pool.languages == lang)) for lang in languages}
    for lang in languages:
        rows.append(row(NAME, "retrieval_share", freq["frequency"][lang], n=n_img * fk,
                        group={"language": lang, "tier": tiers.get(lang, "unknown")},
                        details={"k": fk, "pool_share": pool_share[lang], "uniform_share": 1 / len(languages),
                                 "by_rank": freq["by_rank"][lang]}))
    for tier, share in freq["group_frequency"].items():
        rows.append(row(NAME, "tier_share", share, n=n_img * fk, group={"tier": tier},
                        details={"k": fk, "by_rank": freq["group_by_rank"][tier],
                                 "pool_share": sum(pool_share[lang] for lang in languages
                                                   if tiers.get(lang, "unknown") == tier),
                                 "languages": [lang for lang in languages if tiers.get(lang, "unknown") == tier]}))
    return rows


SUITE = Suite(NAME, prevalence, section=render_prevalence, description="Image→text prevalence bias: Acc@k, NDCG@k, LBKL@k, DLBKL@k and "
                                             "retrieval frequency by language and resource tier (seed 000 RQ1).")
