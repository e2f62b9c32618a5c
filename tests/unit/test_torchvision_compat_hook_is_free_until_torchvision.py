"""The torchvision compat hook (scripts/torchvision_compat.py) runs at every interpreter start of the venv it is
installed in: it imports nothing and defines nothing until ``torchvision`` itself is imported."""
from __future__ import annotations

import importlib.util
import subprocess
import sys

from tests import REPO


def _hook_source() -> str:
    spec = importlib.util.spec_from_file_location("torchvision_compat", REPO / "scripts" / "torchvision_compat.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.HOOK_SOURCE


def test_hook_imports_nothing_at_start_and_waits_for_torchvision():
    probe = (
        "import sys\n"
        "before = set(sys.modules)\n"
        f"exec(compile({_hook_source()!r}, '_cultura_torchvision_compat', 'exec'))\n"
        "print(sorted(set(sys.modules) - before))\n"
        "print(sum(getattr(f, '__name__', '') == '_Finder' for f in sys.meta_path))\n"
        "called = []\n"
        "_define_missing_schemas = lambda: called.append(1)\n"  # what torchvision's import would trigger
        "import json\n"
        "_Finder.find_spec('json')\n"
        "print(len(called))\n"
        "_Finder.find_spec('torchvision')\n"
        "print(len(called), sum(getattr(f, '__name__', '') == '_Finder' for f in sys.meta_path))\n"
    )
    out = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:4] == ["[]", "1", "0", "1 0"]
