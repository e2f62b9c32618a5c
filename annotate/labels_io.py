"""The raw labels in and out: ``export-labels`` writes the (task, worker, label, time) table every aggregation
tool reads, in crowd-kit's column names, as CSV or Parquet; ``import-labels`` reads a Label Studio JSON export
made elsewhere.

Columns written: ``task`` (the item's stable key), ``worker`` (annotator name), ``label`` (for 1–5 ratings the
rating as text), ``value`` (the rating as a number, empty for labels), ``time`` (Label Studio lead time,
seconds), ``gold`` (the item's known answer, else empty), ``campaign``. Load it with
``pd.read_csv(path, dtype={"label": str, "gold": str})`` and give ``df[["task", "worker", "label"]]`` to any
crowd-kit model.
"""
from __future__ import annotations

import csv
import os
from pathlib import Path

from cultura.errors import CulturaError

from .aggregate import labels_table
from .report import campaigns

COLUMNS = ["task", "worker", "label", "value", "time", "gold", "campaign"]


def export_labels(project, out: str | Path, *, campaign: str | None = None) -> dict:
    """Write the raw labels of ``campaign`` (default: all) to ``out`` (``.csv`` or ``.parquet``), through a
    temporary file renamed at the end."""
    out = Path(out)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in ("csv", "parquet"):
        raise CulturaError(f"Cannot write {out.name!r}: give a file ending in .csv or .parquet.", param="out")
    rows = [r for c in campaigns(project.db, campaign) for r in labels_table(project.db, c)]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    if fmt == "csv":
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            w.writerows({k: r.get(k) for k in COLUMNS} for r in rows)
    else:
        import pandas as pd  # deferred: heavy optional dependency (Parquet through pyarrow)
        pd.DataFrame(rows, columns=COLUMNS).to_parquet(tmp, index=False)
    os.replace(tmp, out)
    return {"path": str(out), "format": fmt, "rows": len(rows), "tasks": len({r["task"] for r in rows}),
            "workers": len({r["worker"] for r in rows})}
