"""cultura imports sqlite-utils without numpy (a command that prints counts needs no numpy), yet a numpy value
gets the column type sqlite-utils gives it when it imports numpy itself: the table of types, looked up after
numpy is imported, equals the one a plain ``import sqlite_utils`` builds."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests import REPO

TYPES = "['int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64', 'float16', 'float32', 'float64']"

THROUGH_CULTURA = f"""
import json, sys
import cultura.db
numpy_at_import = "numpy" in sys.modules
import numpy as np, sqlite_utils
db = sqlite_utils.Database(memory=True)
db["t"].create({{name: getattr(np, name) for name in {TYPES}}})
got = sqlite_utils.db.COLUMN_TYPE_MAPPING.get(np.float32)
print(json.dumps([numpy_at_import, db["t"].schema, got]))
"""

PLAIN = f"""
import json
import numpy as np, sqlite_utils
db = sqlite_utils.Database(memory=True)
db["t"].create({{name: getattr(np, name) for name in {TYPES}}})
print(json.dumps([False, db["t"].schema, sqlite_utils.db.COLUMN_TYPE_MAPPING.get(np.float32)]))
"""


def _run(code: str) -> list:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_numpy_column_types_are_sqlite_utils_own_once_numpy_is_imported():
    ours, plain = _run(THROUGH_CULTURA), _run(PLAIN)
    assert ours[0] is False  # cultura.db imported no numpy
    assert ours == plain and "REAL" in ours[1] and "INTEGER" in ours[1]
