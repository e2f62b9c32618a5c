"""A file the user names is never replaced unasked, and a failed write leaves nothing behind: every command that
writes a user-named file (found by walking the command tree: each path parameter is an input or a known output,
so a new output must be listed here) refuses an existing one in one sentence unless ``--overwrite``; a write that
fails removes its temporary file, and the temporary files of a killed process (the view's pid-named ones
included) are removed by the next run — only cultura's own, only of dead processes."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

import cultura
from cultura.cli import cli
from cultura.files import OutputExists, sweep_temp, write_atomic
from tests.fakes.benchmark_world import make_benchmarks
from tests.fakes.cli_tree import leaves

#: (command, parameter) of every path a command writes to; each command of these has --overwrite, except those
#: that take only a new or empty folder (export) or have their own meaning of it (init: the project's config).
OUTPUTS = {("annotate export-labels", "out"), ("evaluate samples", "output"), ("evaluate report", "out_html"),
           ("evaluate run", "output_path"), ("social translation-items", "out_path"),
           ("social synthetic-portraits", "directory"), ("init", "directory"), ("export", "directory")}
#: Paths a command reads (without click's own existence check: the command says what is missing itself).
INPUTS = {("annotate push", "source"), ("annotate import-labels", "file"), ("concepts set-term", "source"),
          ("concepts remove", "source"), ("build set-query", "source"),
          ("evaluate models", "cache_dir"), ("images ingest", "directory")}
REFUSED = "already exists: choose another file, or overwrite it."


def test_every_path_a_command_writes_is_known_and_can_be_overwritten_only_when_asked():
    seen = set()
    for path, cmd in ((" ".join(p), c) for p, c in leaves()):
        for p in cmd.params:
            if isinstance(p.type, click.Path) and not p.type.exists:
                seen.add((path, p.name))
    unknown = seen - OUTPUTS - INPUTS
    assert not unknown, f"say whether these paths are read or written (OUTPUTS / INPUTS): {sorted(unknown)}"
    assert (OUTPUTS | INPUTS) <= seen, f"listed but gone: {sorted((OUTPUTS | INPUTS) - seen)}"
    commands = {" ".join(p): c for p, c in leaves()}
    for path, _ in OUTPUTS - {("export", "directory"), ("init", "directory")}:
        assert "overwrite" in {p.name for p in commands[path].params}, path


def _run(project, *args):
    return CliRunner().invoke(cli, ["--project", str(project.root), *args])


def _refused(r, path) -> None:
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    assert r.output.strip() == f"Error: --overwrite: {path} {REFUSED}", r.output


def test_export_labels_translation_items_and_synthetic_portraits_refuse_an_existing_file(project, tmp_path):
    labels = tmp_path / "labels.csv"
    labels.write_text("mine\n")
    _refused(_run(project, "annotate", "export-labels", "--out", str(labels)), labels)
    assert labels.read_text() == "mine\n"
    r = _run(project, "annotate", "export-labels", "--out", str(labels), "--overwrite")
    assert r.exit_code == 0 and labels.read_text().startswith("task,worker,label"), r.output

    items = tmp_path / "fr.jsonl"
    items.write_text("mine\n")
    _refused(_run(project, "social", "translation-items", "fr", "--out", str(items)), items)
    assert items.read_text() == "mine\n"
    assert _run(project, "social", "translation-items", "fr", "--out", str(items), "--overwrite").exit_code == 0
    assert json.loads(items.read_text().splitlines()[0])["language"] == "fr"

    folder = tmp_path / "portraits"
    folder.mkdir()
    (folder / "labels.csv").write_text("mine\n")
    _refused(_run(project, "social", "synthetic-portraits", str(folder), "--per-cell", "1"), folder / "labels.csv")
    assert sorted(p.name for p in folder.iterdir()) == ["labels.csv"]  # nothing drawn
    assert _run(project, "social", "synthetic-portraits", str(folder), "--per-cell", "1",
                "--overwrite").exit_code == 0
    assert (folder / "labels.csv").read_text().startswith("file,")
    # the Python API refuses the same way
    p = cultura.open(project.root)
    with pytest.raises(OutputExists, match=REFUSED) as e:
        p.annotate.export_labels(labels)
    assert e.value.param == "overwrite"
    p.close()


def test_evaluation_outputs_refuse_an_existing_file_before_anything_runs(project, tmp_path):
    make_benchmarks(project)
    results = tmp_path / "results.json"
    results.write_text("{}")
    args = ["evaluate", "run", "--model", "fake", "--suite", "association", "--option", "n_resamples=50",
            "--limit", "3", "--log-samples", "--output-path", str(results)]
    _refused(_run(project, *args), results)
    assert project.db["eval_runs"].count == 0 and results.read_text() == "{}"  # refused before running
    r = _run(project, *args, "--overwrite", "--json")
    assert r.exit_code == 0, r.output
    run_id = json.loads(r.stdout)[0]["run_id"]
    assert json.loads(results.read_text())["runs"][0]["run_id"] == run_id

    samples = tmp_path / "s.jsonl"
    samples.write_text("mine\n")
    _refused(_run(project, "evaluate", "samples", str(run_id), str(samples)), samples)
    assert samples.read_text() == "mine\n"
    assert _run(project, "evaluate", "samples", str(run_id), str(samples), "--overwrite").exit_code == 0
    assert json.loads(samples.read_text().splitlines()[0])["run_id"] == run_id

    # evaluate report (figures: matplotlib): tests/integration/evaluate/test_a_named_report_is_never_clobbered.py


# ------------------------------------------------------------------------------------------ temporary files

def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_failed_write_removes_its_temporary_file(tmp_path, monkeypatch, project):
    folder = tmp_path / "out"
    folder.mkdir()
    target = folder / "out.csv"

    def full_disk(tmp):
        tmp.write_bytes(b"half a fi")
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp))

    with pytest.raises(OSError):
        write_atomic(target, writer=full_disk)
    assert list(folder.iterdir()) == []
    # through the command line: one sentence about the disk, and nothing left beside the target
    import cultura.annotate.labels_io as labels_io

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(labels_io.csv, "DictWriter", no_space)
    r = _run(project, "annotate", "export-labels", "--out", str(target))
    assert r.exit_code == 1 and "Traceback" not in r.output and "free space" in r.output, r.output
    assert list(folder.iterdir()) == []


def test_the_next_run_removes_the_temporary_files_a_killed_process_left_and_only_those(tmp_path):
    dead, alive = _dead_pid(), os.getppid()
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    target = tmp_path / "labels.csv"
    stale = [tmp_path / f".labels.csv.{dead}-0a1b2c3d.tmp", tmp_path / f".labels.csv.{dead}.tmp"]
    kept = [tmp_path / f".labels.csv.{alive}-0a1b2c3d.tmp",   # a process still writing
            tmp_path / f".other.csv.{dead}.tmp",               # another target's (its own write sweeps it)
            tmp_path / ".notes.tmp", tmp_path / "labels.csv.tmp"]  # not cultura's
    for p in stale + kept:
        p.write_text("x")
    write_atomic(target, "task\n")
    assert target.read_text() == "task\n"
    assert not any(p.exists() for p in stale) and all(p.exists() for p in kept)
    assert sweep_temp(tmp_path) == 1 and not kept[1].exists()


def test_cultura_view_removes_the_pid_named_files_a_killed_run_left(project, monkeypatch):
    assert _run(project, "view").exit_code == 0
    view = project.reports / "view"
    (view / "thumbs" / "ab").mkdir(parents=True, exist_ok=True)
    dead = _dead_pid()
    left = [view / f".index.html.{dead}.tmp", view / "thumbs" / "ab" / f".{'ab' * 32}.jpg.{dead}.tmp"]
    writing = view / f".pool.html.{os.getppid()}.tmp"  # a live process's: not for this run to remove
    for p in [*left, writing]:
        p.write_bytes(b"half")
    assert _run(project, "view").exit_code == 0
    assert sorted(view.rglob("*.tmp")) == [writing]
    writing.unlink()
    # a run that fails while writing a page (a full disk) says so and leaves no temporary file of its own
    import cultura.files as files

    def no_space(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device", str(dst))

    (view / "index.html").write_text("changed, so it is rewritten")
    monkeypatch.setattr(files.os, "replace", no_space)
    r = _run(project, "view")
    monkeypatch.undo()
    assert r.exit_code == 1 and "free space" in r.output and "Traceback" not in r.output, r.output
    assert list(view.rglob("*.tmp")) == []
    assert _run(project, "view").exit_code == 0 and "changed" not in (view / "index.html").read_text()
