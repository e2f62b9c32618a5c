"""Pattern-based entity extraction from a local text corpus (seed 001 §3.1: "manually designed patterns that
mention a culturally-relevant entity (e.g., the [Chinese] city of, the [Indian] dish)").

Patterns are data: ``data/patterns/<language>.toml`` holds ``[[patterns]]`` tables with ``name``, ``type``,
``side`` (local / western), ``country`` (optional) and ``regex`` (a Python regular expression with a named
group ``entity``). The corpus is a JSONL file (one object with a ``text`` field per line), a text file, or a
folder of ``.txt``/``.jsonl`` files. Matches are counted; entities seen at least ``min_count`` times are stored
as ``candidate`` entities (``source = pattern:<name>``) for annotation.

Languages written without spaces (Chinese, Japanese) extract poorly with regexes; the seed used an LLM there —
:func:`llm_extract_entities` does that with ``templates/prompts/camellia_entity_extraction.j2``.
"""
from __future__ import annotations

import json
import re
import tomllib
from collections import Counter
from importlib import resources
from pathlib import Path

from ....errors import CulturaError
from .entities import add_entities, normalise_entity


def load_patterns(language: str) -> list[dict]:
    """The compiled patterns of one language (``regex`` compiled into ``"re"``)."""
    f = resources.files("cultura.data").joinpath("patterns", f"{language}.toml")
    if not f.is_file():
        raise CulturaError(f"No extraction patterns for {language!r}; add data/patterns/{language}.toml.")
    out = []
    for p in tomllib.loads(f.read_text("utf-8")).get("patterns", []):
        rx = re.compile(p["regex"])
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
            for m in p["re"].finditer(t):
                ent = m.group("entity").strip()
                if ent:
                    counts[(p["name"], ent)] += 1
    return counts


def extract_entities(project, corpus, language: str, *, min_count: int = 1) -> dict:
    """Run the language's patterns over ``corpus`` and store candidate entities; returns counts."""
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


def llm_extract_entities(project, corpus, language: str, *, type: str, country: str, model: str | None = None,
                         client=None, max_texts: int | None = None) -> dict:
    """Extract candidate entities with the project's LLM (``curate.llm.LLM.json_call``), one call per text;
    for Chinese / Japanese and other languages written without spaces. Failed calls are logged in
    ``llm_calls`` and skipped."""
    from pydantic import BaseModel

    from ....models.llm import LLM
    from .sentiment import language_name

    class Extracted(BaseModel):
        entities: list[str]

    llm = LLM(project, model=model, client=client)
    c = project.registry.country(country)
    counts: Counter = Counter()
    failed = 0
    for i, text in enumerate(iter_texts(corpus)):
        if max_texts is not None and i >= max_texts:
            break
        parsed, _ = llm.json_call(stage="entities.extract", schema=Extracted, template="camellia_entity_extraction.j2",
                                  variables={"language": language_name(project, language), "entity_type": type,
                                             "culture": c.name, "text": text})
        if parsed is None:
            failed += 1
            continue
        counts.update(e.strip() for e in parsed.entities if e.strip() and e.strip() in text)
    rows = [normalise_entity({"language": language, "type": type, "side": "local", "country": c.code,
                              "native": e, "status": "candidate", "source": "llm", "count": n})
            for e, n in counts.items()]
    stored = add_entities(project, rows, source="llm") if rows else {"inserted": 0}
    return {"distinct": len(counts), "inserted": stored["inserted"], "failed_calls": failed}
