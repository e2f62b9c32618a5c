"""The public API is typed, and a type checker holds a user's code to it: mypy (configured in pyproject.toml)
finds no error in the front door, none in the Python walkthrough of docs/python-api.md, and does find a wrong
argument in a user's script — so the signatures are seen, not Any."""
from __future__ import annotations

import re
import subprocess
import sys

from tests import REPO


def mypy(*args: str, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
                           "--cache-dir", str(REPO / ".cache" / "mypy"), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def test_the_front_door_type_checks():
    r = mypy()
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_python_walkthrough_type_checks(tmp_path):
    doc = (REPO / "docs" / "python-api.md").read_text("utf-8")
    script = tmp_path / "walkthrough.py"
    script.write_text("\n\n".join(re.findall(r"```python\n(.*?)```", doc, flags=re.S)), "utf-8")
    r = mypy(str(script))
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_wrong_call_is_caught(tmp_path):
    script = tmp_path / "wrong.py"
    script.write_text('import cultura\n\np = cultura.open("bench")\np.images.download(workers="8")\n'
                      'p.benchmarks.build("association", sede=1)\nrows: int = p.status()\n', "utf-8")
    r = mypy(str(script))
    assert r.returncode == 1
    assert 'Argument "workers" to "download" of "Images" has incompatible type "str"' in r.stdout
    assert 'Unexpected keyword argument "sede" for "build" of "Benchmarks"' in r.stdout
    assert "Incompatible types in assignment" in r.stdout
