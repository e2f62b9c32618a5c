"""Seed 003 App. D: significance tests over the social suite's per-language scores, across models.

The unit is the language: for each model × dataset × metric × axis there is one score per language. Families
of hypotheses (Holm and Benjamini–Hochberg are applied within each, never across):

- ``model-vs-model``: paired two-sided Wilcoxon signed-rank over the languages both models have (r = Z/√n,
  ties dropped), and the sign test for directional consistency;
- ``resource``: low- vs high-resource languages (Shapiro + Levene screening → t with Cohen's d, else
  Mann–Whitney U with A12 and rank-biserial r);
- ``morphology``: grammatically gendered vs genderless languages, same protocol;
- ``kruskal``: Kruskal–Wallis with ε² across the resource and gender strata (high, low, genderless);
- ``english-baseline`` (design iv): each multilingual model against its English-only counterpart (seed 003
  Table 1: M-CLIP vs CLIP L/14, NLLB-CLIP vs CLIP B/32, CAPIVARA vs OpenCLIP B/32 — the presets'
  ``baseline``, or ``baselines={model: baseline}``) on English prompts, a small paired panel over
  {datasets} × {gender max-skew, race mean max-skew} per axis, paired two-sided Wilcoxon (n ≤ 4 with two
  datasets: the smallest two-sided exact p is 2/2⁴ = 0.125, so the seed's "all p ≥ .125" is all it can say).

The partitions are data (``data/language_partitions.toml``). A family is (design, metric); each test row says
its dataset, axis, comparison, n, test, statistic, p, effect size and the corrected p-values, or ``status =
skipped`` with the reason (too few languages, all ties…).

>>> social_statistics([])
[]
"""
from __future__ import annotations

import itertools
import math
from collections import defaultdict

from ....models.embedders.presets import english_baselines
from .data import language_partitions
from ...stats import (StatsInputError, compare_two_groups, kruskal_wallis, sign_test,
                     wilcoxon_signed_rank)
from ...stats_extra import correct_within_families, r_band

METRICS = ("gender_max_skew", "skl", "race_mean_max_skew")
METRIC_TABLE = {"gender_max_skew": "T2", "skl": "T3", "race_mean_max_skew": "T4"}


def _label(r: dict) -> str:
    return r.get("model_spec") or r.get("model") or "model"


def language_vectors(rows: list[dict], metrics=METRICS) -> dict:
    """``{(model, dataset, metric, axis): {language: value}}`` from social result rows (finite values only)."""
    out: dict = defaultdict(dict)
    for r in rows:
        g = r.get("group") or {}
        if r.get("metric") not in metrics or set(g) != {"dataset", "language", "axis"}:
            continue
        v = r.get("value")
        if v is None or not math.isfinite(v):
            continue
        out[(_label(r), g["dataset"], r["metric"], g["axis"])][g["language"]] = float(v)
    return dict(out)


def _test_row(design, metric, dataset, axis, comparison, fn, *args) -> dict:
    base = {"family": f"{design}:{metric}", "design": design, "metric": metric, "table": METRIC_TABLE.get(metric),
            "dataset": dataset, "axis": axis, "comparison": comparison}
    try:
        res = fn(*args)
    except StatsInputError as e:
        return {**base, "status": "skipped", "reason": str(e), "p": math.nan}
    out = {**base, "status": "ok", "reason": "", "test": res.method, "n": res.n, "statistic": res.statistic,
           "p": res.p, "effect": res.effect_size, "effect_name": res.effect_name}
    if res.effect_name == "r":
        out["effect_band"] = r_band(res.effect_size)
    if "rank_biserial" in res.extra:
        out["rank_biserial"] = res.extra["rank_biserial"]
    if "chosen" in res.extra:
        out["chosen"] = res.extra["chosen"]
    if "direction" in res.extra:  # the paper's r is ≤ 0 (Z of min(W+, W−)); the side is its own column
        a, _, b = comparison.rpartition(": ")[2].partition(" vs ")
        out["direction"] = {"x > y": f"{a} > {b}", "x < y": f"{a} < {b}"}.get(res.extra["direction"], "none") \
            if b else res.extra["direction"]
    return out


PANEL_METRICS = ("gender_max_skew", "race_mean_max_skew")


def english_baseline_tests(rows: list[dict], baselines: dict | None = None, *, language: str = "en") -> list[dict]:
    """Design iv: multilingual model vs its English-only baseline, paired over the panel (dataset × gender /
    race metric) of one axis, on ``language`` prompts (see the module docstring)."""
    pairs = dict(english_baselines())
    pairs.update(baselines or {})
    vals: dict = defaultdict(dict)
    for r in rows:
        g = r.get("group") or {}
        v = r.get("value")
        if (r.get("metric") in PANEL_METRICS and set(g) == {"dataset", "language", "axis"}
                and g["language"] == language and v is not None and math.isfinite(v)):
            vals[(_label(r), g["axis"])][(g["dataset"], r["metric"])] = float(v)
    models = {m for m, _ in vals}
    tests = []
    for model in sorted(models):
        base = pairs.get(model)
        if base is None or base not in models:
            continue
        for axis in sorted({a for m, a in vals if m == model}):
            a, b = vals[(model, axis)], vals.get((base, axis), {})
            cells = sorted(set(a) & set(b))
            t = _test_row("english-baseline", "panel", "+".join(sorted({c[0] for c in cells})) or "-", axis,
                          f"{model} vs {base}", wilcoxon_signed_rank, [a[c] for c in cells], [b[c] for c in cells])
            t.update(family=f"english-baseline:{axis}", table="T1", model=model, baseline=base,
                     panel=[f"{d}:{m}" for d, m in cells], language=language)
            tests.append(t)
    return tests


def social_statistics(rows: list[dict], *, alpha: float = 0.05, partitions: dict | None = None,
                      baselines: dict | None = None) -> list[dict]:
    """All App. D tests over stored social rows (of one or many models); see the module docstring."""
    vecs = language_vectors(rows)
    if not vecs:
        return []
    parts = partitions or language_partitions()
    res_p = parts.get("resource", {})
    gen_p = parts.get("grammatical_gender", {})
    tests: list[dict] = []
    by_cell: dict = defaultdict(dict)
    for (model, ds, metric, axis), langs in vecs.items():
        by_cell[(ds, metric, axis)][model] = langs
    for (ds, metric, axis), models in sorted(by_cell.items()):
        for a, b in itertools.combinations(sorted(models), 2):
            common = sorted(set(models[a]) & set(models[b]))
            x, y = [models[a][lang] for lang in common], [models[b][lang] for lang in common]
            comp = f"{a} vs {b}"
            t = _test_row("model-vs-model", metric, ds, axis, comp, wilcoxon_signed_rank, x, y)
            t["languages"] = common
            tests.append(t)
            s = _test_row("sign", metric, ds, axis, f"{a} > {b}", sign_test, x, y)
            s["languages"] = common
            tests.append(s)
        for model, langs in sorted(models.items()):
            for design, part, (g1, g2) in (("resource", res_p, ("low", "high")),
                                           ("morphology", gen_p, ("gendered", "genderless"))):
                x = [langs[lang] for lang in part.get(g1, []) if lang in langs]
                y = [langs[lang] for lang in part.get(g2, []) if lang in langs]
                t = _test_row(design, metric, ds, axis, f"{model}: {g1} vs {g2}", compare_two_groups, x, y)
                t.update(model=model, n_a=len(x), n_b=len(y))
                tests.append(t)
            groups = [[langs[lang] for lang in part.get(g, []) if lang in langs]
                      for part, g in ((res_p, "high"), (res_p, "low"), (gen_p, "genderless"))]
            t = _test_row("kruskal", metric, ds, axis, f"{model}: high vs low vs genderless", kruskal_wallis,
                          *groups)
            t["model"] = model
            tests.append(t)
    tests += english_baseline_tests(rows, baselines)
    return correct_within_families(tests, alpha=alpha)
