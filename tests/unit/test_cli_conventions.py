"""One vocabulary on every command: ``--model`` for a model spec, ``--top-k``, ``--overwrite`` /
``--retry-failed``, ``--dry-run`` on bulk changes, ``--json`` everywhere with errors as JSON on stderr and a
non-zero exit; old option names still parse (hidden, for one release); long error texts are never folded into
narrow table columns; shell completion is documented."""
from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from cultura.cli import cli
from tests import REPO
from tests.fakes.cli_tree import leaves

ROOT = REPO
#: Names replaced by the one vocabulary (still accepted, never shown).
OLD_NAMES = {"--encoder", "--embedder", "--clip-model", "--k", "--n", "--force", "--refresh", "--apply"}


def _leaves():
    return ((" ".join(("cultura", *p)), c) for p, c in leaves())


def _shown_options(cmd) -> set[str]:
    ctx = click.Context(cmd)
    shown = set()
    for p in cmd.params:
        record = p.get_help_record(ctx) if isinstance(p, click.Option) and not p.hidden else None
        if record:
            shown |= {o.strip().split(" ")[0] for o in record[0].split(",")}
    return shown


def test_every_command_has_json():
    missing = [path for path, cmd in _leaves() if not any(p.name == "as_json" for p in cmd.params)]
    assert not missing, f"commands without --json: {missing}"


def test_no_command_shows_an_old_option_name():
    shown = {path: _shown_options(cmd) & OLD_NAMES for path, cmd in _leaves()}
    assert not {p: s for p, s in shown.items() if s}


def test_model_specs_are_chosen_with_model():
    """Every option whose help speaks of a model/embedder spec is --model (judges and scorers keep their
    role's name)."""
    for path, cmd in _leaves():
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.hidden and p.name in ("model", "encoder", "embedder",
                                                                           "clip_model"):
                shown = [o for o in p.opts if o not in getattr(p, "hidden_aliases", ())]
                assert shown == ["--model"], f"{path}: {shown} should be --model"


def _params(args: list[str]) -> dict:
    """The parameters the command of ``args`` is called with (parsed as under ``cultura``, not run)."""
    ctx = click.Context(cli, info_name="cultura", help_option_names=["-h", "--help"])
    cmd, words = cli, list(args)
    while isinstance(cmd, click.Group):
        cmd = cmd.commands[words.pop(0)]
    return cmd.make_context(cmd.name, words, parent=ctx).params


@pytest.mark.parametrize("args, param, value", [
    (["images", "tag", "--clip-model", "openclip:cultura-tiny"], "model", "openclip:cultura-tiny"),
    (["images", "dedup", "--embedder", "fake:dim=8"], "model", "fake:dim=8"),
    (["concepts", "dedup", "--embedder", "st:x"], "model", "st:x"),
    (["concepts", "generate", "--n", "7"], "n", 7),
    (["images", "search", "--refresh"], "refresh", True),
    (["init", "somewhere", "--force"], "overwrite", True),
    (["attribution", "run", "--encoder", "fake:dim=8", "--judge", "stub", "--k", "3"], "k", 3),
    (["attribution", "run", "--encoder", "fake:dim=8", "--judge", "stub"], "encoder", "fake:dim=8"),
])
def test_old_names_still_parse(args, param, value):
    assert _params(args)[param] == value


def test_new_names_parse():
    assert _params(["images", "tag", "--model", "openclip:cultura-tiny"])["model"] == "openclip:cultura-tiny"
    params = _params(["attribution", "run", "--model", "fake:dim=8", "--judge", "stub", "--top-k", "4"])
    assert params["encoder"] == "fake:dim=8" and params["k"] == 4
    assert _params(["concepts", "dedup", "--dry-run"])["dry_run"] is True


def _run(args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cultura", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


def test_json_errors_go_to_stderr_with_a_non_zero_exit(project):
    # a library error
    r = _run(["build", "association", "--json"], project.root)
    assert r.returncode == 1 and r.stdout == ""
    err = json.loads(r.stderr)
    assert err["type"] == "BuildError" and "annotate push filter" in err["error"]
    # click's own error (an option out of range), still one JSON object naming the help to read
    r = _run(["images", "download", "--workers", "0", "--json"], project.root)
    assert r.returncode == 2 and r.stdout == ""
    err = json.loads(r.stderr)
    assert "--workers" in err["error"] and "cultura images download --help" in err["error"]
    # without --json: plain text on stderr
    r = _run(["images", "download", "--workers", "0"], project.root)
    assert r.returncode == 2 and "Error" in r.stderr and not r.stderr.lstrip().startswith("{")


def test_cache_clear_dry_run_and_no_prompt_without_a_terminal(project):
    r = _run(["evaluate", "cache", "clear", "--dry-run", "--json"], project.root)
    assert r.returncode == 0 and json.loads(r.stdout) == {"model": "all", "would_remove": 0}
    r = _run(["evaluate", "cache", "clear"], project.root)
    assert r.returncode == 2 and "--yes" in r.stderr
    r = _run(["evaluate", "cache", "clear", "--yes", "--json"], project.root)
    assert r.returncode == 0 and json.loads(r.stdout) == {"model": "all", "removed": 0}


def test_long_cells_are_notes_not_folded_columns():
    from cultura.cli.console import out, table

    reason = "Model 'openclip:ViT-B-32/openai' needs weights from the Hugging Face hub, which is offline."
    with out.capture() as cap:
        table("Evaluation runs", [{"run_id": 1, "status": "failed", "reason": reason}])
    text = cap.get()
    assert "see [1]" in text and f"[1] reason: {reason}" in text


def test_a_missing_extra_is_one_sentence(monkeypatch, project):
    """A command whose optional library is missing names the extra to install (here torch, hidden)."""
    monkeypatch.setitem(sys.modules, "open_clip", None)
    r = CliRunner().invoke(cli, ["--project", str(project.root), "images", "tag", "--method", "clip",
                                 "--model", "openclip:cultura-tiny"])
    assert r.exit_code == 1
    assert "needs open_clip, which is not installed: run pip install 'cultura[models]'" in r.output


def test_shell_completion_is_documented_and_works():
    readme = (ROOT / "README.md").read_text("utf-8")
    assert "_CULTURA_COMPLETE=bash_source cultura" in readme
    env = {"_CULTURA_COMPLETE": "bash_complete", "COMP_WORDS": "cultura ima", "COMP_CWORD": "1"}
    r = subprocess.run([sys.executable, "-m", "cultura"], env={**__import__("os").environ, **env},
                       capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == ["plain,images"]
