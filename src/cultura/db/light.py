"""sqlite-utils, imported without its optional pandas and numpy.

``sqlite_utils.db`` imports pandas and numpy when they are installed (0.3 s and 0.15 s of CPU, more than the
rest of ``cultura status``) for one thing each: the column types of ``pandas.Timestamp`` values (which cultura
never stores) and of numpy scalars. When they are not imported yet, both are hidden for the duration of that
one import (``sys.modules[name] = None`` makes its ``import`` fail cleanly) and restored at once, so a later
``import numpy`` anywhere works as usual; the numpy column types are then added by :class:`ColumnTypes` the
first time a type is looked up after numpy was imported (before that, no numpy value can exist).
"""
from __future__ import annotations

import sys

HIDDEN = ("pandas", "numpy")


class ColumnTypes(dict):
    """sqlite-utils' ``COLUMN_TYPE_MAPPING`` that adds numpy's scalar types once numpy is imported: the same
    table as sqlite-utils builds when it imports numpy itself."""

    def _add_numpy(self) -> bool:
        np = sys.modules.get("numpy")
        if np is None or np.float64 in self:
            return False
        self.update({t: "INTEGER" for t in (np.int8, np.int16, np.int32, np.int64,
                                             np.uint8, np.uint16, np.uint32, np.uint64)})
        self.update({t: "REAL" for t in (np.float16, np.float32, np.float64)})
        return True

    def __missing__(self, key):
        if self._add_numpy():
            return self[key]
        raise KeyError(key)

    def get(self, key, default=None):
        if key not in self:
            self._add_numpy()
        return super().get(key, default)


if "sqlite_utils" in sys.modules:
    import sqlite_utils
else:
    hidden = [name for name in HIDDEN if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        import sqlite_utils
        import sqlite_utils.db
    finally:
        for name in hidden:
            del sys.modules[name]
    if "numpy" in hidden:
        sqlite_utils.db.COLUMN_TYPE_MAPPING = ColumnTypes(sqlite_utils.db.COLUMN_TYPE_MAPPING)

__all__ = ["sqlite_utils"]
