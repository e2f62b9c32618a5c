"""``python -m cultura`` is the ``cultura`` command."""
from cultura.cli import main

main()
