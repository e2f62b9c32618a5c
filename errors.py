"""Exceptions with messages that name the fix.

Library code raises these; the CLI turns them into one clear sentence and a non-zero exit.
"""
from __future__ import annotations

import difflib
from typing import Iterable


class CulturaError(Exception):
    """Base class: the message is meant for the user and should say what to do.

    Library errors name library arguments, never CLI flags: ``param`` names the argument at fault (e.g.
    ``"workers"``) and the CLI adds the flag that sets it (``--workers``) when it prints the error.
    """

    def __init__(self, *args, param: str | None = None):
        super().__init__(*args)
        self.param = param


class ConfigError(CulturaError):
    """cultura.toml or an option is invalid."""


class ProjectNotFound(CulturaError):
    """No cultura.toml was found."""


class UnknownName(CulturaError, KeyError):
    """A name (country, provider, embedder, preset…) is not known."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0] if self.args else ""


def unknown(kind: str, name: str, valid: Iterable[str], *, hint: str = "", param: str | None = None) -> UnknownName:
    """Build an `UnknownName` error: "Unknown country 'XX'. Did you mean 'XY'? Valid: …"."""
    valid = sorted(valid)
    close = difflib.get_close_matches(str(name), valid, n=1, cutoff=0.6)
    msg = f"Unknown {kind} {name!r}."
    if close:
        msg += f" Did you mean {close[0]!r}?"
    shown = ", ".join(valid) if len(valid) <= 60 else ", ".join(valid[:60]) + f", … ({len(valid)} in all)"
    msg += f" Valid: {shown}."
    if hint:
        msg += " " + hint
    return UnknownName(msg, param=param)


class SuiteSkipped(CulturaError):
    """Raised by a suite when the project holds no data it can evaluate (no benchmark of its kind, no caption
    pool, no portrait set). Under ``--suite all`` the run is recorded as ``skipped`` with this reason; asked for
    by name, it is an error that says what to build or import first."""


#: Optional libraries → the extra that installs them (pyproject.toml ``[project.optional-dependencies]``).
EXTRAS = {
    "torch": "models", "torchvision": "models", "open_clip": "models", "transformers": "models",
    "sentence_transformers": "models", "safetensors": "models", "tokenizers": "models",
    "huggingface_hub": "models", "matplotlib": "report", "umap": "umap", "ray": "ray",
    "datasets": "hub", "mlcroissant": "hub", "crowdkit": "crowd",
}


class MissingExtra(CulturaError):
    """A command needs an optional library that is not installed (``pip install 'cultura[EXTRA]'``)."""


def missing_extra(exc: ImportError, what: str = "This command") -> MissingExtra | None:
    """The :class:`MissingExtra` for ``exc`` when it is an optional library of :data:`EXTRAS` (else None).

    >>> str(missing_extra(ModuleNotFoundError("No module named 'torch'", name="torch"), "'cultura images tag'"))
    "'cultura images tag' needs torch, which is not installed: run pip install 'cultura[models]' (or 'cultura[all]')."
    """
    top = (getattr(exc, "name", None) or "").split(".")[0]
    if top not in EXTRAS:
        return None
    return MissingExtra(f"{what} needs {top}, which is not installed: run pip install 'cultura[{EXTRAS[top]}]' "
                        f"(or 'cultura[all]').")
