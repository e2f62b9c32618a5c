"""Tables as a notebook wants them: a pandas DataFrame when pandas is installed, else the rows as they are."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pandas import DataFrame

#: A table's rows as the library returns them.
Rows = list[dict[str, Any]]


def frame(rows: Rows, frame: bool | None = None, columns: list[str] | None = None) -> DataFrame:
    """``rows`` as a DataFrame (``frame`` None: when pandas is installed; True: always; False: never, the rows
    themselves). ``columns``: the columns of an empty table."""
    if frame is False:
        return rows  # type: ignore[return-value]
    try:
        import pandas  # deferred: optional (not a core dependency); without it a table is its list of rows
    except ImportError:
        if frame:
            raise
        return rows  # type: ignore[return-value]
    return pandas.DataFrame(rows, columns=columns if not rows else None)
