"""Benchmark assembly: seeded forced-choice trials built from the curated image pool (seed 000 §3.2.2–3.2.3).

Two kinds, each a registry entry of role rules (:data:`KINDS`), not an if/elif chain:

- ``association`` (RQ2, three candidates): for a concept C and a query country L —
  ``cr`` an image of C from a culture other than L's; ``lb`` an image of another concept from L's culture that
  carries no tag of C; ``ti`` an image of another concept, no tag of C, not from L's culture.
- ``descriptor`` (RQ3, six candidates): query = C + descriptor country D ≠ L in L's language —
  ``cr`` (C, D), ``orlb`` (C, L), ``or`` (C, third), ``cdr`` (other, D), ``lb`` (other, L), ``ti`` (other, third).

An image's cultures are the countries whose queries found it (``image_links``), with those of the copies a
dedup review dropped in its favour, kept under the one culture rule of :mod:`cultura.curate.cultures_decide`
(open culture questions refuse the build); a relevance decision for (image, country) below ``min_relevance``
removes that culture. An image "carries a tag of C" when
``image_tags`` holds C's name (any source) or the image was found for C. Eligible images passed the human
filter (or ``allow_unreviewed`` when no filter decision exists), were not dropped by dedup review, carry no
open ``culture_conflict`` flag and have ``images.status = 'ok'`` (the pool: :mod:`.eligible`). No two images
of one trial share a duplicate cluster, no image appears twice in a trial, and a benchmark holds one member of an
open duplicate set at most (:mod:`.verify`: a set is one photograph until a dedup review decides).

Seed: one ``numpy.random.Generator(PCG64(seed))`` consumed in a fixed order (cells sorted by concept name,
L, D; every pool sorted by sha256), so the same database and seed give the same benchmark and content hash.
Candidate positions come from a second stream of the same seed (:func:`.readiness.position_orders`: shuffled
per trial, balanced in Latin-square blocks); the role is stored beside each position.

A benchmark is stored only when complete (:mod:`.readiness`): every trial has the queries its suites need,
and, when relevance ratings are used, every culture link of its images is rated (or ``allow_unrated``).

>>> sorted(KINDS)
['association', 'descriptor']
"""
from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from typing import TYPE_CHECKING, Iterable

from .. import db as dbmod
from ..curate.benchmark_queries import (english_defaults, ensure_pattern_mentions, ensure_short_queries, live_queries,
                                        live_query_keys, missing_terms)
from ..curate.concepts import concept_names
from ..annotate.decisions import native_annotators, rated_countries
from ..curate.cultures_decide import require_decided, resolve_rated_conflicts
from ..bounds import COUNT, SEED, VERSION, Bound
from ..errors import unknown
from ..names import benchmark_name
from .eligible import EXCLUSION_REASONS, BuildError, Pool, load_pool  # noqa: F401  (re-exported)
from .roles import KINDS, Role  # noqa: F401  (re-exported)
from .sampling import Trial, sample_trials, tag_cause
from .verify import check_benchmark
from .readiness import (POSITION_METHOD, describe_changes, missing_queries, missing_query_message,
                        position_balance, position_counts, position_orders, signature, unrated_links,
                        unrated_message, used_variants)

if TYPE_CHECKING:
    from ..project import Project


# ------------------------------------------------------------------ writing a benchmark

def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def content_hash(kind: str, items: list[dict], queries: list[dict]) -> str:
    """sha256 over canonical JSON of items (with candidates), queries and the sorted image hashes."""
    images = sorted({c["sha256"] for it in items for c in it["candidates"]})
    payload = {"kind": kind, "items": sorted(items, key=lambda i: i["item_key"]),
               "queries": sorted(queries, key=lambda q: (q["concept"], q["country"], q["variant"])),
               "images": images}
    return hashlib.sha256(_canonical(payload).encode("utf-8")).hexdigest()


def parse_benchmark_spec(spec: str) -> tuple[str, int | None]:
    """``NAME`` or ``NAME@VERSION`` → (name, version or None)."""
    name, _, ver = spec.partition("@")
    if not name:
        raise BuildError(f"Benchmark {spec!r} has no name. Write NAME or NAME@VERSION.")
    if ver:
        try:
            return name, int(ver.lstrip("v"))
        except ValueError:
            raise BuildError(f"Benchmark version {ver!r} is not an integer. Write NAME@VERSION, e.g. "
                             f"{name}@1.") from None
    return name, None


def get_benchmark(project: Project, spec: str | None = None) -> dict:
    """The benchmark row for ``NAME[@VERSION]`` (latest ready version when none is given; the latest ready
    benchmark of any name when ``spec`` is None)."""
    db = project.db
    if spec is None:
        row = db.execute("SELECT id FROM benchmarks WHERE status = 'ready' ORDER BY id DESC LIMIT 1").fetchone()
        if row is None:
            raise BuildError("No benchmark has been built yet. Run 'cultura build association' first.")
        return db["benchmarks"].get(row[0])
    name, version = parse_benchmark_spec(spec)
    sql, args = "SELECT id FROM benchmarks WHERE name = ? AND status = 'ready'", [name]
    if version is not None:
        sql, args = sql + " AND version = ?", args + [version]
    row = db.execute(sql + " ORDER BY version DESC LIMIT 1", args).fetchone()
    if row is None:
        names = [r[0] for r in db.execute("SELECT DISTINCT name FROM benchmarks")]
        if name in names:
            raise BuildError(f"Benchmark {name!r} has no version {version}. See 'cultura build list'.")
        raise unknown("benchmark", name, names, hint="See 'cultura build list'.")
    return db["benchmarks"].get(row[0])


def _next_version(db, name: str, version: int | None) -> int:
    versions = {r[0] for r in db.execute("SELECT version FROM benchmarks WHERE name = ?", [name])}
    if version is None:
        return max(versions, default=0) + 1
    version = VERSION.check(version, "version")
    if version in versions:
        raise BuildError(f"Benchmark {name!r} version {version} already exists. Give no version to build "
                         f"version {max(versions) + 1}, or choose another name.", param="version")
    return version


#: Trials per concept × query country (× descriptor) cell.
PER_PAIR = Bound(1, 10_000)


def build_benchmark(project: Project, kind: str, *, name: str | None = None, version: int | None = None,
                    seed: int = 0, per_pair: int = 1, concepts: Iterable[str] | None = None,
                    countries: Iterable[str] | None = None, descriptors: Iterable[str] | None = None,
                    allow_unreviewed: bool = False, min_relevance: float | None = 4.0,
                    allow_random_tags: bool = False, allow_unrated: bool = False) -> dict:
    """Build, store and return a versioned benchmark (the ``benchmarks`` row plus its ``report``, ``reused`` and
    ``changes``: what differs from the previous version, or nothing when an identical one was reused).

    Everything is checked before anything is written (name + version free, integer seed, a native term for
    every query concept × country, every query the trials' suites need — short descriptor queries are made from
    the language's pattern where one exists —, a relevance rating for every culture link of the images kept
    when ratings are used, unless ``allow_unrated``); the benchmark, its items, candidates (in seeded, balanced
    positions), the short queries and the snapshot of the query variants the trials use are then written in
    one transaction. ``report`` lists what was excluded and why."""

    if kind not in KINDS:
        raise unknown("benchmark kind", kind, KINDS)
    seed, per_pair = SEED.check(seed, "seed"), PER_PAIR.check(per_pair, "per_pair")
    db = project.db
    name = benchmark_name(name or kind)
    asked_version = version
    version = _next_version(db, name, version)
    reg = project.registry
    L_codes = [c.code for c in (reg.resolve(countries) if countries else project.countries)]
    D_codes = [c.code for c in reg.resolve(descriptors)] if descriptors else None
    # the ratings on record settle the culture questions they cover, whichever came first, flag or rating
    resolve_rated_conflicts(db, "ratings on record", rated_countries(db))
    pool = load_pool(project, allow_unreviewed=allow_unreviewed, min_relevance=min_relevance,
                     allow_random_tags=allow_random_tags)
    require_decided(db, pool.excluded)  # open culture questions block the build (one sentence naming the fix)
    by_name = {v: k for k, v in pool.concept_names.items()}
    if concepts:
        bad = [c for c in concepts if c not in by_name]
        if bad:
            raise unknown("concept", bad[0], by_name, hint="See 'cultura concepts list'.")
        cids = [by_name[c] for c in concepts]
    else:
        cids = sorted({c for ls in pool.links.values() for c, _ in ls})
    trials, srep = sample_trials(pool, kind, concepts=cids, countries=L_codes, descriptors=D_codes,
                                 per_pair=per_pair, seed=int(seed))
    if not trials:
        holes = srep["too_few_images"]
        roles = sorted({h["role"] for h in holes})
        raise BuildError(
            f"No {kind} trial could be built: {srep['cells']} cells, every one short of images "
            f"(role{'s' if len(roles) != 1 else ''} {', '.join(roles) or '-'}; {srep['duplicate_conflicts']} "
            f"duplicate conflicts; {len(pool.links)} eligible of {pool.total} linked images). A benchmark "
            "with no trials is not stored. " + (tag_cause(pool, cids) or "See 'cultura build stats' for images "
            "per concept × country; add images or concepts, or review fewer of them away."))
    lang = {c: reg.country(c).language for c in L_codes}
    pairs = sorted({(t.concept_id, t.query_country) for t in trials})
    missing = missing_terms(project, pairs)
    if missing:
        shown = ", ".join(f"{pool.concept_names[c]} × {k}" for c, k in missing[:8])
        more = f" (and {len(missing) - 8} more)" if len(missing) > 8 else ""
        raise BuildError(f"No native term for {shown}{more}. Run 'cultura concepts translate' or set one "
                         "with 'cultura concepts set-term CONCEPT COUNTRY TERM', then rebuild.")
    relevance = _relevance_coverage(project, pool, trials, allow_unrated)
    keys = [(t.concept_id, t.query_country, lang[t.query_country], t.descriptor_country) for t in trials]
    _complete_queries(project, kind, keys, pool.concept_names)
    orders = position_orders(len(trials), len(KINDS[kind]), int(seed))
    items = []
    for t, order in zip(trials, orders):
        cname = pool.concept_names[t.concept_id]
        key = f"{t.query_country}/{t.descriptor_country or '-'}/{cname}/{t.index}"
        items.append({"item_key": key, "concept": cname, "query_country": t.query_country,
                      "query_language": lang[t.query_country], "descriptor_country": t.descriptor_country,
                      "candidates": [{"role": r, "position": order[i], "sha256": sha,
                                      "concept": pool.concept_names[c], "country": k}
                                     for i, (r, sha, c, k) in enumerate(t.candidates)]})
    counts = position_counts([(c["role"], c["position"]) for c in it["candidates"]] for it in items)
    # an English-speaking country's term, when none was set, is the concept's English name: said, not hidden
    english = english_defaults(project, pairs)
    report = {"english_terms": {"count": len(english),
                                "examples": [f"{pool.concept_names[c]} × {k}" for c, k in english[:5]]},
              "images": pool.report(), "sampling": srep, "allow_unreviewed": allow_unreviewed,
              "min_relevance": min_relevance if pool.ratings else None, "relevance": relevance,
              "positions": {"method": POSITION_METHOD, "seed": int(seed), "counts": counts,
                            **position_balance(counts)}}
    params = {"per_pair": per_pair, "countries": L_codes, "descriptors": D_codes,
              "concepts": sorted(concepts) if concepts else None, "allow_unreviewed": allow_unreviewed,
              "min_relevance": min_relevance, "allow_random_tags": allow_random_tags,
              "allow_unrated": allow_unrated, "positions": POSITION_METHOD}
    run_id = dbmod.start_run(db, f"build.{kind}", {"name": name, "version": version, "seed": int(seed),
                                                   **params})
    wanted = {(cid, L, lg, v) for cid, L, lg, D in keys for v in used_variants(kind, D)}
    conn = db.conn
    reused = None
    try:
        with dbmod.transaction(db):  # one transaction: the benchmark, its items, candidates and snapshot
            ensure_short_queries(project, pairs)
            qrows = [q for q in live_queries(db, ordered=True)   # exactly the variants the trials use
                     if (q["concept_id"], q["country"], q["language"], q["variant"]) in wanted]
            queries = [{"concept": pool.concept_names[q["concept_id"]], **{k: v for k, v in q.items()
                                                                           if k != "concept_id"}}
                       for q in qrows]
            chash = content_hash(kind, items, queries)
            if asked_version is None:  # identical inputs and seed: the existing version, not a copy of it
                reused = conn.execute(
                    "SELECT id FROM benchmarks WHERE name = ? AND kind = ? AND seed = ? AND content_hash = ? "
                    "AND params = ? AND status = 'ready' ORDER BY version DESC LIMIT 1",
                    [name, kind, int(seed), chash, dbmod.dumps(params)]).fetchone()
            if reused:
                raise _Reused(reused[0])
            prev = conn.execute("SELECT id, version FROM benchmarks WHERE name = ? ORDER BY version DESC LIMIT 1",
                                [name]).fetchone()
            old = signature(conn, prev[0]) if prev else None
            # re-checked under the write lock: another process may have built this version meanwhile
            version = _next_version(db, name, asked_version)
            bid = _insert(conn, "benchmarks", {
                "name": name, "version": version, "kind": kind, "seed": int(seed),
                "params": dbmod.dumps(params), "content_hash": chash, "n_items": len(items),
                "report": dbmod.dumps(report), "status": "ready", "created_at": dbmod.now()})
            for t, it in zip(trials, items):
                iid = _insert(conn, "benchmark_items", {
                    "benchmark_id": bid, "item_key": it["item_key"], "concept_id": t.concept_id,
                    "query_country": t.query_country, "query_language": it["query_language"],
                    "descriptor_country": t.descriptor_country})
                for c, (r, sha, cid, k) in zip(it["candidates"], t.candidates):
                    _insert(conn, "benchmark_candidates", {"item_id": iid, "role": r, "position": c["position"],
                                                           "sha256": sha, "concept_id": cid, "country": k})
            for q in qrows:
                _insert(conn, "benchmark_query_snapshot", {"benchmark_id": bid, **q})
            # the one check export runs, on the version about to be committed: what build writes, export takes
            check = check_benchmark(project, db["benchmarks"].get(bid), pool=pool)
            if not check["supported"]:
                raise BuildError(f"The {kind} benchmark this build would write breaks its own rules ("
                                 + "; ".join(c["text"] for c in check["changes"]) + (check["ready"] or "")
                                 + "): nothing was written.")
            changes = describe_changes(old, signature(conn, bid)) or [
                f"nothing changed since v{prev[1]} (version {version} was asked for)"]
    except _Reused as r:
        row = db["benchmarks"].get(r.benchmark_id)
        dbmod.finish_run(db, run_id, {"benchmark_id": row["id"], "n_items": row["n_items"], "reused": True,
                                      "version": row["version"]})
        return {**row, "report": json.loads(row["report"] or "{}"), "reused": True, "changes": [],
                "message": f"reused v{row['version']} (nothing changed)"}
    except Exception as e:
        dbmod.finish_run(db, run_id, status="failed", error=str(e))
        raise
    dbmod.finish_run(db, run_id, {"benchmark_id": bid, "n_items": len(items), "changes": changes})
    return {**db["benchmarks"].get(bid), "report": report, "reused": False, "changes": changes,
            "message": f"new v{version}: {'; '.join(changes)}"}


def _relevance_coverage(project: Project, pool: Pool, trials: list[Trial], allow_unrated: bool) -> dict:
    """When relevance ratings are used, every culture link of the images the trials keep must be rated: refuse
    (naming the countries without a native annotator) unless ``allow_unrated``. Returns the report entry."""
    if not pool.ratings:
        return {"used": False, "allow_unrated": allow_unrated, "unrated_links": 0, "unrated_by_country": {}}
    shas = {sha for t in trials for _, sha, _, _ in t.candidates}
    unrated = unrated_links(pool.links, pool.rated, shas)
    n_links = sum(len({k for _, k in pool.links[s]}) for s in shas)
    if unrated and not allow_unrated:
        raise BuildError(unrated_message(unrated, native_annotators(project.db), n_links),
                         param="allow_unrated")
    return {"used": True, "allow_unrated": allow_unrated, "links": n_links,
            "unrated_links": sum(unrated.values()), "unrated_by_country": unrated}


def _complete_queries(project: Project, kind: str, keys: list[tuple], names: dict) -> None:
    """Every trial must have the query variants its suites need: missing short descriptor queries are made from
    the query language's pattern (stored, validated); anything still missing refuses the build, naming the
    command that makes it."""
    def have():
        return live_query_keys(project.db)
    missing = [m for m in missing_queries(kind, keys, have()) if m[3] != "short"]  # short: made at write time
    if not missing:
        return
    ensure_pattern_mentions(project, missing)
    missing = [m for m in missing_queries(kind, keys, have()) if m[3] != "short"]
    if missing:
        miss = set(missing)
        n_bad = sum(1 for cid, L, lg, D in keys
                    if any((cid, L, lg, v) in miss for v in used_variants(kind, D, required_only=True)))
        raise BuildError(missing_query_message(missing, len(keys), names, n_missing_trials=n_bad,
                                               then=f"rebuild ('cultura build {kind}')"))


class _Reused(Exception):
    """An identical benchmark exists: roll the build back and return that one."""

    def __init__(self, benchmark_id: int):
        super().__init__(benchmark_id)
        self.benchmark_id = benchmark_id


def _insert(conn, table: str, row: dict) -> int:
    """INSERT through the raw connection (no commit), returning the new rowid."""
    cols = ", ".join(f"[{k}]" for k in row)
    marks = ", ".join("?" for _ in row)
    return conn.execute(f"INSERT INTO [{table}] ({cols}) VALUES ({marks})", list(row.values())).lastrowid


def list_benchmarks(project: Project) -> list[dict]:
    """Every benchmark row (without its report), oldest first."""
    return [dict(zip(("name", "version", "kind", "seed", "n_items", "content_hash", "status", "created_at"), r))
            for r in project.db.execute(
                "SELECT name, version, kind, seed, n_items, content_hash, status, created_at FROM benchmarks "
                "ORDER BY id")]


# ------------------------------------------------------------------ statistics (seed 000 Tables 9 and 10)

def build_stats(project: Project, *, min_images: int = 3, benchmark: str | None = None,
                allow_unreviewed: bool = True, min_relevance: float | None = 4.0) -> dict:
    """Per-country samples (Table 9), per-concept image counts (Table 10) and coverage holes.

    Over the eligible pool (unreviewed images counted unless filter decisions exist), or over the images of
    one benchmark when ``benchmark`` is given. A hole is a concept × country cell with fewer than
    ``min_images`` images."""
    min_images = COUNT.check(min_images, "min_images")
    reg = project.registry
    if benchmark is not None:
        b = get_benchmark(project, benchmark)
        rows = project.db.execute(
            "SELECT DISTINCT c.sha256, c.concept_id, c.country FROM benchmark_candidates c "
            "JOIN benchmark_items i ON i.id = c.item_id WHERE i.benchmark_id = ?", [b["id"]]).fetchall()
        names = concept_names(project.db)
        cells = {(r[0], r[1], r[2]) for r in rows}
        excluded = None
    else:
        pool = load_pool(project, allow_unreviewed=allow_unreviewed, min_relevance=min_relevance,
                         allow_random_tags=True)  # counts only: tags play no part
        names = pool.concept_names
        cells = {(sha, c, k) for sha, ls in pool.links.items() for c, k in ls}
        excluded = pool.report()
    per_country: dict[str, set] = defaultdict(set)
    per_concept: dict[int, set] = defaultdict(set)
    per_cell: dict[tuple, set] = defaultdict(set)
    for sha, c, k in cells:
        per_country[k].add(sha)
        per_concept[c].add(sha)
        per_cell[(c, k)].add(sha)
    codes = [c.code for c in project.countries]
    countries = [{"country": reg.country(k).name if k in reg.countries else k, "code": k,
                  "samples": len(per_country.get(k, ()))} for k in sorted(set(codes) | set(per_country))]
    concepts = [{"concept": names[c], "images": len(s)} for c, s in per_concept.items()]
    concepts.sort(key=lambda r: r["concept"])
    holes = [{"concept": names[c], "country": k, "images": len(per_cell.get((c, k), ()))}
             for c in sorted(per_concept, key=lambda c: names[c]) for k in codes
             if len(per_cell.get((c, k), ())) < min_images]
    avg = round(sum(r["samples"] for r in countries) / len(countries), 2) if countries else 0.0
    return {"countries": countries, "concepts": concepts, "holes": holes, "average_per_country": avg,
            "min_images": min_images, "pool": excluded}
