"""Hugging Face transformers dual encoders: ``hf:REPO_ID`` or ``hf:/path/to/folder``.

Works with any model class that has ``get_image_features`` / ``get_text_features`` — CLIP
(``hf:openai/clip-vit-base-patch32``), SigLIP / SigLIP 2 (``hf:google/siglip-base-patch16-224``; texts padded to
the maximum length as in training) and Chinese-CLIP (``hf:OFA-Sys/chinese-clip-vit-base-patch16``). The folder
holds what ``save_pretrained`` writes: the model, a tokenizer and an image processor config.
"""
from __future__ import annotations

import os
from pathlib import Path

from ...errors import CulturaError
from .base import Embedder, file_sha256, offline_error, resolve_device
from .languages import set_source_language, source_language_tokenizer

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def _features(out):
    """transformers ≥ 5 returns a model output whose pooler_output holds the projected features."""
    if hasattr(out, "pooler_output"):
        return out.pooler_output
    if isinstance(out, (tuple, list)):  # pragma: no cover - return_dict=False
        return out[0]
    return out


class HFDualEncoder(Embedder):
    """A transformers CLIP-like model (image and text towers projected into one space)."""

    family = "hf"

    def __init__(self, name: str, *, cache_dir: str | None = None, revision: str | None = None,
                 spec: str | None = None, **kw):
        super().__init__(**kw)
        import torch  # deferred: heavy optional dependency, loaded on first use
        from transformers import (  # deferred: heavy optional dependency, loaded on first use
            AutoImageProcessor,
            AutoModel,
            AutoTokenizer,
        )

        self.spec = spec or f"hf:{name}"
        self.device = resolve_device(self.requested_device)
        path = Path(name).expanduser()
        self.is_local = path.is_dir()
        self.source = str(path.resolve()) if self.is_local else name
        self.name = path.resolve().name if self.is_local else name
        if not self.is_local and name.startswith(("/", "./", "../", "~")):
            raise CulturaError(f"Folder {name!r} does not exist. Give a folder written by save_pretrained, "
                               "or a hub id like 'hf:openai/clip-vit-base-patch32'.")
        try:
            self.model = AutoModel.from_pretrained(self.source, cache_dir=cache_dir, revision=revision)
            self.tokenizer = AutoTokenizer.from_pretrained(self.source, cache_dir=cache_dir, revision=revision)
            self.image_processor = AutoImageProcessor.from_pretrained(self.source, cache_dir=cache_dir,
                                                                      revision=revision)
        except CulturaError:
            raise
        except Exception as e:
            if self.is_local:
                raise CulturaError(f"Hugging Face model folder {self.source} could not be loaded ({e}). It needs "
                                   "the model, tokenizer and image processor files save_pretrained writes.") from e
            raise offline_error(self.spec, e, local_hint="or give a local folder: 'hf:/path/to/model'") from e
        for attr in ("get_image_features", "get_text_features"):
            if not hasattr(self.model, attr):
                raise CulturaError(f"{self.spec!r} ({type(self.model).__name__}) has no {attr}; the hf family "
                                   "needs a dual encoder such as CLIP, SigLIP or Chinese-CLIP.")
        self.model.to(self.device).eval()
        self.model_type = getattr(self.model.config, "model_type", "")
        self.sha256 = self._weights_sha(cache_dir)
        self._dim = getattr(self.model.config, "projection_dim", None) or None
        text_cfg = getattr(self.model.config, "text_config", None)
        max_pos = getattr(text_cfg, "max_position_embeddings", None) or 77
        tok_max = getattr(self.tokenizer, "model_max_length", max_pos) or max_pos
        self.max_length = int(min(tok_max, max_pos))
        self.padding = "max_length" if self.model_type.startswith("siglip") else True
        self._torch = torch
        self._lang_tok = source_language_tokenizer(self.tokenizer)  # an NLLB-style tokenizer takes src_lang
        self.language_aware = self._lang_tok is not None
        self.default_language = (getattr(self._lang_tok, "src_lang", None) or "eng_Latn") if self._lang_tok else None

    def _weights_sha(self, cache_dir):
        if self.is_local:
            for f in WEIGHT_FILES:
                if (Path(self.source) / f).is_file():
                    return file_sha256(Path(self.source) / f)
            return None
        from huggingface_hub import try_to_load_from_cache  # deferred: heavy optional dependency, loaded on first use

        for f in WEIGHT_FILES:
            hit = try_to_load_from_cache(self.source, f, cache_dir=cache_dir)
            if isinstance(hit, str) and os.path.isfile(hit):
                return file_sha256(hit)
        return None

    @property
    def identity(self) -> str:
        return f"hf:{self.name}" + (f"@{self.sha256[:12]}" if self.sha256 else "")

    @property
    def info(self) -> dict:
        import transformers  # deferred: heavy optional dependency, loaded on first use

        return {**super().info, "architecture": type(self.model).__name__, "model_type": self.model_type,
                "pretrained": self.name, "weights_sha256": self.sha256,
                "transformers_version": transformers.__version__}

    def _embed_image_batch(self, images):
        inputs = self.image_processor(images=[im.convert("RGB") for im in images], return_tensors="pt")
        with self._torch.inference_mode():
            return _features(self.model.get_image_features(pixel_values=inputs["pixel_values"].to(self.device)))

    def _embed_text_batch(self, texts, language: str | None = None):
        if self._lang_tok is not None:
            set_source_language(self._lang_tok, language, self.default_language)
        enc = self.tokenizer(texts, padding=self.padding, truncation=True, max_length=self.max_length,
                             return_tensors="pt")
        kwargs = {"input_ids": enc["input_ids"].to(self.device)}
        if "attention_mask" in enc and not self.model_type.startswith("siglip"):
            kwargs["attention_mask"] = enc["attention_mask"].to(self.device)
        if "token_type_ids" in enc and self.model_type == "chinese_clip":
            kwargs["token_type_ids"] = enc["token_type_ids"].to(self.device)
        with self._torch.inference_mode():
            return _features(self.model.get_text_features(**kwargs))


def config_identity(rest: str, *, cache_dir: str | None = None, **_options) -> str | None:
    """The identity :class:`HFDualEncoder` reports for ``hf:rest``, from files only (no transformers, no torch):
    a local folder, or a hub id whose weights are in the local hub cache (None otherwise: only a download
    tells)."""
    rest = rest.strip()
    path = Path(rest).expanduser()
    if path.is_dir():
        for f in WEIGHT_FILES:
            if (path / f).is_file():
                return f"hf:{path.resolve().name}@{file_sha256(path / f)[:12]}"
        return f"hf:{path.resolve().name}"
    if not rest or rest.startswith(("/", "./", "../", "~")):
        return None
    from huggingface_hub import try_to_load_from_cache  # deferred: loaded only to find a cached file

    for f in WEIGHT_FILES:
        hit = try_to_load_from_cache(rest, f, cache_dir=cache_dir)
        if isinstance(hit, str) and os.path.isfile(hit):
            return f"hf:{rest}@{file_sha256(hit)[:12]}"
    return None


def from_spec(rest: str, **options) -> HFDualEncoder:
    """Factory for ``hf:REPO_ID`` / ``hf:/path``."""
    rest = rest.strip()
    if not rest:
        raise CulturaError("An hf spec needs a model, e.g. 'hf:openai/clip-vit-base-patch32' or 'hf:/path/to/dir'.")
    return HFDualEncoder(rest, spec=f"hf:{rest}", **options)
