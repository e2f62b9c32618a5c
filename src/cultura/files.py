"""Files written whole, and never over a user's file unasked.

:func:`write_atomic` writes a file through a temporary file beside it (``.NAME.<pid>-<random>.tmp``) renamed over
the target at the end, so a reader never sees half a file; a write that fails (a full disk, an error of the
caller's writer) removes its temporary file. A process killed mid-write cannot clean up, so the next write sweeps
(:func:`sweep_temp`) the temporary files of processes that are no longer running — only cultura's own
(``.NAME.<pid>[-<random>].tmp``), only beside the target (or, for a folder cultura owns such as the view, in
that folder). :func:`refuse_existing` is the one answer to an output the user named that already exists: one
sentence naming ``overwrite``.
"""
from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path
from typing import Callable

from .errors import CulturaError

#: A temporary file of :func:`write_atomic` (and of the view before it): ``.NAME.<pid>.tmp`` or
#: ``.NAME.<pid>-<hex>.tmp``.
TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)(?:-[0-9a-f]+)?\.tmp$")
#: A temporary file older than this is stale whatever its process id says (the id may have been reused).
STALE_AFTER = 24 * 3600.0


class OutputExists(CulturaError):
    """An output file the user named exists and overwriting it was not asked for."""


def refuse_existing(path: str | os.PathLike, *, overwrite: bool) -> None:
    """Raise :class:`OutputExists` (``param="overwrite"``) when ``path`` exists and ``overwrite`` is false."""
    path = Path(path)
    if not overwrite and (path.exists() or path.is_symlink()):
        raise OutputExists(f"{path} already exists: choose another file, or overwrite it.", param="overwrite")


def temp_path(path: Path) -> Path:
    """This process's temporary file for ``path`` (beside it, hidden, named after this process)."""
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")


def write_atomic(path: str | os.PathLike, data: bytes | str | None = None, *,
                 writer: Callable[[Path], None] | None = None, overwrite: bool = True, sweep: bool = True) -> Path:
    """Write ``data`` (text as UTF-8), or whatever ``writer(temporary_path)`` writes, to ``path`` whole.

    ``overwrite=False``: an existing ``path`` is refused (:func:`refuse_existing`) before anything is written.
    Stale temporary files of ``path`` left by dead processes are removed first (``sweep=False``: the caller
    sweeps their folder once, :func:`sweep_temp`, instead of once per file); this write's own is removed when
    it fails."""
    path = Path(path)
    refuse_existing(path, overwrite=overwrite)
    path.parent.mkdir(parents=True, exist_ok=True)
    if sweep:
        sweep_temp(path.parent, name=path.name)
    tmp = temp_path(path)
    try:
        if writer is not None:
            writer(tmp)
        else:
            tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else bytes(data or b""))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if os.name != "posix":  # no cheap liveness check: keep the file
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OverflowError:  # no process has such an id
        return False
    except OSError:  # another user's process (EPERM): alive
        return True
    return True


def sweep_temp(folder: str | os.PathLike, *, name: str | None = None, recursive: bool = False) -> int:
    """Remove the temporary files of :func:`write_atomic` in ``folder`` (and below it with ``recursive``; of the
    target ``name`` only, when given) whose process is no longer running or that are older than a day.
    Returns how many were removed; a file that vanishes meanwhile is no error."""
    folder = Path(folder)
    if not folder.is_dir():
        return 0
    removed, now = 0, time.time()
    for p in (folder.rglob(".*.tmp") if recursive else folder.glob(".*.tmp")):
        m = TEMP_NAME.match(p.name)
        if not m or (name is not None and m["name"] != name):
            continue
        try:
            old = now - p.lstat().st_mtime > STALE_AFTER
            if old or not _running(int(m["pid"])):
                p.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed


__all__ = ["OutputExists", "refuse_existing", "write_atomic", "sweep_temp", "temp_path", "TEMP_NAME"]


def user_cache() -> Path | None:
    """cultura's folder in the user cache: ``$CULTURA_CACHE_DIR``, else ``$XDG_CACHE_HOME/cultura`` or
    ``~/.cache/cultura``; None when ``CULTURA_CACHE_DIR=off`` turns it off."""
    base = os.environ.get("CULTURA_CACHE_DIR")
    if base == "off":
        return None
    if not base:
        base = str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cultura")
    return Path(base)
