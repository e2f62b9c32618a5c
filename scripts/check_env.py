"""Set-up check: the virtualenv must hold the CPU build of torch and an importable torchvision."""
import sys
from importlib import metadata

import torch

bad = [d.metadata["Name"] for d in metadata.distributions() if d.metadata["Name"].lower().startswith("nvidia")]
if bad:
    sys.exit(f"CUDA packages found in the virtualenv ({', '.join(sorted(bad)[:5])}…): something pulled the "
             "CUDA build of torch. Remove .venv and rerun 'make setup' (constraints.txt pins torch==2.13.0).")
import torchvision  # noqa: E402,F401  (fails here, not in a test, if the compat hook is missing)

print(f"environment ok: torch {torch.__version__}, torchvision {torchvision.__version__}, "
      f"cuda available: {torch.cuda.is_available()}")
