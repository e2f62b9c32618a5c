"""The CLI's output helpers: errors name the option that sets the library argument at fault, --json errors
are JSON, tables show every key of every row and print text literally."""
from __future__ import annotations

import json

from click.testing import CliRunner

from cultura.cli import cli
from cultura.cli.console import columns_of, table


def test_library_error_gets_its_cli_flag(project):
    r = CliRunner().invoke(cli, ["--project", str(project.root), "annotate", "annotators", "add", "zoe",
                                 "--email", "not-an-address"])
    assert r.exit_code == 1
    assert "Error: --email: 'not-an-address' is not an e-mail address" in r.output


def test_library_error_under_json_is_a_json_object(project):
    r = CliRunner().invoke(cli, ["--project", str(project.root), "annotate", "annotators", "add", "zoe",
                                 "--email", "not-an-address", "--json"])
    assert r.exit_code == 1
    assert r.stdout == ""  # errors under --json go to stderr, stdout stays the data
    err = json.loads(r.stderr.strip().splitlines()[-1])
    assert err == {"error": "--email: 'not-an-address' is not an e-mail address; Label Studio users need one.",
                   "type": "CulturaError"}


def test_table_columns_are_the_union_of_keys_and_text_is_literal(capsys):
    rows = [{"a": 1}, {"a": 2, "note": "[evaluate.llm] is a config section"}]
    assert columns_of(rows) == ["a", "note"]
    table("t", rows)
    out = capsys.readouterr().out
    assert "note" in out and "[evaluate.llm]" in out


def test_one_table_reader_streams_json_arrays_csv_and_parquet(tmp_path):
    """db.readers is the one reader: JSON Lines, a JSON array, CSV/TSV and Parquet (in batches)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cultura.db.readers import TableReadError, iter_rows, read_rows

    (tmp_path / "a.json").write_text('[{"x": 1}, 2]', encoding="utf-8")
    assert read_rows(tmp_path / "a.json") == [{"x": 1}, {"__error__": "element 2 is not an object", "__line__": 2}]
    (tmp_path / "b.csv").write_text("x\ty\n1\t2\n", encoding="utf-8")
    assert read_rows(tmp_path / "b.csv") == [{"x": "1", "y": "2"}]
    pq.write_table(pa.table({"x": list(range(10))}), tmp_path / "c.parquet")
    assert [r["x"] for r in iter_rows(tmp_path / "c.parquet", batch_size=3)] == list(range(10))
    (tmp_path / "d.jsonl").write_bytes(b'{"x": "\xff"}\n')
    try:
        read_rows(tmp_path / "d.jsonl")
    except TableReadError as e:
        assert "not UTF-8" in str(e)
    else:
        raise AssertionError("a non-UTF-8 file must be one clear error")


def cli_run(project, *args):
    return CliRunner().invoke(cli, ["--project", str(project.root), *args])


def test_json_errors_and_literal_markup(project):
    res = cli_run(project, "build", "association", "--json")
    assert res.exit_code != 0 and json.loads(res.output)["type"] == "BuildError"
    from cultura.cli.console import columns_of, out, table
    assert columns_of([{"a": 1}, {"b": 2}]) == ["a", "b"]
    with out.capture() as cap:
        table("t", [{"what": "[evaluate.llm] llm = ..."}, {"note": "second row only"}])
    text = cap.get()
    assert "[evaluate.llm]" in text and "second row only" in text


def test_executor_choices_offered_by_the_command_line_are_the_library_executors():
    """--executor lists its choices without importing the executor module (numpy): the two lists stay equal."""
    from cultura import executor
    from cultura.cli import console

    assert console.EXECUTORS == executor.EXECUTORS
