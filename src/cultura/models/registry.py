"""One generic registry for every model family cultura calls: ``family:rest`` specs → instances.

Embedders, LM scorers, text generators and relevance judges each keep one :class:`Registry` (``EMBEDDERS``,
``SCORERS``, ``GENERATORS``, ``JUDGES``). A factory is called as ``factory(rest, **options)`` where ``rest``
is what follows ``family:`` in the spec; it may be given as a callable or as an import path
``"package.module:attr"`` so registering costs nothing until the family is used. Outside packages add
families through the registry's entry point group (``cultura.embedders``, ``cultura.scorers``,
``cultura.generators``, ``cultura.judges``)::

    [project.entry-points."cultura.embedders"]
    mymodel = "my_package.embed:factory"

An unknown family is an error that lists the registered ones and suggests the closest ("did you mean").

>>> class Thing:
...     def __init__(self, name): self.name = name
>>> things = Registry("thing", Thing, builtins={"plain": lambda rest, **kw: Thing(rest)})
>>> things.build("plain:x").name
'x'
>>> things.build("plian:x")
Traceback (most recent call last):
...
cultura.errors.UnknownName: Unknown thing family 'plian'. Did you mean 'plain'? Valid: plain.
"""
from __future__ import annotations

import importlib
from importlib import metadata
from typing import Any, Callable, Generic, Mapping, TypeVar, Union

from ..errors import CulturaError, unknown

T = TypeVar("T")
Factory = Union[Callable[..., Any], str]


def resolve_factory(factory: Factory) -> Callable[..., Any]:
    """A factory given as ``"package.module:attr"`` → the object (imported on first use)."""
    if callable(factory):
        return factory
    mod_name, _, attr = str(factory).partition(":")
    obj: Any = importlib.import_module(mod_name)
    for part in attr.split(".") if attr else []:
        obj = getattr(obj, part)
    return obj


class Registry(Generic[T]):
    """Families of one kind of model. ``base``: the class every built instance must be (checked);
    ``examples``: spec examples for error messages; ``builtins``: family → factory registered up front."""

    def __init__(self, kind: str, base: type, *, entry_point_group: str | None = None, examples: str = "",
                 builtins: Mapping[str, Factory] | None = None):
        self.kind = kind
        self.base = base
        self.entry_point_group = entry_point_group
        self.examples = examples
        self._factories: dict[str, Factory] = dict(builtins or {})
        self._entry_points_loaded = entry_point_group is None

    def register(self, family: str, factory: Factory, *, replace: bool = True) -> None:
        """Register ``family`` (the part before ``:`` in a spec) with ``factory(rest, **options)``."""
        if not family or ":" in family:
            raise CulturaError(f"A {self.kind} family name must be non-empty and contain no ':' (got {family!r}).")
        if not replace and family in self._factories:
            raise CulturaError(f"The {self.kind} family {family!r} is already registered.")
        self._factories[family] = factory

    def unregister(self, family: str) -> None:
        """Remove a family (tests use it to undo a registration)."""
        self._factories.pop(family, None)

    def _load_entry_points(self) -> None:
        if self._entry_points_loaded:
            return
        self._entry_points_loaded = True
        for ep in metadata.entry_points(group=self.entry_point_group):
            self._factories.setdefault(ep.name, ep.value)  # an import path: loaded on first use

    def families(self) -> list[str]:
        """The registered families (built-ins, plugins and entry points), sorted."""
        self._load_entry_points()
        return sorted(self._factories)

    def __contains__(self, family: str) -> bool:
        self._load_entry_points()
        return family in self._factories

    def parse(self, spec: str, *, default_family: str | None = None) -> tuple[str, str]:
        """``"family:rest"`` → ``(family, rest)``. A spec whose prefix is not a family is read as
        ``default_family:spec`` when a default is given, else it is an error naming the valid families."""
        if not isinstance(spec, str) or not spec.strip():
            raise CulturaError(f"A {self.kind} spec must be a non-empty string like {self.examples or 'FAMILY:NAME'}"
                               f", got {spec!r}.")
        self._load_entry_points()
        spec = spec.strip()
        family, sep, rest = spec.partition(":")
        if family in self._factories:
            return family, rest
        if default_family and default_family in self._factories:
            return default_family, spec
        raise unknown(f"{self.kind} family", family if sep else spec, self._factories,
                      hint=f"Write specs as FAMILY:NAME, e.g. {self.examples}." if self.examples else "")

    def build(self, spec: "str | T", *, default_family: str | None = None, **options: Any) -> T:
        """The instance named by ``spec``; an instance of ``base`` is returned as is."""
        if isinstance(spec, self.base):
            return spec
        family, rest = self.parse(spec, default_family=default_family)
        obj = resolve_factory(self._factories[family])(rest, **options)
        if not isinstance(obj, self.base):
            raise CulturaError(f"The {self.kind} family {family!r} returned {type(obj).__name__}, "
                               f"not a {self.base.__name__}.")
        return obj
