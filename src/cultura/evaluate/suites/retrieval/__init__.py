"""Retrieval suites of seed 000 (3XCM): prevalence (RQ1, image→text), association (RQ2, text→image on
3-candidate trials), descriptor (RQ3, 6-candidate trials), with their report sections (Tables 1–3, 8, 11–19;
Figures 5–10)."""

from __future__ import annotations

from .prevalence import SUITE as _prevalence
from .association import SUITE as _association
from .descriptor import SUITE as _descriptor

#: The folder's suites (report section included), registered by :func:`cultura.evaluate.suites.load_suites`.
SUITES = (_prevalence, _association, _descriptor,)
