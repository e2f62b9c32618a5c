"""Heavy modules imported on first use: ``stats = lazy("scipy.stats")`` at module level reads like an import but
costs nothing until an attribute is read (``stats.wilcoxon``), so every command — ``cultura --help`` included —
starts without scipy, scikit-learn, statsmodels, pyarrow or torch unless it uses them. Core: imports nothing of
cultura.

>>> m = lazy("json")
>>> m.dumps([1])
'[1]'
"""
from __future__ import annotations

import importlib
from types import ModuleType


class LazyModule(ModuleType):
    """A stand-in for the module ``name``, imported by the first attribute read."""

    def __init__(self, name: str):
        super().__init__(name)
        self.__dict__["_lazy_target"] = None

    def _load(self) -> ModuleType:
        mod = self.__dict__["_lazy_target"]
        if mod is None:
            mod = importlib.import_module(self.__name__)
            self.__dict__["_lazy_target"] = mod
        return mod

    def __getattr__(self, attr: str):
        return getattr(self._load(), attr)

    def __dir__(self):
        return dir(self._load())

    def __repr__(self) -> str:
        state = "loaded" if self.__dict__["_lazy_target"] is not None else "not loaded yet"
        return f"<lazy module {self.__name__!r} ({state})>"


def lazy(name: str) -> ModuleType:
    """The module ``name``, imported when first used (``lazy("scipy.stats").wilcoxon``)."""
    return LazyModule(name)


def lazy_attributes(package: str, names: dict[str, str]):
    """A module ``__getattr__`` (PEP 562) for ``package``'s ``__init__``: ``names`` maps a public name to
    ``".submodule:attribute"``, imported on first use, so that importing one submodule of the package (a
    ``schema`` read when a project opens) does not import all of them.

    >>> getattr_ = lazy_attributes("email", {"Parser": ".parser:Parser"})
    >>> getattr_("Parser").__module__
    'email.parser'
    """
    def __getattr__(name: str):
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = names[name].partition(":")
        value = getattr(importlib.import_module(module, package), attribute)
        setattr(importlib.import_module(package), name, value)  # the next read is a plain attribute
        return value

    return __getattr__


__all__ = ["lazy", "lazy_attributes", "LazyModule"]
