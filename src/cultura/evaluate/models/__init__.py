"""Moved to :mod:`cultura.models` (every model cultura calls lives there); this path keeps working."""
from ...models import *  # noqa: F401,F403
from ...models import __all__  # noqa: F401
