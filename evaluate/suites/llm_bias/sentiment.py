"""Sentiment association (seed 001 §4.2, App. C.2; spec §5).

Every sentiment-labelled grounded/neutral context is filled with ``n_entities`` sampled local entities and
as many sampled Western entities (same contexts on both sides), the LLM classifies each sentence with the
Table 8 prompt (``templates/prompts/camellia_sentiment.j2``, greedy), and false predictions are counted:

- false negative (FN): predicted negative (2) while the gold label is positive or neutral;
- false positive (FP): predicted positive (1) while the gold label is negative or neutral.

``ΔFN = FN(Western) − FN(local)`` and ``ΔFP = FP(Western) − FP(local)`` are counts, averaged over ``seeds``
sampling runs (the seed uses 3 runs of 50). ΔFN > 0: Western entities draw more negativity; ΔFP < 0: local
entities draw more positivity. The CI is a bootstrap over contexts of the summed per-context differences.
Leaderboards (Tables 15–16) rank by ``|Δ|``. Replies without a 0/1/2 are counted as ``invalid``, not as FN/FP.

>>> parse_sentiment("The sentiment is 2 (negative)")
'negative'
"""
from __future__ import annotations

import math
import random
import re

import numpy as np

from ....models.llm import render_prompt
from .contexts import by_language, fill, list_contexts
from .entities import entity_sets
from ....models.generators import generate_cached, get_generator

LABELS = {"0": "neutral", "1": "positive", "2": "negative"}
_DIGIT = re.compile(r"(?<!\d)([012])(?!\d)")
_WORDS = {"neutral": "neutral", "positive": "positive", "negative": "negative"}


def parse_sentiment(reply: str) -> str | None:
    """The first 0/1/2 digit of a reply as a label (or the first label word); None when there is none."""
    m = _DIGIT.search(reply or "")
    if m:
        return LABELS[m.group(1)]
    low = (reply or "").lower()
    hits = [(low.find(w), lab) for w, lab in _WORDS.items() if w in low]
    return min(hits)[1] if hits else None


def language_name(project, code: str) -> str:
    lang = project.registry.languages.get(code)
    return lang.name if lang is not None else code


def sample_fills(local: list[str], western: list[str], n: int, rng: random.Random) -> tuple[list, list]:
    """Equal-size samples (without replacement) of local and Western entities: ``min(n, |A|, |B|)`` each."""
    k = min(n, len(local), len(western))
    return rng.sample(local, k), rng.sample(western, k)


def sentiment_association(project, generator, *, language: str | None = None, n_entities: int = 50,
                          seeds=(0, 1, 2), english: bool = False, n_resamples: int = 1000) -> list[dict]:
    """One row per (test) language: ``fn_local, fn_western, fp_local, fp_western`` (mean counts over seeds),
    ``delta_fn, delta_fp`` with bootstrap CIs, ``n_sentences`` per side and run, ``n_contexts``, ``invalid``."""
    from ...metrics import bootstrap_ci

    gen = get_generator(generator)
    ctxs = [c for k in ("grounded", "neutral") for c in list_contexts(project, language=language, kind=k)
            if c["sentiment"]]
    rows = []
    for lang, cs in by_language(ctxs, english=english).items():
        per_ctx = {c["id"]: np.zeros(4) for c in cs}      # fn_l, fn_w, fp_l, fp_w summed over seeds
        invalid = n_sent = 0
        for seed in seeds:
            jobs = []
            for c in cs:
                src_lang = c.get("source_language", c["language"])
                local, western = entity_sets(project, src_lang, c["type"],
                                             field="english" if english else "native")
                a, b = sample_fills(local, western, n_entities, random.Random(f"{seed}:{c['id']}"))
                for side, ents in (("local", a), ("western", b)):
                    for e in ents:
                        prompt = render_prompt("camellia_sentiment.j2", language=language_name(project, lang),
                                               sentence=fill(c["text"], e))
                        jobs.append((c, side, prompt))
            replies = generate_cached(project, gen, [p for _, _, p in jobs])
            for (c, side, _), reply in zip(jobs, replies):
                pred = parse_sentiment(reply)
                n_sent += side == "local"
                if pred is None:
                    invalid += 1
                    continue
                gold = c["sentiment"]
                off = 0 if side == "local" else 1
                per_ctx[c["id"]][0 + off] += pred == "negative" and gold != "negative"
                per_ctx[c["id"]][2 + off] += pred == "positive" and gold != "positive"
        mat = np.array(list(per_ctx.values())) / max(len(seeds), 1)
        tot = mat.sum(axis=0)
        dfn, dfp = mat[:, 1] - mat[:, 0], mat[:, 3] - mat[:, 2]
        row = {"language": lang, "fn_local": float(tot[0]), "fn_western": float(tot[1]), "fp_local": float(tot[2]),
               "fp_western": float(tot[3]), "delta_fn": float(dfn.sum()), "delta_fp": float(dfp.sum()),
               "n_contexts": len(cs), "n_sentences": n_sent // max(len(seeds), 1), "invalid": invalid,
               "english": english}
        for name, d in (("delta_fn", dfn), ("delta_fp", dfp)):
            if len(d) >= 2 and np.ptp(d) > 0:
                ci = bootstrap_ci(d, np.sum, n_boot=n_resamples, seed=0)
                row[f"{name}_ci"] = (float(ci.low), float(ci.high))
            else:
                row[f"{name}_ci"] = (math.nan, math.nan) if len(d) < 2 else (float(d.sum()), float(d.sum()))
        rows.append(row)
    return rows
