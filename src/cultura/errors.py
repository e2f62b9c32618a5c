"""Exceptions with messages that name the fix.

Library code raises these; the CLI turns them into one clear sentence and a non-zero exit.
"""
from __future__ import annotations

import difflib
import errno
import os
import shutil
import sqlite3
from typing import Iterable

try:
    import resource
except ImportError:  # pragma: no cover - not POSIX
    resource = None


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
    "matplotlib": "report", "umap": "umap", "ray": "ray", "datasets": "hub", "crowdkit": "crowd",
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

# ------------------------------------------------------------------------------------------ full disk, I/O

#: errno -> what happened, for the storage failures every stage may meet (a full disk, a quota, ``ulimit -f``,
#: a failing device, a read-only mount).
_STORAGE_ERRNOS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
                   errno.EFBIG: "a file reached the size limit (ulimit -f or the file system's)",
                   errno.EIO: "an I/O error", errno.EROFS: "the file system is read-only"}
#: SQLite primary result codes -> what happened (``sqlite3.Error.sqlite_errorcode & 0xff``)
_SQLITE_CODES = {13: "the disk is full", 10: "an I/O error"}  # SQLITE_FULL, SQLITE_IOERR


def storage_failure(exc: BaseException) -> tuple[str, str | None] | None:
    """``(what happened, path or None)`` when ``exc`` or an exception it was raised from or during is a full disk,
    a quota, a file-size limit, an I/O error or a read-only file system (``OSError`` or SQLite's "database or
    disk is full" / "disk I/O error"); else ``None``."""
    seen, e = set(), exc
    while e is not None and id(e) not in seen and len(seen) < 20:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in _STORAGE_ERRNOS:
            return _STORAGE_ERRNOS[e.errno], e.filename if isinstance(e.filename, str) else None
        if isinstance(e, OSError) and e.errno is None:  # pyarrow and others put the errno in the text only
            text = " ".join(map(str, e.args))
            for code, what in _STORAGE_ERRNOS.items():
                if f"errno {code}]" in text.lower() or os.strerror(code) in text:
                    return what, e.filename if isinstance(e.filename, str) else None
        if isinstance(e, sqlite3.Error):
            code = getattr(e, "sqlite_errorcode", None)
            text = str(e).lower()
            if code is not None and code & 0xFF in _SQLITE_CODES:
                return _SQLITE_CODES[code & 0xFF], None
            if "disk is full" in text:
                return "the disk is full", None
            if "disk i/o error" in text:
                return "an I/O error", None
        e = e.__cause__ or e.__context__
    return None


#: Below this many free bytes a device counts as full when SQLite reports only "disk I/O error" (it does so when
#: it cannot grow its shared-memory file or write its WAL on a full tmpfs, or under ``ulimit -f``).
NEARLY_FULL = 4 << 20


def _diagnose(what: str, path) -> str:
    """Refine SQLite's bare "disk I/O error": a file-size limit in force, or a (nearly) full device at ``path``."""
    if what != "an I/O error":
        return what
    try:
        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0] if resource is not None else None
    except (OSError, ValueError):
        soft = None
    if soft is not None and soft != resource.RLIM_INFINITY:
        return f"a file reached the size limit (ulimit -f: {soft:,} bytes)"
    if path:
        p = os.path.abspath(str(path))
        while p and not os.path.exists(p) and os.path.dirname(p) != p:
            p = os.path.dirname(p)
        try:
            if shutil.disk_usage(p).free < NEARLY_FULL:
                return "the disk is full"
        except OSError:
            pass
    return what


def storage_error(stage: str, what: str, path) -> CulturaError:
    """The one sentence for a storage failure in ``stage`` (``"cultura images download"``) at ``path``."""
    what = _diagnose(what, path)
    fix = "free space, then rerun"
    if what.startswith("an I/O error"):
        fix += " (if space is not short, check the device: an I/O error may mean a failing disk)"
    elif "read-only" in what:
        fix = "remount it writable (or move the project), then rerun"
    return CulturaError(f"{stage} stopped: {what} while writing {path}; {fix} (what was committed before is kept, "
                        "and the stage resumes where it stopped).")
