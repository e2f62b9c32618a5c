"""Helpers shared by the suites: cached embedding of ids and texts, per-trial wins, bootstrap intervals,
2-D projections and language tiers. Private to the suites (the public API is the suite registry)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..curate.images import image_files
from ..models.embedders import cache_texts, embed_images_cached, embed_texts_cached
from .metrics._numpy_stats import pca_2d
from .metrics.resampling import bootstrap_ci

if TYPE_CHECKING:
    from ..project import Project


DEFAULT_RESAMPLES = 1000
DEFAULT_LEVEL = 0.95
UMAP_MIN_POINTS = 200


# -- embeddings (through the project's cache) --------------------------------------------------------

def embed_texts(project: Project, embedder, texts, *, language: str | None = None) -> np.ndarray:
    """One unit-norm row per text (duplicates included), through the project's embedding cache, which embeds
    each distinct text once. ``language`` (the texts' language) reaches language-aware models (NLLB-CLIP)."""

    texts = list(texts)
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    return np.asarray(embed_texts_cached(project, embedder, texts, language=language), dtype=np.float32)


def embed_texts_by_language(project: Project, embedder, texts, languages) -> np.ndarray:
    """:func:`embed_texts` of texts in several languages, each encoded with its own language (``languages[i]``
    is the language of ``texts[i]``): a language-aware model (NLLB-CLIP) gets each language's source tag
    instead of its default (``eng_Latn``); other models are called once, as before."""
    texts = list(texts)
    langs = [None if lang is None else str(lang) for lang in languages]
    if len(langs) != len(texts):
        raise ValueError(f"languages must give one language per text ({len(texts)}), got {len(langs)}.")
    if not getattr(embedder, "language_aware", False) or len(set(langs)) <= 1:
        return embed_texts(project, embedder, texts, language=langs[0] if langs else None)
    out = None
    for lang in dict.fromkeys(langs):
        idx = [i for i, x in enumerate(langs) if x == lang]
        vecs = embed_texts(project, embedder, [texts[i] for i in idx], language=lang)
        if out is None:
            out = np.zeros((len(texts), vecs.shape[1]), dtype=np.float32)
        out[idx] = vecs
    return out


def text_blocks(project: Project, embedder, texts, block: int, *, language: str | None = None):
    """``(start, vectors)`` for consecutive blocks of ``block`` texts, through the cache like
    :func:`embed_texts`. Streams: one ``(block, dim)`` float32 buffer is filled again for every block, so a block
    is valid only until the next one is requested and memory never holds all the texts' vectors.

    A block with misses (a cold cache) embeds them; then every text still missing is embedded and stored in one
    job (:func:`cache_texts`: one progress bar, one job for the ``ray`` executor) before the next block is read."""
    texts = texts if isinstance(texts, list) else list(texts)
    block = max(1, int(block))
    buf, filled = None, False
    for start in range(0, len(texts), block):
        part = texts[start:start + block]
        before = _texts_embedded(embedder)
        if buf is None:
            buf = np.asarray(embed_texts_cached(project, embedder, part, language=language), dtype=np.float32)
            yield start, buf
        else:
            yield start, embed_texts_cached(project, embedder, part, language=language, out=buf[:len(part)])
        if not filled and _texts_embedded(embedder) > before and start + block < len(texts):
            cache_texts(project, embedder, texts[start + block:], language=language)
            filled = True


def _texts_embedded(embedder) -> int:
    return int((getattr(embedder, "stats", None) or {}).get("texts", 0))


def embed_images(project: Project, embedder, sha256s) -> np.ndarray:
    """One unit-norm row per image sha256 (duplicates included), through the cache."""

    shas = list(sha256s)
    if not shas:
        return np.zeros((0, 0), dtype=np.float32)
    return np.asarray(embed_images_cached(project, embedder, shas, files=image_files(project.db)), dtype=np.float32)


# -- trials -----------------------------------------------------------------------------------------

def per_trial_wins(similarities: np.ndarray) -> np.ndarray:
    """Row-wise share of the win: 1 for the best candidate, ties split equally (each row sums to 1). The
    column means equal :func:`cultura.evaluate.metrics.win_rates` (tested); rows are what the bootstrap
    resamples."""
    s = np.asarray(similarities, dtype=float)
    is_max = s == s.max(axis=1, keepdims=True)
    return is_max / is_max.sum(axis=1, keepdims=True)


# -- bootstrap --------------------------------------------------------------------------------------

def _indices(n: int, n_resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(n_resamples, n))


def mean_ci(values, *, n_resamples: int = DEFAULT_RESAMPLES, level: float = DEFAULT_LEVEL,
            seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean (:func:`cultura.evaluate.metrics.bootstrap_ci`); NaN bounds when
    fewer than two values."""

    v = np.asarray(values, dtype=float)
    if v.shape[0] < 2:
        return math.nan, math.nan
    ci = bootstrap_ci(v, np.mean, n_boot=n_resamples, seed=seed, level=level)
    return float(ci.low), float(ci.high)


def bootstrap_ratio_ci(wins: np.ndarray, num: int, den: int, *, n_resamples: int = DEFAULT_RESAMPLES,
                       level: float = DEFAULT_LEVEL, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of ``mean(wins[:, num]) / mean(wins[:, den])`` (SP = M_lb / M_cr), resampling
    trials. Resamples with a zero denominator give ``inf``; the quantiles keep them (an upper bound of inf
    says the ratio is unbounded at this n)."""
    w = np.asarray(wins, dtype=float)
    n = w.shape[0]
    if n < 2:
        return math.nan, math.nan
    idx = _indices(n, n_resamples, seed)
    nums = w[:, num][idx].mean(axis=1)
    dens = w[:, den][idx].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(dens > 0, nums / np.where(dens > 0, dens, 1), np.inf)
    a = (1 - level) / 2
    return float(np.quantile(ratio, a, method="lower")), float(np.quantile(ratio, 1 - a, method="higher"))


def ratio(num: float, den: float) -> float:
    """``num / den`` with ``inf`` for a zero denominator (SP when M_cr = 0)."""
    return float(num / den) if den > 0 else math.inf


SP_INF_REASON = ("M_cr = 0: no trial ranked the correct image first (total retrieval failure), so SP = M_lb / "
                 "M_cr is unbounded; read M_cr and M_lb instead.")


# -- projections and tiers --------------------------------------------------------------------------

def project_2d(x: np.ndarray, *, seed: int = 0, method: str = "auto") -> tuple[np.ndarray, str]:
    """2-D coordinates of the rows of ``x`` and the method used: UMAP (cosine) when there are at least
    ``UMAP_MIN_POINTS`` rows and ``method`` is auto/umap, otherwise PCA."""
    x = np.asarray(x, dtype=np.float32)
    n = x.shape[0]
    if n == 0:
        return np.zeros((0, 2)), "none"
    if n < 3:
        return np.c_[np.arange(n, dtype=float), np.zeros(n)], "index"
    if method in ("auto", "umap") and n >= UMAP_MIN_POINTS:
        import umap  # umap-learn; imported lazily (numba start-up is slow)

        reducer = umap.UMAP(n_components=2, metric="cosine", random_state=seed, n_neighbors=min(15, n - 1), n_jobs=1)
        return np.asarray(reducer.fit_transform(x), dtype=float), "umap"

    return pca_2d(x), "pca"  # numpy: sklearn costs seconds of import for two singular vectors


def language_tiers(project: Project, languages) -> dict[str, str]:
    """language code → resource tier (high/medium/low) from the country registry; ``unknown`` when the
    registry has none (tiers are data, never code)."""
    langs = project.registry.languages
    return {lang: (getattr(langs.get(lang), "resource_tier", "") or "unknown") for lang in languages}


def sample_points(n: int, max_points: int, seed: int = 0) -> np.ndarray:
    """Indices of at most ``max_points`` of ``n`` rows (seeded, sorted)."""
    if n <= max_points:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_points, replace=False))
