"""open_clip models: ``openclip:ARCH[/PRETRAINED]``.

Spec forms:

- ``openclip:ViT-B-32/openai`` — an open_clip architecture and a pretrained tag (weights from the HF hub);
- ``openclip:ViT-B-32/path/to/weights.pt`` — an architecture and a local weights file (``ARCH/`` + path);
- ``openclip:xlm-roberta-large-ViT-H-14/frozen_laion5b_s13b_b90k``, ``openclip:nllb-clip-base/v1``,
  ``openclip:ViT-B-16-SigLIP-i18n-256/webli`` — the multilingual towers (text tower and tokenizer come from
  the hub too);
- ``openclip:cultura-tiny`` — the tiny config shipped in ``cultura/data/model_configs``, random init;
- ``openclip:/path/to/config.json[/PRETRAINED]`` — a model config JSON (``embed_dim``, ``vision_cfg``,
  ``text_cfg``), e.g. with an HF text tower ``text_cfg.hf_model_name`` pointing at a local folder;
- ``openclip:/path/to/folder`` or ``openclip:local-dir:/path`` / ``openclip:hf-hub:org/repo`` — open_clip's
  own schemas (a folder with ``open_clip_config.json`` and weights).

Without a pretrained tag the model is randomly initialised under ``torch.manual_seed(seed)`` (default 0),
so it is deterministic; its identity says so: ``openclip:cultura-tiny/random_init@seed0`` (and
``info['random_init']`` is True).
Its outputs mean nothing: tags it writes are refused by ``build`` (unless ``allow_random_tags``) and reports
carry a banner.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
from importlib import resources
from pathlib import Path

from ...errors import CulturaError, unknown
from .base import Embedder, file_sha256, hub_offline, offline_error, resolve_device
from .languages import set_source_language, source_language_tokenizer

_TINY_REGISTERED = False
RANDOM_TAGS = {"", "random", "none", "None"}
RANDOM_INIT = "random_init"   # the marker in the identity of a model built without weights


def model_configs_dir() -> Path:
    """The folder of cultura's own open_clip configs (``cultura-tiny.json``)."""

    return Path(str(resources.files("cultura.data") / "model_configs"))


def register_model_configs() -> None:
    """Add cultura's configs to open_clip's registry (idempotent)."""
    global _TINY_REGISTERED
    if not _TINY_REGISTERED:
        import open_clip  # deferred: heavy optional dependency, loaded on first use

        open_clip.add_model_config(model_configs_dir())
        _TINY_REGISTERED = True


def register_config_file(path: str | os.PathLike) -> tuple[str, str]:
    """Register a model config JSON with open_clip under ``<stem>#<sha256[:12] of the file>``.

    The content hash in the name keeps two files with the same stem (or a stem equal to a built-in name
    such as ``ViT-B-32``) from replacing each other. Returns (registered name, sha12).
    """
    import open_clip  # deferred: heavy optional dependency, loaded on first use
    from open_clip import factory  # deferred: heavy optional dependency, loaded on first use

    p = Path(path).expanduser()
    if not p.is_file():
        raise CulturaError(f"open_clip model config {str(p)!r} does not exist. Give the path of a JSON file "
                           "with embed_dim, vision_cfg and text_cfg.")
    data = p.read_bytes()
    try:
        cfg = json.loads(data)
    except ValueError as e:
        raise CulturaError(f"open_clip model config {str(p)!r} is not valid JSON ({e}).") from e
    cfg = cfg.get("model_cfg", cfg) if isinstance(cfg, dict) else cfg
    if not isinstance(cfg, dict) or not all(k in cfg for k in ("embed_dim", "vision_cfg", "text_cfg")):
        raise CulturaError(f"{str(p)!r} is not an open_clip model config: it needs the keys embed_dim, "
                           "vision_cfg and text_cfg.")
    sha12 = _sha12_bytes(data)
    name = f"{p.stem}#{sha12}"
    configs = getattr(factory, "_MODEL_CONFIGS", None)
    if isinstance(configs, dict):
        configs[name] = cfg
    else:  # pragma: no cover - a future open_clip without the private registry
        open_clip.add_model_config(p)
        name = p.stem
    return name, sha12


def parse_spec(rest: str) -> tuple[str, str | None]:
    """Split ``rest`` into (model name or path, pretrained tag/path or None)."""
    rest = rest.strip()
    if not rest:
        raise CulturaError("An openclip spec needs an architecture, e.g. 'openclip:ViT-B-32/openai' or "
                           "'openclip:cultura-tiny'.")
    if rest.startswith(("hf-hub:", "local-dir:")):
        return rest, None
    low = rest.lower()
    if ".json" in low:
        end = low.index(".json") + len(".json")
        return rest[:end], (rest[end:].lstrip("/") or None)
    if os.path.isdir(rest):
        return "local-dir:" + rest, None
    arch, _, pretrained = rest.partition("/")
    return arch, (pretrained or None)


class _QuietRandomInit(logging.Filter):
    """Hide open_clip's root-logger warning about random init while we build on purpose without weights."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "initialized randomly" not in record.getMessage()


def _sha12_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def _is_local(name: str | None) -> bool:
    return bool(name) and os.path.exists(str(name))


class OpenCLIPEmbedder(Embedder):
    """An open_clip model (image and text towers)."""

    family = "openclip"

    def __init__(self, model_name: str, pretrained: str | None = None, *, seed: int = 0,
                 cache_dir: str | None = None, precision: str = "fp32", spec: str | None = None, **kw):
        super().__init__(**kw)
        import open_clip  # deferred: heavy optional dependency, loaded on first use
        import torch  # deferred: heavy optional dependency, loaded on first use

        register_model_configs()
        self.seed = int(seed)
        self.spec = spec or f"openclip:{model_name}" + (f"/{pretrained}" if pretrained else "")
        pretrained = None if pretrained in RANDOM_TAGS else pretrained
        self.device = resolve_device(self.requested_device)
        self.precision = precision
        self.weights_path: str | None = None
        self.weights_sha256: str | None = None
        self.config_sha12: str | None = None

        # 1. what to build
        arch = model_name
        if model_name.lower().endswith(".json"):
            arch, self.config_sha12 = register_config_file(model_name)
            self.arch_label = arch
        elif model_name.startswith(("hf-hub:", "local-dir:")):
            self.arch_label = model_name if model_name.startswith("hf-hub:") else \
                "local-dir:" + Path(model_name[len("local-dir:"):]).name
        else:
            if arch not in open_clip.list_models():
                raise unknown("open_clip architecture", arch, open_clip.list_models(),
                              hint="Or give a model config JSON path: 'openclip:/path/to/config.json'.")
            self.arch_label = arch
        self.arch = arch
        cfg = open_clip.get_model_config(arch) if not model_name.startswith(("hf-hub:", "local-dir:")) else None
        text_cfg = (cfg or {}).get("text_cfg", {})
        hf_text = text_cfg.get("hf_model_name")
        needs_hub = model_name.startswith("hf-hub:") or (bool(hf_text) and not _is_local(hf_text))

        # 2. the weights
        if pretrained and not os.path.isfile(pretrained):
            tag_cfg = open_clip.get_pretrained_cfg(arch, pretrained)
            if not tag_cfg:
                raise unknown("open_clip pretrained tag", pretrained,
                              open_clip.list_pretrained_tags_by_model(arch) or ["(none for this architecture)"],
                              hint=f"(These are the tags of {arch}.) Or give a weights file: "
                                   "'openclip:ARCH/path/to/weights.pt'.")
            needs_hub = True
            try:
                self.weights_path = open_clip.pretrained.download_pretrained(tag_cfg, cache_dir=cache_dir) or None
            except Exception as e:  # hub offline / not cached / network error → one clear message
                raise offline_error(self.spec, e) from e
        elif pretrained:
            self.weights_path = pretrained
        elif model_name.startswith("local-dir:"):
            folder = Path(model_name[len("local-dir:"):])
            found = sorted(p for ext in ("*.safetensors", "*.bin", "*.pt", "*.pth") for p in folder.glob(ext))
            self.weights_path = str(found[0]) if found else None
        self.pretrained = pretrained

        # 3. build (seeded, so random init is deterministic; the global RNG is left untouched)
        load_text = bool(pretrained) or model_name.startswith(("hf-hub:", "local-dir:"))
        quiet = _QuietRandomInit()
        logging.getLogger().addFilter(quiet)
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.seed)
                model, _, preprocess = open_clip.create_model_and_transforms(
                    arch if not model_name.startswith(("hf-hub:", "local-dir:")) else model_name,
                    pretrained=pretrained or None,
                    precision=precision, device=self.device, cache_dir=cache_dir,
                    pretrained_text=load_text, pretrained_image=False)
            self.tokenizer = open_clip.get_tokenizer(
                arch if not model_name.startswith(("hf-hub:", "local-dir:")) else model_name, cache_dir=cache_dir)
        except CulturaError:
            raise
        except Exception as e:
            if needs_hub and (hub_offline() or isinstance(e, (OSError, RuntimeError, ValueError))):
                hint = "" if pretrained or not hf_text else (
                    f"or give a model config JSON whose text_cfg.hf_model_name ({hf_text}) is a local folder: "
                    "'openclip:/path/to/config.json'")
                raise offline_error(self.spec, e, local_hint=hint) from e
            raise
        finally:
            logging.getLogger().removeFilter(quiet)
        model.eval()
        self.model = model
        self.preprocess = preprocess
        # NLLB-CLIP: the tokenizer prefixes a source-language token; embed_texts(language=…) sets it per call
        self._lang_tok = source_language_tokenizer(self.tokenizer)
        self.language_aware = self._lang_tok is not None
        self.default_language = (getattr(self._lang_tok, "src_lang", None) or "eng_Latn") if self._lang_tok else None
        if self.weights_path and os.path.isfile(self.weights_path):
            self.weights_sha256 = file_sha256(self.weights_path)
        if cfg:
            self._dim = int(cfg["embed_dim"])

    # -- identity -------------------------------------------------------------------------------------
    @property
    def identity(self) -> str:
        if self.pretrained or self.weights_path:
            tag = self.pretrained if self.pretrained and not os.path.isfile(self.pretrained) else "file"
            ck = f"@{self.weights_sha256[:12]}" if self.weights_sha256 else ""
            return f"openclip:{self.arch_label}/{tag}{ck}"
        return f"openclip:{self.arch_label}/{RANDOM_INIT}@seed{self.seed}"

    @property
    def random_init(self) -> bool:
        """True when no weights were loaded: the model is random and its numbers mean nothing."""
        return not (self.pretrained or self.weights_path)

    @property
    def info(self) -> dict:
        import open_clip  # deferred: heavy optional dependency, loaded on first use

        return {**super().info, "architecture": self.arch, "pretrained": self.pretrained,
                "weights_sha256": self.weights_sha256, "config_sha12": self.config_sha12,
                "seed": None if self.pretrained else self.seed, "precision": self.precision,
                "random_init": self.random_init,
                "language_aware": self.language_aware, "default_language": self.default_language,
                "open_clip_version": open_clip.__version__}

    # -- family methods -------------------------------------------------------------------------------
    def _embed_image_batch(self, images):
        import torch  # deferred: heavy optional dependency, loaded on first use

        x = torch.stack([self.preprocess(im.convert("RGB")) for im in images]).to(self.device)
        with torch.inference_mode():
            return self.model.encode_image(x)

    def _embed_text_batch(self, texts, language: str | None = None):
        import torch  # deferred: heavy optional dependency, loaded on first use

        if self._lang_tok is not None:
            set_source_language(self._lang_tok, language, self.default_language)
        tokens = self.tokenizer(texts).to(self.device)
        with torch.inference_mode():
            return self.model.encode_text(tokens)


def _known_architecture(arch: str) -> bool:
    """``arch`` is one of cultura's or open_clip's shipped configs (read from open_clip's package folder without
    importing it: no torch)."""
    if (model_configs_dir() / f"{arch}.json").is_file():
        return True
    spec = importlib.util.find_spec("open_clip")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        if (Path(loc) / "model_configs" / f"{arch}.json").is_file():
            return True
    return False


def config_identity(rest: str, *, seed: int = 0, pretrained: str | None = "", **_options) -> str | None:
    """The identity :class:`OpenCLIPEmbedder` reports for ``openclip:rest``, from files only (no open_clip, no
    torch): a random-init model (a shipped architecture or a config JSON) and a local weights file. None for a
    pretrained tag or open_clip's folder schemas, whose weights only open_clip locates."""
    name, tag = parse_spec(rest)
    if pretrained != "":
        tag = pretrained
    tag = None if tag in RANDOM_TAGS else tag
    if name.startswith(("hf-hub:", "local-dir:")):
        return None
    if name.lower().endswith(".json"):
        p = Path(name).expanduser()
        if not p.is_file():
            return None
        label = f"{p.stem}#{_sha12_bytes(p.read_bytes())}"
    elif _known_architecture(name):
        label = name
    else:
        return None
    if tag is None:
        return f"openclip:{label}/{RANDOM_INIT}@seed{int(seed)}"
    if not os.path.isfile(tag):
        return None
    return f"openclip:{label}/file@{file_sha256(tag)[:12]}"


def from_spec(rest: str, **options) -> OpenCLIPEmbedder:
    """Factory for ``openclip:…`` specs; a ``pretrained=`` option overrides the spec's tag."""
    name, pretrained = parse_spec(rest)
    if "pretrained" in options:
        pretrained = options.pop("pretrained")
    return OpenCLIPEmbedder(name, pretrained, spec=f"openclip:{rest}", **options)
