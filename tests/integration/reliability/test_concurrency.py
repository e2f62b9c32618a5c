"""Two cultura processes on one project at once: each pair a user might plausibly start together either runs
safely side by side or the second refuses at once with one sentence naming the first.

The overlap is made certain, not left to timing: the first process stops at a chosen point (after its first
blob, after its run row…) and waits for a flag file that the test creates once the second process finished;
every wait is on a state (a file, a process exit), never on a duration.
"""
from __future__ import annotations

import functools
import importlib
import os
import time
from pathlib import Path

import pytest

from tests.integration.reliability.harness import child_error, invariants, query, run_child, start_child, wait_child
from tests.integration.reliability.test_crash import (_server, digest_dedup, digest_import, digest_tag,  # noqa: F401
                                          run_dedup, run_download, run_evaluate, run_import, run_tag,
                                          setup_dedup, setup_download, setup_evaluate, setup_import)

WAIT_LIMIT = 300  # a safety net for a hung child only: the test waits for states


def _wait_for(path: Path) -> None:
    t0 = time.monotonic()
    while not path.exists():
        if time.monotonic() - t0 > WAIT_LIMIT:
            raise AssertionError(f"gave up waiting for {path.name}")
        time.sleep(0.01)


def _pause_at(target: str, n: int, reached: Path, go: Path):
    """In the child: after the n-th call of ``module:attr``, create ``reached`` and wait for ``go``."""
    mod_name, attr = target.split(":")
    mod = importlib.import_module(mod_name)
    orig, count = getattr(mod, attr), [0]

    def wrapper(*a, **k):
        out = orig(*a, **k)
        count[0] += 1
        if count[0] == n:
            reached.write_text(str(os.getpid()))
            _wait_for(go)
        return out
    setattr(mod, attr, wrapper)


def _paused_run(run, target, n, reached, go, p):
    _pause_at(target, n, reached, go)
    run(p)


def _paused(run, target, n, reached, go):
    """``run`` that stops after the n-th call of ``target`` until ``go`` exists (picklable for the child)."""
    return functools.partial(_paused_run, run, target, n, reached, go)


def test_download_beside_an_import_deletes_nothing(tmp_path):
    """The orphan sweep at download start ran while an import held a blob without its row: the blob stays."""
    root = setup_import(tmp_path)
    dl = setup_download(tmp_path / "dl")  # its candidates, copied into the import's project
    from cultura.project import Project
    p, q = Project(root), Project(dl)
    try:
        p.config.download = q.config.download
        p.save_config()
        p.db["candidates"].insert_all([{"url": r["url"], "status": "pending"} for r in q.db["candidates"].rows])
    finally:
        p.close()
        q.close()
    reached, go, swept_flag = tmp_path / "import-stored", tmp_path / "go", tmp_path / "swept"
    # the import stops between writing a blob and committing its row (inside its transaction)
    a = start_child(root, _paused(run_import, "cultura.curate.importers:store_blob", 1, reached, go))
    _wait_for(reached)
    # the download sweeps at its start, then waits for the write lock the import holds
    b = start_child(root, _paused(run_download, "cultura.curate.download:sweep_blobs", 1, swept_flag,
                                  swept_flag))
    _wait_for(swept_flag)
    go.touch()
    assert wait_child(a) == 0, child_error(root)
    assert wait_child(b) == 0, child_error(root)
    swept = query(root, "SELECT summary FROM runs WHERE stage = 'download'")[0][0]
    assert '"skipped"' in swept                       # the sweep saw a live writer and removed nothing
    assert invariants(root) == []
    rows = digest_import(root)["rows"]
    assert sum(1 for r in rows if r[2] == "ok") == 12
    assert query(root, "SELECT count(*) FROM candidates WHERE status = 'downloaded' AND url LIKE 'http%'")[0][0] == 40


def test_dedup_beside_tagging(tmp_path, tmp_path_factory):
    """dedup paused after its hashes while tagging runs to the end; both finish, same outcome as one by one."""
    ref = setup_dedup(tmp_path_factory.mktemp("seq"))
    assert run_child(ref, run_dedup) == 0 and run_child(ref, run_tag) == 0, child_error(ref)
    root = setup_dedup(tmp_path)
    reached, go = tmp_path / "dedup-hashed", tmp_path / "go"
    a = start_child(root, _paused(run_dedup, "cultura.curate.dedup:load_inventory", 1, reached, go))
    _wait_for(reached)
    assert run_child(root, run_tag) == 0, child_error(root)
    go.touch()
    assert wait_child(a) == 0, child_error(root)
    assert invariants(root) == []
    assert digest_dedup(root) == digest_dedup(ref) and digest_tag(root) == digest_tag(ref)


def test_second_dedup_is_refused_naming_the_first(tmp_path):
    root = setup_dedup(tmp_path)
    reached, go = tmp_path / "dedup-started", tmp_path / "go"
    a = start_child(root, _paused(run_dedup, "cultura.curate.dedup:load_inventory", 1, reached, go))
    _wait_for(reached)
    pid_a = int(reached.read_text())
    assert run_child(root, run_dedup) == 1
    err = child_error(root)
    assert "StageBusy" in err and f"Another 'cultura images dedup' (process {pid_a}) is running" in err
    go.touch()
    assert wait_child(a) == 0
    assert invariants(root) == []


def test_two_evaluations_at_once(tmp_path):
    """The second evaluation must not mark the first one's live run 'interrupted'; both runs end done, each
    with its JSON file."""
    root = setup_evaluate(tmp_path)
    reached, go = tmp_path / "run-row", tmp_path / "go"
    a = start_child(root, _paused(run_evaluate, "cultura.evaluate.runner:_embedded", 1, reached, go))
    _wait_for(reached)
    assert run_child(root, run_evaluate) == 0, child_error(root)
    go.touch()
    assert wait_child(a) == 0, child_error(root)
    assert [r[0] for r in query(root, "SELECT status FROM eval_runs ORDER BY id")] == ["done", "done"]
    assert invariants(root) == []
    a_res, b_res = (query(root, "SELECT metric, \"group\", value FROM eval_results WHERE run_id = ? ORDER BY 1, 2",
                          [i]) for i in (1, 2))
    assert a_res == b_res and a_res


def test_database_locked_becomes_one_sentence(tmp_path):
    """Past the busy timeout the CLI says which situation it is, not a traceback."""
    from click.testing import CliRunner

    from cultura.cli import cli
    import cultura.cli.images as dd  # the command's own reference to the library function

    root = setup_dedup(tmp_path)

    def locked(*a, **k):
        import sqlite3
        raise sqlite3.OperationalError("database is locked")

    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(dd, "dedup_images", locked)
        r = CliRunner().invoke(cli, ["--project", str(root), "images", "dedup"])
    finally:
        mp.undo()
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert "locked by another cultura process" in r.output


def test_second_pull_is_refused_naming_the_first(tmp_path):
    """annotate pull takes its stage lock before anything else: a second pull is refused at once."""
    from cultura.annotate import pull as pull_mod
    from cultura.db.leases import StageBusy
    from cultura.project import Project

    root = setup_dedup(tmp_path)
    reached, go = tmp_path / "holding", tmp_path / "go"

    a = start_child(root, functools.partial(_hold_pull_lock, reached, go))
    _wait_for(reached)
    p = Project(root)
    try:
        with pytest.raises(StageBusy, match=rf"Another 'cultura annotate pull' \(process {reached.read_text()}\)"):
            pull_mod.pull(p)
    finally:
        p.close()
        go.touch()
    assert wait_child(a) == 0


def _hold_pull_lock(reached, go, p):
    from cultura.db.leases import stage_lock

    with stage_lock(p.root, "annotate-pull", "cultura annotate pull"):
        reached.write_text(str(os.getpid()))
        _wait_for(go)

