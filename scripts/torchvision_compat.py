"""Set-up helper: make PyPI's torchvision importable next to the CPU build of torch.

PyPI's torchvision wheel is built against CUDA torch; with the CPU wheel of torch its C++ extension does not
load, and ``import torchvision`` then fails in ``_meta_registrations`` with
"operator torchvision::nms does not exist" (it registers fake kernels for ``nms`` and ``qnms``, the two ops
it does not guard). open_clip, transformers and sentence-transformers all import torchvision.

This script checks for that failure and, only then, installs a tiny hook into the virtualenv's
site-packages (a ``.pth`` file and a module) that defines the two missing op schemas just before torchvision
is imported. The hack lives in the environment, never in the cultura package. Run it with the venv's python:

    .venv/bin/python scripts/torchvision_compat.py          # check, install if needed
    .venv/bin/python scripts/torchvision_compat.py --check  # exit 1 if torchvision does not import
"""
from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

HOOK_MODULE = "_cultura_torchvision_compat"

HOOK_SOURCE = '''"""Installed by cultura's set-up (scripts/torchvision_compat.py); see that file for why.

The .pth file imports this module at every interpreter start, so it costs nothing until torchvision is
imported: a plain finder on sys.meta_path (no importlib.abc, whose import alone takes tens of milliseconds)
that answers one name and otherwise returns at once.
"""
import sys


def _define_missing_schemas():
    import torch

    lib = torch.library.Library("torchvision", "FRAGMENT")
    for schema in ("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
                   "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"):
        name = schema.split("(")[0]
        try:
            getattr(torch.ops.torchvision, name)
        except (AttributeError, RuntimeError):
            lib.define(schema)
    sys.modules[__name__]._lib = lib  # keep the library alive


class _Finder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "torchvision":
            sys.meta_path[:] = [f for f in sys.meta_path if f is not _Finder]
            _define_missing_schemas()
        return None


if not any(getattr(f, "__name__", "") == "_Finder" for f in sys.meta_path):
    sys.meta_path.insert(0, _Finder)
'''


def torchvision_imports() -> tuple[bool, str]:
    r = subprocess.run([sys.executable, "-c", "import torchvision, torchvision.ops; print(torchvision.__version__)"],
                       capture_output=True, text=True)
    return r.returncode == 0, (r.stdout + r.stderr).strip().splitlines()[-1] if (r.stdout + r.stderr).strip() else ""


def install() -> Path:
    site = Path(sysconfig.get_paths()["purelib"])
    (site / f"{HOOK_MODULE}.py").write_text(HOOK_SOURCE, encoding="utf-8")
    pth = site / "zz_cultura_torchvision_compat.pth"
    pth.write_text(f"import {HOOK_MODULE}\n", encoding="utf-8")
    return pth


def installed_hook() -> Path | None:
    """The hook module where an earlier run installed it (it is then refreshed to this script's version)."""
    path = Path(sysconfig.get_paths()["purelib"]) / f"{HOOK_MODULE}.py"
    return path if path.exists() else None


def main(argv: list[str]) -> int:
    hook = installed_hook()
    if hook is not None and "--check" not in argv and hook.read_text(encoding="utf-8") != HOOK_SOURCE:
        install()  # an older hook (one that imported importlib.abc at every start) replaced by this one
        print(f"compat hook refreshed ({hook})")
    ok, msg = torchvision_imports()
    if ok:
        print(f"torchvision imports ({msg}); no compat hook needed")
        return 0
    if "--check" in argv:
        print(f"torchvision does not import: {msg}", file=sys.stderr)
        return 1
    if "torchvision::nms does not exist" not in msg and "torchvision::qnms" not in msg:
        print(f"torchvision fails to import for another reason, not patched: {msg}", file=sys.stderr)
        return 1
    pth = install()
    ok, msg = torchvision_imports()
    if not ok:
        print(f"compat hook installed at {pth} but torchvision still fails: {msg}", file=sys.stderr)
        return 1
    print(f"torchvision {msg}: C++ ops unavailable with CPU torch; compat hook installed ({pth})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
