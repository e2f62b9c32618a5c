"""The CLIP latent-space probe (seed 002): suite, data (GlobalRG-style image sets), report section."""

from __future__ import annotations

from .suite import SUITE as _suite

#: The folder's suites (report section included), registered by :func:`cultura.evaluate.suites.load_suites`.
SUITES = (_suite,)
