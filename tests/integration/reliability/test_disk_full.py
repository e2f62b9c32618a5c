"""A full disk (or a file-size limit) in every stage is one sentence, never a traceback: the stage, the
path and "free space, then rerun", exit status 1; and the data is as safe as after a crash: once space is free,
a rerun ends exactly like a run that never failed (the crash tests' digests and invariants).

The project lives on a real small file system: a tmpfs mounted for the test (needs root; skipped otherwise)
filled with a ballast file until only ``slack`` bytes are free. The file-size limit (``ulimit -f``) variant
needs no root and runs everywhere.
"""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from tests.integration.reliability.harness import child_error, invariants, run_child
from tests.integration.reliability.test_crash import STAGES, _reference, _server  # noqa: F401 (the image server fixture)

SENTENCE = "; free space, then rerun"


def _cultura(root, args, preexec_fn=None) -> subprocess.CompletedProcess:
    """The real command line in a child process (the test's own image server must not share its stderr)."""
    return subprocess.run([sys.executable, "-m", "cultura", "--project", str(root), *args], capture_output=True,
                          text=True, preexec_fn=preexec_fn, env={**os.environ, "COLUMNS": "80"})


@pytest.fixture
def small_disk(tmp_path):
    """A 48 MiB tmpfs at ``tmp_path/disk`` (unmounted afterwards)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(disk)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(disk: Path, slack: int) -> Path:
    """Write a ballast file until ``slack`` bytes are left free on ``disk``; return it."""
    ballast = disk / f"ballast-{uuid.uuid4().hex}"
    free = shutil.disk_usage(disk).free - slack
    with open(ballast, "wb") as f:
        chunk = b"\0" * (1 << 20)
        while free > 0:
            n = min(free, len(chunk))
            try:
                f.write(chunk[:n])
                f.flush()
            except OSError:
                break
            free -= n
    return ballast


#: stage -> the CLI arguments that run it (as the crash tests' run_<stage> functions do) and the bytes left free:
#: enough that the stage starts and fails in the middle of its writes, where that is possible to arrange
CLI = {
    "download": (["images", "download", "--workers", "4"], 96 * 1024),
    "dedup": (["images", "dedup", "--method", "sha256", "--method", "phash", "--method", "dhash"], 0),
    "tag": (["images", "tag", "--method", "clip", "--clip-model", "fake"], 0),
    "export": (["export", "{exports}/assoc", "--benchmark", "association@1"], 64 * 1024),
    "evaluate": (["evaluate", "run", "--model", "fake", "--suite", "association", "--option", "n_resamples=20"], 0),
    "import": (["import", "globalrg", "{tmp}/gr.csv", "--images", "{tmp}/gr"], 32 * 1024),
}
STAGE = {"download": "images download", "dedup": "images dedup", "tag": "images tag", "export": "export",
         "evaluate": "evaluate run", "import": "import globalrg"}


@pytest.mark.parametrize("name", sorted(CLI))
def test_full_disk_is_one_sentence_and_a_rerun_completes(name, small_disk, tmp_path_factory):
    setup, run, digest, _ = STAGES[name]
    expected = _reference(name, tmp_path_factory)
    root = setup(small_disk)
    args, slack = CLI[name]
    args = [a.format(exports=small_disk / "exports", tmp=small_disk) for a in args]
    ballast = _fill(small_disk, slack)
    out = _cultura(root, args)
    assert out.returncode == 1, (out.returncode, out.stdout, out.stderr)
    err = out.stdout + out.stderr
    assert "Traceback" not in err, err
    [line] = [x for x in err.splitlines() if "stopped:" in x]  # one sentence, on one line (never wrapped)
    assert line.startswith(f"Error: cultura {STAGE[name]} stopped: ") and line.endswith("where it stopped)."), line
    assert SENTENCE in line and f" while writing {small_disk}/" in line, line  # the path on the full disk
    if name == "export":  # pyarrow's error names no file: the export names its folder
        assert f"while writing {small_disk}/exports/assoc;" in line, line
    # data as safe as after a crash: free the space, rerun, and the outcome is a never-failed run's
    ballast.unlink()
    assert run_child(root, run) == 0, child_error(root)
    assert invariants(root, export_dirs=[small_disk / "exports" / "assoc"]) == []
    assert digest(root) == expected


def test_file_size_limit_is_one_sentence(tmp_path):
    """``ulimit -f`` (EFBIG, SQLite's "database or disk is full") through the real console script: the same
    sentence; no root needed."""
    setup, run, digest, _ = STAGES["import"]
    root = setup(tmp_path)
    limit = 64 * 1024  # every file may grow to 64 KiB: the WAL and the blobs soon reach it

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    r = _cultura(root, ["import", "globalrg", str(tmp_path / "gr.csv"), "--images", str(tmp_path / "gr")],
                 preexec_fn=limited)
    err = r.stdout + r.stderr
    assert r.returncode == 1, err
    assert "Traceback" not in err, err
    [line] = [x for x in err.splitlines() if "stopped:" in x]
    assert line.startswith("Error: cultura import globalrg stopped: a file reached the size limit") and \
        SENTENCE in line and f"while writing {root}" in line, line
    assert run_child(root, run) == 0, child_error(root)
    assert invariants(root) == []


def test_storage_failures_are_recognised_wherever_they_sit_in_the_chain():
    import errno
    import sqlite3

    from cultura.errors import storage_error, storage_failure

    assert storage_failure(OSError(errno.ENOSPC, "No space left on device", "/d/x")) == ("the disk is full", "/d/x")
    assert storage_failure(sqlite3.OperationalError("database or disk is full")) == ("the disk is full", None)
    # pyarrow: the errno only in the text
    e = OSError("[Errno 28] Error writing bytes to file. Detail: [errno 28] No space left on device")
    assert storage_failure(e) == ("the disk is full", None)
    try:  # a library that wraps the OSError in its own exception
        try:
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
        except OSError as inner:
            raise RuntimeError("writing failed") from inner
    except RuntimeError as outer:
        assert storage_failure(outer) == ("the disk quota is used up", None)
    for other in (ValueError("x"), OSError(errno.ENOENT, "No such file"), sqlite3.OperationalError("database is locked")):
        assert storage_failure(other) is None
    msg = str(storage_error("cultura export", "the file system is read-only", "/ro/out"))
    assert msg.startswith("cultura export stopped: the file system is read-only while writing /ro/out; remount it")
