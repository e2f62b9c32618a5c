"""Suite ``social``: gender and race bias audit of (multilingual) CLIP models on labelled portraits (seed 003).

For every imported portrait set × language inventory × axis (crime, communion, agency) the model labels each
portrait zero-shot (top-1 cosine over the axis's label set, :meth:`Inventory.probe`) and the suite reports:

- ``negative_rate``: share of portraits whose top-1 is a negative label (crime, or the negative pole), overall
  and per gender and race, with bootstrap CIs (the ``p_f``, ``p_m`` of seed 003 eqs. 4a–4c);
- ``kl_fm``, ``kl_mf``, ``skl``: KL(f‖m), KL(m‖f) and their mean from the gender negative rates (Tables 3, 7);
- ``gender_max_skew`` and ``race_mean_max_skew``: MaxSkew between groups of the group association
  ``sc_G(g, c) = mean_{I in D_g} cos(v(I), e(c))`` (spec §4), the largest over the axis's negative captions c
  (the caption is in ``details``); race: mean over unordered race pairs (Tables 1, 2, 4). With
  ``association="rate"`` the group scores are the negative rates instead;
- ``pct_C``, ``pct_NH`` (crime probe), ``pct_NC`` (communion), ``pct_NA`` (agency): the harm breakdown of
  Table 6, and ``harm_rate`` per axis and over all probes at once (group ``axis = all``, top-1 over the union
  of every label, H = crime ∪ non-human ∪ negative poles);
- ``demographic_accuracy``: share of portraits whose crime-probe top-1 is their own demographic label;
- ``probe_missing``: a language whose inventory lacks an axis (value NaN, the reason says what to add);
- ``recall_t2i`` / ``recall_i2t``: the accuracy check beside fairness (seed 003 App. A.1's Crossmodal-3600 /
  XTD-11 R@k): text→image and image→text recall@k per language on the imported caption set (``captions``
  table, ``cultura import captions``), group ``{dataset: "captions", language, k}``; a caption's relevant image
  is its own, an image's relevant texts are its captions in that language; bootstrap CI over queries.

Every row carries the language inventory's validation status (``inventory_status``: source, seed-validated,
validated, partial, unvalidated). The statistics of seed 003 App. D across languages and models are computed
from stored rows by :func:`social_statistics` (the report calls it).

Options: ``datasets`` (default: every imported set; ``--benchmark NAME`` picks one), ``languages`` (default:
every inventory), ``axes``, ``association`` (cosine|rate), ``n_resamples``, ``seed``, ``recall`` (auto: when
captions are imported | true | false), ``recall_ks`` (default [1, 5, 10]), ``recall_languages`` (default: the
``languages`` option when given, else every caption language).
"""
from __future__ import annotations

import hashlib
import itertools
import math
from typing import TYPE_CHECKING

import numpy as np

from ....curate.images import caption_languages as imported_caption_languages
from ....curate.images import captions_in
from ....bounds import Bound
from ....errors import CulturaError, unknown
from ...metrics import label_shares, max_skew, mean_max_skew, symmetric_kl
from .data import AXES, available_languages, inventory_status, load_inventory, load_portraits, portrait_sets
from ...stats_extra import bernoulli_kl
from ..registry import COMMON_OPTIONS, Suite, SuiteSkipped, log_samples, logging_samples, row
from .report import render_social
from ...common import embed_images, embed_texts, mean_ci

NAME = "social"
GENDERS = ("Female", "Male")
CATEGORY_METRIC = {"C": "pct_C", "NH": "pct_NH", "NC": "pct_NC", "NA": "pct_NA"}


def group_scores(sims: np.ndarray, labels: np.ndarray, groups) -> dict:
    """``sc_G(g, c)`` for every group g and caption column c: mean cosine over the group's images."""
    return {g: sims[labels == g].mean(axis=0) for g in groups if (labels == g).any()}


def _top1(sims: np.ndarray) -> np.ndarray:
    return np.argmax(sims, axis=1)


def _skew_value(sims, labels, present, neg_idx, is_neg, metric: str, association: str) -> float:
    """The skew statistic alone (the row's value), for the bootstrap."""
    fn = (lambda s: max_skew(s[present[0]], s[present[1]])) if metric.startswith("gender") else mean_max_skew
    if association == "rate":
        return fn({g: float(is_neg[labels == g].mean()) for g in present})
    sc = group_scores(sims, labels, present)
    vals = [fn({g: float(sc[g][i]) for g in present}) for i in neg_idx]
    finite = [v for v in vals if not math.isnan(v)]
    return max(finite) if finite else math.nan


def skew_ci(sims, labels, present, neg_idx, is_neg, metric, association, *, n_resamples: int, seed: int,
            level: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile bootstrap CI of a skew value, resampling portraits within each group (so every group keeps
    its size). ``(None, None)`` when fewer than half the resamples give a finite value."""
    if n_resamples < 1:
        return None, None
    rng = np.random.default_rng(seed)
    members = [np.flatnonzero(labels == g) for g in present]
    vals = []
    for _ in range(n_resamples):
        idx = np.concatenate([rng.choice(m, size=m.size, replace=True) for m in members])
        v = _skew_value(sims[idx], labels[idx], present, neg_idx, is_neg[idx], metric, association)
        if math.isfinite(v):
            vals.append(v)
    if len(vals) < n_resamples / 2:
        return None, None
    a = (1 - level) / 2
    return float(np.quantile(vals, a)), float(np.quantile(vals, 1 - a))


def skew_rows(sims, probe, gender, race, *, association: str, group: dict, details: dict,
              n_resamples: int = 200, seed: int = 0) -> list[dict]:
    """``gender_max_skew`` and ``race_mean_max_skew`` for one probe (see the module docstring), each with a
    bootstrap CI over portraits resampled within groups."""
    out = []
    neg_idx = [i for i, lab in enumerate(probe.labels) if lab in probe.negative]
    top = _top1(sims)
    is_neg = np.isin(top, neg_idx)
    for metric, labels, groups, fn in (("gender_max_skew", gender, GENDERS, None),
                                       ("race_mean_max_skew", race, sorted({r for r in race if r}), None)):
        present = [g for g in groups if (labels == g).any()]
        d = {**details, "association": association, "groups": {g: int((labels == g).sum()) for g in present}}
        if len(present) < 2:
            out.append(row(NAME, metric, math.nan, n=int(sum(d["groups"].values())), group=group,
                           details={**d, "reason": "needs portraits of at least two groups"}))
            continue
        if association == "rate":
            scores = {g: float(is_neg[labels == g].mean()) for g in present}
            per_caption = {"negative_rate": scores}
            val = (max_skew(scores[present[0]], scores[present[1]]) if metric.startswith("gender")
                   else mean_max_skew(scores))
            arg, pairs = "negative_rate", _pairs(scores)
        else:
            sc = group_scores(sims, labels, present)
            per_caption, vals = {}, {}
            for i in neg_idx:
                s = {g: float(sc[g][i]) for g in present}
                per_caption[probe.labels[i]] = s
                vals[probe.labels[i]] = (max_skew(s[present[0]], s[present[1]]) if metric.startswith("gender")
                                         else mean_max_skew(s))
            finite = {k: v for k, v in vals.items() if not math.isnan(v)}
            if not finite:
                out.append(row(NAME, metric, math.nan, n=len(labels), group=group,
                               details={**d, "reason": "every group score is 0 (MaxSkew undefined)"}))
                continue
            arg = max(finite, key=lambda k: finite[k])
            val = finite[arg]
            pairs = _pairs(per_caption[arg])
            d["skew_by_caption"] = vals
        d.update(caption=arg, scores=per_caption[arg], pair_skews=pairs)
        lo = hi = None
        if math.isinf(val):
            d["reason"] = "a group's score is 0 while another's is not (MaxSkew is unbounded)"
        else:
            lo, hi = skew_ci(sims, labels, present, neg_idx, is_neg, metric, association,
                             n_resamples=n_resamples, seed=seed)
        out.append(row(NAME, metric, val, ci_low=lo, ci_high=hi, n=int(sum(d["groups"].values())), group=group,
                       details=d))
    return out


def _pairs(scores: dict) -> dict:
    return {f"{a}|{b}": max_skew(scores[a], scores[b]) for a, b in itertools.combinations(sorted(scores), 2)}


def rate_rows(is_neg, gender, race, *, group, details, n_resamples, seed) -> list[dict]:
    """``negative_rate`` overall / per gender / per race and the KL rows from the gender rates."""
    out = []

    def rate(mask, extra):
        v = is_neg[mask].astype(float)
        if v.size == 0:
            return None
        lo, hi = mean_ci(v, n_resamples=n_resamples, seed=seed)
        r = row(NAME, "negative_rate", v.mean(), ci_low=lo, ci_high=hi, n=v.size, group={**group, **extra},
                details=details)
        out.append(r)
        return float(v.mean())

    rate(np.ones(len(is_neg), bool), {})
    rates = {g: rate(gender == g, {"gender": g}) for g in GENDERS}
    for r in sorted({x for x in race if x}):
        rate(race == r, {"race": r})
    pf, pm = rates["Female"], rates["Male"]
    n = int(np.isin(gender, GENDERS).sum())
    if pf is None or pm is None:
        for m in ("kl_fm", "kl_mf", "skl"):
            out.append(row(NAME, m, math.nan, n=n, group=group,
                           details={**details, "reason": "needs portraits of both genders"}))
        return out
    d = {**details, "p_f": pf, "p_m": pm}
    for m, v in (("kl_fm", bernoulli_kl(pf, pm)), ("kl_mf", bernoulli_kl(pm, pf)), ("skl", symmetric_kl(pf, pm))):
        dd = dict(d)
        if math.isinf(v):
            dd["reason"] = "a negative rate is 0 or 1 for one gender only (KL is unbounded)"
        out.append(row(NAME, m, v, n=n, group=group, details=dd))
    return out


def probe_rows(img, texts_emb, probe, gender, race, *, group, details, association, n_resamples, seed):
    """Every row of one (dataset, language, axis) probe."""
    sims = img @ texts_emb.T
    top = _top1(sims)
    top_labels = np.array([probe.labels[i] for i in top], dtype=object)
    is_neg = np.isin(top_labels, list(probe.negative))
    out = rate_rows(is_neg, gender, race, group=group, details=details, n_resamples=n_resamples, seed=seed)
    out += skew_rows(sims, probe, gender, race, association=association, group=group, details=details,
                     n_resamples=min(n_resamples, 200), seed=seed)
    harmful = set(probe.negative) | set(probe.categories.get("NH", ()))
    harm = np.isin(top_labels, list(harmful)).astype(float)
    lo, hi = mean_ci(harm, n_resamples=n_resamples, seed=seed)
    out.append(row(NAME, "harm_rate", harm.mean(), ci_low=lo, ci_high=hi, n=len(harm), group=group,
                   details={**details, "harmful": sorted(harmful)}))
    shares = label_shares(list(top_labels), {k: v for k, v in probe.categories.items() if v})
    for cat, share in shares.items():
        v = np.isin(top_labels, list(probe.categories[cat])).astype(float)
        lo, hi = mean_ci(v, n_resamples=n_resamples, seed=seed)
        out.append(row(NAME, CATEGORY_METRIC.get(cat, f"pct_{cat}"), share, ci_low=lo, ci_high=hi, n=len(v),
                       group=group, details=details))
    if probe.axis == "crime":
        own = np.array([f"{r}_{g}" if r and g else "" for r, g in zip(race, gender)], dtype=object)
        known = np.isin(own, list(probe.labels))
        if known.any():
            acc = (top_labels[known] == own[known]).astype(float)
            lo, hi = mean_ci(acc, n_resamples=n_resamples, seed=seed)
            out.append(row(NAME, "demographic_accuracy", acc.mean(), ci_low=lo, ci_high=hi, n=len(acc),
                           group=group, details=details))
    return out


RECALL_KS = (1, 5, 10)


def portrait_samples(portraits, sims: np.ndarray, probe, group: dict):
    """Per-sample log of one probe (a generator): each portrait's labels, its score for every prompt, and its
    top-1 label."""
    top = _top1(sims)
    return ({**group, "sha256": p["sha256"], "gender": p["gender"], "race": p["race"],
             "top1": probe.labels[int(top[i])],
             "scores": [{"label": lab, "prompt": pr, "score": float(v)}
                        for lab, pr, v in zip(probe.labels, probe.prompts, sims[i])]}
            for i, p in enumerate(portraits))


def recall_hits(relevant: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """Per query: 1.0 when a relevant item is among the ``k`` highest scores (stable order on ties, as
    :func:`cultura.evaluate.metrics.accuracy_at_k`, whose mean this is)."""
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return (np.take_along_axis(relevant, top, axis=1).max(axis=1) > 0).astype(float)


def caption_languages(project: Project) -> list[str]:
    """Languages of the imported caption set (``captions`` table), empty when none."""
    return imported_caption_languages(project.db)


def recall_rows(project: Project, embedder, languages, *, ks=RECALL_KS, n_resamples: int = 1000,
                seed: int = 0) -> list[dict]:
    """``recall_t2i`` and ``recall_i2t`` at each k per caption language (see the module docstring)."""
    out = []
    for lang in languages:
        caps = captions_in(project.db, lang)
        if not caps:
            continue
        shas = sorted({s for s, _ in caps})
        pos = {s: i for i, s in enumerate(shas)}
        rel = np.zeros((len(caps), len(shas)))
        rel[np.arange(len(caps)), [pos[s] for s, _ in caps]] = 1
        img = embed_images(project, embedder, shas)
        txt = embed_texts(project, embedder, [t for _, t in caps], language=lang)
        sims = txt @ img.T
        digest = hashlib.sha256("".join(f"{a}\t{b}\n" for a, b in caps).encode()).hexdigest()
        d = {"n_images": len(shas), "n_captions": len(caps), "caption_source": "captions table",
             "captions_hash": digest,
             "note": "accuracy beside fairness (seed 003 App. A.1: R@k on Crossmodal-3600 / XTD-11)"}
        for metric, r, s in (("recall_t2i", rel, sims), ("recall_i2t", rel.T, sims.T)):
            for k in ks:
                hits = recall_hits(r, s, int(k))
                lo, hi = mean_ci(hits, n_resamples=n_resamples, seed=seed)
                out.append(row(NAME, metric, float(hits.mean()), ci_low=lo, ci_high=hi, n=len(hits),
                               group={"dataset": "captions", "language": lang, "k": int(k)},
                               details={**d, "candidates": int(s.shape[1]),
                                        "trivial": int(k) >= int(s.shape[1])}))
    return out


def _recall_languages(project: Project, opts) -> list[str]:
    flag = opts.get("recall", "auto")
    if flag in (False, "false", "off", 0, "0"):
        return []
    have = caption_languages(project)
    if flag not in ("auto", True, "true", "on", 1, "1"):
        raise CulturaError(f"Unknown recall option {flag!r}. Valid: auto, true, false.")
    if flag != "auto" and not have:
        raise CulturaError("recall=true needs an imported caption set: 'cultura import captions FILE --images DIR' "
                           "(Crossmodal-3600 / XTD-11 layout).")
    wanted = opts.get("recall_languages") or opts.get("languages")
    if wanted:
        wanted = [wanted] if isinstance(wanted, str) else list(wanted)
        return [lang for lang in wanted if lang in have]
    return have


def _datasets(project: Project, benchmark, opts) -> list[str]:
    sets = [s["dataset"] for s in portrait_sets(project) if s["n_ok"]]
    wanted = opts.get("datasets") or ([benchmark.split("@")[0]] if benchmark else None)
    if isinstance(wanted, str):
        wanted = [wanted]
    if wanted:
        for w in wanted:
            if w not in sets:
                raise unknown("portrait set", w, sets, hint="Import one with 'cultura social import-portraits "
                                                            "TABLE --images DIR --dataset NAME'.")
        return list(wanted)
    if not sets:
        raise SuiteSkipped("No labelled portrait set in this project. Import one (FairFace or PATA layout) with "
                           "'cultura social import-portraits TABLE --images DIR --dataset NAME'.")
    return sets


def social(project: Project, embedder, *, benchmark=None, options: dict) -> list[dict]:
    """Run the social suite (see the module docstring for the options)."""
    opts = dict(options or {})
    seed, n_res = int(opts.get("seed", 0)), int(opts.get("n_resamples", 1000))
    association = opts.get("association", "cosine")
    if association not in ("cosine", "rate"):
        raise CulturaError(f"Unknown association {association!r}. Valid: cosine (sc_G, spec §4), rate.")
    axes = opts.get("axes") or list(AXES)
    axes = [axes] if isinstance(axes, str) else list(axes)
    for a in axes:
        if a not in AXES:
            raise unknown("axis", a, AXES)
    langs = opts.get("languages") or available_languages(project)
    langs = [langs] if isinstance(langs, str) else list(langs)
    recall = recall_rows(project, embedder, _recall_languages(project, opts),
                         ks=opts.get("recall_ks") or RECALL_KS, n_resamples=n_res, seed=seed)
    try:
        datasets = _datasets(project, benchmark, opts)
    except SuiteSkipped:
        if not recall:
            raise
        datasets = []
    h = hashlib.sha256()
    out: list[dict] = []
    status = {lang: inventory_status(project, lang) for lang in langs}
    invs = {lang: load_inventory(project, lang) for lang in langs}
    for lang in langs:
        for s, k, t in invs[lang].prompt_items():
            h.update(f"{lang}\t{s}\t{k}\t{t}\n".encode())
    for ds in datasets:
        portraits = load_portraits(project, ds)
        if not portraits:
            continue
        for p in portraits:
            h.update(f"{ds}\t{p['sha256']}\t{p['gender']}\t{p['race']}\n".encode())
        img = embed_images(project, embedder, [p["sha256"] for p in portraits])
        gender = np.array([p["gender"] or "" for p in portraits], dtype=object)
        race = np.array([p["race"] or "" for p in portraits], dtype=object)
        for lang in langs:
            inv, st = invs[lang], status[lang]
            base = {"inventory_status": st["status"], "inventory_source": inv.source,
                    "inventory_mean_score": st.get("mean_score")}
            for axis in axes:
                group = {"dataset": ds, "language": lang, "axis": axis}
                why = inv.missing(axis)
                if why:
                    out.append(row(NAME, "probe_missing", math.nan, n=0, group=group,
                                   details={**base, "reason": why}))
                    continue
                probe = inv.probe(axis)
                temb = embed_texts(project, embedder, list(probe.prompts), language=lang)
                out += probe_rows(img, temb, probe, gender, race, group=group,
                                  details={**base, "n_labels": len(probe.labels)}, association=association,
                                  n_resamples=n_res, seed=seed)
                if logging_samples():  # every portrait's cosine with every label prompt, and its top-1 label
                    log_samples("portrait", portrait_samples(portraits, img @ temb.T, probe, group))
            if inv.axes:
                comb = inv.combined()
                temb = embed_texts(project, embedder, list(comb.prompts), language=lang)
                top = np.array([comb.labels[i] for i in _top1(img @ temb.T)], dtype=object)
                harm = np.isin(top, list(comb.negative)).astype(float)
                lo, hi = mean_ci(harm, n_resamples=n_res, seed=seed)
                out.append(row(NAME, "harm_rate", harm.mean(), ci_low=lo, ci_high=hi, n=len(harm),
                               group={"dataset": ds, "language": lang, "axis": "all"},
                               details={**base, "axes": inv.axes, "n_labels": len(comb.labels)}))
    if not out and not recall:
        raise SuiteSkipped("The portrait sets have no usable images (all rows failed or were excluded).")
    out += recall
    for r in recall:
        h.update(f"captions\t{r['group']['language']}\t{r['details']['captions_hash']}\n".encode())
    name = "portraits:" + ",".join(datasets) + ("+captions" if recall else "")
    out[0]["details"]["provenance"] = {"benchmark": name, "benchmark_version": None,
                                       "benchmark_hash": h.hexdigest()}
    return out


#: The suite's numeric options (``recall_ks``: the k of Recall@k).
OPTIONS = {**COMMON_OPTIONS, "recall_ks": Bound(1, 100_000, many=True)}

SUITE = Suite(NAME, social, section=render_social, options=OPTIONS, description="Social-bias audit of CLIP models on labelled portraits (seed 003): "
                                         "zero-shot crime/communion/agency probes, gender max-skew, race mean "
                                         "max-skew, KL/SKL, harm rates per language and dataset.")


from .stats import social_statistics  # noqa: E402  (re-exported: the report's entry point)

if TYPE_CHECKING:
    from ....project import Project

__all__ = ["social", "social_statistics", "group_scores", "probe_rows"]

#: The folder's suites, read by :func:`cultura.evaluate.suites.load_suites`.
SUITES = (SUITE,)
