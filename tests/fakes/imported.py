"""``cultura`` run in a child process that says, last on stderr, which heavy libraries it imported: how a test or
a benchmark checks that a command loads only what it needs."""
from __future__ import annotations

#: The model and statistics libraries a light command (a cached evaluation, say) leaves unimported.
HEAVY = ("torch", "transformers", "open_clip", "scipy", "sklearn", "pandas", "statsmodels", "umap")


def cli_script(heavy=HEAVY) -> str:
    """A ``python -c`` script: ``cultura`` with the arguments given, then a last stderr line ``HEAVY=a,b`` naming
    the libraries of ``heavy`` it imported (also when the command failed)."""
    return f"""
import sys
from cultura.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    if e.code:
        raise
finally:
    print("HEAVY=" + ",".join(m for m in {tuple(heavy)!r} if m in sys.modules), file=sys.stderr)
"""


def heavy_imported(stderr: str) -> list[str] | None:
    """The libraries named by :func:`cli_script`'s last line; None when the line is missing."""
    lines = [ln[len("HEAVY="):] for ln in stderr.splitlines() if ln.startswith("HEAVY=")]
    return [m for m in lines[-1].split(",") if m] if lines else None
