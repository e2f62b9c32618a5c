"""Concepts: generation by an LLM (seed 000 §3.2.1, App. H), presets from the seeds, manual curation,
embedding de-duplication, native terms per country (translation), and the search queries built from them.

Nothing is deleted: removal and merging are statuses (``removed``, ``merged`` with ``merged_into``).
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, Field, field_validator

from ..bounds import Bound, from_field
from ..config import ConceptsSection
from ..db import finish_run, now, start_run, transaction
from ..errors import CulturaError, unknown
from ..models.embedders import get_embedder
from ..models.llm import LLM
from ..names import MAX_TERM_CHARS, BadName, clean_name, concept_name
from .hash_search import connected_clusters

if TYPE_CHECKING:
    from ..project import Project


PRESETS = {"3xcm": "concepts_3xcm.csv", "globalrg": "concepts_globalrg.csv"}


def normalise(name: str) -> str:
    """Canonical concept name: Unicode NFC, trimmed, single-spaced, lower-case, checked by the one name
    validator (:mod:`cultura.names`: no control/bidi/zero-width characters, not path-like, no formula start, a
    length cap); a refused name raises :class:`~cultura.names.BadName` with one sentence."""
    return concept_name(name)


def _term(raw, *, where: str = "") -> str:
    """A native term: NFC, whitespace collapsed, checked like a name (cap :data:`MAX_TERM_CHARS`)."""
    return clean_name(raw, what=f"{where}term", max_chars=MAX_TERM_CHARS, param="term")


# ---------------------------------------------------------------- manual curation and presets

def get_concept(db, name_or_id) -> dict:
    """A concept row by name or id; an unknown one is an error listing close names."""
    if isinstance(name_or_id, int) or str(name_or_id).isdigit():
        rows = list(db["concepts"].rows_where("id = ?", [int(name_or_id)]))
    else:
        rows = list(db["concepts"].rows_where("name = ?", [normalise(name_or_id)]))
    if not rows:
        raise unknown("concept", str(name_or_id), [r["name"] for r in db["concepts"].rows],
                      hint="Add it with 'cultura concepts add NAME'.")
    return rows[0]


def add_concepts(project: Project, names, *, source: str = "manual", description: str | None = None) -> dict:
    """Add concepts (idempotent: an existing name is left as it is; a removed one is reactivated only
    when added manually)."""
    db = project.db
    added, existing, reactivated = [], [], []
    with transaction(db):
        for raw in names:
            name = normalise(raw)
            if not name:
                continue
            rows = list(db["concepts"].rows_where("name = ?", [name]))
            if rows:
                row = rows[0]
                if row["status"] == "removed" and source == "manual":
                    db["concepts"].update(row["id"], {"status": "active", "reason": None, "updated_at": now()})
                    reactivated.append(name)
                else:
                    existing.append(name)
                continue
            db["concepts"].insert({"name": name, "description": description, "source": source,
                                   "status": "active", "created_at": now()})
            added.append(name)
    return {"added": len(added), "existing": len(existing), "reactivated": len(reactivated), "names": added}


def load_preset(project: Project, preset: str) -> dict:
    """Load a seed's concept list: ``3xcm`` (seed 000 Table 10) or ``globalrg`` (seeds 002/004)."""
    if preset not in PRESETS:
        raise unknown("concept preset", preset, PRESETS)
    text = resources.files("cultura.data").joinpath(PRESETS[preset]).read_text("utf-8")
    names = [row["concept"] for row in csv.DictReader(text.splitlines())]
    return add_concepts(project, names, source=f"preset:{preset}")


def list_concepts(project: Project, *, status: str | None = "active") -> list[dict]:
    """Concepts with their number of native terms, queries and images."""
    where = "WHERE c.status = :status" if status else ""
    sql = f"""
        SELECT c.id, c.name, c.status, c.source, c.merged_into, c.reason,
          (SELECT count(*) FROM terms t WHERE t.concept_id = c.id) AS terms,
          (SELECT count(*) FROM queries q WHERE q.concept_id = c.id) AS queries,
          (SELECT count(DISTINCT sha256) FROM image_links l WHERE l.concept_id = c.id) AS images
        FROM concepts c {where} ORDER BY c.name"""
    return [dict(r) for r in project.db.query(sql, {"status": status} if status else {})]


def remove_concept(project: Project, name, *, reason: str = "removed by hand") -> dict:
    """Mark a concept removed (its rows stay; later stages skip it)."""
    row = get_concept(project.db, name)
    project.db["concepts"].update(row["id"], {"status": "removed", "reason": reason, "updated_at": now()})
    return {"concept": row["name"], "status": "removed"}


def remove_concepts(project: Project, names, *, path=None, reason: str = "removed by hand") -> dict:
    """Mark many concepts removed at once: ``names`` and/or the names of a text file (``path``: one a line,
    blank lines and ``#`` comments skipped). Every name is checked first: an unknown one is one error naming
    each (with a "did you mean" for the first) and nothing is removed; then all in one transaction."""
    wanted = list(names or ())
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise CulturaError(f"No file {str(p)!r}. Give a text file with one concept name a line.", param="path")
        try:
            text = p.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError:
            raise CulturaError(f"{p.name} is not UTF-8 text; save it as UTF-8 (one concept name a line).",
                               param="path") from None
        wanted += [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not wanted:
        raise CulturaError("No concept to remove: give names or --from FILE.", param="names")
    db = project.db
    known = {r["name"]: r for r in db.query("SELECT id, name, status FROM concepts")}
    by_id = {str(r["id"]): r for r in known.values()}

    def find(n: str):
        if n.isdigit():
            return by_id.get(n)
        try:
            return known.get(normalise(n))
        except BadName:
            return None

    found = {n: find(n) for n in dict.fromkeys(wanted)}
    missing = [n for n, r in found.items() if r is None]
    if missing:
        shown = ", ".join(repr(n) for n in missing[:8])
        more = f" (and {len(missing) - 8} more)" if len(missing) > 8 else ""
        raise unknown("concept", missing[0], list(known),
                      hint=f"Unknown: {shown}{more}; nothing was removed. See 'cultura concepts list'.")
    rows = list({r["id"]: r for r in found.values()}.values())
    todo = [r for r in rows if r["status"] != "removed"]
    with transaction(db):
        for r in todo:
            db["concepts"].update(r["id"], {"status": "removed", "reason": reason, "updated_at": now()})
    return {"removed": len(todo), "already_removed": len(rows) - len(todo)}


def active_concepts(db) -> list[dict]:
    return list(db["concepts"].rows_where("status = 'active'", order_by="name"))


def concept_names(db) -> dict[int, str]:
    """Concept id → name, every status."""
    return {r[0]: r[1] for r in db.execute("SELECT id, name FROM concepts")}


def active_concept_ids(db) -> set[int]:
    return {r[0] for r in db.execute("SELECT id FROM concepts WHERE status = 'active'")}


def imported_concept(db, name: str, source: str) -> int:
    """The id of concept ``name``, added (active, ``source`` such as ``import:3xcm``) when it is new; part of
    the caller's transaction."""
    row = db.execute("SELECT id FROM concepts WHERE name = ?", [name]).fetchone()
    if row:
        return row[0]
    return db.execute("INSERT INTO concepts (name, source, status, created_at) VALUES (?, ?, 'active', ?)",
                      [name, source, now()]).lastrowid


def common_term(db, concept_id: int, language: str) -> str | None:
    """The concept's native term in ``language`` (the most common one across countries), or None."""
    rows = db.execute("SELECT term, count(*) AS n FROM terms WHERE concept_id = ? AND language = ? "
                      "GROUP BY term ORDER BY n DESC, term LIMIT 1", [concept_id, language]).fetchall()
    return rows[0][0] if rows else None


# ---------------------------------------------------------------- generation (seed 000 App. H)

class GeneratedConcept(BaseModel):
    concept: str = Field(min_length=1, max_length=80)
    description: str = ""
    examples: dict[str, str] = Field(default_factory=dict)

    @field_validator("concept")
    @classmethod
    def _name(cls, v):
        try:
            v = normalise(v)
        except BadName as e:  # pydantic turns a ValueError into a validation retry
            raise ValueError(e.reason) from None
        if not v:
            raise ValueError("empty concept name")
        return v


class ConceptBatch(BaseModel):
    concepts: list[GeneratedConcept] = Field(min_length=1)


#: Concepts asked of the LLM in one generation.
N_CONCEPTS = Bound(1, 100_000)
#: The cosine similarity at which concepts merge: the range of concepts.dedup_threshold.
DEDUP_THRESHOLD = from_field(ConceptsSection, "dedup_threshold")


def generate_concepts(project: Project, *, n: int = 100, model: str | None = None, llm: LLM | None = None) -> dict:
    """Ask the LLM for ``n`` culturally-varying universal concepts with one example entity per country,
    in batches of ``llm.batch_size``. Failed batches are stored (raw reply + error) and counted, never fatal.
    """
    n = N_CONCEPTS.check(n, "n")
    llm = llm or LLM(project, model=model)
    countries = project.countries
    codes = {c.code for c in countries}
    run = start_run(project.db, "concepts.generate", {"n": n, "model": llm.model})
    batch = project.config.llm.batch_size
    added, failed_batches, seen = 0, 0, set()
    remaining, rounds = n, 0
    while remaining > 0 and rounds < max(3, 2 * (n // batch + 1)):
        rounds += 1
        k = min(batch, remaining)
        existing = [r["name"] for r in project.db["concepts"].rows]
        system = None
        if existing:
            system = ("Do not propose any of these concepts, which are already in the list: "
                      + ", ".join(sorted(existing)[:400]))
        obj, _ = llm.json_call(stage="concepts.generate", template="concept_generation.j2",
                               variables={"n": k, "countries": countries}, schema=ConceptBatch,
                               run_id=run, system=system)
        if obj is None:
            failed_batches += 1
            continue
        new_here = 0
        db = project.db
        with transaction(db):
            for item in obj.concepts:
                if item.concept in seen:
                    continue
                seen.add(item.concept)
                res = add_concepts(project, [item.concept], source=f"llm:{llm.model}",
                                   description=item.description or None)
                cid = get_concept(db, item.concept)["id"]
                for code, entity in item.examples.items():
                    code_u = code.strip().upper()
                    if code_u in codes and entity.strip():
                        db["concept_examples"].insert({"concept_id": cid, "country": code_u,
                                                       "entity": entity.strip(), "source": f"llm:{llm.model}"},
                                                      ignore=True)
                if res["added"]:
                    new_here += 1
        added += new_here
        remaining -= new_here
        if new_here == 0 and obj is not None:
            break  # the model only repeats itself
    summary = {"requested": n, "added": added, "failed_batches": failed_batches}
    finish_run(project.db, run, summary)
    return summary


# ---------------------------------------------------------------- de-duplication

@dataclass
class ConceptCluster:
    keep: str
    merge: list[str]
    similarity: float


def dedup_concepts(project: Project, *, threshold: float | None = None, embedder: str | None = None,
                   apply: bool = False) -> list[ConceptCluster]:
    """Cluster active concepts whose name embeddings have cosine ≥ ``threshold`` (seed 000 §3.2.1 uses
    BAAI/bge-m3). The kept concept of a cluster is the one with the most images, then the shortest name.
    With ``apply`` the others become ``merged`` with ``merged_into`` pointing at the kept one."""


    cfg = project.config.concepts
    threshold = DEDUP_THRESHOLD.check(cfg.dedup_threshold if threshold is None else threshold, "threshold")
    spec = embedder or cfg.dedup_embedder
    rows = list_concepts(project)
    if len(rows) < 2:
        return []
    names = [r["name"] for r in rows]
    emb = get_embedder(spec, default_family="st").embed_texts(names)
    sims = emb @ emb.T
    pairs = np.argwhere(np.triu(sims, k=1) >= threshold)
    clusters = []
    for idx in connected_clusters(len(names), pairs):  # each sorted, in the order of its first concept
        order = sorted(idx, key=lambda k: (-rows[k]["images"], len(names[k]), names[k]))
        keep, rest = order[0], order[1:]
        sub = sims[np.ix_(idx, idx)]
        clusters.append(ConceptCluster(keep=names[keep], merge=[names[k] for k in rest],
                                       similarity=float(sub[np.triu_indices(len(idx), 1)].min())))
    if apply:
        db = project.db
        with transaction(db):
            for c in clusters:
                kid = get_concept(db, c.keep)["id"]
                for m in c.merge:
                    db["concepts"].update(get_concept(db, m)["id"], {
                        "status": "merged", "merged_into": kid, "updated_at": now(),
                        "reason": f"near-duplicate of '{c.keep}' (cosine ≥ {threshold}, {spec})"})
    return clusters


# ---------------------------------------------------------------- native terms (translation)

class TermMap(BaseModel):
    terms: dict[str, str]


def _language(project: Project, code):
    lang = project.registry.languages.get(code)
    return lang or type("L", (), {"code": code, "name": code})()


def translate_concepts(project: Project, *, model: str | None = None, overwrite: bool = False,
                       llm: LLM | None = None) -> dict:
    """Native term of every active concept for every country's primary language, by LLM.

    English-speaking countries get the English name (source ``english``). Terms set by hand (source
    ``manual``) are never overwritten. Missing terms after the run are reported, not fatal."""
    llm = llm or LLM(project, model=model)
    db = project.db
    concepts = active_concepts(db)
    run = start_run(db, "concepts.translate", {"model": llm.model})
    stored, failed, skipped = 0, 0, 0
    batch = project.config.llm.batch_size
    for country in project.countries:
        lang = country.language
        have = {r["concept_id"]: r for r in db["terms"].rows_where("country = ? AND language = ?",
                                                                   [country.code, lang])}
        todo = [c for c in concepts if c["id"] not in have
                or (overwrite and have[c["id"]]["source"] not in ("manual",))]
        skipped += len(concepts) - len(todo)
        if not todo:
            continue
        if lang == "en":
            stored += store_english_terms(project, countries=[country], concepts=todo)
            continue
        for i in range(0, len(todo), batch):
            part = todo[i:i + batch]
            obj, _ = llm.json_call(stage="concepts.translate", template="concept_translation.j2", variables={
                "concepts": [c["name"] for c in part], "language": _language(project, lang),
                "country": country}, schema=TermMap, run_id=run)
            if obj is None:
                failed += len(part)
                continue
            got = {}
            for k, v in obj.terms.items():
                try:  # a reply key or term the validator refuses counts as a failed translation
                    got[normalise(k)] = _term(v)
                except BadName:
                    continue
            got = {k: v for k, v in got.items() if k and v}
            with transaction(db):
                for c in part:
                    if c["name"] in got:
                        _store_term(db, c["id"], country.code, lang, got[c["name"]], f"llm:{llm.model}")
                        stored += 1
                    else:
                        failed += 1
    summary = {"stored": stored, "failed": failed, "kept": skipped}
    finish_run(db, run, summary)
    return summary


def store_english_terms(project: Project, *, countries=None, concepts=None) -> int:
    """For countries whose primary language is English the native term is the concept name (source
    ``english``): no LLM needed. Existing terms are kept. Returns how many were stored."""
    db = project.db
    concepts = active_concepts(db) if concepts is None else concepts
    n = 0
    with transaction(db):
        for country in countries or project.countries:
            if country.language != "en":
                continue
            have = {r["concept_id"] for r in db["terms"].rows_where("country = ?", [country.code])}
            for c in concepts:
                if c["id"] not in have or db["terms"].get((c["id"], country.code, "en"))["source"] == "english":
                    _store_term(db, c["id"], country.code, "en", c["name"], "english")
                    n += 1
    return n


def _store_term(db, concept_id, country, language, term, source):
    db["terms"].upsert({"concept_id": concept_id, "country": country, "language": language, "term": term,
                        "source": source, "updated_at": now()}, pk=("concept_id", "country", "language"))


def set_term(project: Project, concept, country: str, term: str, *, language: str | None = None) -> dict:
    """Set a native term by hand (source ``manual``: never overwritten by translation)."""
    c = project.country(country)
    if c.code not in {x.code for x in project.countries}:
        raise CulturaError(f"{c.code} is not one of this project's countries "
                           f"({', '.join(x.code for x in project.countries)}). Add it to cultura.toml first.")
    row = get_concept(project.db, concept)
    lang = language or c.language
    term = _term(term)
    if not term:
        raise CulturaError("The term is empty. Give the native word or phrase.", param="term")
    _store_term(project.db, row["id"], c.code, lang, term, "manual")
    return {"concept": row["name"], "country": c.code, "language": lang, "term": term}


def set_terms_from_file(project: Project, path) -> dict:
    """Set many native terms by hand from a CSV or TSV file (``.tsv``/``.tab`` = tab-separated) with the columns
    ``concept``, ``country``, ``term`` and optionally ``language``. Every row is checked first (unknown concept
    or country, empty term: an error naming the line); then all are written in one transaction."""
    p = Path(path)
    if not p.is_file():
        raise CulturaError(f"No file {str(p)!r}. Give a CSV/TSV with columns concept, country, term[, language].")
    delim = "\t" if p.suffix.lower() in (".tsv", ".tab") else ","
    rows = _read_term_rows(p, delim)
    need = {"concept", "country", "term"}
    cols = set(rows[0]) if rows else set()
    if not rows or not need <= cols:
        raise CulturaError(f"{p.name} needs a header with the columns concept, country, term (and optionally "
                           f"language); found {', '.join(sorted(c for c in cols if c)) or 'no rows'}.")
    checked = []
    for n, r in enumerate(rows, start=2):
        try:
            c = project.country(r["country"])
            if c.code not in {x.code for x in project.countries}:
                raise CulturaError(f"{c.code} is not one of this project's countries")
            row = get_concept(project.db, r["concept"])
            term = _term(r.get("term"))
        except CulturaError as e:
            raise CulturaError(f"{p.name} line {n}: {e}") from None
        if not term:
            raise CulturaError(f"{p.name} line {n}: the term is empty.")
        checked.append((row["id"], c.code, (r.get("language") or "").strip() or c.language, term))
    with transaction(project.db):
        for cid, cc, lang, term in checked:
            _store_term(project.db, cid, cc, lang, term, "manual")
    return {"terms": len(checked), "file": str(p)}


def _read_term_rows(p: Path, delim: str) -> list[dict]:
    """The rows of a terms file; a malformed line (a field over the csv module's 128 KiB limit, a NUL byte, an
    unclosed quote) or text that is not UTF-8 is one sentence naming the line, never a ``_csv.Error``."""
    rows = []
    try:
        with p.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.DictReader(f, delimiter=delim)
            for r in reader:
                rows.append(r)
    except csv.Error as e:
        kind = "TSV" if delim == "\t" else "CSV"
        raise CulturaError(f"{p.name} line {reader.reader.line_num}: cannot be read as {kind} ({e}); fix that line "
                           "and rerun.") from None
    except UnicodeDecodeError as e:
        raise CulturaError(f"{p.name} is not UTF-8 text ({e.reason} at byte {e.start}); save it as UTF-8 and "
                           "rerun.") from None
    return rows


def list_terms(project: Project, *, country: str | None = None) -> list[dict]:
    sql = """SELECT c.name AS concept, t.country, t.language, t.term, t.source FROM terms t
             JOIN concepts c ON c.id = t.concept_id WHERE c.status = 'active'"""
    params = []
    if country:
        sql += " AND t.country = ?"
        params.append(project.country(country).code)
    return [dict(r) for r in project.db.query(sql + " ORDER BY c.name, t.country", params)]


# ---------------------------------------------------------------- queries

def build_queries(project: Project) -> dict:
    """Search queries per active concept × country: English ``"{concept} {Country}"`` and native
    ``"{term} {native country name}"``, each with the country's search region. Idempotent; a native query
    whose term changed is marked ``stale`` (kept, not searched again)."""
    db = project.db
    terms = {(r["concept_id"], r["country"]): r for r in db["terms"].rows}
    created = 0
    missing = []
    rows = []
    for c in active_concepts(db):
        for country in project.countries:
            rows.append({"concept_id": c["id"], "country": country.code, "language": "en", "kind": "english",
                         "text": f"{c['name']} {country.name}", "region": country.ddg_region})
            if country.language != "en":
                t = terms.get((c["id"], country.code))
                if t is None:
                    missing.append(f"{c['name']}/{country.code}")
                    continue
                rows.append({"concept_id": c["id"], "country": country.code, "language": t["language"],
                             "kind": "native", "text": f"{t['term']} {country.native_name}",
                             "region": country.ddg_region})
    with transaction(db):
        before = db.execute("SELECT count(*) FROM queries").fetchone()[0]
        for r in rows:
            db["queries"].insert({**r, "status": "active", "created_at": now()}, ignore=True)
        created = db.execute("SELECT count(*) FROM queries").fetchone()[0] - before
        # native queries whose text no longer matches the current term are stale
        current = {(r["concept_id"], r["country"], r["kind"], r["text"]) for r in rows}
        for q in db.query("SELECT id, concept_id, country, kind, text, status FROM queries "
                          "WHERE kind IN ('english', 'native') AND status IN ('active', 'stale')"):
            key = (q["concept_id"], q["country"], q["kind"], q["text"])
            status = "active" if key in current else "stale"
            if q["status"] != status:
                db["queries"].update(q["id"], {"status": status})
    return {"created": created, "total": len(rows), "missing_terms": len(missing),
            "missing_examples": missing[:10]}
