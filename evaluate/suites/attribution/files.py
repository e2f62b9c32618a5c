"""The streaming record reader for knowledge-base dumps (JSONL / JSON array, CSV / TSV, Parquet in batches):
a BabelNet / Wikipedia extract can hold millions of entities with page texts, more than
:func:`cultura.db.readers.read_rows` (which returns the whole file as a list, and is used for every other
input of this area) should hold in memory.

>>> # doctest: +SKIP
>>> for rec in iter_records("kb.parquet"): ...
"""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Iterator

from ....errors import CulturaError

FORMATS = (".jsonl", ".ndjson", ".json", ".csv", ".tsv", ".parquet")


def iter_records(path: str | Path, *, batch_size: int = 4096) -> Iterator[dict]:
    """Yield one dict per record of ``path`` (format by extension; see :data:`FORMATS`)."""
    p = Path(path)
    if not p.is_file():
        raise CulturaError(f"{p} does not exist (or is not a file).")
    ext = p.suffix.lower()
    if ext in (".jsonl", ".ndjson", ".json"):
        with p.open(encoding="utf-8") as f:
            head = f.read(1)
            while head and head.isspace():
                head = f.read(1)
            if head == "[":
                f.seek(0)
                try:
                    data = json.load(f)
                except json.JSONDecodeError as e:
                    raise CulturaError(f"{p} is not valid JSON ({e.msg} at line {e.lineno}).") from None
                for rec in data:
                    if not isinstance(rec, dict):
                        raise CulturaError(f"{p}: every element of the JSON array must be an object.")
                    yield rec
                return
            f.seek(0)
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError as e:
                        raise CulturaError(f"{p}:{n} is not valid JSON ({e.msg}); fix that line.") from None
                    if not isinstance(rec, dict):
                        raise CulturaError(f"{p}:{n} must be a JSON object.")
                    yield rec
        return
    if ext in (".csv", ".tsv"):
        with p.open(newline="", encoding="utf-8") as f:
            yield from csv.DictReader(f, delimiter="\t" if ext == ".tsv" else ",")
        return
    if ext == ".parquet":
        import pyarrow.parquet as pq  # heavy optional dependency, deferred

        try:
            pf = pq.ParquetFile(p)
        except Exception as e:  # pyarrow raises ArrowInvalid and friends
            raise CulturaError(f"{p} is not a readable Parquet file ({e}).") from None
        for batch in pf.iter_batches(batch_size=batch_size):
            yield from batch.to_pylist()
        return
    raise CulturaError(f"{p}: unknown format {p.suffix!r}; use one of {', '.join(FORMATS)}.")


def as_list(value) -> list:
    """A list from a JSON list, a list/array, or a ';'-separated string (None/"" → [])."""
    if value is None:
        return []
    if isinstance(value, str):
        v = value.strip()
        if not v:
            return []
        if v.startswith("["):
            try:
                return list(json.loads(v))
            except json.JSONDecodeError as e:
                raise CulturaError(f"Cannot read the list {v[:60]!r} ({e.msg}).") from None
        return [x.strip() for x in v.split(";") if x.strip()]
    if isinstance(value, dict):
        raise CulturaError(f"Expected a list, got an object {str(value)[:60]!r}.")
    try:
        return list(value)
    except TypeError:
        return [value]
