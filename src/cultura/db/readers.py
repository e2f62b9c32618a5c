"""The one table reader: rows of a JSON Lines (or JSON array), CSV, TSV or Parquet file, as dicts.

Every input file a user hands cultura (URL lists, caption sets, rating tables, entity and context lists, KB
files, portrait label tables, gold answers) goes through :func:`read_rows`, so every command accepts the same
formats and reports a bad file the same way:

- a file that does not exist, is not UTF-8, or has an unknown extension is a :class:`TableReadError` naming
  the file (one sentence, no traceback);
- :func:`iter_rows` streams (JSON Lines line by line, CSV row by row, Parquet in record batches), so a
  knowledge-base dump of millions of entities never sits in memory; :func:`read_rows` is its list;
- a JSON Lines line that is not JSON, or is JSON but not an object (``[1,2,3]``, ``null``), is returned as an
  **error row** ``{"__error__": reason, "__line__": n}`` in its place, so one bad line never refuses the whole
  file: importers store it as a reject row with that reason; callers that cannot use a partial file pass
  ``strict=True`` and get a :class:`TableReadError` naming the line.

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "rows.jsonl"
>>> _ = p.write_text('{"url": "http://a/x.jpg"}\\n[1, 2]\\nnot json\\n', encoding="utf-8")
>>> [r.get("url") or r["__error__"] for r in read_rows(p)]
['http://a/x.jpg', 'line 2 is JSON but not an object (a list)', 'line 3 is not JSON (Expecting value)']
"""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Iterator

from ..errors import CulturaError

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
CSV_SUFFIXES = (".csv", ".tsv")
SUFFIXES = (*JSONL_SUFFIXES, *CSV_SUFFIXES, ".parquet")
ERROR = "__error__"


class TableReadError(CulturaError):
    """An input table cannot be read at all (missing, not UTF-8, unknown format, or a bad line with strict)."""


def is_error(row: dict) -> bool:
    """Whether ``row`` is an error row standing in for an unreadable line."""
    return ERROR in row


def read_rows(path: str | Path, *, strict: bool = False) -> list[dict]:
    """Rows of ``path`` by extension (``.jsonl``/``.ndjson``/``.json`` one object per line, or one JSON array;
    ``.csv``, ``.tsv`` (a ``.csv`` whose header has tabs and no comma is read as TSV); ``.parquet``). Bad JSON
    lines become error rows (see the module doc); with ``strict`` they raise :class:`TableReadError`."""
    return list(iter_rows(path, strict=strict))


def iter_rows(path: str | Path, *, strict: bool = False, batch_size: int = 4096) -> Iterator[dict]:
    """The rows of :func:`read_rows`, one at a time (Parquet read ``batch_size`` records at a time)."""
    p = Path(path)
    if not p.is_file():
        raise TableReadError(f"{p} does not exist or is not a file; give the path of a "
                             f"{', '.join(SUFFIXES)} file.")
    suffix = p.suffix.lower()
    if suffix not in SUFFIXES:
        raise TableReadError(f"{p}: unsupported file type {suffix!r}; use one of {', '.join(SUFFIXES)}.")
    if suffix == ".parquet":
        import pyarrow.parquet as pq  # deferred: heavy

        try:
            batches = pq.ParquetFile(p).iter_batches(batch_size=batch_size)
            for batch in batches:
                yield from batch.to_pylist()
        except Exception as e:  # pyarrow raises several types for a damaged file
            raise TableReadError(f"{p} is not a readable Parquet file ({e}).") from None
        return
    try:
        with p.open(encoding="utf-8-sig", newline="") as f:
            rows = _json_rows(f, p) if suffix in JSONL_SUFFIXES else _csv_rows(f, p, suffix)
            for row in rows:
                if strict and is_error(row):
                    raise TableReadError(f"{p}: {row[ERROR]}; fix that line.")
                yield row
    except UnicodeDecodeError as e:
        raise TableReadError(f"{p} is not UTF-8 text (byte {e.start}); re-save it as UTF-8.") from None


def _json_rows(f, p: Path) -> Iterator[dict]:
    head = f.read(1)
    while head and head.isspace():
        head = f.read(1)
    f.seek(0)
    if head == "[" and p.suffix.lower() == ".json":  # a .json file may hold one array of objects
        try:
            data = json.load(f)
        except json.JSONDecodeError:
            f.seek(0)  # not one array: read it as JSON Lines (the first line may be a bad row)
        else:
            for n, obj in enumerate(data, 1):
                yield obj if isinstance(obj, dict) else {ERROR: f"element {n} is not an object", "__line__": n}
            return
    for n, line in enumerate(f, 1):
        if line.strip():
            yield _json_row(line, n)


def _csv_rows(f, p: Path, suffix: str) -> Iterator[dict]:
    first = f.readline()
    f.seek(0)
    dialect = "excel-tab" if suffix == ".tsv" or ("\t" in first and "," not in first) else "excel"
    reader = csv.DictReader(f, dialect=dialect)
    try:
        reader.fieldnames  # noqa: B018 - reads the header: a header that cannot be read refuses the file
    except csv.Error as e:
        raise TableReadError(f"{p} is not a readable {suffix[1:].upper()} file ({e}).") from None
    while True:  # every step consumes at least one line: no endless loop
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:  # a field over the csv module's 128 KiB limit: that line only, never the file
            n = reader.reader.line_num  # DictReader's own count skips the line it failed on
            yield {ERROR: f"line {n} cannot be read ({e})", "__line__": n}
            continue
        yield row


def _json_row(line: str, n: int) -> dict:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        return {ERROR: f"line {n} is not JSON ({e.msg})", "__line__": n}
    if not isinstance(obj, dict):
        kind = {list: "a list", type(None): "null", str: "a string", bool: "a boolean"}.get(type(obj), "a number")
        return {ERROR: f"line {n} is JSON but not an object ({kind})", "__line__": n}
    return obj
