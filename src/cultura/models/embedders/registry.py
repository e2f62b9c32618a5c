"""The embedder registry: ``family:rest`` specs → :class:`Embedder` instances.

A factory is called as ``factory(rest, **options)`` where ``rest`` is what follows ``family:`` in the spec
(possibly empty) and ``options`` are keyword options (device, batch_size, progress, family-specific ones).
A factory may be given as a callable or as an import path ``"package.module:attr"`` so that registering
costs nothing until the family is used.

Outside packages add families through the entry point group ``cultura.embedders``::

    [project.entry-points."cultura.embedders"]
    mymodel = "my_package.embed:factory"

The built-in families are listed in :data:`EMBEDDERS` (a :class:`cultura.models.registry.Registry`); plugins use
:func:`register_embedder` or the entry point group.

>>> register_embedder("demo", lambda rest, **kw: get_embedder("fake:" + rest, **kw))
>>> get_embedder("demo:dim=4").embed_texts(["x"]).shape
(1, 4)
>>> unregister_embedder("demo")
"""
from __future__ import annotations

from typing import Callable, Union

from ...errors import CulturaError
from ..registry import Registry
from .base import Embedder, hub_offline
from .deferred import CONFIG_IDENTITY, remember
from .deferred import deferred as deferred_embedder

ENTRY_POINT_GROUP = "cultura.embedders"

Factory = Union[Callable[..., Embedder], str]

#: The embedder families. Built-ins are import paths, loaded when first used.
EMBEDDERS: Registry[Embedder] = Registry(
    "embedder", Embedder, entry_point_group=ENTRY_POINT_GROUP,
    examples="'openclip:ViT-B-32/openai', 'st:BAAI/bge-m3', 'hf:openai/clip-vit-base-patch32', 'openai:MODEL' "
             "or 'fake'",
    builtins={
        "fake": "cultura.models.embedders.fake:from_spec",
        "openclip": "cultura.models.embedders.openclip:from_spec",
        "st": "cultura.models.embedders.st:from_spec",
        "hf": "cultura.models.embedders.hf:from_spec",
        "openai": "cultura.models.embedders.openai:from_spec",
        "mclip": "cultura.models.embedders.mclip:from_spec",
        "preset": "cultura.models.embedders.presets:from_spec",
        "openai-multi": "cultura.models.embedders.multivector:openai_multi_from_spec",
        "colqwen": "cultura.models.embedders.multivector:colqwen_from_spec",
    })


def register_embedder(name: str, factory: Factory, *, replace: bool = True) -> None:
    """Register a family ``name`` (the part before ``:`` in a spec) with ``factory(rest, **options)``."""
    EMBEDDERS.register(name, factory, replace=replace)


def unregister_embedder(name: str) -> None:
    """Remove a family (tests use it to undo a registration)."""
    EMBEDDERS.unregister(name)


def available_embedders() -> list[str]:
    """Names of the registered families (built-ins, plugins and entry points)."""
    return EMBEDDERS.families()


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


def get_embedder(spec: "str | Embedder", *, default_family: str | None = None, deferred: bool = False,
                 **options) -> Embedder:
    """Build the embedder named by ``spec`` (``"openclip:ViT-B-32/openai"``, ``"st:BAAI/bge-m3"``, ``"fake"``).

    ``default_family`` is used when ``spec`` has no known family prefix (e.g. a config value
    ``"BAAI/bge-m3"`` read with ``default_family="st"``). An :class:`Embedder` instance is returned as is.

    Instructions (seed 000 App. U): ``SPEC#text=INSTRUCTION#image=INSTRUCTION#template={instruction}: {text}``
    or the options ``text_instruction``, ``image_instruction``, ``instruction_template`` (``@retrieval`` and
    ``@agnostic`` name the paper's prompts); they become part of the model's identity and cache key
    (:meth:`Embedder.set_instructions`).

    ``deferred=True``: where the family names the model's identity from its files and the model was loaded
    once before, a :class:`~.deferred.DeferredEmbedder` that loads the weights on the first vector it
    computes (a run whose vectors are all cached imports no torch).

    >>> get_embedder("fake:dim=4#text=@agnostic").identity
    'fake:dim=4#instr=98aea73aded5'
    """
    if isinstance(spec, Embedder):
        return spec
    recipe = {"spec": spec, "options": dict(options, default_family=default_family)}
    instr = {k: options.pop(k, None) for k in INSTRUCTION_KEYS.values()}
    if isinstance(spec, str) and "#" in spec:
        spec, from_spec = split_instructions(spec.strip())
        instr.update(from_spec)
    if deferred:
        family, rest = EMBEDDERS.parse(spec, default_family=default_family)
        lazy = deferred_embedder(family, rest, recipe, options, instr, get_embedder)
        if lazy is not None:
            return lazy
    hub_offline()  # a hub that cannot be reached is switched off now: a missing model fails in one sentence
    emb = EMBEDDERS.build(spec, default_family=default_family, **options)
    if any(instr.values()):
        emb.set_instructions(text=instr["text_instruction"], image=instr["image_instruction"],
                             template=instr["instruction_template"])
    emb.recipe = recipe  # how a Ray actor builds the same model (cultura.executor)
    if isinstance(spec, str) and spec.partition(":")[0] in CONFIG_IDENTITY:
        remember(emb)  # the facts a later run reads without loading it
    return emb
