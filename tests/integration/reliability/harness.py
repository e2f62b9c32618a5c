"""Run a stage in a real child process, optionally killed (``os._exit``) at a chosen write.

The child is forked from a forkserver (one fresh interpreter that imported cultura once, so no 5–10 s start
per run on a busy machine and no lock copied from the test process's threads), opens the project itself and
runs the stage function. A crash point is either

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
import multiprocessing
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


def _ctx():
    """Children come from a forkserver: a fresh interpreter that imported cultura once and forks a child per
    run. Forking the test process itself would copy its threads' locks (torch / OpenMP pools, the image
    server) into the child, which can then wait forever on a lock no thread will release."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["cultura.project", "tests.integration.reliability.harness"])
    return ctx


def _child_main(root, fn, point) -> None:
    from cultura.project import Project

    code = 1
    try:
        p = Project(root)
        _install(point, p)
        fn(p)
        p.close()
        code = 0
    except BaseException:
        (Path(root) / f"child-error-{os.getpid()}.txt").write_text(traceback.format_exc())
    finally:
        os._exit(code)


def start_child(root, fn, point=None):
    """Start ``fn(project)`` on a freshly opened ``Project(root)`` in a child process (``fn`` must be picklable:
    a module-level function or a ``functools.partial`` of one); returns the process (``.pid``)."""
    proc = _ctx().Process(target=_child_main, args=(str(root), fn, point))
    proc.start()
    return proc


def wait_child(proc) -> int:
    proc.join()
    return proc.exitcode


def run_child(root, fn, point=None) -> int:
    """Run ``fn(project)`` in a child process (see :func:`start_child`) and return its exit code."""
    return wait_child(start_child(root, fn, point))


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
