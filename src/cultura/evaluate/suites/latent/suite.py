"""Suite ``latent``: latent-space probes of cultural bias (seed 002) on any curated or imported image set.

Per concept (images of one universal concept from many countries, each country in a group G — Western by
default — or not, see :mod:`cultura.evaluate.suites.latent.data`):

- ``ww_vs_wn``: image–image cosine similarities of WW pairs (both images in G) against WN pairs (one in G,
  one not); Welch's t (one-sided WW > WN as in seed 002 §4.2.1, two-sided p kept), Bonferroni **and** Holm over
  the concepts tested (seed 002 Table 3 shape), plus a country-label permutation p that does not assume
  independent pairs. The unit of the test is, by default, the **country pair** (``unit="country"``: the mean
  similarity of the images of two countries, one value per pair), the paper's unit: 7 Western + 9 other
  countries give n_WW = C(7, 2) = 21 and n_WN = 7 × 9 = 63 (seed 002 Table 3) whatever the number of images
  per country. ``unit="image"`` tests image pairs instead (an option, labelled as such in the report: with 3
  images per country it gives n_WW = 189, n_WN = 567, pairs that share images and are not independent).
  ``pairs="cross-country"`` (default) leaves same-country pairs (the diagonal) out of WW, so a tight country
  cluster alone is not read as a tight group; ``pairs="all"`` keeps them;
- ``heatmap``: country × country mean similarity, in-group countries first (seed 002 Figure 1);
- ``c_asc``: C-ASC of the caption ``template`` (default ``"A photo of a {concept}"``; any template, in any
  language with ``{term}`` = the concept's native term) towards G, with a bootstrap CI (resampling images
  within each group) and the effect-size band (seed 002 Table 4);
- ``alignment_rank``: per concept, countries ranked by mean caption–image similarity (1 = closest), ranks
  averaged over concepts (seed 002 Figure 4, a ranked bar chart in the report), and a Mann–Whitney test of the
  in-group's ranks against the others';
- ``projection``: UMAP (PCA for few points) of the concept's images and caption with k-means regions
  (seed 002 Figure 3), for the report.

Options: ``grouping`` (country attribute, default ``western``), ``in_group``, ``groups_file``, ``unit``
(country|image, default country), ``pairs`` (cross-country|all), ``alpha``, ``permutations`` (default 999; 0 = off),
``templates`` (list of strings or ``{"template", "language"}``), ``concepts``, ``query_kinds``,
``projection`` (auto|umap|pca|none), ``k`` (k-means regions, default 2), ``n_resamples``, ``seed``.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ....bounds import Bound
from ....errors import CulturaError
from ...common import embed_images, embed_texts
from ...metrics import c_asc
from ...stats import StatsInputError, correct_pvalues, in_words, mann_whitney, welch_ww_wn
from ...stats_extra import country_permutation_test, effect_band
from ..registry import COMMON_OPTIONS, Suite, SuiteSkipped, log_samples, logging_samples, row
from .data import ConceptSet, load_concept_sets, term_for
from .report import render_latent
from ....lazy import lazy

#: what the two samples of the Welch test are, for a reason in words (never the test's argument names)
WW_WORDS = "in-group pairs (WW: two images from in-group countries)"
WN_WORDS = "cross pairs (WN: an in-group image with an out-group one)"

if TYPE_CHECKING:
    from ....project import Project

stats = lazy("scipy.stats")  # imported on first use (start-up)
cluster = lazy("sklearn.cluster")  # imported on first use (start-up)
decomposition = lazy("sklearn.decomposition")  # imported on first use (start-up)

NAME = "latent"
DEFAULT_TEMPLATE = "A photo of a {concept}"
UMAP_MIN = 15


# ---------------------------------------------------------------- image–image (seed 002 §4.2.1)

def country_pair_matrix(emb: np.ndarray, countries: list[str], order: list[str]):
    """(sums, counts) of image-pair cosine similarities per country pair (diagonal: within-country pairs,
    each unordered pair once)."""
    k = len(order)
    pos = {c: i for i, c in enumerate(order)}
    ci = np.array([pos[c] for c in countries])
    sims = emb @ emb.T
    iu = np.triu_indices(len(countries), 1)
    a, b = ci[iu[0]], ci[iu[1]]
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    sums, counts = np.zeros((k, k)), np.zeros((k, k))
    np.add.at(sums, (lo, hi), sims[iu])
    np.add.at(counts, (lo, hi), 1)
    off = np.triu(np.ones((k, k), bool), 1)
    sums[off.T], counts[off.T] = sums.T[off.T], counts.T[off.T]
    return sums, counts


UNITS = {"country": "country pairs (the paper's unit: one mean similarity per pair of countries)",
         "image": "image pairs (option: pairs share images, so they are not independent)"}
DEFAULT_UNIT = "country"


def ww_wn_samples(emb: np.ndarray, in_group: np.ndarray, countries: list[str], *, unit: str = DEFAULT_UNIT,
                  pairs: str = "cross-country", order: list[str] | None = None, matrix=None):
    """The WW and WN similarity samples of one concept: image pairs (``unit="image"``) or country-pair means
    (``unit="country"``). ``pairs="cross-country"`` leaves same-country pairs out of WW."""
    if unit not in UNITS:
        raise CulturaError(f"Unknown unit {unit!r}. Valid: country (the default, seed 002's), image.")
    if pairs not in ("cross-country", "all"):
        raise CulturaError(f"Unknown pairs {pairs!r}. Valid: cross-country, all.")
    if unit == "image":
        sims = emb @ emb.T
        i, j = np.triu_indices(len(countries), 1)
        c = np.asarray(countries, dtype=object)
        gi, gj = in_group[i], in_group[j]
        ww = gi & gj & ((c[i] != c[j]) if pairs == "cross-country" else True)
        wn = gi ^ gj
        return sims[i, j][ww], sims[i, j][wn]
    if order is None:
        order = sorted(set(countries))
    sums, counts = matrix if matrix is not None else country_pair_matrix(emb, countries, order)
    g = np.array([in_group[countries.index(cc)] for cc in order])
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.where(counts > 0, counts, 1), np.nan)
    k = len(order)
    ww = [means[a, b] for a in range(k) for b in range(a + 1, k) if g[a] and g[b]]
    if pairs == "all":
        ww += [means[a, a] for a in range(k) if g[a]]
    wn = [means[a, b] for a in range(k) for b in range(k) if g[a] and not g[b]]
    return np.array([x for x in ww if np.isfinite(x)]), np.array([x for x in wn if np.isfinite(x)])


def _country_order(cs: ConceptSet) -> list[str]:
    """In-group countries first, then the rest, each alphabetical (seed 002 Figure 1)."""
    ccs = sorted(set(cs.countries))
    flag = {c: bool(cs.in_group[cs.countries.index(c)]) for c in ccs}
    return [c for c in ccs if flag[c]] + [c for c in ccs if not flag[c]]


def ww_wn_rows(sets, embs, *, unit, pairs, alpha, permutations, seed, details) -> list[dict]:
    """One ``ww_vs_wn`` row per concept, corrected (Bonferroni and Holm) over the concepts tested, plus the
    summary row ``ww_vs_wn_significant`` and one ``heatmap`` row per concept."""
    out, tested = [], []
    for cs in sets:
        emb = embs[cs.concept]
        order = _country_order(cs)
        matrix = country_pair_matrix(emb, cs.countries, order)
        sums, counts = matrix
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(counts > 0, sums / np.where(counts > 0, counts, 1), np.nan)
        flags = [bool(cs.in_group[cs.countries.index(c)]) for c in order]
        out.append(row(NAME, "heatmap", len(order), n=len(cs), group={"concept": cs.concept}, details={
            **details, "countries": order, "in_group": flags,
            "matrix": [[None if not np.isfinite(v) else round(float(v), 5) for v in r] for r in means],
            "counts": counts.astype(int).tolist()}))
        d = {**details, "unit": unit, "unit_label": UNITS.get(unit, unit), "pairs": pairs, "n_images": len(cs),
             "excluded": cs.excluded,
             "n_countries_in": int(sum(flags)), "n_countries_out": int(len(flags) - sum(flags))}
        ww, wn = ww_wn_samples(emb, cs.in_group, cs.countries, unit=unit, pairs=pairs, order=order, matrix=matrix)
        if logging_samples():  # the similarities the Welch test compares (per country pair or image pair)
            log_samples("ww_wn", [{"concept": cs.concept, "unit": unit, "pairs": pairs,
                                   "ww": np.asarray(ww, dtype=float).tolist(),
                                   "wn": np.asarray(wn, dtype=float).tolist()}])
        try:
            r = welch_ww_wn(ww, wn)
        except StatsInputError as e:
            out.append(row(NAME, "ww_vs_wn", math.nan, n=len(ww) + len(wn), group={"concept": cs.concept},
                           details={**d, "status": "skipped", "n_ww": len(ww), "n_wn": len(wn),
                                    "reason": in_words(e, a=WW_WORDS, b=WN_WORDS)}))
            continue
        d.update({"status": "ok", "n_ww": r.extra["n_ww"], "n_wn": r.extra["n_wn"], "mean_ww": r.extra["mean_ww"],
                  "mean_wn": r.extra["mean_wn"], "t": r.statistic, "df": r.extra["df"], "p": r.p,
                  "p_two_sided": r.extra["p_two_sided"], "cohens_d": r.effect_size, "method": r.method})
        if permutations:
            try:
                perm = country_permutation_test(sums, counts, flags, same_country=pairs == "all",
                                                n_resamples=int(permutations), seed=seed)
                d.update(p_perm=perm["p"], perm_resamples=perm["n_resamples"], perm_exact=perm["exact"])
            except StatsInputError as e:
                d.update(p_perm=math.nan, perm_reason=in_words(e))
        out.append(row(NAME, "ww_vs_wn", r.extra["mean_ww"] - r.extra["mean_wn"], n=r.n,
                       group={"concept": cs.concept}, details=d))
        tested.append(out[-1])
    if tested:
        ps = [t["details"]["p"] for t in tested]
        for method, key in (("bonferroni", "bonf"), ("holm", "holm")):
            adj = correct_pvalues(ps, method, alpha=alpha)
            for t, pa, rej in zip(tested, adj.p_adjusted, adj.reject):
                t["details"][f"p_{key}"] = float(pa)
                t["details"][f"significant_{key}"] = bool(rej)
        for t in tested:
            t["details"]["significant"] = t["details"]["significant_bonf"]
            t["details"]["n_tests"] = len(tested)
    n_sig = sum(t["details"]["significant"] for t in tested)
    out.append(row(NAME, "ww_vs_wn_significant", n_sig / len(tested) if tested else math.nan, n=len(tested),
                   details={**details, "n_significant_bonf": n_sig,
                            "n_significant_holm": sum(t["details"].get("significant_holm", False) for t in tested),
                            "alpha": alpha, "correction": "bonferroni (holm also stored)",
                            **({} if tested else {"reason": "no concept had both WW and WN pairs"})}))
    return out


# ---------------------------------------------------------------- text–image (seed 002 §4.2.2)

def _templates(opts) -> list[dict]:
    raw = opts.get("templates") or [DEFAULT_TEMPLATE]
    if isinstance(raw, (str, dict)):
        raw = [raw]
    out = []
    for t in raw:
        t = {"template": t} if isinstance(t, str) else dict(t)
        if "template" not in t or not ("{concept}" in t["template"] or "{term}" in t["template"]):
            raise CulturaError(f"Caption template {t.get('template')!r} needs {{concept}} or {{term}}, e.g. "
                               "'A photo of a {concept}' or {'template': '{term}の写真', 'language': 'ja'}.")
        t.setdefault("language", "en")
        out.append(t)
    return out


def caption_text(project: Project, cs: ConceptSet, tpl: dict) -> str | None:
    """The caption of one concept for one template (None when ``{term}`` has no term in that language)."""
    term = None
    if "{term}" in tpl["template"]:
        term = cs.concept if tpl["language"] == "en" else term_for(project, cs.concept_id, tpl["language"])
        if term is None:
            return None
    return tpl["template"].replace("{concept}", cs.concept).replace("{term}", term or "")


def c_asc_ci(sims: np.ndarray, g: np.ndarray, *, n_resamples: int, seed: int, level: float = 0.95):
    """Percentile bootstrap CI of C-ASC resampling images within G and within its complement
    (``scipy.stats.bootstrap`` with two samples)."""

    x, y = sims[g], sims[~g]
    if len(x) < 2 or len(y) < 2 or n_resamples < 1:
        return math.nan, math.nan

    def stat(a, b, axis=-1):
        both = np.concatenate([a, b], axis=axis)
        return (a.mean(axis=axis) - b.mean(axis=axis)) / both.std(axis=axis, ddof=1)

    with np.errstate(invalid="ignore", divide="ignore"):
        res = stats.bootstrap((x, y), stat, n_resamples=n_resamples, confidence_level=level, method="percentile",
                              vectorized=True, rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def caption_rows(project: Project, embedder, sets, embs, grouping, *, templates, n_resamples, seed, details):
    """``c_asc`` per concept × template, ``alignment_rank`` per country × template, the group test of the
    ranks, and the per-concept caption similarities used by the projection."""
    out, captions = [], {}
    for tpl in templates:
        tg = {"template": tpl["template"], "language": tpl["language"]}
        per_concept_means: dict[str, dict[str, float]] = {}
        for cs in sets:
            text = caption_text(project, cs, tpl)
            grp = {"concept": cs.concept, **tg}
            if text is None:
                out.append(row(NAME, "c_asc", math.nan, n=len(cs), group=grp, details={
                    **details, "reason": f"concept has no term in language {tpl['language']!r}; set one with "
                                         "'cultura concepts set-term' or use {concept}"}))
                continue
            cap = embed_texts(project, embedder, [text], language=tpl["language"])[0]
            emb, g = embs[cs.concept], cs.in_group
            sims = emb @ cap
            captions[(cs.concept, tpl["template"], tpl["language"])] = (text, cap)
            if logging_samples():  # every image's cosine with the caption, as C-ASC computes it
                e64, c64 = np.asarray(emb, dtype=float), np.asarray(cap, dtype=float)  # float64, as c_asc
                cos = (e64 @ c64) / (np.linalg.norm(e64, axis=1) * np.linalg.norm(c64))
                log_samples("caption_image", [{"concept": cs.concept, **tg, "caption": text, "images": [
                    {"sha256": sha, "country": cc, "in_group": bool(ig), "cosine": float(v)}
                    for sha, cc, ig, v in zip(cs.sha256, cs.countries, cs.in_group, cos)]}])
            ccs = np.asarray(cs.countries, dtype=object)
            per_concept_means[cs.concept] = {c: float(sims[ccs == c].mean()) for c in sorted(set(cs.countries))}
            d = {**details, "caption": text, "n_in": int(g.sum()), "n_out": int((~g).sum())}
            if g.all() or not g.any() or len(cs) < 3:
                out.append(row(NAME, "c_asc", math.nan, n=len(cs), group=grp, details={
                    **d, "reason": "needs images in G and outside it (at least 3 in all)"}))
                continue
            val = c_asc(cap, emb, g)
            lo, hi = c_asc_ci(sims, g, n_resamples=n_resamples, seed=seed)
            d.update(mean_in=float(sims[g].mean()), mean_out=float(sims[~g].mean()),
                     sd=float(sims.std(ddof=1)), band=effect_band(val))
            if not math.isfinite(val):
                d["reason"] = "all caption–image similarities are equal (sd = 0)"
            out.append(row(NAME, "c_asc", val, ci_low=lo, ci_high=hi, n=len(cs), group=grp, details=d))
        out += alignment_rows(per_concept_means, grouping, tg, details)
    return out, captions


def alignment_rows(per_concept_means: dict, grouping, tg: dict, details: dict) -> list[dict]:
    """Average rank of each country over concepts (rank 1 = highest mean caption–image similarity; ties get
    the average rank), and a Mann–Whitney test of in-group vs other countries' average ranks."""

    ranks: dict[str, dict[str, float]] = {}
    for concept, means in per_concept_means.items():
        ccs = list(means)
        r = stats.rankdata([-means[c] for c in ccs], method="average")
        for c, rk in zip(ccs, r):
            ranks.setdefault(c, {})[concept] = float(rk)
    out = []
    avg = {}
    for c in sorted(ranks):
        vals = list(ranks[c].values())
        avg[c] = float(np.mean(vals))
        sims = [per_concept_means[k][c] for k in ranks[c]]
        out.append(row(NAME, "alignment_rank", avg[c], n=len(vals), group={"country": c, **tg}, details={
            **details, "ranks": ranks[c], "mean_similarity": float(np.mean(sims)),
            "n_countries": {k: len(per_concept_means[k]) for k in ranks[c]}, "in_group": grouping.is_in(c)}))
    ins = [avg[c] for c in avg if grouping.is_in(c)]
    outs = [avg[c] for c in avg if not grouping.is_in(c)]
    d = {**details, "n_in": len(ins), "n_out": len(outs), "alternative": "two-sided",
         "note": "A12 < 0.5: in-group countries rank closer to the caption (lower rank = closer)"}
    try:
        t = mann_whitney(ins, outs)
        out.append(row(NAME, "alignment_rank_group_test", t.effect_size, n=t.n, group=tg,
                       details={**d, "U": t.statistic, "p": t.p, "rank_biserial": t.extra["rank_biserial"],
                                "effect": "A12", "method": t.method}))
    except StatsInputError as e:
        out.append(row(NAME, "alignment_rank_group_test", math.nan, n=len(ins) + len(outs), group=tg,
                       details={**d, "reason": in_words(e, a="in-group countries ranked",
                                                        b="other countries ranked")}))
    return out


def projection_rows(sets, embs, captions, template: dict, *, method: str, k: int, seed: int,
                    details: dict) -> list[dict]:
    """Per concept: 2-D coordinates of its images and caption (UMAP from ``UMAP_MIN`` points, else PCA) and
    k-means regions fitted on the 2-D points (centroids stored so the report can draw the boundaries)."""

    if method == "none":
        return []
    if method not in ("auto", "umap", "pca"):
        raise CulturaError(f"Unknown projection {method!r}. Valid: auto, umap, pca, none.")
    out = []
    for cs in sets:
        cap = captions.get((cs.concept, template["template"], template["language"]))
        if cap is None or len(cs) < 3:
            continue
        x = np.vstack([embs[cs.concept], cap[1][None, :]])
        n = x.shape[0]
        if method == "umap" or (method == "auto" and n >= UMAP_MIN):
            import umap  # lazily: numba start-up is slow

            xy = umap.UMAP(n_components=2, metric="cosine", random_state=seed, n_neighbors=min(15, n - 1),
                           n_jobs=1).fit_transform(x)
            used = "umap"
        else:
            xy, used = decomposition.PCA(n_components=2, random_state=seed).fit_transform(x), "pca"
        kk = max(1, min(int(k), n - 1))
        km = cluster.KMeans(n_clusters=kk, n_init=10, random_state=seed).fit(xy)
        pts = [[round(float(a), 4), round(float(b), 4), "image", c, bool(g)]
               for (a, b), c, g in zip(xy[:-1], cs.countries, cs.in_group)]
        pts.append([round(float(xy[-1, 0]), 4), round(float(xy[-1, 1]), 4), "caption", None, None])
        out.append(row(NAME, "projection", n, n=n, group={"concept": cs.concept}, details={
            **details, "method": used, "points": pts, "caption": cap[0], "k": kk,
            "centroids": km.cluster_centers_.round(4).tolist(), "labels": km.labels_.tolist()}))
    return out


# ---------------------------------------------------------------- the suite

def latent(project: Project, embedder, *, benchmark=None, options: dict) -> list[dict]:
    """Run the latent suite (see the module docstring for the options)."""
    opts = dict(options or {})
    seed, n_res = int(opts.get("seed", 0)), int(opts.get("n_resamples", 1000))
    alpha = float(opts.get("alpha", 0.05))
    sets, grouping, meta = load_concept_sets(
        project, benchmark=benchmark, grouping_attribute=opts.get("grouping", "western"),
        in_group=opts.get("in_group"), groups_file=opts.get("groups_file"), concepts=opts.get("concepts"),
        query_kinds=opts.get("query_kinds"))
    sets = [s for s in sets if len(s) >= 2]
    if not sets:
        raise SuiteSkipped("No concept has two or more images with a country group; import or download more.")
    details = {"grouping": grouping.name, "in_group": grouping.label}
    embs = {cs.concept: embed_images(project, embedder, cs.sha256) for cs in sets}
    templates = _templates(opts)
    out = [row(NAME, "n_images", sum(len(s) for s in sets), n=len(sets), details={
        **details, "excluded": meta["excluded"], "provenance": meta["provenance"],
        "concepts": {s.concept: len(s) for s in sets}})]
    out += ww_wn_rows(sets, embs, unit=opts.get("unit", DEFAULT_UNIT), pairs=opts.get("pairs", "cross-country"),
                      alpha=alpha, permutations=int(opts.get("permutations", 999)), seed=seed, details=details)
    caps, captions = caption_rows(project, embedder, sets, embs, grouping, templates=templates, n_resamples=n_res,
                                  seed=seed, details=details)
    out += caps
    out += projection_rows(sets, embs, captions, templates[0], method=opts.get("projection", "auto"),
                           k=int(opts.get("k", 2)), seed=seed, details=details)
    return out



#: The suite's numeric options: ``alpha`` a significance level, ``permutations`` (0: off) resamples like
#: ``n_resamples``, ``k`` the k-means regions of the projection.
OPTIONS = {**COMMON_OPTIONS, "alpha": Bound(0, 1, float, open_low=True), "permutations": Bound(0, 1_000_000),
           "k": Bound(1, 100)}

SUITE = Suite(NAME, latent, section=render_latent, options=OPTIONS, description="Latent-space probes (seed 002): WW vs WN image similarity with Welch "
                                         "t, Bonferroni/Holm and a permutation check, country heatmaps, C-ASC, "
                                         "global alignment ranks, UMAP + k-means projections.")
