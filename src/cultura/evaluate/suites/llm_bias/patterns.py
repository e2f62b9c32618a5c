"""Pattern-based entity extraction from a local text corpus (seed 001 §3.1: "manually designed patterns that
mention a culturally-relevant entity (e.g., the [Chinese] city of, the [Indian] dish)").

Patterns are data: ``data/patterns/<language>.toml`` holds ``[[patterns]]`` tables with ``name``, ``type``,
``side`` (local / western; default local — a candidate's side is settled by annotation), ``country``
(optional) and ``regex`` (a Python regular expression with a named group ``entity``). Seed 001 "extracted
unigrams and bigrams that appeared after a detected pattern": ``ngrams = 2`` makes the entity group's first
word and first two words candidates (``position = "before"`` for patterns that follow the entity, as in
"<dish> की रेसिपी": the last word and the last two words). Each pattern carries an ``example`` sentence and
the candidates it must ``expect`` (a test runs them). The corpus is a JSONL file (one object with a ``text``
field per line), a text file, or a
folder of ``.txt``/``.jsonl`` files. Matches are counted; entities seen at least ``min_count`` times are stored
as ``candidate`` entities (``source = pattern:<name>``) for annotation.

Languages written without spaces (Chinese, Japanese) extract poorly with regexes; the seed retrieved each
pattern match with up to ten following characters and had an LLM extract the entity from it. A pattern with
``window = N`` does the first half (:func:`pattern_windows`: the trigger and the next N characters, no
entity group needed), :func:`llm_extract_entities` the second (``cultura entities extract-llm``, prompt
``templates/prompts/camellia_entity_extraction.j2``), for both sides: entities of the language's culture and
Western ones.
"""
from __future__ import annotations

import json
import re
import tomllib
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from ....bounds import COUNT
from ....errors import CulturaError
from ....models.llm import LLM
from ....curate.entities import add_entities, normalise_entity
from .qa import entity_type_words
from .sentiment import language_name

if TYPE_CHECKING:
    from ....project import Project


def load_patterns(language: str) -> list[dict]:
    """The compiled patterns of one language (``regex`` compiled into ``"re"``)."""
    f = resources.files("cultura.data").joinpath("patterns", f"{language}.toml")
    if not f.is_file():
        raise CulturaError(f"No extraction patterns for {language!r}; add data/patterns/{language}.toml.")
    out = []
    for p in tomllib.loads(f.read_text("utf-8")).get("patterns", []):
        rx = re.compile(p["regex"])
        if p.get("window"):
            out.append({**p, "re": rx})
            continue
        if "entity" not in rx.groupindex:
            raise CulturaError(f"Pattern {p.get('name')!r} of {language} has no (?P<entity>...) group.")
        out.append({**p, "re": rx})
    return out


def iter_texts(corpus: str | Path):
    """Texts of a JSONL / text file or a folder of them."""
    path = Path(corpus)
    files = sorted(path.rglob("*")) if path.is_dir() else [path]
    for f in files:
        if f.suffix.lower() in (".jsonl", ".ndjson"):
            for line in f.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    yield str(json.loads(line).get("text") or "")
        elif f.suffix.lower() == ".txt":
            yield from (line for line in f.read_text(encoding="utf-8").splitlines() if line.strip())


def match_entities(texts, patterns: list[dict]) -> Counter:
    """Counter of ``(pattern name, entity)`` over all texts."""
    counts: Counter = Counter()
    for t in texts:
        for p in patterns:
            if p.get("window"):
                continue
            for m in p["re"].finditer(t):
                for ent in _candidates(m.group("entity").strip(), p):
                    counts[(p["name"], ent)] += 1
    return counts


def _candidates(text: str, pattern: dict) -> list[str]:
    """The candidate entities of one match: the text itself, or its 1..n-word n-grams next to the trigger."""
    if not text:
        return []
    n = int(pattern.get("ngrams") or 0)
    if n <= 0:
        return [text]
    words = text.split()
    if pattern.get("position") == "before":
        return list(dict.fromkeys(" ".join(words[-i:]) for i in range(1, min(n, len(words)) + 1)))
    return list(dict.fromkeys(" ".join(words[:i]) for i in range(1, min(n, len(words)) + 1)))


def extract_entities(project: Project, corpus, language: str, *, min_count: int = 1) -> dict:
    """Run the language's patterns over ``corpus`` and store candidate entities; returns counts."""
    min_count = COUNT.check(min_count, "min_count")
    patterns = load_patterns(language)
    by_name = {p["name"]: p for p in patterns}
    counts = match_entities(iter_texts(corpus), patterns)
    rows = []
    for (name, ent), n in counts.items():
        if n < min_count:
            continue
        p = by_name[name]
        rows.append(normalise_entity({"language": language, "type": p["type"], "side": p.get("side", "local"),
                                      "country": p.get("country"), "native": ent, "status": "candidate",
                                      "source": f"pattern:{name}", "count": n}))
    stored = add_entities(project, rows, source="pattern") if rows else {"inserted": 0}
    return {"matches": sum(counts.values()), "distinct": len(counts), "kept": len(rows),
            "inserted": stored["inserted"]}


def pattern_windows(texts, patterns: list[dict]) -> list[dict]:
    """For the ``window`` patterns: each match with up to ``window`` characters on either side (seed 001 §3.1,
    "the detected pattern and up to ten surrounding characters"), as ``{"pattern", "type", "text"}``,
    de-duplicated."""
    out, seen = [], set()
    for t in texts:
        for p in patterns:
            if not p.get("window"):
                continue
            for m in p["re"].finditer(t):
                w = int(p["window"])
                snippet = t[max(0, m.start() - w):m.end() + w]
                if (p["type"], snippet) not in seen:
                    seen.add((p["type"], snippet))
                    out.append({"pattern": p["name"], "type": p["type"], "text": snippet})
    return out


class ExtractedEntity(BaseModel):
    entity: str
    culture: str


class Extracted(BaseModel):
    entities: list[ExtractedEntity]


_CULTURE_SIDE = {"local": "local", "western": "western", "west": "western"}


def llm_extract_entities(project: Project, corpus, language: str, *, country: str, type: str | None = None,
                         from_patterns: bool = False, model: str | None = None, client=None,
                         max_texts: int | None = None) -> dict:
    """Extract candidate entities of both sides with the project's LLM (:meth:`cultura.models.llm.LLM.json_call`,
    prompt ``camellia_entity_extraction.j2``), one call per text: the LLM lists the entities of the type
    and says whether each belongs to the culture of ``country`` (stored as ``local``), to Western culture
    (``western``) or to neither (dropped, counted in ``other``). An entity must appear verbatim in its text.

    Texts are the corpus lines (``type`` required), or with ``from_patterns`` the windows of the language's
    ``window`` patterns (:func:`pattern_windows`; each window has its pattern's type). Failed calls are logged
    in ``llm_calls`` and counted. Returns ``{"texts", "local", "western", "other", "not_in_text", "inserted",
    "failed_calls"}``."""
    max_texts = COUNT.check_optional(max_texts, "max_texts")
    if from_patterns:
        jobs = [(w["type"], w["text"]) for w in pattern_windows(iter_texts(corpus), load_patterns(language))]
        if type is not None:
            jobs = [j for j in jobs if j[0] == type]
        if not jobs:
            raise CulturaError(f"No window pattern of data/patterns/{language}.toml matched {corpus}.")
    else:
        if not type:
            raise CulturaError("llm_extract_entities needs the entity type of the corpus (type=...), or "
                               "from_patterns=True to take it from the patterns.")
        jobs = [(type, t) for t in iter_texts(corpus)]
    if max_texts is not None:
        jobs = jobs[:max_texts]
    llm = LLM(project, model=model, client=client)
    c = project.registry.country(country)
    counts: Counter = Counter()
    tally = {"texts": len(jobs), "local": 0, "western": 0, "other": 0, "not_in_text": 0, "failed_calls": 0}
    for typ, text in jobs:
        parsed, _ = llm.json_call(stage="entities.extract", schema=Extracted,
                                  template="camellia_entity_extraction.j2",
                                  variables={"language": language_name(project, language),
                                             "entity_type": entity_type_words(typ), "culture": c.name,
                                             "text": text})
        if parsed is None:
            tally["failed_calls"] += 1
            continue
        for e in parsed.entities:
            ent, side = e.entity.strip(), _CULTURE_SIDE.get(e.culture.strip().lower())
            if not ent:
                continue
            if ent not in text:
                tally["not_in_text"] += 1
                continue
            if side is None:
                tally["other"] += 1
                continue
            counts[(typ, side, ent)] += 1
    rows = [normalise_entity({"language": language, "type": typ, "side": side,
                              "country": c.code if side == "local" else None, "native": ent,
                              "status": "candidate", "source": "llm", "count": n})
            for (typ, side, ent), n in counts.items()]
    for (_, side, _), _n in counts.items():
        tally[side] += 1
    stored = add_entities(project, rows, source="llm") if rows else {"inserted": 0}
    return {**tally, "inserted": stored["inserted"]}
