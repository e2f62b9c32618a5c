"""A model named by its config, loaded on the first vector it must compute.

An evaluation whose vectors are all in the embedding cache needs the model's identity (the cache key) and the
facts a run stores beside its results (``info``: architecture, weights checksum…), never its weights. A family
that can name its identity from files alone (the config, the weights file's checksum, memoised by
:func:`~.base.file_sha256`) offers a ``config_identity(rest, **options)`` function: the identity the loaded
model would report, or None where only loading tells (a hub tag not in the local cache). The other facts are
those the loaded model reported the first time it was built (:func:`remember`), kept by identity in the user
cache: an identity carries the weights' checksum, so the same identity is the same model.

:func:`deferred` returns a :class:`DeferredEmbedder` when both are known: no torch, open_clip or transformers is
imported until a vector is missing from the cache; the model is then built from the same recipe and must
report the same identity (else the vectors would be stored under a wrong key: an error).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Sequence

from ...errors import CulturaError
from ...files import write_atomic
from ..registry import resolve_factory
from .base import Embedder, _checksum_memo_path

#: family → the import path of its ``config_identity(rest, **options)``.
CONFIG_IDENTITY = {
    "openclip": "cultura.models.embedders.openclip:config_identity",
    "hf": "cultura.models.embedders.hf:config_identity",
    "st": "cultura.models.embedders.st:config_identity",
}

#: The attributes of a loaded model a run reads before any vector is computed.
FACTS = ("family", "language_aware", "random_init", "non_model", "supports_images", "supports_texts",
         "remote_service", "default_language", "late_interaction")


def _facts_path() -> Path | None:
    memo = _checksum_memo_path()
    return None if memo is None else memo.with_name("model_facts.json")


def _read_facts() -> dict:
    path = _facts_path()
    if path is None:  # CULTURA_CACHE_DIR=off: every run loads its model
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def remember(embedder: Embedder) -> None:
    """Keep what a loaded model reports (its info and :data:`FACTS`) under its identity, for the next run."""
    try:
        identity = embedder.identity
        info = dict(embedder.info)
        facts = {k: getattr(embedder, k, None) for k in FACTS}
        facts["dim"] = embedder._dim
        json.dumps(info)
    except Exception:  # a model whose info cannot be written down is simply loaded every time
        return
    path = _facts_path()
    if path is None:  # CULTURA_CACHE_DIR=off: nothing remembered
        return
    memo = _read_facts()
    if memo.get(identity) == {"info": info, **facts}:
        return
    memo[identity] = {"info": info, **facts}
    try:
        write_atomic(path, json.dumps(memo, indent=0, sort_keys=True))
    except OSError:
        pass  # a read-only cache only means the model is loaded next time


class DeferredEmbedder(Embedder):
    """The model of ``recipe`` under its known identity; built (by :func:`~.registry.get_embedder`) on the first
    call that computes a vector or reads an attribute only the loaded model has."""

    def __init__(self, identity: str, facts: dict, recipe: dict, build: Callable[..., Embedder], **kw):
        super().__init__(**kw)
        self._build = build  # get_embedder, handed in (the registry imports this module)
        self._identity = identity
        self._facts = facts
        self.recipe = recipe
        self._model: Embedder | None = None
        for k in FACTS:
            setattr(self, k, facts.get(k))
        self._dim = facts.get("dim")

    @property
    def identity(self) -> str:
        return self._identity

    @property
    def info(self) -> dict:
        if self._model is not None:
            return self._model.info
        return {**self._facts["info"], "identity": self.identity}

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def model(self) -> Embedder:
        """The loaded model (built now on first use)."""
        if self._model is None:
            model = self._build(self.recipe["spec"], **self.recipe["options"])
            if model.identity != self.identity:
                raise CulturaError(f"Model {self.recipe['spec']!r} loaded as {model.identity!r}, but its config "
                                   f"named it {self.identity!r}; its cached vectors cannot be trusted. Clear the "
                                   "embedding cache of this model (cultura images cache --clear) and rerun.")
            model.stats = self.stats  # one set of counters, whichever object the caller holds
            self._model = model
        return self._model

    def _sync(self) -> Embedder:
        model = self.model()
        model.batch_size, model.progress = self.batch_size, self.progress
        return model

    def embed_images(self, images: Sequence[Any]):
        model = self._sync()
        try:
            return model.embed_images(images)
        finally:
            self._dim = model._dim

    def embed_texts(self, texts: Sequence[str], *, language: str | None = None):
        model = self._sync()
        try:
            return model.embed_texts(texts, language=language)
        finally:
            self._dim = model._dim

    def __getattr__(self, name: str):
        # only called for what this object lacks: the loaded model's own attributes (model, tokenizer…)
        if name.startswith("_") or name in ("recipe",):
            raise AttributeError(name)
        return getattr(self.model(), name)

    def __getstate__(self):
        raise TypeError("a DeferredEmbedder travels as its recipe")  # Ray actors build from self.recipe


def deferred(family: str, rest: str, recipe: dict, options: dict, instructions: dict,
             build: Callable[..., Embedder]) -> DeferredEmbedder | None:
    """A :class:`DeferredEmbedder` for ``family:rest`` when its identity follows from its files and its facts
    were remembered; None otherwise (the caller builds the model)."""
    path = CONFIG_IDENTITY.get(family)
    if path is None or os.environ.get("CULTURA_LOAD_MODELS") == "1":
        return None
    family_options = {k: v for k, v in options.items() if k not in ("device", "batch_size", "progress")}
    try:
        base = resolve_factory(path)(rest, **family_options)
    except CulturaError:
        return None  # the real build explains the problem
    if base is None:
        return None
    kw = {k: options[k] for k in ("device", "batch_size", "progress") if k in options}
    proxy = DeferredEmbedder(base, {k: None for k in FACTS}, recipe, build, **kw)
    proxy.family = family
    if any(instructions.values()):
        try:
            proxy.set_instructions(text=instructions["text_instruction"], image=instructions["image_instruction"],
                                   template=instructions["instruction_template"])
        except CulturaError:
            return None  # the real build explains the problem
    facts = _read_facts().get(proxy.identity)
    if not facts:
        return None
    proxy._facts = facts
    for k in FACTS:
        setattr(proxy, k, facts.get(k))
    proxy._dim = facts.get("dim")
    return proxy


__all__ = ["DeferredEmbedder", "deferred", "remember", "CONFIG_IDENTITY"]
