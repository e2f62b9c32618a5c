"""Translation validation summaries (seed 003 App. E, Tables 12–13) from the ``translation`` campaign.

Bilingual raters score every prompt translation 1–5 (1 inaccurate … 5 perfect; ``templates/guidelines/
translation.md``). Per language this gives the share of prompts in each rating band (Table 12: 1, 2, 3, 4–5;
the seed prints 2, 3 and 4–5 only — the rest of a row is the band 1), the mean, the **population** standard
deviation (σ, ``ddof = 0``) and the share scoring ≥ 4 (Table 13), and over every language the pooled share ≥ 4
(the seed's 88.5 %).

The unit is the prompt: its rating is the campaign's decision (``decisions``, kind ``translation``, the median
of its raters); ``unit="rating"`` counts every rater's current annotation instead. A prompt's language is the
``language`` of its ``annotation_items`` row. The seed's own numbers (``data/language_partitions.toml``
``[translation_validation]``) come beside each language for comparison.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np

from ....annotate.decisions import ratings_by_language
from ....errors import CulturaError
from .data import _seed_validation

if TYPE_CHECKING:
    from ....project import Project

#: (band, lower bound, upper bound): a decided median between two levels (3.5) falls in the lower band, so the
#: 4–5 band is exactly the share ≥ 4.
BANDS = (("1", 1.0, 2.0), ("2", 2.0, 3.0), ("3", 3.0, 4.0), ("4–5", 4.0, 5.01))


def _ratings(project: Project, unit: str) -> dict[str, list[float]]:
    if unit not in ("item", "rating"):
        raise CulturaError(f"Unknown unit {unit!r}. Valid: item (the prompt's decided rating), rating (every "
                           "rater's score).")
    out: dict[str, list[float]] = defaultdict(list)
    for lang, value in ratings_by_language(project.db, "translation", unit):
        out[lang or "?"].append(value)
    return dict(out)


def summarize_ratings(values) -> dict:
    """Bands, mean, population SD and share ≥ 4 of 1–5 ratings (percentages 0–100)."""
    x = np.asarray(list(values), dtype=float)
    if x.size == 0:
        return {"n": 0, **{f"pct_{b}": math.nan for b, _, _ in BANDS}, "mean": math.nan, "sd": math.nan,
                "pct_ge4": math.nan}
    bad = x[(x < 1) | (x > 5)]
    if bad.size:
        raise CulturaError(f"Translation ratings must lie in 1–5; got {bad[0]:g}.")
    out = {"n": int(x.size)}
    for name, lo, hi in BANDS:
        out[f"pct_{name}"] = float(100 * np.mean((x >= lo) & (x < hi)))
    out.update(mean=float(x.mean()), sd=float(x.std(ddof=0)), pct_ge4=float(100 * np.mean(x >= 4)))
    return out


def translation_validation(project: Project, *, unit: str = "item", languages=None) -> list[dict]:
    """One row per language (sorted), then ``language = "all"`` pooled over languages; each with ``n``,
    ``pct_1``, ``pct_2``, ``pct_3``, ``pct_4–5``, ``mean``, ``sd`` (population), ``pct_ge4`` and the seed's
    ``seed_mean`` / ``seed_sd`` / ``seed_pct_ge4`` where seed 003 rated that language."""
    ratings = _ratings(project, unit)
    if languages:
        ratings = {k: v for k, v in ratings.items() if k in set(languages)}
    rows = []
    for lang in sorted(ratings):
        seed = _seed_validation(lang)
        rows.append({"language": lang, "unit": unit, **summarize_ratings(ratings[lang]),
                     "seed_n": seed.get("n_prompts"), "seed_mean": seed.get("mean"), "seed_sd": seed.get("sd"),
                     "seed_pct_ge4": seed.get("pct_ge4")})
    if len(rows) > 1:
        pooled = [v for lang in sorted(ratings) for v in ratings[lang]]
        rows.append({"language": "all", "unit": unit, **summarize_ratings(pooled), "seed_n": None,
                     "seed_mean": None, "seed_sd": None, "seed_pct_ge4": 88.5})
    return rows
