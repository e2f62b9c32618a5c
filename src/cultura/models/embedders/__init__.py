"""The model zoo: one `Embedder` interface, a registry of families, an embedding cache and zero-shot tagging.

>>> from cultura.models.embedders import get_embedder
>>> e = get_embedder("fake:dim=16")
>>> e.embed_texts(["a photo of a temple"]).shape
(1, 16)

Families (``family:rest`` specs): ``openclip`` (open_clip, incl. multilingual towers), ``st``
(sentence-transformers, text-only or ``TEXT+IMAGE`` pairs), ``hf`` (transformers CLIP / SigLIP /
Chinese-CLIP), ``openai`` (an OpenAI-compatible ``/v1/embeddings`` server), ``fake`` (deterministic, for
tests). Plugins register more with :func:`register_embedder` or the ``cultura.embedders`` entry point group.
Importing this package is cheap: torch, open_clip and transformers load only when a family is built.
"""
from .base import Embedder, ModelCapabilityError, ModelUnavailable, normalize
from .cache import cache_images, cache_size, cache_texts, clear_cache, embed_images_cached, embed_texts_cached, text_key
from .fake import FakeEmbedder
from .registry import (ENTRY_POINT_GROUP, available_embedders, get_embedder, register_embedder,
                       unregister_embedder)
from .zeroshot import zero_shot

__all__ = [
    "Embedder", "FakeEmbedder", "ModelCapabilityError", "ModelUnavailable", "normalize",
    "ENTRY_POINT_GROUP", "available_embedders", "get_embedder", "register_embedder", "unregister_embedder",
    "embed_images_cached", "embed_texts_cached", "cache_images", "cache_texts", "cache_size", "clear_cache", "text_key",
    "zero_shot",
]
