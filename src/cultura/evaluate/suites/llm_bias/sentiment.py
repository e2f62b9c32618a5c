"""Sentiment association (seed 001 §4.2, App. C.2; spec §5).

Every sentiment-labelled grounded/neutral context is filled with ``n_entities`` sampled local entities and
as many sampled Western entities (same contexts on both sides), the LLM classifies each sentence with the
Table 8 prompt (``templates/prompts/camellia_sentiment.j2``, greedy), and false predictions are counted:

- false negative (FN): predicted negative (2) while the gold label is positive or neutral;
- false positive (FP): predicted positive (1) while the gold label is negative or neutral.

``ΔFN = FN(Western) − FN(local)`` and ``ΔFP = FP(Western) − FP(local)`` are counts, averaged over ``seeds``
sampling runs (the seed uses 3 runs of 50). ΔFN > 0: Western entities draw more negativity; ΔFP < 0: local
entities draw more positivity. The CI is a bootstrap over contexts of the summed per-context differences.
Leaderboards (Tables 15–16) rank by ``|Δ|``. Replies that name no label (or several) are ``invalid``, not
FN/FP: each is kept with its reason in the row's ``invalid_replies`` (and counted per reason in
``invalid_reasons``).

>>> parse_sentiment("The sentiment is 2 (negative)")
'negative'
"""
from __future__ import annotations

import math
import random
import re
from typing import TYPE_CHECKING

import numpy as np

from ....models.generators import generate_cached, get_generator
from ....models.llm import render_prompt
from ...metrics import bootstrap_ci
from ....curate.contexts import by_language, fill, list_contexts
from ....curate.entities import entity_pool

if TYPE_CHECKING:
    from ....project import Project

MAX_INVALID_KEPT = 50  # unparseable replies kept verbatim per language (all are counted)
LABELS = {"0": "neutral", "1": "positive", "2": "negative"}
_WORD_LABELS = {v: v for v in LABELS.values()}
# the key of the Table 8 prompt, when a reply echoes it: "0 = neutral", "1: positive", ...
_KEY_ENTRY = re.compile(r"(?<!\d)([012])\s*[=:]\s*(neutral|positive|negative)\b", re.I)
# the range of the question, "(0-2)", "0–2", "0 to 2": never an answer
_RANGE = re.compile(r"\(?\s*0\s*(?:-|–|—|to)\s*2\s*\)?", re.I)
_QUESTION = re.compile(r"sentiment of this sentence is\s*(?:\(?\s*0\s*(?:-|–|—|to)\s*2\s*\)?)?\s*:?", re.I)
_DIGIT = re.compile(r"(?<![\d.])([012])(?![\d.]*\d)")
_WORD = re.compile(r"\b(neutral|positive|negative)\b", re.I)


def parse_sentiment_reply(reply: str) -> tuple[str | None, str | None]:
    """``(label, None)`` for the answer of a reply to the Table 8 prompt, or ``(None, reason)``.

    The answer, not the key: an echoed question ("... the sentiment of this sentence is (0-2):") is cut off
    and only what follows it is read; the range "(0-2)" and echoed key entries ("0 = neutral") are never read as
    answers. What remains must name one label, by digit (0/1/2) or word (neutral/positive/negative); a digit and
    a word that agree ("2 (negative)") are one answer; two different labels are ambiguous.

    >>> parse_sentiment_reply("Given the above key, the sentiment of this sentence is (0-2): 2")
    ('negative', None)
    >>> parse_sentiment_reply("1 or 2")
    (None, 'ambiguous: the reply names positive and negative')
    """
    text = reply or ""
    if not text.strip():
        return None, "empty reply"
    q = list(_QUESTION.finditer(text))
    if q:
        text = text[q[-1].end():]
    keys = _KEY_ENTRY.findall(text)
    key_echo = {(d, w.lower()) for d, w in keys if LABELS[d] == w.lower()}
    if len(key_echo) == 3:      # the whole key is echoed: its entries are not answers
        text = _KEY_ENTRY.sub(" ", text)
    text = _RANGE.sub(" ", text)
    labels = [LABELS[m.group(1)] for m in _DIGIT.finditer(text)]
    labels += [_WORD_LABELS[m.group(1).lower()] for m in _WORD.finditer(text)]
    found = list(dict.fromkeys(labels))
    if not found:
        return None, "no 0/1/2 or sentiment word in the reply"
    if len(found) > 1:
        return None, f"ambiguous: the reply names {' and '.join(found)}"
    return found[0], None


def parse_sentiment(reply: str) -> str | None:
    """The label a reply answers (:func:`parse_sentiment_reply`), None when it names none or several."""
    return parse_sentiment_reply(reply)[0]


def language_name(project: Project, code: str) -> str:
    lang = project.registry.languages.get(code)
    return lang.name if lang is not None else code


def sample_fills(local: list, western: list, n: int, rng: random.Random) -> tuple[list, list]:
    """Equal-size samples (without replacement) of local and Western entities: ``min(n, |A|, |B|)`` each."""
    k = min(n, len(local), len(western))
    return rng.sample(local, k), rng.sample(western, k)


def sample_entities(project: Project, context: dict, n: int, rng: random.Random, *, english: bool = False,
                    parallel: bool = False) -> tuple[list[str], list[str]]:
    """The local and Western surface forms that fill one context: a sample of entity rows from
    :func:`~.entities.entity_pool` of the context's source language and type, then their English forms in an
    English run. An English run draws from the entities with an English form; with ``parallel`` the native run
    draws from that same pool, so with the same seed both fill a context with the same entity ids and differ
    only in language (the suite sets it whenever it runs the English twins)."""
    src = context.get("source_language", context["language"])
    local, western = entity_pool(project, src, context["type"], parallel=parallel or english)
    a, b = sample_fills(local, western, n, rng)
    field = "english" if english else "native"
    return [e[field] for e in a], [e[field] for e in b]


def entity_jobs(project: Project, contexts: list[dict], n_entities: int, seed, *, english: bool, parallel: bool,
                prompt) -> list[tuple]:
    """``[(context, side, entity, prompt(context, entity))]`` for the local and Western entities sampled per
    context with the seeded generator of :func:`sample_entities` (the sentiment and QA runs share it)."""
    jobs = []
    for c in contexts:
        a, b = sample_entities(project, c, n_entities, random.Random(f"{seed}:{c['id']}"), english=english,
                               parallel=parallel)
        for side, ents in (("local", a), ("western", b)):
            jobs += [(c, side, e, prompt(c, e)) for e in ents]
    return jobs


def sentiment_association(project: Project, generator, *, language: str | None = None, n_entities: int = 50,
                          seeds=(0, 1, 2), english: bool = False, n_resamples: int = 1000,
                          parallel: bool = False) -> list[dict]:
    """One row per (test) language: ``fn_local, fn_western, fp_local, fp_western`` (mean counts over seeds),
    entities sampled by :func:`sample_entities` (``parallel``: the native run and its English twin fill each
    context with the same entities),
    ``delta_fn, delta_fp`` with bootstrap CIs, ``n_sentences`` per side and run, ``n_contexts``, ``invalid``."""

    gen = get_generator(generator)
    ctxs = [c for k in ("grounded", "neutral") for c in list_contexts(project, language=language, kind=k)
            if c["sentiment"]]
    rows = []
    for lang, cs in by_language(ctxs, english=english).items():
        per_ctx = {c["id"]: np.zeros(4) for c in cs}      # fn_l, fn_w, fp_l, fp_w summed over seeds
        invalid = n_sent = 0
        reasons: dict[str, int] = {}
        n_valid = {"local": 0, "western": 0}
        bad: list[dict] = []
        for seed in seeds:
            jobs = entity_jobs(project, cs, n_entities, seed, english=english, parallel=parallel,
                               prompt=lambda c, e, lang=lang: render_prompt("camellia_sentiment.j2",
                                                                 language=language_name(project, lang),
                                                                 sentence=fill(c["text"], e)))
            replies = generate_cached(project, gen, [p for _, _, _, p in jobs])
            for (c, side, _, _), reply in zip(jobs, replies):
                pred, why = parse_sentiment_reply(reply)
                n_sent += side == "local"
                n_valid[side] += pred is not None
                if pred is None:
                    invalid += 1
                    reasons[why.split(":")[0]] = reasons.get(why.split(":")[0], 0) + 1
                    if len(bad) < MAX_INVALID_KEPT:
                        bad.append({"context_id": c["id"], "side": side, "seed": seed, "reply": reply[:200],
                                    "reason": why})
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
               "invalid_reasons": reasons, "invalid_replies": bad, "english": english}
        for name, d in (("delta_fn", dfn), ("delta_fp", dfp)):
            if len(d) >= 2 and np.ptp(d) > 0:
                ci = bootstrap_ci(d, np.sum, n_boot=n_resamples, seed=0)
                row[f"{name}_ci"] = (float(ci.low), float(ci.high))
            else:
                row[f"{name}_ci"] = (math.nan, math.nan) if len(d) < 2 else (float(d.sum()), float(d.sum()))
        if not n_valid["local"] or not n_valid["western"]:
            empty = [k for k in ("local", "western") if not n_valid[k]]
            row.update({"delta_fn": math.nan, "delta_fp": math.nan, "delta_fn_ci": (math.nan, math.nan),
                        "delta_fp_ci": (math.nan, math.nan),
                        "reason": f"no parseable reply for the {' and '.join(empty)} entities (see invalid_replies)"})
        rows.append(row)
    return rows
