"""Every number from outside has a declared range, and a number outside it is one sentence naming the range, never
a traceback: each numeric option and argument of every command (walked from the root group, so a new option
without a range fails here) refuses a number below its range, a huge one (10**30) and, for real numbers, nan and
infinity (exit 2); each numeric option of every suite does the same through ``evaluate run --option`` (exit 1),
and every number a suite reads from its options is declared; the library refuses the same values in words
(``build_benchmark(seed=-1)``), through the same declarations."""
from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import cultura
from cultura.bounds import OutOfRange
from cultura.cli import cli
from cultura.cli.console import _Bounded
from cultura.evaluate.suites import load_suites
from tests.fakes.cli_tree import leaves

HUGE = "1" + "0" * 30


def _numeric_params():
    for path, cmd in leaves():
        for p in cmd.params:
            if isinstance(p.type, (click.types.IntParamType, click.types.FloatParamType)):
                yield path, cmd, p


NUMERIC = list(_numeric_params())


def _below(bound) -> str:
    """A number under the range: -1 where the range starts at -1 or above, else one under its start."""
    return "-1" if bound.low > -1 else str(int(bound.low) - 1)


def _bad_values(bound) -> list[str]:
    values = [_below(bound), HUGE, "-" + HUGE, "abc"]
    if bound.kind is float:
        values += ["nan", "inf", "-inf", "1e400"]
    return values


def _args(path, cmd, param, value: str) -> list[str]:
    """The command line that gives ``param`` the text ``value`` (other arguments filled with placeholders)."""
    if isinstance(param, click.Option):
        return [*path, max(param.opts, key=len), value]
    positional = [value if p is param else "x.jsonl" for p in cmd.params if isinstance(p, click.Argument)]
    return [*path, "--", *positional]


def _one_sentence(line: str) -> bool:
    return line.endswith(".") and len(re.findall(r"\.(?:\s|$)", line)) == 1


def test_the_walk_finds_the_whole_tree():
    paths = {" ".join(path) for path, _, _ in NUMERIC}
    assert len(NUMERIC) > 40 and {"build association", "evaluate samples", "images failures", "view",
                                  "annotate push", "evaluate run"} <= paths


@pytest.mark.parametrize("path, cmd, param", NUMERIC, ids=[f"{' '.join(p)} {q.name}" for p, _, q in NUMERIC])
def test_every_numeric_parameter_declares_a_range_and_refuses_what_is_outside(path, cmd, param, tmp_path,
                                                                             monkeypatch):
    assert isinstance(param.type, _Bounded), \
        f"cultura {' '.join(path)} {param.name}: declare its range with console.bounded(Bound(...))"
    bound = param.type.bound
    default = param.default
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        assert bound.contains(default), f"the default {default} is outside {bound.describe()}"
    monkeypatch.chdir(tmp_path)  # a command that slipped through would write here, not in the repository
    for value in _bad_values(bound):
        args = ["--project", str(tmp_path / "no-project-here"), *_args(path, cmd, param, value)]
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 2, (args, r.output)
        assert r.exception is None or isinstance(r.exception, SystemExit), (args, r.exception)
        assert "Traceback" not in r.output
        line = r.output.strip().splitlines()[-1]
        assert line.startswith("Error: Invalid value for") and bound.describe() in line, (args, line)
        assert _one_sentence(line), line
    assert not any(tmp_path.iterdir()), "a refused command wrote files"


# ------------------------------------------------------------------------------------------ the suites' options

SUITE_OPTIONS = [(name, key, bound) for name, s in load_suites().items() for key, bound in s.options.items()]


def _bad_option_values(bound) -> list[str]:
    below, huge = _below(bound), HUGE
    values = [below, huge, '"abc"', "true"]
    if bound.kind is float:
        values += ["NaN", "Infinity"]
    if bound.many:
        values = [f"[{v}]" for v in values] + [below]
    return values


def test_every_suite_declares_the_numbers_it_reads():
    """A number a suite folder reads from its options (``int(opts.get("k", …))``) has a declared range."""
    read = re.compile(r"""\b(?:int|float)\(\s*(?:o|opts?|options)\s*(?:\.get\(|\[)\s*["']([A-Za-z_]\w*)["']""")
    missing = []
    for name, suite in load_suites().items():
        folder = Path(suite.func.__code__.co_filename).parent
        declared = {k for s in load_suites().values()
                    if Path(s.func.__code__.co_filename).parent == folder for k in s.options}
        for f in folder.glob("*.py"):
            missing += [f"{f.name}: {k}" for k in read.findall(f.read_text("utf-8")) if k not in declared]
    assert not missing, f"numeric suite options without a range: {sorted(set(missing))}"


def test_every_suite_option_refuses_what_is_outside_its_range(project):
    runner = CliRunner()
    assert len(SUITE_OPTIONS) > 20
    for name, key, bound in SUITE_OPTIONS:
        for value in _bad_option_values(bound):
            args = ["--project", str(project.root), "evaluate", "run", "--model", "fake", "--suite", name,
                    "--option", f"{name}.{key}={value}"]
            r = runner.invoke(cli, args)
            assert r.exit_code == 1 and (r.exception is None or isinstance(r.exception, SystemExit)), (args, r.output)
            assert "Traceback" not in r.output
            line = r.output.strip().splitlines()[-1]
            assert line == (f"Error: --option: Option {key} of suite {name} must be {bound.describe()}; got "
                            f"{line.rsplit('; got ', 1)[-1]}") and _one_sentence(line), (args, line)
    assert project.db["eval_runs"].count == 0  # refused before any run started


# ------------------------------------------------------------------------------------------ the reported cases

@pytest.mark.parametrize("args, option, words", [
    (["annotate", "push", "filter", "--gold", "-1"], "--gold", "an integer from 0 to 9223372036854775807"),
    (["build", "association", "--seed", "-1"], "--seed", "an integer from 0 to 4294967295"),
    (["build", "association", "--seed", "18446744073709551617"], "--seed", "an integer from 0 to 4294967295"),
    (["build", "association", "--seed", HUGE], "--seed", "an integer from 0 to 4294967295"),
    (["build", "association", "--version", str(2**63)], "--version", "an integer from 1 to 9223372036854775807"),
    (["build", "association", "--min-relevance", "nan"], "--min-relevance", "a number from 1 to 5 (or none)"),
    (["images", "download", "--limit", str(10**20)], "--limit", "an integer from 1 to 9223372036854775807"),
    (["images", "failures", "--limit", str(10**20)], "--limit", "an integer from 1 to 9223372036854775807"),
    (["evaluate", "samples", "9223372036854775808", "F"], "'RUN_ID'", "an integer from 1 to 9223372036854775807"),
])
def test_the_reported_numbers_are_one_sentence(project, args, option, words):
    r = CliRunner().invoke(cli, ["--project", str(project.root), *args])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert f"Invalid value for {option if option.startswith(chr(39)) else repr(option)}" in r.output
    assert f"is not {words}." in r.output


@pytest.mark.parametrize("option, words", [
    ("n_resamples=1000000000000", "Option n_resamples of suite association must be an integer from 1 to 1000000; "
                                  "got 1000000000000."),
    (f"seed={2**70}", f"Option seed of suite association must be an integer from 0 to 4294967295; got {2**70}."),
    ("seed=2**70", "Option seed of suite association must be an integer from 0 to 4294967295; got '2**70'."),
])
def test_evaluate_run_options_out_of_range_are_one_sentence(project, option, words):
    r = CliRunner().invoke(cli, ["--project", str(project.root), "evaluate", "run", "--model", "fake", "--suite",
                                 "association", "--option", option])
    assert r.exit_code == 1 and r.output.strip() == f"Error: --option: {words}"


def test_the_python_api_refuses_the_same_numbers_in_words(project):
    from cultura.benchmark.build import build_benchmark

    with pytest.raises(OutOfRange, match=r"^seed must be an integer from 0 to 4294967295; got -1\.$") as e:
        build_benchmark(project, "association", seed=-1, allow_unreviewed=True)
    assert e.value.param == "seed"
    p = cultura.open(project.root)
    cases = [
        (lambda: p.benchmarks.build("association", version=2**63, allow_unreviewed=True), "version"),
        (lambda: p.benchmarks.build("association", min_relevance=float("nan"), allow_unreviewed=True),
         "min_relevance"),
        (lambda: p.images.failures(limit=10**20), "limit"),
        (lambda: p.images.download(limit=10**20), "limit"),
        (lambda: p.evaluate.export_samples(2**63, project.root / "s.jsonl"), "run_id"),
        (lambda: p.evaluate.run("fake", "association", options={"n_resamples": 10**12}), "options"),
        (lambda: p.view.build(page_size=0), "page_size"),
        (lambda: p.concepts.dedup(threshold=2.0), "threshold"),
    ]
    for call, param in cases:
        with pytest.raises(OutOfRange) as e:
            call()
        assert e.value.param == param and "must be" in str(e.value), (param, e.value)
    assert project.db["eval_runs"].count == 0 and project.db["benchmarks"].count == 0
    p.close()
