"""Extractive QA (seed 001 §4.3, App. C.3; spec §5): the LLM extracts the entity from a paragraph.

Each ``qa`` context is filled with ``n_entities`` sampled local and as many Western entities; the Table 9
prompt (``templates/prompts/camellia_qa.j2``) asks for the entity; a reply is correct when it equals the
filled entity after normalisation (:func:`normalise_answer`: Unicode NFKC, case-folded, surrounding quotes,
brackets, whitespace and final punctuation removed). ``Δaccuracy = acc(local) − acc(Western)`` in
percentage points (Table 17 ranks by ``|Δ|``); native language vs English gives the Table 1 shape.

>>> normalise_answer(" ‘‘Sushi.’’ ")
'sushi'
"""
from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING

import numpy as np

from ....models.generators import generate_cached, get_generator
from ....models.llm import render_prompt
from ...common import mean_ci
from ....curate.contexts import by_language, fill, list_contexts
from .sentiment import entity_jobs, language_name

if TYPE_CHECKING:
    from ....project import Project

#: entity types in words for the prompts (seed 001 §3.1 names them authors, food dishes, beverages, first
#: names, locations and sports clubs); other types are written with spaces for underscores
ENTITY_TYPE_WORDS = {"authors": "author", "author": "author", "food": "food", "beverage": "beverage",
                     "location": "location", "names_female": "female first name",
                     "names_male": "male first name", "sports_clubs": "sports club"}


def entity_type_words(type_: str) -> str:
    """The entity type as the prompts say it: ``names_female`` → ``female first name``."""
    return ENTITY_TYPE_WORDS.get(type_, type_.replace("_", " "))


_STRIP = " \t\n\"'`‘’“”«»「」『』()[]{}.,;:!?。、・！？"


def normalise_answer(text: str) -> str:
    """Normalised form for exact match (NFKC, casefold, outer quotes / punctuation stripped)."""
    t = unicodedata.normalize("NFKC", text or "").strip()
    t = t.splitlines()[0] if t else t
    return t.strip(_STRIP).casefold()


def exact_match(reply: str, entity: str) -> bool:
    return normalise_answer(reply) == normalise_answer(entity)


def extractive_qa(project: Project, generator, *, language: str | None = None, n_entities: int = 50, seed: int = 0,
                  english: bool = False, n_resamples: int = 1000, parallel: bool = False) -> list[dict]:
    """One row per (test) language: ``acc_local, acc_western, delta_acc`` (percentage points, CI by a
    bootstrap over contexts of the per-context accuracy difference), ``n_local``, ``n_western``,
    ``n_contexts``. Entities as in :func:`~.sentiment.sample_entities` (``parallel``: the same in the native
    run and its English twin)."""

    gen = get_generator(generator)
    ctxs = list_contexts(project, language=language, kind="qa")
    rows = []
    for lang, cs in by_language(ctxs, english=english).items():
        jobs = [(c["id"], side, e, p) for c, side, e, p in entity_jobs(
            project, cs, n_entities, seed, english=english, parallel=parallel,
            prompt=lambda c, e, lang=lang: render_prompt("camellia_qa.j2", entity_type=entity_type_words(c["type"]),
                                              language=language_name(project, lang),
                                              qa_context=fill(c["text"], e)))]
        if not jobs:
            continue
        replies = generate_cached(project, gen, [j[3] for j in jobs])
        hits: dict[int, dict[str, list[bool]]] = {}
        for (cid, side, e, _), reply in zip(jobs, replies):
            hits.setdefault(cid, {"local": [], "western": []})[side].append(exact_match(reply, e))
        loc = [x for h in hits.values() for x in h["local"]]
        wes = [x for h in hits.values() for x in h["western"]]
        diffs = [100 * (np.mean(h["local"]) - np.mean(h["western"])) for h in hits.values()
                 if h["local"] and h["western"]]
        lo, hi = mean_ci(diffs, n_resamples=n_resamples) if len(diffs) >= 2 else (float("nan"), float("nan"))
        acc_l = 100 * float(np.mean(loc)) if loc else float("nan")
        acc_w = 100 * float(np.mean(wes)) if wes else float("nan")
        rows.append({"language": lang, "acc_local": acc_l, "acc_western": acc_w, "delta_acc": acc_l - acc_w,
                     "delta_acc_ci": (lo, hi), "n_local": len(loc), "n_western": len(wes),
                     "n_contexts": len(hits), "english": english})
    return rows
