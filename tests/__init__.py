"""cultura's tests: ``unit/`` (no server, subprocess virtualenv, Label Studio or Ray: ``make test-fast``),
``integration/`` (the rest: ``make test`` runs both) and ``fakes/``, the stand-ins and fixture worlds both use."""
from pathlib import Path

#: The repository's root (the package is under ``src/cultura``).
REPO = Path(__file__).resolve().parent.parent
