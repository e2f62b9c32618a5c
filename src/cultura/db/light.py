"""sqlite-utils, imported without its optional pandas.

``sqlite_utils.db`` imports pandas when it is installed (0.3 s of CPU, more than the rest of ``cultura --help``)
for one thing cultura never does: storing ``pandas.Timestamp`` values as TEXT. When neither is imported yet,
pandas is hidden for the duration of that one import (``sys.modules["pandas"] = None`` makes its ``import
pandas`` fail cleanly) and restored at once, so a later ``import pandas`` anywhere works as usual.
"""
from __future__ import annotations

import sys

if "sqlite_utils" in sys.modules or "pandas" in sys.modules:
    import sqlite_utils
else:
    sys.modules["pandas"] = None  # type: ignore[assignment]
    try:
        import sqlite_utils
    finally:
        del sys.modules["pandas"]

__all__ = ["sqlite_utils"]
