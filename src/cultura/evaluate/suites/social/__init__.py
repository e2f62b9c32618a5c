"""The multilingual CLIP social-bias audit (seed 003): suite, statistics (App. D), portrait sets and prompt
inventories (data), LLM translation of inventories, report section, schema and commands."""

from __future__ import annotations

from ....lazy import lazy_attributes

#: The folder's suites (report section included), registered by :func:`cultura.evaluate.suites.load_suites`;
#: imported on first use (opening a project reads this folder's ``schema`` only).
__getattr__ = lazy_attributes(__name__, {"SUITES": ".suite:SUITES"})
