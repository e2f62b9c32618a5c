"""Process leases: which cultura processes are alive on a project, without trusting PIDs.

Each process that writes to a project holds an exclusive ``flock`` on its own file
``<project>/.leases/<token>.lock`` for as long as it lives; the kernel drops the lock when the process dies,
however it dies (kill -9 included). A row that records its writer's token (``runs.owner``,
``eval_runs.owner``) can therefore be judged later: its writer is alive exactly when that file is still
locked. This is what turns a run left ``running`` by a dead process into ``interrupted`` on the next start
of that stage, while a run that another live process is still doing is left alone.

>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> tok = process_token(root)
>>> is_alive(root, tok), is_alive(root, "123-deadbeef"), is_alive(root, None)
(True, False, False)
"""
from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from ..errors import CulturaError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

__all__ = ["LEASE_DIR", "StageBusy", "process_token", "is_alive", "token_pid", "db_root", "stage_lock"]

LEASE_DIR = ".leases"

# root -> (pid, token, open file holding the lock); filled on first use, never at import
_HELD: dict[str, tuple[int, str, object]] = {}


def _dir(root) -> Path:
    return Path(root) / LEASE_DIR


def process_token(root) -> str:
    """This process's token on the project at ``root`` (created and locked on first call)."""
    key = str(Path(root).resolve())
    held = _HELD.get(key)
    if held is not None and held[0] == os.getpid():
        return held[1]
    token = f"{os.getpid()}-{secrets.token_hex(6)}"
    d = _dir(root)
    d.mkdir(parents=True, exist_ok=True)
    f = open(d / f"{token}.lock", "a+")  # noqa: SIM115 - held open for the life of the process
    if fcntl is not None:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    f.write(f"pid {os.getpid()}\n")
    f.flush()
    _HELD[key] = (os.getpid(), token, f)
    return token


def is_alive(root, token: str | None) -> bool:
    """Whether the process that holds ``token`` on the project at ``root`` is still running."""
    if not token:
        return False
    held = _HELD.get(str(Path(root).resolve()))
    if held is not None and held[1] == token and held[0] == os.getpid():
        return True
    path = _dir(root) / f"{token}.lock"
    if not path.exists():
        return False
    if fcntl is None:  # pragma: no cover - not POSIX: fall back to the PID
        return _pid_alive(token_pid(token))
    try:
        with open(path, "a+") as f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            path.unlink(missing_ok=True)  # its owner is gone: tidy up
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    except FileNotFoundError:
        return False
    return False


def token_pid(token: str | None) -> int | None:
    try:
        return int(str(token).split("-", 1)[0])
    except ValueError:
        return None


def _pid_alive(pid: int | None) -> bool:  # pragma: no cover - non-POSIX fallback
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def db_root(db) -> Path | None:
    """The folder of the database file behind ``db`` (None for an in-memory database)."""
    for row in db.conn.execute("PRAGMA database_list").fetchall():
        if row[1] == "main":
            return Path(row[2]).parent if row[2] else None
    return None


class StageBusy(CulturaError):
    """Another process is running a stage that must not run twice at once on one project."""


@contextlib.contextmanager
def stage_lock(root, name: str, what: str):
    """Run a stage alone on the project at ``root``: a second process asking for the same ``name`` is refused
    at once with one sentence naming the process that holds it (``what`` names the stage for people, e.g.
    ``"cultura annotate push"``). The kernel releases the lock when its holder dies."""
    d = _dir(root)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"stage-{name}.lock"
    with open(path, "a+") as f:
        if fcntl is not None:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.seek(0)
                holder = f.read().strip() or "another process"
                raise StageBusy(f"Another '{what}' ({holder}) is running on {root}; wait for it to finish, then "
                                "rerun.") from None
        f.seek(0)
        f.truncate()
        f.write(f"process {os.getpid()}")
        f.flush()
        try:
            yield
        finally:
            if fcntl is not None:
                f.seek(0)
                f.truncate()
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

