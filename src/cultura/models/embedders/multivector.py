"""Multi-vector (late-interaction) embedders and MaxSim scoring: ColQwen / ColPali / ColBERT-style models.

Such a model embeds a text or an image into one vector **per token** (or patch); a query ``q`` and a document
``d`` are scored by MaxSim (Khattab & Zaharia 2020; ColPali, Faysse et al. 2024), as seed 000 scores ColQwen2.5:

    ``S(q, d) = Σ_i max_j ⟨q_i, d_j⟩``   (token vectors L2-normalised)

>>> import numpy as np
>>> q = [np.array([[1.0, 0.0], [0.0, 1.0]])]
>>> d = [np.array([[1.0, 0.0]]), np.array([[0.6, 0.8], [1.0, 0.0]])]
>>> maxsim_scores(q, d).round(2).tolist()
[[1.0, 1.8]]

Families (registered in :mod:`.registry`):

- ``openai-multi:MODEL``: an OpenAI-compatible ``/v1/embeddings`` server (vLLM with a ColQwen/ColBERT pooler,
  or any server) whose ``embedding`` is a list of token vectors; images as data URLs like ``openai:``
  (``images="input"`` or ``"messages"``); same options as :class:`~.openai.OpenAIEmbedder`;
- ``colqwen:NAME_OR_PATH``: a local ColQwen2 / ColQwen2.5 checkpoint through transformers
  (``ColQwen2ForRetrieval`` + ``ColQwen2Processor``), by hub name or local folder (one code path).

A :class:`MultiVectorEmbedder` also answers ``embed_texts`` / ``embed_images`` with the **mean-pooled** token
vectors (so every single-vector path still runs), but the retrieval suites score it by MaxSim
(``late_interaction = True``, :func:`late_similarities`). Token vectors are cached in the ``embeddings`` table
under kinds ``text_tokens`` / ``image_tokens`` (one row per input: the token dimension, then the flattened
token matrix), keyed by the model identity like every embedding.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ...errors import CulturaError
from .base import Embedder, ModelCapabilityError, _to_numpy, file_sha256, normalize, offline_error, resolve_device
from .cache import ImageFiles, _db, _image_loader, _lookup, _store, text_key
from .openai import OpenAIEmbedder, image_data_url

if TYPE_CHECKING:
    from ...project import Project

#: Query tokens × document tokens scored per block (bounds memory at block × Tq × Td floats).
SCORE_BLOCK = 64


def _pad(mats: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(n, T, d) zero-padded stack and its (n, T) mask of real tokens."""
    if not mats:
        return np.zeros((0, 0, 0), dtype=np.float32), np.zeros((0, 0), dtype=bool)
    t = max(m.shape[0] for m in mats)
    d = mats[0].shape[1]
    out = np.zeros((len(mats), t, d), dtype=np.float32)
    mask = np.zeros((len(mats), t), dtype=bool)
    for i, m in enumerate(mats):
        if m.ndim != 2 or m.shape[1] != d:
            raise CulturaError(f"Token matrices must all be (tokens, {d}); got {m.shape}.")
        out[i, :m.shape[0]] = m
        mask[i, :m.shape[0]] = True
    return out, mask


def maxsim_scores(queries: Sequence[np.ndarray], docs: Sequence[np.ndarray], *, block: int = SCORE_BLOCK
                  ) -> np.ndarray:
    """MaxSim of every query token matrix with every document token matrix: an ``(n_queries, n_docs)``
    array, ``S[q, d] = Σ_i max_j q_i · d_j`` over real (unpadded) tokens. Inputs are used as given
    (normalise token rows first for cosine MaxSim)."""
    q, qm = _pad([np.asarray(x, dtype=np.float32) for x in queries])
    d, dm = _pad([np.asarray(x, dtype=np.float32) for x in docs])
    out = np.zeros((q.shape[0], d.shape[0]), dtype=np.float64)
    if q.size == 0 or d.size == 0:
        return out
    if q.shape[2] != d.shape[2]:
        raise CulturaError(f"Query tokens have {q.shape[2]} dimensions, document tokens {d.shape[2]}.")
    for qs in range(0, q.shape[0], block):
        for ds in range(0, d.shape[0], block):
            sims = np.einsum("atk,bsk->abts", q[qs:qs + block], d[ds:ds + block])
            sims = np.where(dm[None, ds:ds + block, None, :], sims, -np.inf).max(axis=3)
            sims = np.where(qm[qs:qs + block, None, :], sims, 0.0).sum(axis=2)
            out[qs:qs + block, ds:ds + block] = sims
    return out


def pairwise_maxsim(queries: Sequence[np.ndarray], docs: Sequence[np.ndarray]) -> np.ndarray:
    """MaxSim of ``queries[i]`` with ``docs[i]`` for each i (one score per pair)."""
    if len(queries) != len(docs):
        raise CulturaError(f"{len(queries)} queries for {len(docs)} documents: pairs need one each.")
    return np.array([float((np.asarray(q, np.float32) @ np.asarray(d, np.float32).T).max(axis=1).sum())
                     for q, d in zip(queries, docs)], dtype=np.float64)


class MultiVectorEmbedder(Embedder):
    """Base of the late-interaction families: implement ``_text_tokens(texts)`` and ``_image_tokens(images)``,
    each returning one ``(tokens, dim)`` array per input."""

    late_interaction = True

    def embed_text_tokens(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One L2-normalised ``(tokens, dim)`` matrix per text (instructions applied, see
        :meth:`Embedder.set_instructions`)."""
        texts = list(texts)
        if not self.supports_texts:
            raise ModelCapabilityError(f"Model {self.identity!r} embeds images only.")
        return self._tokens_run(self._instructed(texts), self._text_tokens, "text")

    def embed_image_tokens(self, images: Sequence[Any]) -> list[np.ndarray]:
        """One L2-normalised ``(patches, dim)`` matrix per image."""
        if not self.supports_images:
            raise ModelCapabilityError(f"Model {self.identity!r} embeds text only.")
        return self._tokens_run(list(images), self._image_tokens, "image")

    def _tokens_run(self, items: list, fn, kind: str) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for start in range(0, len(items), self.batch_size):
            batch = items[start:start + self.batch_size]
            mats = [normalize(_to_numpy(m)) for m in fn(batch)]
            if len(mats) != len(batch) or any(m.ndim != 2 or m.shape[0] == 0 for m in mats):
                raise CulturaError(f"Model {self.identity!r} returned {len(mats)} token matrices for {len(batch)} "
                                   f"{kind}s; each input needs one non-empty (tokens, dim) matrix.")
            self.stats[f"{kind}_calls"] += 1
            self.stats[f"{kind}s"] += len(batch)
            self._dim = mats[0].shape[1]
            out += mats
        return out

    # single-vector view: mean-pooled tokens (the suites score by MaxSim instead)
    def _embed_text_batch(self, texts):
        return np.stack([m.mean(axis=0) for m in self._tokens_run(texts, self._text_tokens, "text")])

    def _embed_image_batch(self, images):
        return np.stack([m.mean(axis=0) for m in self._tokens_run(images, self._image_tokens, "image")])

    def _text_tokens(self, texts: list[str]) -> list:
        raise ModelCapabilityError(f"Model {self.identity!r} cannot embed texts.")

    def _image_tokens(self, images: list) -> list:
        raise ModelCapabilityError(f"Model {self.identity!r} cannot embed images.")

    @property
    def info(self) -> dict:
        return {**super().info, "scoring": "MaxSim (late interaction)", "single_vector": "mean of tokens"}


# -- cache ------------------------------------------------------------------------------------------------

def _encode(m: np.ndarray) -> np.ndarray:
    return np.concatenate([[np.float32(m.shape[1])], m.astype(np.float32).ravel()])


def _decode(v: np.ndarray) -> np.ndarray:
    d = int(v[0])
    return np.asarray(v[1:], dtype=np.float32).reshape(-1, d)


def _tokens_cached(db, embedder: MultiVectorEmbedder, kind: str, keys: list[str], compute) -> list[np.ndarray]:
    model, ck = embedder.identity, f"{kind}_tokens"
    unique = list(dict.fromkeys(keys))
    found = {k: _decode(v) for k, v in _lookup(db, model, ck, unique).items()}
    misses = [k for k in unique if k not in found]
    step = max(embedder.batch_size * 8, 64)
    for start in range(0, len(misses), step):
        part = misses[start:start + step]
        mats = compute(part)
        _store(db, model, ck, part, [_encode(m) for m in mats])
        found.update(zip(part, mats))
    return [found[k] for k in keys]


def text_tokens_cached(project: Project, embedder: MultiVectorEmbedder, texts: Sequence[str]) -> list[np.ndarray]:
    """Token matrices of texts through the project's embedding cache (computed once per model identity)."""
    texts = list(texts)
    by_key = {text_key(t): t for t in texts}
    return _tokens_cached(_db(project), embedder, "text", [text_key(t) for t in texts],
                          lambda part: embedder.embed_text_tokens([by_key[k] for k in part]))


def image_tokens_cached(project: Project, embedder: MultiVectorEmbedder, sha256s: Sequence[str], *,
                        files: ImageFiles | None = None) -> list[np.ndarray]:
    """Token matrices of stored images (by sha256) through the project's embedding cache (``files``: where the
    image files are, as for :func:`cultura.models.embedders.cache.embed_images_cached`)."""
    loader = _image_loader(project, files)
    return _tokens_cached(_db(project), embedder, "image", list(sha256s),
                          lambda part: embedder.embed_image_tokens(loader(part)))


def late_similarities(project: Project, embedder: MultiVectorEmbedder, texts: Sequence[str],
                      sha256s: Sequence[str]) -> np.ndarray:
    """``(n_texts, n_images)`` MaxSim scores (text as the query), through the cache."""
    return maxsim_scores(text_tokens_cached(project, embedder, texts), image_tokens_cached(project, embedder, sha256s))


def is_late_interaction(embedder) -> bool:
    """True for embedders scored by MaxSim (:class:`MultiVectorEmbedder`)."""
    return bool(getattr(embedder, "late_interaction", False))


# -- families -----------------------------------------------------------------------------------------------

class OpenAIMultiVectorEmbedder(OpenAIEmbedder, MultiVectorEmbedder):
    """Token embeddings from an OpenAI-compatible ``/v1/embeddings`` server: each ``data[i].embedding`` is a
    list of token vectors (a flat vector is taken as one token)."""

    family = "openai-multi"

    @property
    def identity(self) -> str:
        return f"openai-multi:{self.model_name}"

    @staticmethod
    def _matrices(resp, n: int) -> list[np.ndarray]:
        data = sorted(resp.data, key=lambda d: d.index)
        if len(data) != n:
            raise CulturaError(f"The embeddings server returned {len(data)} embeddings for {n} inputs.")
        out = []
        for d in data:
            m = np.asarray(d.embedding, dtype=np.float32)
            out.append(m[None, :] if m.ndim == 1 else m)
        return out

    def _text_tokens(self, texts):
        return self._matrices(self._call("text", lambda: self._create(texts)), len(texts))

    def _image_tokens(self, images):
        urls = [image_data_url(im, self.image_format) for im in images]
        if self.image_mode == "input":
            return self._matrices(self._call("image", lambda: self._create(urls)), len(urls))
        out = []
        for url in urls:
            messages = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]
            if self.instructions.get("image"):
                messages.insert(0, {"role": "system", "content": [{"type": "text",
                                                                   "text": self.instructions["image"]}]})
            body = {"model": self.model_name, "encoding_format": "float", "messages": messages}
            resp = self._call("image", lambda: self.client.post(
                "/embeddings", body=body, cast_to=self._openai.types.CreateEmbeddingResponse))
            out += self._matrices(resp, 1)
        return out

    _embed_text_batch = MultiVectorEmbedder._embed_text_batch
    _embed_image_batch = MultiVectorEmbedder._embed_image_batch


class ColQwenEmbedder(MultiVectorEmbedder):
    """A ColQwen2 / ColQwen2.5 checkpoint through transformers (``ColQwen2ForRetrieval`` and
    ``ColQwen2Processor``), by hub name or local folder — one code path. Identity:
    ``colqwen:NAME@<sha256[:12] of the weights>``; a checkpoint whose config says ``cultura_random_init`` (the
    tiny test models) is named ``colqwen:random-init:NAME…`` so it is never passed off as a model."""

    family = "colqwen"

    def __init__(self, name: str, *, revision: str | None = None, cache_dir: str | None = None, **kw):
        kw.setdefault("batch_size", 4)
        super().__init__(**kw)
        # deferred: torch and transformers are heavy optional dependencies
        import torch
        from transformers import (  # deferred: heavy optional dependency, loaded on first use
            ColQwen2ForRetrieval,
            ColQwen2Processor,
        )

        path = Path(name).expanduser()
        self.is_local = path.is_dir()
        self.source = str(path.resolve()) if self.is_local else name
        self.name = path.resolve().name if self.is_local else name
        self.device = resolve_device(self.requested_device)
        try:
            self.model = ColQwen2ForRetrieval.from_pretrained(self.source, revision=revision, cache_dir=cache_dir)
            self.processor = ColQwen2Processor.from_pretrained(self.source, revision=revision, cache_dir=cache_dir)
        except Exception as e:
            if self.is_local:
                raise CulturaError(f"ColQwen folder {self.source} could not be loaded ({e}). It needs the model "
                                   "and processor files save_pretrained writes.") from e
            raise offline_error(f"colqwen:{name}", e, local_hint="or give a local folder: 'colqwen:/path'") from e
        self.model.to(self.device).eval()
        self._torch = torch
        self.weights_sha256 = _weights_sha(self.source, self.is_local, cache_dir)
        self.random_init = bool(getattr(self.model.config, "cultura_random_init", False))

    @property
    def identity(self) -> str:
        tag = "random-init:" if self.random_init else ""
        return f"colqwen:{tag}{self.name}" + (f"@{self.weights_sha256[:12]}" if self.weights_sha256 else "")

    @property
    def info(self) -> dict:
        return {**super().info, "architecture": type(self.model).__name__, "pretrained": self.name,
                "weights_sha256": self.weights_sha256, "random_init": self.random_init}

    def _run_model(self, inputs) -> list:
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        with self._torch.no_grad():
            emb = self.model(**inputs).embeddings
        mask = inputs["attention_mask"].bool()
        return [emb[i][mask[i]].float().cpu().numpy() for i in range(emb.shape[0])]

    def _text_tokens(self, texts):
        return self._run_model(self.processor(text=texts, return_tensors="pt", padding=True))

    def _image_tokens(self, images):
        return self._run_model(self.processor(images=[im.convert("RGB") for im in images], return_tensors="pt"))


WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json")


def _weights_sha(source: str, is_local: bool, cache_dir: str | None) -> str | None:
    if is_local:
        for f in WEIGHT_FILES:
            if (Path(source) / f).is_file():
                return file_sha256(Path(source) / f)
        return None
    from huggingface_hub import try_to_load_from_cache  # deferred: heavy optional dependency, loaded on first use

    for f in WEIGHT_FILES:
        hit = try_to_load_from_cache(source, f, cache_dir=cache_dir)
        if isinstance(hit, str) and os.path.isfile(hit):
            return file_sha256(hit)
    return None


def openai_multi_from_spec(rest: str, **options) -> OpenAIMultiVectorEmbedder:
    """Factory for ``openai-multi:MODEL``."""
    rest = rest.strip()
    if not rest:
        raise CulturaError("An openai-multi spec needs the served model name, e.g. "
                           "'openai-multi:vidore/colqwen2.5-v0.2'.")
    return OpenAIMultiVectorEmbedder(rest, **options)


def colqwen_from_spec(rest: str, **options) -> ColQwenEmbedder:
    """Factory for ``colqwen:NAME_OR_PATH``."""
    rest = rest.strip()
    if not rest:
        raise CulturaError("A colqwen spec needs a hub name or a local folder, e.g. 'colqwen:vidore/colqwen2.5-v0.2'.")
    return ColQwenEmbedder(rest, **options)
