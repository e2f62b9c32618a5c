"""Benchmark, annotator and campaign names pass one validator (``cultura.names``) at every door that creates
one: a name that hides what it says (U+202E, BEL, only zero-width characters) or that no file name holds
(10,000 characters) is refused with one sentence and nothing is made; a benchmark name is also a Hugging Face
config name, so the characters ``datasets`` refuses there (``InvalidConfigName``) are refused naming the rule.

The doors are found by walking the command line and the front door for a ``name``/``batch`` parameter: each
one is either a door that creates (checked here) or one that only looks a name up, and a new one must say
which before this test passes."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

import cultura
from cultura.cli import cli
from cultura.names import HUB_CONFIG_FORBIDDEN, benchmark_name, label_name
from tests.fakes.cli_tree import leaves

BAD = {"right-to-left override": "bench\u202emark", "BEL": "bell\x07", "zero-width only": "\u200b\u200b\u200d",
       "10,000 characters": "x" * 10_000}
NOT_HUB = {"slash": "a/b", "colon": "a:b", "less-than": "a<b", "greater-than": "a>b", "parent folder": "../x",
           "pipe": "a|b", "question mark": "a?b", "star": "a*b", "backslash": "a\\b"}

#: command line: (command, parameter) → the arguments that create something with NAME
CLI_CREATES = {
    ("annotate annotators add", "name"): lambda n: ["annotate", "annotators", "add", n, "--email", "a@example.org"],
    ("annotate push", "batch"): lambda n: ["annotate", "push", "filter", "--batch", n],
    ("build association", "name"): lambda n: ["build", "association", "--name", n],
    ("build descriptor", "name"): lambda n: ["build", "descriptor", "--name", n],
    ("import 3xcm", "name"): lambda n: ["import", "3xcm", "{table}", "--trials", "--name", n],
}
#: parameters that name something that exists already (looked up, never created) or is no benchmark,
#: annotator or campaign (a project's, a concept's, a culture label's name)
CLI_OTHER = {("annotate annotators deactivate", "name"), ("annotate annotators password", "name"),
             ("annotate campaigns archive", "name"), ("annotate campaigns close", "name"),
             ("annotate campaigns open", "name"), ("annotate push", "names"), ("concepts add", "names"),
             ("concepts remove", "names"), ("culture add", "name"), ("init", "name")}
BENCHMARK_DOORS = {("build association", "name"), ("build descriptor", "name"), ("import 3xcm", "name")}


def _cli_params():
    for path, cmd in leaves():
        for p in cmd.params:
            if p.name in ("name", "names", "batch"):
                yield " ".join(path), p.name


def test_every_name_parameter_of_the_command_line_is_classified():
    found = set(_cli_params())
    assert found == set(CLI_CREATES) | CLI_OTHER, (
        f"new: {sorted(found - set(CLI_CREATES) - CLI_OTHER)}, gone: {sorted(set(CLI_CREATES) | CLI_OTHER - found)}")


def _doors(project, tmp_path):
    table = tmp_path / "trials.csv"
    table.write_text("query,cr,lb,ti\n")
    for (cmd, param), args in CLI_CREATES.items():
        def run(n, args=args):
            argv = [a.replace("{table}", str(table)) for a in args(n)]
            return CliRunner().invoke(cli, ["--project", str(project.root), *argv])
        yield f"cultura {cmd}", (cmd, param) in BENCHMARK_DOORS, run


def _counts(project):
    db = project.db
    return [db[t].count for t in ("benchmarks", "annotators", "campaigns")]


@pytest.mark.parametrize("why", list(BAD) + list(NOT_HUB))
def test_a_bad_name_is_refused_at_every_door_with_one_sentence(project, tmp_path, why):
    bad = BAD.get(why) or NOT_HUB[why]
    before = _counts(project)
    for door, is_benchmark, run in _doors(project, tmp_path):
        r = run(bad)
        if why in NOT_HUB and not is_benchmark:
            continue  # a slash is fine in a campaign or annotator name (where it ends, it is escaped)
        assert r.exit_code != 0, (door, why, r.output[:300])
        text = r.output.strip()
        assert "Traceback" not in text and len(text) < 600 and text.count("\n") <= 2, (door, why, text[:600])
        assert "rerun" in text and "name" in text, (door, why, text)
        if why in NOT_HUB and why != "parent folder":  # '../x' is refused as a file path first
            assert "InvalidConfigName" in text and HUB_CONFIG_FORBIDDEN in text, (door, text)
    assert _counts(project) == before


def test_the_front_door_checks_the_same_names(project, tmp_path):
    p = cultura.open(project.root)
    table = tmp_path / "trials.csv"
    table.write_text("query,cr,lb,ti\n")
    doors = [lambda n: p.benchmarks.build("association", name=n),
             lambda n: p.imports.threexcm(table, trials=True, name=n),
             lambda n: p.annotate.annotators.add(n, email="a@example.org"),
             lambda n: p.annotate.push("filter", batch=n)]
    for door in doors:
        for why, bad in BAD.items():
            with pytest.raises(cultura.errors.CulturaError, match="rerun"):
                door(bad)
    with pytest.raises(cultura.errors.CulturaError, match="InvalidConfigName"):
        p.benchmarks.build("association", name="a:b")
    assert _counts(project) == [0, 0, 0]


def test_an_at_sign_in_a_benchmark_name_is_refused_naming_name_at_version(project):
    r = CliRunner().invoke(cli, ["--project", str(project.root), "build", "association", "--name", "rice@2"])
    assert r.exit_code == 1 and "NAME@VERSION" in r.output and "'rice-2'" in r.output, r.output


def test_the_hub_rule_is_the_one_datasets_applies():
    from datasets.naming import INVALID_WINDOWS_CHARACTERS_IN_PATH

    assert HUB_CONFIG_FORBIDDEN == INVALID_WINDOWS_CHARACTERS_IN_PATH
    assert benchmark_name("  Café  & co. 100% #1 ") == "Café & co. 100% #1"
    assert label_name("ラベル 2", what="campaign name") == "ラベル 2"
