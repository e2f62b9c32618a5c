"""Suite ``association``: text→image association bias on three-candidate trials (seed 000 §3.2.2, RQ2).

Per trial the query (a concept in the query country's language) is compared with three images: ``cr`` (the
concept, another culture), ``lb`` (the query language's culture, another concept), ``ti`` (neither). Reported:

- ``M_cr``, ``M_lb``, ``M_ti`` (win rates, ties split) and ``SP = M_lb / M_cr`` with bootstrap CIs over trials
  (seed 000 Table 2); SP is ``inf`` with its reason when ``M_cr = 0``;
- the random baseline (uniformly random candidates, 10 rounds; SP ≈ 1, App. R);
- the same per query country (Table 12, Figure 5);
- per-country text silhouette (query embeddings labelled by query language; each country takes its
  language's value, as in Table 12) and image silhouette (images labelled by culture), and the Pearson
  correlation of each with per-country SP (App. N, Tables 11–12);
- the verbose query variants ``task`` and ``casual`` when the benchmark has them (App. S.1);
- 2-D projections (UMAP, PCA for few points) of the text and image embeddings for the report (Figure 6).

Options: ``variants`` (default: every variant present), ``n_resamples``, ``seed``, ``projection``
(auto|umap|pca|none), ``max_points``.
"""
from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import numpy as np

from ...metrics._numpy_stats import pearson
from ...metrics.association import random_baseline, self_preference, silhouette_by_label, win_rates, win_rates_ci
from ..registry import Suite, degenerate, log_samples, logging_samples, row, sample_limit
from .options import OPTIONS
from .report import render_association
from ...common import (SP_INF_REASON, bootstrap_ratio_ci, embed_images, embed_texts, embed_texts_by_language,
                       per_trial_wins, project_2d, sample_points)
from ...data import ASSOCIATION_ROLES, load_trials, query_variants, resolve_benchmark
from ....curate.images import image_files
from ....models.embedders.multivector import (image_tokens_cached, is_late_interaction, pairwise_maxsim,
                                              text_tokens_cached)

if TYPE_CHECKING:
    from ....project import Project


NAME = "association"


def variant_trials(project: Project, embedder, bench, opts: dict, roles, *, main: str):
    """For each query variant of the benchmark (``opts["variants"]`` or all it has; ``main`` when none):
    ``(variant, trials, similarities, group, details)`` — the prelude every trial suite shares. ``group`` is
    empty for the ``main`` variant and ``{"variant": v}`` otherwise."""
    variants = list(opts.get("variants") or query_variants(project, bench, descriptor=bench.kind == "descriptor")
                    or [main])
    for variant in variants:
        trials = head(load_trials(project, bench, roles, variant=variant), sample_limit())
        sims = trial_similarities(project, embedder, trials)
        if logging_samples():
            log_samples("trial", trial_samples(trials, sims, variant))
        group = {} if variant == main else {"variant": variant}
        details = {"variant": variant, "excluded": trials.excluded, "provenance": bench.provenance()}
        yield variant, trials, sims, group, details


def head(trials, limit: int | None):
    """The first ``limit`` trials (``evaluate run --limit``: a smoke run); all when ``limit`` is None."""
    if limit is None or len(trials) <= limit:
        return trials
    cut = {f.name: getattr(trials, f.name)[:limit] for f in dataclasses.fields(trials)
           if f.name not in ("roles", "excluded")}
    return dataclasses.replace(trials, **cut, excluded={**trials.excluded, "limit": len(trials) - limit})


def trial_samples(trials, sims: np.ndarray, variant: str):
    """Per-sample log of trials (a generator): the item's ``item_key`` (the export's, to join the published
    dataset), the query, each candidate's role, position, image, culture and score, the ``target`` (the
    correct candidate, ``cr``, and its position) and the winner (the role with the highest score; every tied
    role in ``winners``, as win rates split ties)."""
    for i in range(len(trials)):
        s = sims[i]
        best = np.flatnonzero(s == s.max()).tolist()
        yield {
            "variant": variant, "item_id": int(trials.item_ids[i]), "item_key": str(trials.item_keys[i]),
            "concept": str(trials.concepts[i]),
            "query_country": str(trials.query_country[i]), "query_language": str(trials.query_language[i]),
            "descriptor_country": (None if trials.descriptor_country[i] is None
                                   else str(trials.descriptor_country[i])),
            "query": trials.texts[i],
            "candidates": [{"role": r, "position": int(trials.positions[i, j]), "sha256": str(trials.sha256[i, j]),
                            "country": str(trials.countries[i, j]), "score": float(s[j])}
                           for j, r in enumerate(trials.roles)],
            "target": ({"role": "cr", "position": int(trials.positions[i, trials.roles.index("cr")])}
                       if "cr" in trials.roles else None),
            "winner": trials.roles[best[0]] if len(best) == 1 else None,
            "winners": [trials.roles[j] for j in best]}


def trial_similarities(project: Project, embedder, trials) -> np.ndarray:
    """(trials × roles) cosine similarities of each trial's query with each of its candidate images."""
    if len(trials) == 0:
        return np.zeros((0, len(trials.roles)))
    return query_image_scores(project, embedder, trials.texts, trials.sha256, languages=trials.query_language)


def query_image_scores(project: Project, embedder, texts, sha256: np.ndarray, *, languages=None) -> np.ndarray:
    """(n × r) score of ``texts[i]`` with each image ``sha256[i, j]``: cosine similarity, or MaxSim for a
    late-interaction (multi-vector) embedder such as ColQwen (token matrices through the cache). ``languages``
    (the query language of each text) reaches a language-aware text encoder (NLLB-CLIP encodes per language)."""
    n, r = sha256.shape
    if is_late_interaction(embedder):
        q = text_tokens_cached(project, embedder, texts)
        flat = image_tokens_cached(project, embedder, sha256.ravel().tolist(), files=image_files(project.db))
        return pairwise_maxsim([q[i] for i in range(n) for _ in range(r)], flat).reshape(n, r)
    q = embed_texts(project, embedder, texts) if languages is None else \
        embed_texts_by_language(project, embedder, texts, languages)
    flat = embed_images(project, embedder, sha256.ravel().tolist())
    return np.einsum("td,trd->tr", q, flat.reshape(n, r, -1)).astype(float)


def win_rate_rows(suite: str, sims: np.ndarray, roles, *, group: dict, details: dict, n_resamples: int,
                  seed: int, sp_pair: tuple[str, str] | None = ("lb", "cr"),
                  empty_reason: str = "no trials") -> list[dict]:
    """Rows ``M_<role>`` (and SP) for one set of trials, with percentile bootstrap CIs over trials; without
    trials, NaN rows with ``empty_reason``."""
    n = sims.shape[0]
    if n == 0:
        return [row(suite, f"M_{r}", math.nan, n=0, group=group, details={**details, "reason": empty_reason})
                for r in roles]
    m = win_rates(sims)
    if n >= 2:
        ci = win_rates_ci(sims, n_boot=n_resamples, seed=seed)
        lo, hi = ci.low, ci.high
    else:
        lo = hi = [math.nan] * len(roles)
    one = {"reason": "one trial: a win rate of 0 or 1 with no confidence interval (a bootstrap needs at least "
                     "2 trials)"} if n < 2 else {}
    out = [degenerate([row(suite, f"M_{r}", m[i], ci_low=lo[i], ci_high=hi[i], n=n, group=group,
                           details={**details, **one})], one.get("reason"))[0]
           for i, r in enumerate(roles)]
    if sp_pair:
        b, c = roles.index(sp_pair[0]), roles.index(sp_pair[1])
        sp = self_preference(sims, correct=c, biased=b)
        slo, shi = bootstrap_ratio_ci(per_trial_wins(sims), b, c, n_resamples=n_resamples, seed=seed)
        d = dict(details)
        if math.isinf(sp):
            d["reason"] = SP_INF_REASON
        elif not (math.isfinite(slo) and math.isfinite(shi)):
            d["reason"] = (f"SP is a number, but in some of the {n_resamples} bootstrap resamples of these {n} trials "
                           "the correct image never won (M_cr = 0), so its interval is unbounded")
        out.append(row(suite, "SP", sp, ci_low=slo, ci_high=shi, n=n, group=group, details=d))
    return out


def random_baseline_rows(suite: str, n_trials: int, roles, *, seed: int, group: dict | None = None,
                         sp_pair=("lb", "cr")) -> list[dict]:
    """Rows ``random_M_<role>`` and ``random_SP``: candidates picked uniformly at random, 10 rounds
    (seed 000 App. R; SP must come out ≈ 1). ``random_SP`` is computed on columns ``sp_pair``."""
    if n_trials == 0:
        return []
    b, c = roles.index(sp_pair[0]), roles.index(sp_pair[1])
    # random_baseline measures SP on columns 1 (biased) / 0 (correct); order the roles so they line up
    order = [c, b] + [i for i in range(len(roles)) if i not in (b, c)]
    rb = random_baseline(n_trials, len(roles), seed=seed, rounds=10)
    rates = np.empty(len(roles))
    rates[order] = np.asarray(rb["win_rates"], dtype=float)
    det = {"rounds": rb["rounds"], "seed": seed}
    out = [row(suite, f"random_M_{r}", rates[i], n=n_trials, group=group, details=det)
           for i, r in enumerate(roles)]
    sp_det = {**det, "interval": "min–max over rounds", "sp_rounds": rb["sp_rounds"]}
    unbounded = sum(1 for x in rb["sp_rounds"] if not math.isfinite(x))
    why = None
    if unbounded:
        why = (f"in {unbounded} of {rb['rounds']} random rounds of {n_trials} trials the correct candidate never "
               "won by chance (M_cr = 0), so the random SP is unbounded; with so few trials the baseline says "
               "nothing: compare M_cr and M_lb instead")
        sp_det["reason"] = why
    out.append(row(suite, "random_SP", rb["self_preference"], ci_low=rb["sp_min"], ci_high=rb["sp_max"],
                   n=n_trials, group=group, details=sp_det))
    degenerate(out[-1:], why)
    return out


def silhouette_rows(project: Project, embedder, trials, sp_by_country: dict[str, float], *, suite: str = NAME,
                    details: dict) -> list[dict]:
    """Per-country text and image silhouettes and their Pearson correlation with per-country SP (App. N).

    Text points are the distinct query texts labelled by their **language** (the paper's text silhouette is a
    language's: countries sharing a language — US/GB/AU, ES/AR, PT/BR — show identical TS values in Table 12);
    each country gets its language's value (``details.language``), so none drops out of the correlation with SP.
    Image points are the distinct images labelled by their culture (country)."""
    out: list[dict] = []
    seen: dict[str, str] = {}
    country_lang: dict[str, str] = {}
    for text, lang, cc in zip(trials.texts, trials.query_language, trials.query_country):
        seen.setdefault(text, lang)
        country_lang.setdefault(cc, lang)
    texts, labels = list(seen), list(seen.values())
    imgs: dict[str, str] = {}
    for shas, ccs in zip(trials.sha256, trials.countries):
        for s, c in zip(shas, ccs):
            imgs.setdefault(s, c)
    per = {}
    def text_fn(project: Project, embedder, keys):  # each query text in its own language
        return embed_texts_by_language(project, embedder, keys, [seen[k] for k in keys])

    for kind, keys, labs, emb_fn in (("text", texts, labels, text_fn), ("image", list(imgs), list(imgs.values()),
                                                                     embed_images)):
        what = "languages" if kind == "text" else "countries"
        if len(set(labs)) < 2 or len(keys) <= len(set(labs)):
            out.append(row(suite, f"{kind}_silhouette", math.nan, n=len(keys), details={
                **details, "reason": f"needs at least two {what} and more points than {what}"}))
            continue
        emb = emb_fn(project, embedder, keys)
        sil = silhouette_by_label(emb, labs)
        counts = {lab: labs.count(lab) for lab in set(labs)}
        if kind == "text":
            # one value per country: its language's (n = distinct texts of that language)
            per[kind] = {cc: sil[lang] for cc, lang in country_lang.items() if lang in sil}
            for cc, lang in sorted(country_lang.items()):
                if lang in sil:
                    out.append(row(suite, "text_silhouette", sil[lang], n=counts.get(lang), group={"country": cc},
                                   details={**details, "language": lang, "label": "language"}))
        else:
            per[kind] = sil
            for lab, val in sorted(sil.items()):
                out.append(row(suite, "image_silhouette", val, n=counts.get(lab), group={"country": lab},
                               details={**details, "label": "country"}))
        # a label with one point has silhouette 0 by convention (sklearn), not by measurement
        for r in out[-len(sil):] if kind == "image" else [x for x in out if x["metric"] == "text_silhouette"]:
            lab = r["group"]["country"] if kind == "image" else r["details"]["language"]
            if counts.get(lab) == 1:
                what_one = "image" if kind == "image" else f"query text in {lab}"
                why = (f"{r['group']['country']} has one {what_one}: the silhouette of a one-member cluster is 0 "
                       "by definition, not a measurement")
                r["details"]["reason"] = why
                degenerate([r], why)
    for kind, sil in per.items():
        common = [c for c in sorted(sil) if c in sp_by_country and math.isfinite(sp_by_country[c])
                  and math.isfinite(sil[c])]
        d = {**details, "countries": common}
        if len(common) < 3:
            out.append(row(suite, f"pearson_{kind}_silhouette_SP", math.nan, n=len(common),
                           details={**d, "reason": "needs at least 3 countries with a finite SP and silhouette"}))
            continue
        x, y = [sil[c] for c in common], [sp_by_country[c] for c in common]
        if np.std(x) == 0 or np.std(y) == 0:
            out.append(row(suite, f"pearson_{kind}_silhouette_SP", math.nan, n=len(common),
                           details={**d, "reason": "constant silhouette or SP across countries"}))
            continue
        r, p, lo, hi = pearson(x, y, level=0.95)  # scipy.stats.pearsonr's numbers, without importing scipy
        if math.isnan(lo):  # pearson's own rule: the Fisher-z interval is undefined below 4 points
            lo = hi = None
        out.append(row(suite, f"pearson_{kind}_silhouette_SP", r, ci_low=lo, ci_high=hi,
                       n=len(common), details={**d, "p": p, "ci": "Fisher z, 95%"}))
    return out


def projection_rows(project: Project, embedder, trials, *, suite: str, method: str, max_points: int, seed: int,
                    details: dict) -> list[dict]:
    """2-D projections of the query texts (coloured by language) and images (by culture) for the report."""
    if method == "none":
        return []
    out = []
    seen: dict[str, tuple[str, set]] = {}
    for text, lang, cc in zip(trials.texts, trials.query_language, trials.query_country):
        seen.setdefault(text, (lang, set()))[1].add(cc)  # one text asked in several countries names them all
    imgs: dict[str, str] = {}
    for shas, ccs in zip(trials.sha256, trials.countries):
        for s, c in zip(shas, ccs):
            imgs.setdefault(s, c)
    def text_fn(project: Project, embedder, keys):  # each query text in its own language
        return embed_texts_by_language(project, embedder, keys, [seen[k][0] for k in keys])

    for kind, keys, labels, fn in (("text", list(seen), [f"{lang} ({', '.join(sorted(ccs))})" for lang, ccs in seen.values()],
                                    text_fn),
                                   ("image", list(imgs), list(imgs.values()), embed_images)):
        idx = sample_points(len(keys), max_points, seed)
        if len(idx) == 0:
            continue
        emb = fn(project, embedder, [keys[i] for i in idx])
        xy, used = project_2d(emb, seed=seed, method=method)
        pts = [[round(float(a), 4), round(float(b), 4), labels[i]] for (a, b), i in zip(xy, idx)]
        out.append(row(suite, f"projection_{kind}", len(pts), n=len(keys),
                       details={**details, "method": used, "points": pts,
                                "label": "language (country)" if kind == "text" else "country"}))
    return out


def association(project: Project, embedder, *, benchmark=None, options: dict) -> list[dict]:
    """Run the association suite (see the module docstring for the options)."""
    opts = dict(options or {})
    seed, n_res = int(opts.get("seed", 0)), int(opts.get("n_resamples", 1000))
    roles = ASSOCIATION_ROLES
    out: list[dict] = []
    bench = resolve_benchmark(project, benchmark, "association")
    for variant, trials, sims, vg, det in variant_trials(project, embedder, bench, opts, roles, main="short"):
        out += win_rate_rows(NAME, sims, roles, group=vg, details=det, n_resamples=n_res, seed=seed)
        if variant != "short":
            continue
        out += random_baseline_rows(NAME, len(trials), roles, seed=seed)
        sp_by_country: dict[str, float] = {}
        for cc in sorted(set(trials.query_country.tolist())):
            mask = trials.query_country == cc
            lang = trials.query_language[mask][0]
            rows = win_rate_rows(NAME, sims[mask], roles, group={"country": cc},
                                 details={**det, "language": lang}, n_resamples=n_res, seed=seed)
            sp_by_country[cc] = next(r["value"] for r in rows if r["metric"] == "SP")
            out += rows
        if len(trials):
            out += silhouette_rows(project, embedder, trials, sp_by_country, details={"variant": variant})
            out += projection_rows(project, embedder, trials, suite=NAME, method=opts.get("projection", "auto"),
                                   max_points=int(opts.get("max_points", 3000)), seed=seed,
                                   details={"variant": variant})
    return out


SUITE = Suite(NAME, association, section=render_association, benchmark_kind="association", options=OPTIONS,
               description="Text→image association bias on 3-candidate trials: M_cr, M_lb, M_ti, SP, random "
                           "baseline, per-country SP, silhouettes (seed 000 RQ2).")
