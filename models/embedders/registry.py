"""The embedder registry: ``family:rest`` specs → :class:`Embedder` instances.

A factory is called as ``factory(rest, **options)`` where ``rest`` is what follows ``family:`` in the spec
(possibly empty) and ``options`` are keyword options (device, batch_size, progress, family-specific ones).
A factory may be given as a callable or as an import path ``"package.module:attr"`` so that registering
costs nothing until the family is used.

Outside packages add families through the entry point group ``cultura.embedders``::

    [project.entry-points."cultura.embedders"]
    mymodel = "my_package.embed:factory"

The built-in families are registered below with the same public :func:`register_embedder` a plugin uses.

>>> register_embedder("demo", lambda rest, **kw: get_embedder("fake:" + rest, **kw))
>>> get_embedder("demo:dim=4").embed_texts(["x"]).shape
(1, 4)
>>> unregister_embedder("demo")
"""
from __future__ import annotations

import importlib
from importlib import metadata
from typing import Any, Callable, Union

from ...errors import CulturaError, unknown
from .base import Embedder

ENTRY_POINT_GROUP = "cultura.embedders"

Factory = Union[Callable[..., Embedder], str]

_FACTORIES: dict[str, Factory] = {}
_entry_points_loaded = False


def register_embedder(name: str, factory: Factory, *, replace: bool = True) -> None:
    """Register a family ``name`` (the part before ``:`` in a spec) with ``factory(rest, **options)``."""
    if not name or ":" in name:
        raise CulturaError(f"Embedder family name {name!r} must be non-empty and contain no ':'.")
    if not replace and name in _FACTORIES:
        raise CulturaError(f"Embedder family {name!r} is already registered.")
    _FACTORIES[name] = factory


def unregister_embedder(name: str) -> None:
    """Remove a family (tests use it to undo a registration)."""
    _FACTORIES.pop(name, None)


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        _FACTORIES.setdefault(ep.name, ep.value)  # an import path: loaded on first use


def available_embedders() -> list[str]:
    """Names of the registered families (built-ins, plugins and entry points)."""
    _load_entry_points()
    return sorted(_FACTORIES)


def _resolve(factory: Factory) -> Callable[..., Embedder]:
    if callable(factory):
        return factory
    mod_name, _, attr = str(factory).partition(":")
    obj: Any = importlib.import_module(mod_name)
    for part in attr.split(".") if attr else []:
        obj = getattr(obj, part)
    return obj


INSTRUCTION_KEYS = {"text": "text_instruction", "image": "image_instruction", "template": "instruction_template"}


def split_instructions(spec: str) -> tuple[str, dict[str, str]]:
    """``"openai:gme#text=@agnostic#image=Find…"`` → ``("openai:gme", {"text_instruction": "@agnostic", …})``.
    Instructions follow the model spec after ``#``, one ``#key=value`` each (keys: text, image, template)."""
    base, *parts = spec.split("#")
    out: dict[str, str] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in INSTRUCTION_KEYS:
            raise CulturaError(f"Embedder spec part {'#' + part!r} must be #text=…, #image=… or #template=… "
                               "(an instruction per modality, seed 000 App. U), e.g. "
                               "'openai:gme-Qwen2-VL-2B#text=@agnostic'.")
        out[INSTRUCTION_KEYS[key.strip()]] = value.replace("\\n", "\n")
    return base.strip(), out


def get_embedder(spec: "str | Embedder", *, default_family: str | None = None, **options) -> Embedder:
    """Build the embedder named by ``spec`` (``"openclip:ViT-B-32/openai"``, ``"st:BAAI/bge-m3"``, ``"fake"``).

    ``default_family`` is used when ``spec`` has no known family prefix (e.g. a config value
    ``"BAAI/bge-m3"`` read with ``default_family="st"``). An :class:`Embedder` instance is returned as is.

    Instructions (seed 000 App. U): ``SPEC#text=INSTRUCTION#image=INSTRUCTION#template={instruction}: {text}``
    or the options ``text_instruction``, ``image_instruction``, ``instruction_template`` (``@retrieval`` and
    ``@agnostic`` name the paper's prompts); they become part of the model's identity and cache key
    (:meth:`Embedder.set_instructions`).

    >>> get_embedder("fake:dim=4#text=@agnostic").identity
    'fake:dim=4#instr=98aea73aded5'
    """
    if isinstance(spec, Embedder):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise CulturaError(f"An embedder spec must be a non-empty string like 'openclip:ViT-B-32/openai', "
                           f"got {spec!r}.")
    _load_entry_points()
    spec, from_spec = split_instructions(spec.strip())
    instr = {k: options.pop(k, None) for k in INSTRUCTION_KEYS.values()}
    instr.update({k: v for k, v in from_spec.items()})
    family, sep, rest = spec.partition(":")
    if family not in _FACTORIES:
        if default_family and default_family in _FACTORIES:
            family, rest = default_family, spec
        else:
            raise unknown("embedder", family if sep else spec, _FACTORIES,
                          hint="Write specs as FAMILY:NAME, e.g. 'openclip:ViT-B-32/openai', "
                               "'st:BAAI/bge-m3', 'hf:openai/clip-vit-base-patch32', 'openai:MODEL' or 'fake'.")
    factory = _resolve(_FACTORIES[family])
    emb = factory(rest, **options)
    if not isinstance(emb, Embedder):
        raise CulturaError(f"Embedder family {family!r} returned {type(emb).__name__}, not an Embedder.")
    if any(instr.values()):
        emb.set_instructions(text=instr["text_instruction"], image=instr["image_instruction"],
                             template=instr["instruction_template"])
    return emb


# -- built-ins, registered exactly as a plugin would --------------------------------------------------
register_embedder("fake", "cultura.models.embedders.fake:from_spec")
register_embedder("openclip", "cultura.models.embedders.openclip:from_spec")
register_embedder("st", "cultura.models.embedders.st:from_spec")
register_embedder("hf", "cultura.models.embedders.hf:from_spec")
register_embedder("openai", "cultura.models.embedders.openai:from_spec")
register_embedder("openai-multi", "cultura.models.embedders.multivector:openai_multi_from_spec")
register_embedder("colqwen", "cultura.models.embedders.multivector:colqwen_from_spec")
