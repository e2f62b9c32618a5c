"""The multilingual CLIP social-bias audit (seed 003): suite, statistics (App. D), portrait sets and prompt
inventories (data), LLM translation of inventories, report section, schema and commands."""

from __future__ import annotations

from .suite import SUITE as _suite

#: The folder's suites (report section included), registered by :func:`cultura.evaluate.suites.load_suites`.
SUITES = (_suite,)
