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

from ..registry import Registry
from .base import Embedder

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


def get_embedder(spec: "str | Embedder", *, default_family: str | None = None, **options) -> Embedder:
    """Build the embedder named by ``spec`` (``"openclip:ViT-B-32/openai"``, ``"st:BAAI/bge-m3"``, ``"fake"``).

    ``default_family`` is used when ``spec`` has no known family prefix (e.g. a config value
    ``"BAAI/bge-m3"`` read with ``default_family="st"``). An :class:`Embedder` instance is returned as is.
    """
    return EMBEDDERS.build(spec, default_family=default_family, **options)
