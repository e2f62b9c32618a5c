"""The ``cultura`` command line: the root group (:mod:`.main`), the output helpers every command shares
(:mod:`.console`), one module per command group, and the demo. The library below never imports this package."""
from .main import cli, main

__all__ = ["cli", "main"]
