"""Benchmark query texts, parallel across languages by construction (seed 000 §3.2, App. S).

Variants stored in ``benchmark_queries`` per concept × country (its primary language):

- ``short``: the native term exactly (``terms``), source ``term``;
- ``task`` / ``casual``: verbose queries from one LLM call per concept covering every country at once
  (``templates/prompts/verbose_query.j2``, seed 000 Figure 22), so the sentences are parallel;
- ``mention_<CC>``: the short descriptor query of RQ3 ("Train of Japan" written in Thai), per concept × query
  country × descriptor country CC (:func:`build_mention_queries`: LLM, ``mention_query.j2``, or a per-language
  pattern from ``data/mention_patterns.toml``); ``descriptor_country`` = CC;
- ``task_mention_<CC>`` / ``casual_mention_<CC>``: the English verbose sentences with a descriptor for country
  CC inserted and translated into the target language (``descriptor_query.j2``, Figure 23);
  ``descriptor_country`` = CC.

Every LLM text is validated: it must contain the native term exactly, and carry no culture cue — no country
name, native country name, language name or nationality adjective from the registry, nor a country's name in
the query's language (CLDR, through babel), other than the descriptor country's own for ``*_mention_<CC>``
variants — and a ``*mention_<CC>`` text must name CC in the query language (the check:
:mod:`cultura.curate.cues`). A text failing a check is stored with status ``invalid`` and the reason, never
dropped. Texts set by a person (:mod:`cultura.curate.query_edits`, source ``manual``) are never overwritten.

The texts are curated before any benchmark exists (``cultura build queries``): annotation rates the LLM-written
ones (kind ``translation``: :func:`translation_pairs`) and a build freezes the ones it uses
(``benchmark_query_snapshot``, the benchmark's own copy). So curation owns ``benchmark_queries``, below both.

>>> validate_text("I need a picture of a bus for school", "bus", cue_patterns(["JP"]))
>>> validate_text("A Japanese bus please", "bus", cue_patterns(["JP"]))
"culture cue 'Japanese'"
>>> validate_text("ขอรูปรถบัส", "รถบัส", cue_patterns(allow=["JP"], language="th"))
"descriptor JP missing in language 'th' (looked for 'ญี่ปุ่น')"
>>> validate_text("ขอรูปรถบัสญี่ปุ่น", "รถบัส", cue_patterns(allow=["JP"], language="th"))
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from pydantic import RootModel

from .. import db as dbmod
from ..countries import registry
from ..db import transaction
from ..errors import CulturaError, unknown
from ..models.llm import LLM
from .cues import DEMONYMS, cldr_locale, cue_patterns, language_forms, mention_table, of_phrase, validate_text

if TYPE_CHECKING:
    from ..project import Project

STAGE = "build.queries"


class QueryError(CulturaError):
    """Queries cannot be built as asked."""


class VerboseReply(RootModel[dict[str, dict[str, dict[str, str]]]]):
    """``{concept: {"format_task"|"format_casual": {country name: text}}}`` (Figure 22 output)."""


class DescriptorReply(RootModel[dict[str, dict[str, dict[str, dict[str, str]]]]]):
    """``{concept: {"format_task"|"format_casual": {target name: {"mention_<Name>": text}}}}`` (Figure 23)."""


def native_terms(project: Project) -> dict[tuple[int, str], str]:
    """(concept_id, country) -> native term in the country's primary language; for an English-speaking
    project country without one, the concept's English name (:func:`english_defaults` says which)."""
    reg = registry()
    out = {}
    for cid, country, language, term in project.db.execute(
            "SELECT concept_id, country, language, term FROM terms"):
        c = reg.countries.get(country)
        if c is not None and c.language == language:
            out[(cid, country)] = term
    english = [c.code for c in project.countries if c.language == "en"]
    if english:
        for cid, name in project.db.execute("SELECT id, name FROM concepts"):
            for cc in english:
                out.setdefault((cid, cc), name)
    return out


def english_defaults(project: Project, pairs: Iterable[tuple[int, str]]) -> list[tuple[int, str]]:
    """The (concept_id, country) pairs of English-speaking countries whose term is the concept's English name
    because no term was set (a note for the build's report: 'cultura concepts set-term' gives another)."""
    db = project.db
    english = {c.code for c in project.countries if c.language == "en"}
    have = {(cid, cc) for cid, cc in db.execute("SELECT concept_id, country FROM terms WHERE language = 'en'")}
    return [(cid, cc) for cid, cc in sorted(set(pairs)) if cc in english and (cid, cc) not in have]


def missing_terms(project: Project, pairs: Iterable[tuple[int, str]], *,
                  terms: dict | None = None) -> list[tuple[int, str]]:
    """The (concept_id, country) pairs without a native term in the country's primary language (``terms``: the
    caller's :func:`native_terms`, read once)."""
    have = native_terms(project) if terms is None else terms
    return [p for p in sorted(set(pairs)) if p not in have]


def _missing_error(project: Project, missing) -> QueryError:
    names = {r[0]: r[1] for r in project.db.execute("SELECT id, name FROM concepts")}
    shown = ", ".join(f"{names.get(c, c)} × {k}" for c, k in missing[:8])
    more = f" (and {len(missing) - 8} more)" if len(missing) > 8 else ""
    return QueryError(f"No native term for {shown}{more}. Run 'cultura concepts translate' or set one with "
                      "'cultura concepts set-term CONCEPT COUNTRY TERM'.")


def ensure_short_queries(project: Project, pairs: Iterable[tuple[int, str]]) -> int:
    """Upsert the ``short`` variant (= the native term) for each (concept_id, country) pair through the raw
    connection (no commit: callers may hold a transaction). Manual texts are kept. Returns rows changed."""
    have = native_terms(project)
    conn = project.db.conn
    n = 0
    for cid, country in sorted(set(pairs)):
        term = have.get((cid, country))
        if term is None:
            raise _missing_error(project, [(cid, country)])
        cur = conn.execute(
            "INSERT INTO benchmark_queries (concept_id, country, language, variant, descriptor_country, text, "
            "source, status, reason, updated_at) VALUES (?, ?, ?, 'short', NULL, ?, 'term', 'ok', NULL, ?) "
            "ON CONFLICT (concept_id, country, language, variant) DO UPDATE SET text = excluded.text, "
            "source = 'term', status = 'ok', reason = NULL, updated_at = excluded.updated_at "
            "WHERE benchmark_queries.source != 'manual' AND benchmark_queries.text != excluded.text",
            [cid, country, project.country(country).language, term, dbmod.now()])
        n += cur.rowcount
    return n


def _scope(project: Project, concepts: Iterable[str] | None, countries: Iterable[str] | None):
    db = project.db
    rows = {r[1]: r[0] for r in db.execute("SELECT id, name FROM concepts WHERE status = 'active' ORDER BY name")}
    if concepts:
        for c in concepts:
            if c not in rows:
                raise unknown("concept", c, rows, hint="See 'cultura concepts list'.")
        rows = {c: rows[c] for c in sorted(concepts)}
    cs = project.registry.resolve(countries) if countries else project.countries
    return rows, cs


def build_short_queries(project: Project, *, concepts=None, countries=None) -> dict:
    """The ``short`` query of every active concept × project country. Every missing native term is one
    error (nothing written)."""
    names, cs = _scope(project, concepts, countries)
    pairs = [(cid, c.code) for cid in names.values() for c in cs]
    missing = missing_terms(project, pairs)
    if missing:
        raise _missing_error(project, missing)
    with transaction(project.db):
        changed = ensure_short_queries(project, pairs)
    return {"short": len(pairs), "changed": changed}


# ------------------------------------------------------------------ LLM variants

def _language_label(project: Project, country, countries) -> str:
    lang = project.registry.languages.get(country.language)
    name = lang.name if lang else country.language
    if sum(1 for c in countries if c.language == country.language) > 1:
        return f"{name} ({country.name})"
    return name


def _store(conn, cid, country, language, variant, descriptor, text, source, reason, overwrite) -> str:
    """Upsert one LLM text (manual texts kept; existing ok texts kept unless ``overwrite``)."""
    row = conn.execute("SELECT source, status FROM benchmark_queries WHERE concept_id = ? AND country = ? AND "
                       "language = ? AND variant = ?", [cid, country, language, variant]).fetchone()
    if row and (row[0] == "manual" or (row[1] == "ok" and not overwrite)):
        return "kept"
    status = "invalid" if reason else "ok"
    conn.execute(
        "INSERT INTO benchmark_queries (concept_id, country, language, variant, descriptor_country, text, "
        "source, status, reason, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (concept_id, country, language, variant) DO UPDATE SET text = excluded.text, "
        "descriptor_country = excluded.descriptor_country, source = excluded.source, "
        "status = excluded.status, reason = excluded.reason, updated_at = excluded.updated_at",
        [cid, country, language, variant, descriptor, text or "", source, status, reason, dbmod.now()])
    return status


def _get(d: dict, key: str):
    """Case- and space-insensitive dict lookup (LLMs vary key spelling)."""
    if key in d:
        return d[key]
    norm = {k.strip().lower(): v for k, v in d.items()}
    return norm.get(key.strip().lower())


def build_verbose_queries(project: Project, *, llm=None, model: str | None = None, concepts=None, countries=None,
                          overwrite: bool = False) -> dict:
    """``task`` and ``casual`` variants: one Figure 22 call per concept over all countries (parallel).
    A concept whose call fails is counted under ``failed_calls`` and can be rerun (idempotent)."""

    names, cs = _scope(project, concepts, countries)
    pairs = [(cid, c.code) for cid in names.values() for c in cs]
    terms = native_terms(project)
    missing = missing_terms(project, pairs, terms=terms)
    if missing:
        raise _missing_error(project, missing)
    llm = llm or LLM(project, model=model)
    patterns = {c.language: cue_patterns(language=c.language) for c in cs}
    counts = {"ok": 0, "invalid": 0, "kept": 0, "failed_calls": 0}
    run = dbmod.start_run(project.db, STAGE + ".verbose", {"model": llm.model})
    for cname, cid in names.items():
        variables = {"concept": cname, "countries": [
            {"name": c.name, "native_term": terms[(cid, c.code)], "language": _language_label(project, c, cs)}
            for c in cs]}
        obj, _ = llm.json_call(stage=STAGE, template="verbose_query.j2", variables=variables,
                               schema=VerboseReply, run_id=run)
        if obj is None:
            counts["failed_calls"] += 1
            continue
        reply = _get(obj.root, cname) or (next(iter(obj.root.values())) if len(obj.root) == 1 else {})
        with transaction(project.db):
            for fmt, variant in (("format_task", "task"), ("format_casual", "casual")):
                block = _get(reply, fmt) or {}
                for c in cs:
                    text = _get(block, c.name)
                    term = terms[(cid, c.code)]
                    reason = "missing from the reply" if not text else validate_text(text, term, patterns[c.language])
                    st = _store(project.db.conn, cid, c.code, c.language, variant, None, text, f"llm:{llm.model}",
                                reason, overwrite)
                    counts[st] += 1
    dbmod.finish_run(project.db, run, counts)
    return counts


def _english_base(project: Project, cid) -> tuple[str, str] | None:
    for task, casual in project.db.execute(
            "SELECT t.text, c.text FROM benchmark_queries t JOIN benchmark_queries c ON c.concept_id = t.concept_id "
            "AND c.country = t.country AND c.variant = 'casual' AND c.status = 'ok' WHERE t.concept_id = ? "
            "AND t.language = 'en' AND t.variant = 'task' AND t.status = 'ok' ORDER BY t.country", [cid]):
        return task, casual
    return None


def build_descriptor_queries(project: Project, *, llm=None, model: str | None = None, concepts=None, countries=None,
                             overwrite: bool = False) -> dict:
    """``task_mention_<CC>`` / ``casual_mention_<CC>`` for every target country and every descriptor country
    CC (Figure 23). The English base sentences are the ``task``/``casual`` queries of an English-language
    country; without one, they come from one extra Figure 22 call with English as the only language."""

    names, cs = _scope(project, concepts, countries)
    llm = llm or LLM(project, model=model)
    terms = native_terms(project)
    missing = missing_terms(project, [(cid, c.code) for cid in names.values() for c in cs], terms=terms)
    if missing:
        raise _missing_error(project, missing)
    counts = {"ok": 0, "invalid": 0, "kept": 0, "failed_calls": 0, "no_english_base": 0}
    run = dbmod.start_run(project.db, STAGE + ".descriptor", {"model": llm.model})
    tags = [{"name": c.name, "tag": c.language.upper() + (f"-{c.code}" if sum(
        1 for x in cs if x.language == c.language) > 1 else "")} for c in cs]
    for cname, cid in names.items():
        base = _english_base(project, cid)
        if base is None:
            obj, _ = llm.json_call(stage=STAGE, template="verbose_query.j2", schema=VerboseReply, run_id=run,
                                   variables={"concept": cname, "countries": [
                                       {"name": "English", "native_term": cname, "language": "English"}]})
            reply = (_get(obj.root, cname) or {}) if obj else {}
            task, casual = (_get(_get(reply, "format_task") or {}, "English"),
                            _get(_get(reply, "format_casual") or {}, "English"))
            if not (task and casual):
                counts["no_english_base"] += 1
                continue
            base = (task, casual)
        for target in cs:
            obj, _ = llm.json_call(stage=STAGE, template="descriptor_query.j2", schema=DescriptorReply,
                                   run_id=run, variables={
                                       "concept": cname, "format_task": base[0], "format_casual": base[1],
                                       "target": {"name": target.name,
                                                  "language": _language_label(project, target, cs)},
                                       "countries": tags})
            if obj is None:
                counts["failed_calls"] += 1
                continue
            reply = _get(obj.root, cname) or (next(iter(obj.root.values())) if len(obj.root) == 1 else {})
            term = terms[(cid, target.code)]
            with transaction(project.db):
                for fmt, prefix in (("format_task", "task"), ("format_casual", "casual")):
                    block = _get(_get(reply, fmt) or {}, target.name) or {}
                    for d in cs:
                        text = _get(block, f"mention_{d.name}")
                        reason = ("missing from the reply" if not text else
                                  validate_text(text, term, cue_patterns(allow=[d.code], language=target.language)))
                        st = _store(project.db.conn, cid, target.code, target.language,
                                    f"{prefix}_mention_{d.code}", d.code, text, f"llm:{llm.model}", reason,
                                    overwrite)
                        counts[st] += 1
    dbmod.finish_run(project.db, run, counts)
    return counts


class MentionReply(RootModel[dict[str, dict[str, str]]]):
    """``{concept: {"mention_<Name>": text}}`` (``mention_query.j2``)."""


def mention_patterns() -> dict[str, str]:
    """Language → short descriptor query pattern (``data/mention_patterns.toml``)."""
    return dict(mention_table().get("mention", {}))


def pattern_mention(term: str, language: str, descriptor: str) -> str | None:
    """The short descriptor query for ``term`` in ``language`` naming country ``descriptor`` by the
    language's pattern, or None when the language has no pattern (or the country has no name in it)."""
    pat = mention_patterns().get(language)
    if pat is None:
        return None
    loc = cldr_locale(language)
    country = loc.territories.get(descriptor) if loc is not None else None
    adjective = (DEMONYMS.get(descriptor) or [None])[0]
    of = of_phrase(descriptor, language)
    if (("{country}" in pat and not country) or ("{adjective}" in pat and not adjective)
            or ("{of}" in pat and not of)):
        return None
    return pat.format(term=term, country=country or "", adjective=adjective or "", of=of or "")


def build_mention_queries(project: Project, *, method: str = "llm", llm=None, model: str | None = None, concepts=None,
                          countries=None, descriptors=None, overwrite: bool = False) -> dict:
    """The short descriptor query ``mention_<CC>`` of seed 000 RQ3 ("Train of Japan" written in Thai) for
    every concept × query country × descriptor country CC ≠ the query country.

    ``method="llm"``: one ``mention_query.j2`` call per concept × query country covering every descriptor;
    ``method="pattern"``: the query language's pattern from ``data/mention_patterns.toml`` (languages without
    one are counted under ``no_pattern``: use the LLM or set them by hand). Every text is validated
    (:func:`validate_text`: the native term, the descriptor named in the query language, no other culture
    cue) and stored with status ok or invalid and the reason; manual texts are never overwritten."""
    if method not in ("llm", "pattern"):
        raise QueryError(f"Unknown method {method!r}: use 'llm' or 'pattern'.")
    names, cs = _scope(project, concepts, countries)
    ds = project.registry.resolve(descriptors) if descriptors else cs
    terms = native_terms(project)
    missing = missing_terms(project, [(cid, c.code) for cid in names.values() for c in cs], terms=terms)
    if missing:
        raise _missing_error(project, missing)
    counts = {"ok": 0, "invalid": 0, "kept": 0, "failed_calls": 0, "no_pattern": 0}
    if method == "llm":

        llm = llm or LLM(project, model=model)
    source = f"llm:{llm.model}" if method == "llm" else "pattern"
    run = dbmod.start_run(project.db, STAGE + ".mention", {"method": method,
                                                           **({"model": llm.model} if method == "llm" else {})})
    for cname, cid in names.items():
        for target in cs:
            term = terms[(cid, target.code)]
            dlist = [d for d in ds if d.code != target.code]
            texts: dict[str, str | None] = {}
            if method == "pattern":
                texts = {d.code: pattern_mention(term, target.language, d.code) for d in dlist}
                if all(t is None for t in texts.values()):
                    counts["no_pattern"] += len(dlist)
                    continue
            else:
                obj, _ = llm.json_call(stage=STAGE, template="mention_query.j2", schema=MentionReply, run_id=run,
                                       variables={"concept": cname, "native_term": term,
                                                  "language": _language_label(project, target, cs),
                                                  "countries": [{"name": d.name, "forms": list(
                                                      language_forms(d.code, target.language))} for d in dlist]})
                if obj is None:
                    counts["failed_calls"] += 1
                    continue
                reply = _get(obj.root, cname) or (next(iter(obj.root.values())) if len(obj.root) == 1 else {})
                texts = {d.code: _get(reply, f"mention_{d.name}") for d in dlist}
            with transaction(project.db):
                for d in dlist:
                    text = texts.get(d.code)
                    reason = (("missing from the reply" if method == "llm" else
                               f"the {target.language!r} pattern has no name for {d.code}") if not text else
                              validate_text(text, term, cue_patterns(allow=[d.code], language=target.language)))
                    st = _store(project.db.conn, cid, target.code, target.language, f"mention_{d.code}", d.code,
                                text, source, reason, overwrite)
                    counts[st] += 1
    dbmod.finish_run(project.db, run, counts)
    return counts


def ensure_pattern_mentions(project: Project, keys: Iterable[tuple]) -> dict:
    """Make the missing short descriptor queries ``keys`` (``(concept_id, country, language, "mention_<CC>")``)
    from the query language's pattern where it has one (validated and stored like :func:`build_mention_queries`
    with ``method="pattern"``; manual and valid texts kept). Languages without a pattern are left to the caller
    (counted under ``no_pattern``). One transaction."""
    terms = native_terms(project)
    counts = {"ok": 0, "invalid": 0, "kept": 0, "no_pattern": 0}
    with transaction(project.db):
        for cid, country, language, variant in sorted(set(keys)):
            d = variant.rsplit("_", 1)[1]
            term = terms.get((cid, country))
            text = pattern_mention(term, language, d) if term else None
            if text is None:
                counts["no_pattern"] += 1
                continue
            reason = validate_text(text, term, cue_patterns(allow=[d], language=language))
            counts[_store(project.db.conn, cid, country, language, variant, d, text, "pattern", reason,
                          False)] += 1
    return counts


def build_queries(project: Project, *, verbose: bool = True, descriptors: bool = True, llm=None, model=None,
                  concepts=None, countries=None, overwrite: bool = False) -> dict:
    """All variants: short (terms), then verbose and descriptor ones (short ``mention_<CC>`` and verbose
    ``*_mention_<CC>``) by LLM (each optional)."""
    out = {"short": build_short_queries(project, concepts=concepts, countries=countries)}
    if verbose or descriptors:
        llm = llm or LLM(project, model=model)
    if verbose:
        out["verbose"] = build_verbose_queries(project, llm=llm, concepts=concepts, countries=countries,
                                               overwrite=overwrite)
    if descriptors:
        out["mention"] = build_mention_queries(project, llm=llm, concepts=concepts, countries=countries,
                                               overwrite=overwrite)
        out["descriptor"] = build_descriptor_queries(project, llm=llm, concepts=concepts, countries=countries,
                                                     overwrite=overwrite)
    return out


QUERY_COLUMNS = ("concept_id", "country", "language", "variant", "descriptor_country", "text", "source")


def live_queries(db, *, ordered: bool = False) -> list[dict]:
    """The usable query texts (status ``ok``) as dicts of :data:`QUERY_COLUMNS` (``ordered``: by concept,
    country and variant)."""
    sql = f"SELECT {', '.join(QUERY_COLUMNS)} FROM benchmark_queries WHERE status = 'ok'"
    return [dict(zip(QUERY_COLUMNS, r)) for r in db.execute(
        sql + (" ORDER BY concept_id, country, variant" if ordered else ""))]


def live_query_keys(db) -> set[tuple[int, str, str, str]]:
    """``(concept_id, country, language, variant)`` of the usable query texts."""
    return {tuple(r) for r in db.execute(
        "SELECT concept_id, country, language, variant FROM benchmark_queries WHERE status = 'ok'")}


def query_text(db, concept_id: int, country: str, language: str, variant: str = "short") -> str | None:
    """The stored text of one query variant (whatever its status), or None."""
    row = db.execute("SELECT text FROM benchmark_queries WHERE concept_id = ? AND country = ? AND language = ? AND "
                     "variant = ?", [concept_id, country, language, variant]).fetchone()
    return row[0] if row else None


def store_released_query(db, concept_id: int, q: dict) -> None:
    """Store a query text of a released benchmark (``q``: country, language, variant, descriptor_country, text,
    source) as a usable query, so it is listed and editable; a person's text (source ``manual``) is kept. Part
    of the caller's transaction."""
    db.execute("INSERT INTO benchmark_queries (concept_id, country, language, variant, descriptor_country, "
               "text, source, status, reason, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'ok', NULL, ?) "
               "ON CONFLICT (concept_id, country, language, variant) DO UPDATE SET text = excluded.text, "
               "source = excluded.source, status = 'ok', reason = NULL, updated_at = excluded.updated_at "
               "WHERE benchmark_queries.source != 'manual'",
               [concept_id, q["country"], q["language"], q["variant"], q["descriptor_country"], q["text"],
                q["source"], dbmod.now()])


def translation_pairs(db) -> list[dict]:
    """LLM-written queries (verbose and descriptor variants) beside their English counterpart of the same
    concept and variant: ``{"id", "text", "language", "country", "source"}`` (``source`` the English text), by
    id; manual and short (native-term) queries are not rated."""
    sql = """SELECT q.id, q.text, q.language, q.country, e.text AS source FROM benchmark_queries q
             JOIN benchmark_queries e ON e.concept_id = q.concept_id AND e.variant = q.variant
                  AND e.language = 'en' AND e.status = 'ok'
             WHERE q.language != 'en' AND q.status = 'ok' AND q.source LIKE 'llm:%'
               AND e.id = (SELECT min(id) FROM benchmark_queries x WHERE x.concept_id = q.concept_id
                           AND x.variant = q.variant AND x.language = 'en' AND x.status = 'ok')
             ORDER BY q.id"""
    return [dict(r) for r in db.query(sql)]


def list_queries(project: Project, *, concept: str | None = None, country: str | None = None,
                 status: str | None = None) -> list[dict]:
    """Stored query texts (for review and the translation campaign)."""
    sql = ("SELECT c.name AS concept, q.country, q.language, q.variant, q.text, q.source, q.status, q.reason "
           "FROM benchmark_queries q JOIN concepts c ON c.id = q.concept_id WHERE 1 = 1")
    args = []
    for col, val in (("c.name", concept), ("q.country", country), ("q.status", status)):
        if val:
            sql += f" AND {col} = ?"
            args.append(val)
    return [dict(r) for r in project.db.query(sql + " ORDER BY c.name, q.country, q.variant", args)]
