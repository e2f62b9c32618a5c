"""Suite ``prevalence``: image→text retrieval over a multilingual caption pool (seed 000 §3.1, RQ1, App. D–G).

For every query image the pool's captions are ranked by cosine similarity; from the top k the suite reports
Acc@k, NDCG@k, LBKL@k and DLBKL@k (language-wise, uniform prior over all N pool languages) for k in
{5, 10, 25, 50, 99}, with bootstrap CIs over query images, plus the retrieval frequency of each language and
resource tier in the top ``freq_k`` and by rank (App. G, Figures 9–10).

The pool is an imported Crossmodal-3600-style caption set (each image's own captions are relevant) or the
project's own benchmark queries (the benchmark's images are the queries; captions of the same concept are
relevant). Caption vectors are streamed from the embedding cache ``text_chunk`` captions at a time straight
into a running top-k (:func:`streamed_topk`, :class:`RunningTopK`), so 3,600 images × 260k captions holds one
block of caption vectors and one ``image_chunk × text_chunk`` block of similarities, never the caption matrix
(532 MB at dim 512) nor the similarity matrix. Ranking ties are broken by pool order (also at the k-th place).

A query image with no relevant caption in the pool has no defined Acc@k or NDCG@k (IDCG = 0): by default it is
left out of both means and counted (``details["n_no_relevant"]``, n = the queries that count), never scored 0;
``no_relevant="zero"`` is sklearn's ``ndcg_score`` reading (scored 0 and averaged in), labelled as such. LBKL and
DLBKL do not need relevance and use every query.

Options: ``ks`` (list), ``pool`` (auto|captions|queries), ``caption_source``, ``variants`` (query variants used
as captions, default ["short"]), ``freq_k`` (default 10), ``prior`` (uniform|pool), ``no_relevant``
(exclude|zero), ``image_chunk``, ``text_chunk``, ``n_resamples``, ``seed``.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from ...metrics.retrieval import accuracy_at_k, lbkl_per_query, ndcg_at_k, retrieval_frequency
from ..registry import Suite, degenerate, log_samples, logging_samples, row, sample_limit
from .options import OPTIONS
from .report import render_prevalence
from ...common import mean_ci, embed_images, language_tiers, text_blocks
from ....curate.images import image_files
from ....models.embedders.multivector import (image_tokens_cached, is_late_interaction, maxsim_scores,
                                              text_tokens_cached)
from ...data import caption_pool
from ....errors import CulturaError

if TYPE_CHECKING:
    from ....project import Project

NAME = "prevalence"
DEFAULT_KS = (5, 10, 25, 50, 99)
PAD_SCORE = -10.0   # below any cosine: stands for relevant captions ranked beyond the kept top-K
# similarities are computed IMAGE_CHUNK × TEXT_CHUNK at a time (59 MB of float32 for 3,600 images): one product
# for all of XM3600's images packs each block of caption vectors once (~20% less CPU than 256 × 16384)
IMAGE_CHUNK = 4096
TEXT_CHUNK = 4096
CACHE_BLOCK = 16384  # captions read from the embedding cache at a time (32 MB at dim 512)


class RunningTopK:
    """The ``k`` highest inner products of each query row against documents fed block by block (in document
    order), best first; equal scores are ordered by document index, also at the k-th place (the result is the
    first ``k`` columns of a stable descending sort of the full similarity matrix).

    Memory: the running top-k (queries × k) and one ``query_chunk × doc_chunk`` float32 product with its boolean
    mask at a time, never the full matrix. Once a query holds ``k`` documents, a later document can only
    enter with a score strictly above the current k-th (it has a higher index), so a block costs its product
    and one comparison; only the few documents above the threshold are merged.
    """

    def __init__(self, queries: np.ndarray, n_docs: int, k: int, *, query_chunk: int = IMAGE_CHUNK,
                 doc_chunk: int = TEXT_CHUNK):
        self.queries = np.asarray(queries, dtype=np.float32)
        self.k = max(0, min(int(k), int(n_docs)))
        self.query_chunk = max(1, int(query_chunk))
        self.doc_chunk = max(1, int(doc_chunk))
        n_q = self.queries.shape[0]
        self.val = np.empty((n_q, 0), dtype=np.float32)
        self.idx = np.empty((n_q, 0), dtype=np.int64)
        self.seen = 0

    def add(self, start: int, block: np.ndarray) -> None:
        """Documents ``start … start + len(block) - 1`` (``start`` must continue the previous block), scored
        ``query_chunk × doc_chunk`` at a time."""
        if start != self.seen:
            raise ValueError(f"blocks must come in document order: expected start {self.seen}, got {start}")
        for ds in range(0, block.shape[0], self.doc_chunk):
            self._add(block[ds:ds + self.doc_chunk])

    def _add(self, block: np.ndarray) -> None:
        start, n_b = self.seen, block.shape[0]
        if self.k == 0:
            self.seen += n_b
            return
        width = min(self.k, self.seen + n_b)
        vals, idxs = [], []
        for qs in range(0, self.queries.shape[0], self.query_chunk):
            sims = self.queries[qs:qs + self.query_chunk] @ block.T
            v, i = self._merge(sims, qs, start, width)
            vals.append(v)
            idxs.append(i)
        self.val = np.concatenate(vals) if vals else np.empty((0, width), dtype=np.float32)
        self.idx = np.concatenate(idxs) if idxs else np.empty((0, width), dtype=np.int64)
        self.seen += n_b

    def _merge(self, sims: np.ndarray, qs: int, start: int, width: int) -> tuple[np.ndarray, np.ndarray]:
        n, n_b = sims.shape
        best_v, best_i = self.val[qs:qs + n], self.idx[qs:qs + n]
        if best_v.shape[1] == self.k:      # full: only scores above the k-th can enter (a NaN never does)
            rows, cols = np.nonzero(sims > best_v[:, -1:])
        else:
            # first block(s): a NaN score (a zero vector) ranks last instead of poisoning the k-th score
            np.nan_to_num(sims, copy=False, nan=-np.inf)
            if n_b > self.k:                # the block's own top k, ties at the k-th kept
                kth = np.partition(sims, n_b - self.k, axis=1)[:, n_b - self.k:n_b - self.k + 1]
                rows, cols = np.nonzero(sims >= kth)
            else:
                rows, cols = np.nonzero(np.ones(sims.shape, dtype=bool))
        if rows.size == 0:
            return best_v, best_i
        counts = np.bincount(rows, minlength=n)
        extra = int(counts.max())
        cand_v = np.full((n, best_v.shape[1] + extra), -np.inf, dtype=np.float32)
        cand_i = np.full(cand_v.shape, np.iinfo(np.int64).max, dtype=np.int64)
        cand_v[:, :best_v.shape[1]] = best_v
        cand_i[:, :best_v.shape[1]] = best_i
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
        col = best_v.shape[1] + np.arange(rows.size) - offsets[rows]
        cand_v[rows, col] = sims[rows, cols]
        cand_i[rows, col] = cols + start
        order = np.lexsort((cand_i, -cand_v), axis=1)[:, :width]
        return np.take_along_axis(cand_v, order, axis=1), np.take_along_axis(cand_i, order, axis=1)

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """``(indices, scores)``, each (queries × k), best first."""
        return self.idx, self.val


def topk_chunked(queries: np.ndarray, docs: np.ndarray, k: int, *, query_chunk: int = IMAGE_CHUNK,
                 doc_chunk: int = TEXT_CHUNK) -> tuple[np.ndarray, np.ndarray]:
    """Indices and scores of the ``k`` highest inner products of each query row against ``docs``, best first,
    through :class:`RunningTopK` over blocks of ``doc_chunk`` documents. Equal scores are listed by document
    index, also at the k-th place.

    >>> q = np.eye(3, dtype=np.float32); d = np.eye(3, dtype=np.float32)[[2, 0, 1]]
    >>> topk_chunked(q, d, 1, doc_chunk=2)[0].ravel().tolist()
    [1, 2, 0]
    """
    docs = np.asarray(docs, dtype=np.float32)
    top = RunningTopK(queries, docs.shape[0], k, query_chunk=query_chunk, doc_chunk=doc_chunk)
    top.add(0, docs)
    return top.result()


def streamed_topk(project: Project, embedder, queries: np.ndarray, texts: list[str], k: int, *,
                  query_chunk: int = IMAGE_CHUNK, doc_chunk: int = TEXT_CHUNK,
                  languages=None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`topk_chunked` of ``queries`` against the texts' embeddings, read from the embedding cache
    ``max(CACHE_BLOCK, doc_chunk)`` texts at a time (:func:`text_blocks`, misses embedded and stored block by
    block) straight into the running top-k: the caption matrix is never held (one block of vectors is).
    ``languages`` (each caption's language) reaches a language-aware encoder (NLLB-CLIP): the pool is read in
    runs of one language, in pool order, so ranking ties still go by pool order."""
    top = RunningTopK(queries, len(texts), k, query_chunk=query_chunk, doc_chunk=doc_chunk)
    block = max(CACHE_BLOCK, int(doc_chunk))
    if languages is None or not getattr(embedder, "language_aware", False):
        for start, vecs in text_blocks(project, embedder, texts, block):
            top.add(start, vecs)
        return top.result()
    langs = [str(x) for x in languages]
    a = 0
    while a < len(texts):
        b = a
        while b < len(texts) and langs[b] == langs[a]:
            b += 1
        for start, vecs in text_blocks(project, embedder, texts[a:b], block, language=langs[a]):
            top.add(a + start, vecs)
        a = b
    return top.result()


def late_topk(project: Project, embedder, sha256s, texts, k: int, *, image_chunk: int = 256
              ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`topk_chunked` for a late-interaction embedder: each image's ``k`` captions with the highest
    MaxSim score ``S(caption, image)`` (the caption's tokens as the query, as ColQwen scores), best first,
    equal scores by caption index. Token matrices come through the embedding cache."""
    txt = text_tokens_cached(project, embedder, texts)
    k = min(int(k), len(txt))
    idx_out, val_out = [], []
    for s in range(0, len(sha256s), image_chunk):
        imgs = image_tokens_cached(project, embedder, sha256s[s:s + image_chunk],
                                   files=image_files(project.db))
        scores = maxsim_scores(txt, imgs).T.astype(np.float32)          # images × captions
        order = np.lexsort((np.broadcast_to(np.arange(scores.shape[1]), scores.shape), -scores), axis=1)[:, :k]
        idx_out.append(order)
        val_out.append(np.take_along_axis(scores, order, axis=1))
    if not idx_out:
        return np.zeros((0, k), dtype=np.int64), np.zeros((0, k), dtype=np.float32)
    return np.concatenate(idx_out).astype(np.int64), np.concatenate(val_out)


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


def prevalence(project: Project, embedder, *, benchmark=None, options: dict) -> list[dict]:
    """Run the prevalence suite (see the module docstring for the options)."""
    opts = dict(options or {})
    ks = sorted({int(k) for k in opts.get("ks", DEFAULT_KS)})
    seed = int(opts.get("seed", 0))
    n_res = int(opts.get("n_resamples", 1000))
    pool = caption_pool(project, pool=opts.get("pool", "auto"), benchmark=benchmark,
                        caption_source=opts.get("caption_source"), variants=tuple(opts.get("variants", ("short",))))
    lim = sample_limit()
    if lim is not None and len(pool.image_sha256) > lim:  # a smoke run: the first query images only
        pool = dataclasses.replace(pool, image_sha256=pool.image_sha256[:lim], image_keys=pool.image_keys[:lim],
                                   image_countries=pool.image_countries[:lim])
    k_max = min(max(ks), len(pool.texts))
    if is_late_interaction(embedder):  # ColQwen-style: MaxSim of caption tokens with image patches
        top_idx, top_val = late_topk(project, embedder, pool.image_sha256, pool.texts, k_max,
                                     image_chunk=int(opts.get("image_chunk", 256)))  # token matrices: fewer
    else:
        img = embed_images(project, embedder, pool.image_sha256)
        top_idx, top_val = streamed_topk(project, embedder, img, pool.texts, k_max,
                                         query_chunk=int(opts.get("image_chunk", IMAGE_CHUNK)),
                                         doc_chunk=int(opts.get("text_chunk", TEXT_CHUNK)),
                                         languages=pool.languages)
    return prevalence_rows(pool, top_idx, top_val, ks=ks, tiers=language_tiers(project, set(pool.languages)),
                           freq_k=int(opts.get("freq_k", 10)), prior=opts.get("prior", "uniform"),
                           n_resamples=n_res, seed=seed, no_relevant=str(opts.get("no_relevant", "exclude")))


NO_RELEVANT = ("exclude", "zero")


def prevalence_rows(pool, top_idx, top_val, *, ks, tiers: dict, freq_k: int = 10, prior: str = "uniform",
                    n_resamples: int = 1000, seed: int = 0, no_relevant: str = "exclude") -> list[dict]:
    """Result rows from the ranked top-K of every query image (separated from embedding for tests and the
    benchmark script). ``no_relevant``: "exclude" (queries without a relevant caption are left out of Acc@k and
    NDCG@k, counted) or "zero" (scored 0, sklearn's reading)."""
    if no_relevant not in NO_RELEVANT:
        raise CulturaError(f"no_relevant must be 'exclude' (the default: a query without a relevant caption has "
                           f"no Acc@k / NDCG@k) or 'zero' (sklearn's reading), got {no_relevant!r}.",
                           param="no_relevant")
    languages = sorted(set(pool.languages.tolist()))
    n_img = len(pool.image_sha256)
    k_max = top_idx.shape[1]
    y_true, y_score = reduced_relevance(top_idx, top_val, pool.image_keys, pool.caption_keys, k_max)
    has_rel = y_true.sum(axis=1) > 0 if y_true.size else np.zeros(len(y_true), dtype=bool)
    keep = has_rel if no_relevant == "exclude" else np.ones(len(y_true), dtype=bool)
    n_no_rel = int((~has_rel).sum())
    ranked = pool.languages[top_idx]
    prior_arg = None
    if prior == "pool":
        vals, counts = np.unique(pool.languages, return_counts=True)
        mix = dict(zip(vals.tolist(), (counts / counts.sum()).tolist()))
        prior_arg = {lang: mix[lang] for lang in languages}
    if logging_samples():
        log_samples("pool", [{"languages": languages, "prior": prior, "prior_mix": prior_arg, "ks": list(ks),
                              "n_captions": len(pool.texts), "source": pool.source}])
        log_samples("image_query", image_query_samples(pool, top_idx, top_val))
    common = {"pool": pool.source, "n_captions": len(pool.texts), "n_languages": len(languages),
              "prior": prior, "eps": 1e-9, "provenance": pool.provenance}
    rows = []
    n_cap = len(pool.texts)
    one_class = len(set(np.asarray(pool.caption_keys).tolist())) <= 1

    def trivial(k: int, metrics: str) -> str | None:
        """Why the metrics of one k are trivial for this input, or None."""
        if k >= n_cap and metrics in ("lbkl", "share"):
            return (f"k={k} covers the whole pool of {n_cap} captions: every caption is in the top k, so the "
                    "top-k language mix is the pool's own" + (" (LBKL@k measures only the pool's imbalance)"
                                                              if metrics == "lbkl" else
                                                              " (share of top-k = share of pool)"))
        if k >= n_cap and metrics == "acc":
            return f"k={k} covers the whole pool of {n_cap} captions: every relevant caption is retrieved"
        if len(languages) == 1 and metrics in ("lbkl", "share"):
            return f"one language in the pool ({languages[0]}): the language mix of any top k is that language"
        if one_class and metrics in ("acc", "ndcg"):
            return "one class: every caption is relevant to every image, so any ranking scores the maximum"
        return None

    for k in ks:
        if k > k_max:
            why = f"the pool holds only {k_max} captions, fewer than k: such a k covers more than the whole pool"
            for metric in ("acc", "ndcg", "lbkl", "dlbkl"):
                rows.append(row(NAME, f"{metric}@{k}", float("nan"), n=n_img,
                                details={**common, "k": k, "reason": why, "degenerate": why}))
            continue
        hit, ndcg_q = per_query_scores(y_true, k)
        # LBKL@k / DLBKL@k are the means of the per-query values (metrics.lbkl / dlbkl): computed once
        lb_q = lbkl_per_query(ranked[:, :k], languages, k=k, prior=prior_arg)
        dlb_q = lbkl_per_query(ranked[:, :k], languages, k=k, prior=prior_arg, discounted=True)
        rel_det = {"n_no_relevant": n_no_rel, "no_relevant": no_relevant}
        for metric, fn, values in ((f"acc@{k}", accuracy_at_k, hit), (f"ndcg@{k}", ndcg_at_k, ndcg_q)):
            if not keep.any():
                rows.append(row(NAME, metric, float("nan"), n=0, details={
                    **common, "k": k, **rel_det, "reason": f"none of the {n_img} query images has a relevant "
                                                           "caption in the pool, so the metric is undefined"}))
                continue
            lo, hi = mean_ci(values[keep], n_resamples=n_resamples, seed=seed)
            rows += degenerate([row(NAME, metric, fn(y_true[keep], y_score[keep], k=k), ci_low=lo, ci_high=hi,
                                    n=int(keep.sum()), details={**common, "k": k, **rel_det})],
                               trivial(k, metric.split("@")[0]))
        for metric, values in ((f"lbkl@{k}", lb_q), (f"dlbkl@{k}", dlb_q)):
            lo, hi = mean_ci(values, n_resamples=n_resamples, seed=seed)
            rows += degenerate([row(NAME, metric, float(values.mean()), ci_low=lo, ci_high=hi, n=n_img,
                                    details={**common, "k": k})], trivial(k, "lbkl"))
    fk = min(freq_k, k_max)
    freq = retrieval_frequency(ranked[:, :fk], languages, k=fk, groups={lang: tiers.get(lang, "unknown")
                                                                 for lang in languages})
    n_of = Counter(pool.languages.tolist())
    pool_share = {lang: n_of[lang] / len(pool.languages) for lang in languages}
    share_why = trivial(fk, "share")
    start = len(rows)
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
    degenerate(rows[start:], share_why)
    return rows


def image_query_samples(pool, top_idx, top_val):
    """Per-sample log (a generator): each query image's top-k captions, best first, with language, score and
    relevance."""
    keys = np.asarray(pool.caption_keys)
    return ({"sha256": pool.image_sha256[i], "country": pool.image_countries[i],
             "key": str(pool.image_keys[i]),
             "top": [{"caption": int(j), "text": pool.texts[j], "language": str(pool.languages[j]),
                      "score": float(v), "relevant": bool(keys[j] == pool.image_keys[i])}
                     for j, v in zip(top_idx[i].tolist(), top_val[i].tolist())]}
            for i in range(len(pool.image_sha256)))


SUITE = Suite(NAME, prevalence, section=render_prevalence, options=OPTIONS, description="Image→text prevalence bias: Acc@k, NDCG@k, LBKL@k, DLBKL@k and "
                                             "retrieval frequency by language and resource tier (seed 000 RQ1).")
