"""Named model presets: the seed papers' models under one short name, ``preset:NAME``.

Each preset is an ordinary embedder spec (``openclip:…``, ``mclip:…``, ``hf:…``) plus what it needs (Python
packages, hub repositories, approximate download) and which seed uses it. ``cultura evaluate models`` lists
them with whether their hub files are already in the local Hugging Face cache.

>>> get_preset("nllb-clip").spec
'openclip:nllb-clip-base/v1'
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import unknown
from .mclip import IMAGE_TOWERS
from .registry import get_embedder


@dataclass(frozen=True)
class Preset:
    """A named model: its spec, what it needs and where the seeds use it."""

    name: str
    spec: str
    description: str
    seeds: tuple[str, ...]
    packages: tuple[str, ...]
    hub: tuple[str, ...] = ()  # hub repositories read (besides open_clip pretrained tags, found at run time)
    download: str = ""
    notes: str = ""
    random_init: bool = False
    baseline: str | None = None  # the English-only counterpart (seed 003 Table 1), a preset name
    extra: dict = field(default_factory=dict, compare=False, hash=False)


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("clip-vit-b32", "openclip:ViT-B-32/openai", "OpenAI CLIP ViT-B/32 (open_clip)",
           ("002", "003"), ("open_clip_torch",), download="~0.6 GB",
           notes="seed 002's model; seed 003's English baseline for NLLB-CLIP and CAPIVARA (Table 1)."),
    Preset("clip-vit-b32-hf", "hf:openai/clip-vit-base-patch32", "OpenAI CLIP ViT-B/32 (transformers)",
           ("002",), ("transformers",), ("openai/clip-vit-base-patch32",), "~0.6 GB",
           notes="seed 002 §4.1's exact loading path (transformers CLIPModel + CLIPProcessor: shortest edge "
                 "224, centre crop)."),
    Preset("clip-vit-l14", "openclip:ViT-L-14/openai", "OpenAI CLIP ViT-L/14", ("003",), ("open_clip_torch",),
           download="~1.7 GB", notes="seed 003's English baseline for M-CLIP (Table 1)."),
    Preset("openclip-vit-b32", "openclip:ViT-B-32/laion2b_s34b_b79k", "OpenCLIP ViT-B/32 (LAION-2B)", ("003",),
           ("open_clip_torch",), download="~0.6 GB",
           notes="seed 003's OpenCLIP English baseline; the paper does not name the pretrained tag (LAION-2B "
                 "assumed)."),
    Preset("m-clip", "mclip:M-CLIP/XLM-Roberta-Large-Vit-L-14", "M-CLIP XLM-R large → CLIP ViT-L/14",
           ("003", "000"), ("transformers", "open_clip_torch"),
           ("M-CLIP/XLM-Roberta-Large-Vit-L-14", "xlm-roberta-large"), "~2.2 GB text + 1.7 GB image",
           notes="seed 003 Table 1 'mCLIP L/14'; seed 000's 'XLM-R-L/14'. xlm-roberta-large: config only.",
           baseline="clip-vit-l14"),
    Preset("m-clip-b32", "mclip:M-CLIP/XLM-Roberta-Large-Vit-B-32", "M-CLIP XLM-R large → CLIP ViT-B/32",
           ("003",), ("transformers", "open_clip_torch"),
           ("M-CLIP/XLM-Roberta-Large-Vit-B-32", "xlm-roberta-large"), "~2.2 GB text + 0.6 GB image",
           notes="the ViT-B/32 pairing of seed 003 App. A.1's description.", baseline="clip-vit-b32"),
    Preset("m-clip-b16plus", "mclip:M-CLIP/XLM-Roberta-Large-Vit-B-16Plus", "M-CLIP XLM-R large → ViT-B/16+",
           ("000",), ("transformers", "open_clip_torch"),
           ("M-CLIP/XLM-Roberta-Large-Vit-B-16Plus", "xlm-roberta-large"), "~2.2 GB text + 0.8 GB image",
           notes="seed 000's 'XLM-R-B/16plus' (image tower: open_clip ViT-B-16-plus-240, laion400m_e32)."),
    Preset("nllb-clip", "openclip:nllb-clip-base/v1", "NLLB-CLIP base (NLLB-200 600M encoder, ViT-B/32)",
           ("003",), ("open_clip_torch", "transformers", "sentencepiece"), ("facebook/nllb-200-distilled-600M",),
           "~2.5 GB", notes="seed 003 Table 1 'NLLB B/32'. Texts are encoded with their language's FLORES tag "
                            "(hin_Deva …), not the tokenizer's default eng_Latn.", baseline="clip-vit-b32"),
    Preset("nllb-clip-large", "openclip:nllb-clip-large/v1", "NLLB-CLIP large (NLLB-200 1.3B encoder, ViT-H/14)",
           ("003",), ("open_clip_torch", "transformers", "sentencepiece"), ("facebook/nllb-200-distilled-1.3B",),
           "~6 GB", notes="the larger NLLB-CLIP (seed 003 §3.2 mentions the NLLB encoder without its size)."),
    Preset("capivara-clip", "openclip:hf-hub:hiaac-nlp/CAPIVARA", "CAPIVARA (OpenCLIP ViT-B/32, LoRA-tuned text)",
           ("003",), ("open_clip_torch", "transformers"), ("hiaac-nlp/CAPIVARA",), "~1.5 GB",
           notes="seed 003 Table 1 'CAPIVARA B/32' (pt, hi, xh).", baseline="openclip-vit-b32"),
    Preset("siglip2", "openclip:ViT-L-16-SigLIP2-256/webli", "SigLIP 2 ViT-L/16 (debiased recipe)", ("003",),
           ("open_clip_torch", "transformers", "sentencepiece"), download="~3.5 GB",
           notes="seed 003's debiased variant ('the public ViT-L/16 checkpoint'); resolution 256 assumed."),
    Preset("cultura-tiny", "openclip:cultura-tiny", "tiny random-init open_clip model (tests, demos)", (),
           ("open_clip_torch",), download="none", random_init=True,
           notes="random weights: its numbers mean nothing."),
)}


def english_baselines() -> dict[str, str]:
    """Multilingual model → its English-only counterpart (seed 003 Table 1), by preset name **and** by spec,
    so results stored under either spelling pair up."""
    out = {}
    for p in PRESETS.values():
        if p.baseline:
            b = PRESETS[p.baseline]
            out[f"preset:{p.name}"] = f"preset:{b.name}"
            out[p.spec] = b.spec
    return out


def get_preset(name: str) -> Preset:
    """The preset called ``name`` (an unknown name lists the closest)."""
    if name not in PRESETS:
        raise unknown("model preset", name, PRESETS, hint="List them with 'cultura evaluate models'.")
    return PRESETS[name]


def _openclip_hub(spec: str) -> list[str]:
    """Hub repositories an ``openclip:`` spec reads (pretrained tag, HF text tower, hf-hub repo)."""
    rest = spec.split(":", 1)[1]
    if rest.startswith("hf-hub:"):
        return [rest[len("hf-hub:"):]]
    arch, _, tag = rest.partition("/")
    try:
        import open_clip  # deferred: heavy optional dependency, loaded on first use

        repos = []
        cfg = open_clip.get_pretrained_cfg(arch, tag) if tag else {}
        if cfg.get("hf_hub"):
            repos.append(cfg["hf_hub"].strip("/"))
        text = (open_clip.get_model_config(arch) or {}).get("text_cfg", {})
        if text.get("hf_model_name"):
            repos.append(text["hf_model_name"])
        return repos
    except Exception:  # open_clip missing or unknown name: listing must not fail
        return []


def _hub_cache() -> Path:
    try:
        from huggingface_hub import constants  # deferred: heavy optional dependency, loaded on first use

        return Path(constants.HF_HUB_CACHE)
    except Exception:  # pragma: no cover
        return Path(os.path.expanduser("~/.cache/huggingface/hub"))


def is_cached(repo: str, cache_dir: str | None = None) -> bool:
    """True when the local Hugging Face cache holds a snapshot of ``repo``."""
    folder = Path(cache_dir or _hub_cache()) / ("models--" + repo.replace("/", "--")) / "snapshots"
    return folder.is_dir() and any(folder.iterdir())


def preset_table(cache_dir: str | None = None) -> list[dict]:
    """One row per preset: name, spec, seeds, needs (packages, hub repositories with cached/missing)."""
    rows = []
    for p in PRESETS.values():
        hub = list(dict.fromkeys([*p.hub, *(_openclip_hub(p.spec) if p.spec.startswith("openclip:") else []),
                                  *_paired_image_hub(p.spec)]))
        cached = {r: is_cached(r, cache_dir) for r in hub}
        rows.append({"name": p.name, "spec": p.spec, "model": p.description,
                     "seeds": ", ".join(p.seeds) or "-", "packages": ", ".join(p.packages),
                     "hub": ", ".join(f"{r} ({'cached' if c else 'not cached'})" for r, c in cached.items()) or "-",
                     "ready_offline": all(cached.values()) if hub else True, "download": p.download,
                     "random_init": p.random_init, "notes": p.notes})
    return rows


def _paired_image_hub(spec: str) -> list[str]:
    if not spec.startswith("mclip:"):
        return []
    img = IMAGE_TOWERS.get(spec.split(":", 1)[1].split("+")[0])
    return _openclip_hub(img) if img else []


def from_spec(rest: str, **options):
    """Factory for ``preset:NAME``: the preset's spec, built with the same options."""
    return get_embedder(get_preset(rest.strip()).spec, **options)
