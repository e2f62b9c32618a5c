"""Every model cultura calls, in one place, behind one generic registry (:mod:`cultura.models.registry`):

- ``embedders/``: the :class:`Embedder` interface (image and text towers), its families (open_clip,
  sentence-transformers, transformers CLIP/SigLIP, OpenAI-compatible embeddings, fake), the embedding cache
  and zero-shot tagging;
- ``scorers``: log-probability scorers of language models (transformers, OpenAI-compatible, vLLM);
- ``generators``: text generators (OpenAI-compatible chat, transformers, stub);
- ``judges``: 1–5 relevance judges of images per culture label (vision LLMs, stub);
- ``llm``: the OpenAI-compatible chat client used as a tool (concept generation, translation, tagging), with
  its call log (``llm_calls``);
- ``tiny``: tiny random-init models built locally for tests and the demo (never passed off as models).

Importing this package is cheap: torch, open_clip and transformers load only when a model is built.
"""
from ..lazy import lazy_attributes

#: Each public name is imported on first use: a project that opens reads ``models.schema`` only (``cultura
#: status`` loads no embedder code, numpy or Pillow).
_NAMES = {name: f".embedders:{name}" for name in (
    "ENTRY_POINT_GROUP", "Embedder", "FakeEmbedder", "ModelCapabilityError", "ModelUnavailable",
    "available_embedders", "cache_size", "clear_cache", "embed_images_cached", "embed_texts_cached",
    "get_embedder", "normalize", "register_embedder", "text_key", "unregister_embedder", "zero_shot")}
__getattr__ = lazy_attributes(__name__, _NAMES)

__all__ = [
    "Embedder", "FakeEmbedder", "ModelCapabilityError", "ModelUnavailable", "normalize",
    "ENTRY_POINT_GROUP", "available_embedders", "get_embedder", "register_embedder", "unregister_embedder",
    "embed_images_cached", "embed_texts_cached", "cache_size", "clear_cache", "text_key", "zero_shot",
]
