"""The one table reader: rows of a JSON Lines, CSV, TSV or Parquet file, as dicts.

Every input file a user hands cultura (URL lists, caption sets, rating tables, entity and context lists, KB
files, portrait label tables, gold answers) goes through :func:`read_rows`, so every command accepts the same
formats and reports a bad file the same way:

- a file that does not exist, is not UTF-8, or has an unknown extension is a :class:`TableReadError` naming
  the file (one sentence, no traceback);
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
import io
import json
from pathlib import Path

import pyarrow.parquet as pq

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
    """Rows of ``path`` by extension (``.jsonl``/``.ndjson``/``.json`` one object per line; ``.csv``, ``.tsv``
    (a ``.csv`` whose header has tabs is read as TSV); ``.parquet``). Bad JSON lines become error rows
    (see the module doc); with ``strict`` they raise :class:`TableReadError`."""
    p = Path(path)
    if not p.is_file():
        raise TableReadError(f"{p} does not exist or is not a file; give the path of a "
                             f"{', '.join(SUFFIXES)} file.")
    suffix = p.suffix.lower()
    if suffix not in SUFFIXES:
        raise TableReadError(f"{p}: unsupported file type {suffix!r}; use one of {', '.join(SUFFIXES)}.")
    if suffix == ".parquet":
        try:
            return pq.read_table(p).to_pylist()
        except Exception as e:  # pyarrow raises several types for a damaged file
            raise TableReadError(f"{p} is not a readable Parquet file ({e}).") from None
    try:
        text = p.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise TableReadError(f"{p} is not UTF-8 text (byte {e.start}); re-save it as UTF-8.") from None
    if suffix in JSONL_SUFFIXES:
        rows = [_json_row(line, n) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    else:
        first = text.split("\n", 1)[0]
        dialect = "excel-tab" if suffix == ".tsv" or ("\t" in first and "," not in first) else "excel"
        try:
            rows = list(csv.DictReader(io.StringIO(text), dialect=dialect))
        except csv.Error as e:
            raise TableReadError(f"{p} is not a readable {suffix[1:].upper()} file ({e}).") from None
    if strict:
        bad = next((r for r in rows if is_error(r)), None)
        if bad is not None:
            raise TableReadError(f"{p}: {bad[ERROR]}; fix that line.")
    return rows


def _json_row(line: str, n: int) -> dict:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        return {ERROR: f"line {n} is not JSON ({e.msg})", "__line__": n}
    if not isinstance(obj, dict):
        kind = {list: "a list", type(None): "null", str: "a string", bool: "a boolean"}.get(type(obj), "a number")
        return {ERROR: f"line {n} is JSON but not an object ({kind})", "__line__": n}
    return obj
