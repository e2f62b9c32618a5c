"""M-CLIP (Carlsson et al., 2022): ``mclip:TEXT_MODEL[+IMAGE_SPEC]``.

M-CLIP distils CLIP's text tower into a multilingual transformer (XLM-R large, or LaBSE) followed by one linear
projection; images go through the *unchanged* CLIP image tower the student was distilled against. A hub
repository (``M-CLIP/XLM-Roberta-Large-Vit-B-32`` …) holds only the text side: ``config.json``
(``model_type = "M-CLIP"``, ``modelBase`` = the transformer's name, ``transformerDimensions``, ``numDims``),
the tokenizer and the weights (``transformer.*`` and ``LinearTransformation.*``).

Spec forms:

- ``mclip:M-CLIP/XLM-Roberta-Large-Vit-L-14`` — a hub repository; the image tower is the one it was distilled
  against (:data:`IMAGE_TOWERS`: ViT-L/14 OpenAI via open_clip);
- ``mclip:M-CLIP/XLM-Roberta-Large-Vit-B-32+openclip:ViT-B-32/openai`` — the image tower spelled out (any
  cultura embedder spec after ``+``); required for a repository not in :data:`IMAGE_TOWERS`;
- ``mclip:/path/to/folder+openclip:…`` — a local folder with the same files.

Loading reads ``config.json``, builds the transformer from the **config** of ``modelBase`` (not its
pretrained weights: the M-CLIP checkpoint replaces them all), loads the state dict, and tokenises with the
repository's tokenizer. Text embedding: tokenise (padding, truncation), mean-pool the last hidden states over
the attention mask, apply the linear map (as ``multilingual_clip.pt_multilingual_clip.MultilingualCLIP``).

A folder whose ``config.json`` says ``"cultura_random_init": true`` (the tiny test models) is a random-init
model: its identity says ``random`` and ``info["random_init"]`` is True.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ...errors import CulturaError
from .base import Embedder, file_sha256, offline_error, resolve_device
from .registry import get_embedder

#: The image tower each published M-CLIP text model was distilled against (from the M-CLIP model cards).
IMAGE_TOWERS = {
    "M-CLIP/XLM-Roberta-Large-Vit-B-32": "openclip:ViT-B-32/openai",
    "M-CLIP/XLM-Roberta-Large-Vit-L-14": "openclip:ViT-L-14/openai",
    "M-CLIP/XLM-Roberta-Large-Vit-B-16Plus": "openclip:ViT-B-16-plus-240/laion400m_e32",
    "M-CLIP/LABSE-Vit-L-14": "openclip:ViT-L-14/openai",
}
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
HUB_FAMILIES = ("openclip", "hf", "st", "mclip", "preset")  # image-tower families that take cache_dir
HUB_FILES = ["config.json", "*.json", "*.model", "*.txt", *WEIGHT_FILES]


def _resolve_folder(name: str, cache_dir: str | None, spec: str) -> tuple[Path, bool]:
    """(folder holding config.json, tokenizer and weights; is_local). A hub id goes through the hub cache
    (``HF_HUB_OFFLINE=1`` reads the cache only)."""
    p = Path(name).expanduser()
    if p.is_dir():
        return p.resolve(), True
    if name.startswith(("/", "./", "../", "~")):
        raise CulturaError(f"Folder {name!r} does not exist. Give an M-CLIP folder (config.json, tokenizer, "
                           "weights) or a hub id like 'mclip:M-CLIP/XLM-Roberta-Large-Vit-B-32'.")
    try:
        from huggingface_hub import snapshot_download  # deferred: heavy optional dependency, loaded on first use

        return Path(snapshot_download(name, cache_dir=cache_dir, allow_patterns=HUB_FILES)), False
    except Exception as e:  # offline and not cached, unknown repo, network error → one clear message
        raise offline_error(spec, e, local_hint="or give a local folder: 'mclip:/path/to/folder+IMAGE_SPEC'") \
            from e


class MCLIPEmbedder(Embedder):
    """M-CLIP: a multilingual text tower (transformer + mean pooling + linear map) and a CLIP image tower."""

    family = "mclip"

    def __init__(self, name: str, image: str | Embedder | None = None, *, cache_dir: str | None = None,
                 spec: str | None = None, **kw):
        super().__init__(**kw)
        import torch  # deferred: heavy optional dependency, loaded on first use
        from transformers import (  # deferred: heavy optional dependency, loaded on first use
            AutoConfig,
            AutoModel,
            AutoTokenizer,
        )
        from transformers.utils import logging as hf_logging  # deferred: heavy optional dependency, loaded on first use

        self.spec = spec or f"mclip:{name}"
        self.device = resolve_device(self.requested_device)
        folder, self.is_local = _resolve_folder(name, cache_dir, self.spec)
        self.name = folder.name if self.is_local else name
        try:
            cfg = json.loads((folder / "config.json").read_text("utf-8"))
        except (OSError, ValueError) as e:
            raise CulturaError(f"M-CLIP model {name!r} has no readable config.json in {folder} ({e}).") from e
        # MCLIPConfig stores its init arguments transformerDimSize / imageDimSize as these two attributes
        cfg.setdefault("transformerDimensions", cfg.get("transformerDimSize"))
        cfg.setdefault("numDims", cfg.get("imageDimSize"))
        missing = [k for k in ("modelBase", "transformerDimensions", "numDims") if cfg.get(k) is None]
        if missing:
            raise CulturaError(f"{folder / 'config.json'} is not an M-CLIP config: it lacks {', '.join(missing)} "
                               "(M-CLIP configs have model_type 'M-CLIP', modelBase, transformerDimensions, "
                               "numDims).")
        self.model_base = str(cfg["modelBase"])
        self.random_init = bool(cfg.get("cultura_random_init", False))
        weights = next((folder / f for f in WEIGHT_FILES if (folder / f).is_file()), None)
        if weights is None:
            raise CulturaError(f"M-CLIP model {name!r}: no weights ({' or '.join(WEIGHT_FILES)}) in {folder}.")
        self.weights_sha256 = file_sha256(weights)
        try:
            base_cfg = AutoConfig.from_pretrained(self.model_base, cache_dir=cache_dir)
            tok_src = folder if (folder / "tokenizer_config.json").is_file() else self.model_base
            level = hf_logging.get_verbosity()
            hf_logging.set_verbosity_error()  # the folder's config says model_type "M-CLIP": expected, not news
            try:
                try:
                    self.tokenizer = AutoTokenizer.from_pretrained(str(tok_src), cache_dir=cache_dir)
                except (OSError, ValueError, KeyError):
                    if tok_src == self.model_base:
                        raise
                    # a tokenizer_config.json without tokenizer_class: AutoTokenizer would read model_type
                    # "M-CLIP" from config.json, which it does not know; the base's tokenizer is the same one
                    self.tokenizer = AutoTokenizer.from_pretrained(self.model_base, cache_dir=cache_dir)
            finally:
                hf_logging.set_verbosity(level)
        except Exception as e:
            raise offline_error(self.spec, e, local_hint=f"or make modelBase ({self.model_base}) a local folder "
                                                         "holding the transformer's config") from e
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)  # every weight is overwritten below; the seed only keeps init quiet and cheap
            transformer = AutoModel.from_config(base_cfg)
        proj = torch.nn.Linear(int(cfg["transformerDimensions"]), int(cfg["numDims"]))
        state = self._load_state(weights)
        t_state = {k[len("transformer."):]: v for k, v in state.items() if k.startswith("transformer.")}
        p_state = {k[len("LinearTransformation."):]: v for k, v in state.items()
                   if k.startswith("LinearTransformation.")}
        if not t_state or set(p_state) != {"weight", "bias"}:
            raise CulturaError(f"{weights} is not an M-CLIP checkpoint: it needs transformer.* and "
                               "LinearTransformation.weight/bias tensors.")
        result = transformer.load_state_dict(t_state, strict=False)
        # the pooler is unused (M-CLIP mean-pools the hidden states); position_ids are buffers
        bad = [k for k in result.missing_keys if not k.endswith("position_ids") and not k.startswith("pooler.")]
        if bad or any(not k.endswith("position_ids") for k in result.unexpected_keys):
            raise CulturaError(f"{weights} does not match the architecture of {self.model_base} "
                               f"(missing {bad[:3]}, unexpected {list(result.unexpected_keys)[:3]}).")
        proj.load_state_dict(p_state)
        self.transformer = transformer.to(self.device).eval()
        self.proj = proj.to(self.device).eval()
        self._dim = int(cfg["numDims"])
        max_pos = getattr(base_cfg, "max_position_embeddings", 514) or 514
        self.max_length = int(min(getattr(self.tokenizer, "model_max_length", 512) or 512, max_pos - 2))
        self._torch = torch
        # the image tower
        if image is None:
            image = IMAGE_TOWERS.get(name)
            if image is None:
                raise CulturaError(f"M-CLIP model {name!r} has no known image tower: give it after '+', e.g. "
                                   f"'mclip:{name}+openclip:ViT-B-32/openai' (the CLIP it was distilled from).")
        opts = {k: v for k, v in (("device", self.requested_device), ("cache_dir", cache_dir)) if v is not None}
        if isinstance(image, str) and image.split(":", 1)[0] not in HUB_FAMILIES:
            opts.pop("cache_dir", None)
        self.image_embedder = image if isinstance(image, Embedder) else get_embedder(image, **opts)
        img_dim = getattr(self.image_embedder, "_dim", None)
        if img_dim and img_dim != self._dim:
            raise CulturaError(f"M-CLIP text model {name!r} projects to {self._dim} dimensions but the image tower "
                               f"{self.image_embedder.identity!r} gives {img_dim}; pair it with the CLIP it was "
                               "distilled against.")

    @staticmethod
    def _load_state(weights: Path) -> dict:
        if weights.suffix == ".safetensors":
            from safetensors.torch import load_file  # deferred: heavy (torch)

            return load_file(str(weights))
        import torch  # deferred: heavy optional dependency, loaded on first use

        return torch.load(str(weights), map_location="cpu", weights_only=True)

    # -- identity -------------------------------------------------------------------------------------
    @property
    def identity(self) -> str:
        text = f"mclip:{self.name}" + ("/random" if self.random_init else "") + f"@{self.weights_sha256[:12]}"
        return f"{text}+{self.image_embedder.identity}"

    @property
    def info(self) -> dict:
        import transformers  # deferred: heavy optional dependency, loaded on first use

        img = self.image_embedder.info
        return {**super().info, "architecture": f"M-CLIP ({self.model_base} + linear)", "pretrained": self.name,
                "model_base": self.model_base, "weights_sha256": self.weights_sha256,
                "random_init": self.random_init or bool(img.get("random_init")),
                "image_tower": img.get("identity"), "transformers_version": transformers.__version__}

    # -- family methods -------------------------------------------------------------------------------
    def _embed_image_batch(self, images):
        return self.image_embedder.embed_images(images)

    def _embed_text_batch(self, texts):
        torch = self._torch
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt")
        ids, att = enc["input_ids"].to(self.device), enc["attention_mask"].to(self.device)
        with torch.inference_mode():
            hidden = self.transformer(input_ids=ids, attention_mask=att)[0]
            mask = att.unsqueeze(2).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
            return self.proj(pooled)


def from_spec(rest: str, **options) -> MCLIPEmbedder:
    """Factory for ``mclip:TEXT_MODEL[+IMAGE_SPEC]`` (an ``image=`` option overrides the spec's image tower)."""
    rest = rest.strip()
    if not rest:
        raise CulturaError("An mclip spec needs a text model, e.g. 'mclip:M-CLIP/XLM-Roberta-Large-Vit-B-32' or "
                           "'mclip:/path/to/folder+openclip:ViT-B-32/openai'.")
    name, sep, image = rest.partition("+")
    image = options.pop("image", None) or (image.strip() if sep else None)
    return MCLIPEmbedder(name.strip(), image, spec=f"mclip:{rest}", **options)


def save_mclip(folder: str | os.PathLike, transformer, tokenizer, projection, *, model_base: str,
               random_init: bool = False) -> Path:
    """Write an M-CLIP folder (config.json, tokenizer, weights) the way the hub repositories are laid out —
    used to build tiny random-init test models; ``random_init`` marks the identity."""

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    cfg = {"model_type": "M-CLIP", "architectures": ["MultilingualCLIP"], "modelBase": str(model_base),
           "transformerDimensions": int(projection.in_features), "numDims": int(projection.out_features)}
    if random_init:
        cfg["cultura_random_init"] = True
    (out / "config.json").write_text(json.dumps(cfg, indent=2), "utf-8")
    tokenizer.save_pretrained(str(out))
    state = {f"transformer.{k}": v.contiguous() for k, v in transformer.state_dict().items()}
    state.update({f"LinearTransformation.{k}": v.contiguous() for k, v in projection.state_dict().items()})
    from safetensors.torch import save_file  # deferred: heavy (torch)

    save_file(state, str(out / "model.safetensors"))
    return out
