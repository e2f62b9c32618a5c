"""Run a stage in a real child process, optionally killed (``os._exit``) at a chosen write.

The child is forked from the test process (no 5–10 s interpreter start per run on a busy machine), opens the
project itself and runs the stage function. A crash point is either

* ``("sql", PATTERN, N)``: exit just before the N-th SQL statement matching PATTERN runs (a trace callback on
  the project's connection: every ``INSERT``/``UPDATE``/``COMMIT`` sqlite-utils or our code issues passes
  through it), or
* ``("call", "module:attr", N)`` / ``("after", "module:attr", N)``: exit just before / just after the N-th call
  of that function (file writes, the Label Studio import, the JSON side file).

The child exits with :data:`CRASHED` at the crash point, 0 when the stage finished, 1 on an exception (the
traceback is written to ``<root>/child-error-<pid>.txt`` and returned by :func:`run_child`'s caller via
:func:`child_error`). Waiting is on the child's exit, never on time.
"""
from __future__ import annotations

import importlib
import os
import re
import sqlite3
import traceback
from pathlib import Path

CRASHED = 86


def _install(point, project) -> None:
    if point is None:
        return
    mode, target, n = point
    count = [0]

    def hit():
        count[0] += 1
        return count[0] == n

    if mode == "sql":
        pat = re.compile(target, re.I)

        def trace(sql):
            if pat.search(sql) and hit():
                os._exit(CRASHED)
        project.db.conn.set_trace_callback(trace)
        return
    mod_name, attr = target.split(":")
    mod = importlib.import_module(mod_name)
    orig = getattr(mod, attr)

    def wrapper(*a, **k):
        if mode == "call" and hit():
            os._exit(CRASHED)
        out = orig(*a, **k)
        if mode == "after" and hit():
            os._exit(CRASHED)
        return out
    setattr(mod, attr, wrapper)


def run_child(root, fn, point=None) -> int:
    """Fork, run ``fn(project)`` on a freshly opened ``Project(root)`` in the child; return its exit code."""
    from cultura.project import Project

    root = Path(root)
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        code = 1
        try:
            p = Project(root)
            _install(point, p)
            fn(p)
            p.close()
            code = 0
        except BaseException:
            (root / f"child-error-{os.getpid()}.txt").write_text(traceback.format_exc())
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def start_child(root, fn, point=None) -> int:
    """Fork like :func:`run_child` but return the child's pid at once (wait with :func:`wait_child`)."""
    from cultura.project import Project

    root = Path(root)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            p = Project(root)
            _install(point, p)
            fn(p)
            p.close()
            code = 0
        except BaseException:
            (root / f"child-error-{os.getpid()}.txt").write_text(traceback.format_exc())
        finally:
            os._exit(code)
    return pid


def wait_child(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def child_error(root) -> str:
    return "\n".join(p.read_text() for p in sorted(Path(root).glob("child-error-*.txt")))


def query(root, sql, args=()) -> list[tuple]:
    """Read the project's database with a plain read-only connection (no migrations, no leases)."""
    con = sqlite3.connect(f"file:{Path(root) / 'cultura.db'}?mode=ro", uri=True, timeout=30)
    try:
        return [tuple(r) for r in con.execute(sql, args).fetchall()]
    finally:
        con.close()


def table_exists(root, name) -> bool:
    return bool(query(root, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [name]))


def invariants(root, *, export_dirs=()) -> list[str]:
    """What must hold after any stage finished (after a crash and a rerun): returns the violations."""
    root = Path(root)
    bad = []
    running = query(root, "SELECT stage, id FROM runs WHERE status = 'running'")
    if running:
        bad.append(f"runs stuck in 'running': {running}")
    if table_exists(root, "eval_runs"):
        if query(root, "SELECT id FROM eval_runs WHERE status = 'running'"):
            bad.append("eval_runs stuck in 'running'")
        done = {r[0] for r in query(root, "SELECT id FROM eval_runs WHERE status = 'done'")}
        files = sorted((root / "reports" / "results").glob("run-*")) if (root / "reports" / "results").is_dir() else []
        ids = [int(p.name.split("-")[1]) for p in files]
        if sorted(ids) != sorted(done) or any(not p.name.endswith(".json") for p in files):
            bad.append(f"result JSON files {[p.name for p in files]} != done runs {sorted(done)}")
    empty = query(root, "SELECT id FROM dup_clusters c WHERE NOT EXISTS (SELECT 1 FROM dup_members m "
                        "WHERE m.cluster_id = c.id)")
    if empty:
        bad.append(f"clusters without members: {empty}")
    rows = dict(query(root, "SELECT path, sha256 FROM images WHERE status = 'ok'"))
    files = {str(p.relative_to(root)) for p in (root / "blobs").glob("[0-9a-f][0-9a-f]/*")}
    if set(rows) - files:
        bad.append(f"image rows without a file: {sorted(set(rows) - files)[:3]}")
    named = {r[0] for r in query(root, "SELECT path FROM images")}
    if files - named:
        bad.append(f"blob files without a row: {sorted(files - named)[:3]}")
    tmp = root / "blobs" / ".tmp"
    if tmp.is_dir() and any(tmp.iterdir()):
        bad.append(f"temporary blob files left: {[p.name for p in tmp.iterdir()][:3]}")
    for d in export_dirs:
        d = Path(d)
        left = list(d.parent.glob(f".{d.name}.tmp-*"))
        if left:
            bad.append(f"half-written export folders left: {[p.name for p in left]}")
    return bad
