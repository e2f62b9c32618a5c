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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

import numpy as np

from .. import db as dbmod
from ..annotate.annotators import native_annotators
from ..curate.benchmark_queries import (english_defaults, ensure_pattern_mentions, ensure_short_queries, live_queries,
                                        live_query_keys, missing_terms)
from ..curate.concepts import concept_names
from ..annotate.decisions import rated_countries
from ..curate.cultures_decide import require_decided, resolve_rated_conflicts
from ..bounds import COUNT, SEED, VERSION, Bound
from ..errors import unknown
from ..names import benchmark_name
from .eligible import EXCLUSION_REASONS, BuildError, Pool, load_pool  # noqa: F401  (re-exported)
from .roles import KINDS, Role  # noqa: F401  (re-exported)
from .verify import check_benchmark
from .readiness import (POSITION_METHOD, describe_changes, missing_queries, missing_query_message,
                        position_balance, position_counts, position_orders, signature, unrated_links,
                        unrated_message, used_variants)

if TYPE_CHECKING:
    from ..project import Project


# ------------------------------------------------------------------ sampling

@dataclass
class Trial:
    concept_id: int
    query_country: str
    descriptor_country: str | None
    index: int
    candidates: list[tuple[str, str, int, str]] = field(default_factory=list)  # (role, sha, concept, country)


class _Index:
    """Eligible links by (country, concept) cell, sorted by sha256 (built once per build)."""

    def __init__(self, pool: Pool):
        self.pool = pool
        self.by_cell: dict[tuple[str, int], list[str]] = defaultdict(list)
        self.cultures = {sha: pool.cultures(sha) for sha in pool.links}
        for sha in sorted(pool.links):
            for c, k in sorted(pool.links[sha]):
                self.by_cell[(k, c)].append(sha)
        self.countries = sorted({k for k, _ in self.by_cell})
        self.concepts_in: dict[str, list[int]] = defaultdict(list)
        self.countries_of: dict[int, list[str]] = defaultdict(list)
        for k, c in sorted(self.by_cell):
            self.concepts_in[k].append(c)
            self.countries_of[c].append(k)


def _stratum(idx: _Index, role: Role, concept: int, need: dict, key) -> list[tuple[str, int, str]]:
    """Entries ``(sha256, concept_id, country)`` of one stratum (a (country, concept) cell) of a role's pool."""
    k, c = key
    forbid = {need[f] for f in role.forbid}
    cname = idx.pool.concept_names[concept]
    return [(sha, c, k) for sha in idx.by_cell.get((k, c), ())
            if not idx.cultures[sha] & forbid and (role.same or cname not in idx.pool.tags[sha])]


def _strata_keys(idx: _Index, role: Role, concept: int, need: dict) -> list[tuple[str, int]]:
    """The (country, concept) cells a role may draw from: for the query concept, one per country (balance
    across countries); for other concepts, every (country, concept) pair (balance across both)."""
    forbid = {need[f] for f in role.forbid}
    countries = [need[role.require]] if role.require else idx.countries
    countries = [k for k in countries if k not in forbid]
    if role.same:
        return [(k, concept) for k in countries if (k, concept) in idx.by_cell]
    return [(k, c) for k in countries for c in idx.concepts_in.get(k, ()) if c != concept]


class _Strata:
    """The strata of one role's pool for one cell, computed lazily and cached."""

    def __init__(self, idx, role, concept, need):
        self.args = (idx, role, concept, need)
        self.keys = _strata_keys(idx, role, concept, need)
        self._cache: dict = {}

    def __getitem__(self, key):
        if key not in self._cache:
            self._cache[key] = _stratum(*self.args, key)
        return self._cache[key]

    def entries(self) -> list[tuple[str, int, str]]:
        return sorted(e for k in self.keys for e in self[k])

    def empty(self) -> bool:
        return not any(self[k] for k in self.keys)


def role_pool(pool: Pool, role: Role, concept: int, L: str, D: str | None = None,
              index: _Index | None = None) -> list[tuple[str, int, str]]:
    """Every entry ``(sha256, concept_id, country)`` that may fill ``role`` for the cell (concept, L, D),
    sorted, so the result does not depend on row order."""
    return _Strata(index or _Index(pool), role, concept, {"L": L, "D": D}).entries()


def _pick(rng, strata: _Strata, order, start, used, trial_shas, trial_clusters, pool, reuse=True, taken=None):
    """Pick one entry, trying strata in rotated order; unused entries first, reused ones only if allowed.
    ``taken``: open duplicate set → the member the benchmark already holds (no other member may join it)."""
    taken = taken if taken is not None else {}
    for allow_reuse in ((False, True) if reuse else (False,)):
        for j in range(len(order)):
            group = strata[order[(start + j) % len(order)]]
            ok = [e for e in group if e[0] not in trial_shas
                  and not (pool.clusters.get(e[0], set()) & trial_clusters)
                  and taken.get(pool.sets.get(e[0]), e[0]) == e[0]
                  and (allow_reuse or e[0] not in used)]
            if ok:
                return ok[int(rng.integers(len(ok)))]
    return None


def tag_conflicts(pool: Pool, concepts: Iterable[int]) -> dict[str, int]:
    """Per concept C: images kept out of C's distractor pools only because they carry a tag of C."""
    wanted = {pool.concept_names[c] for c in concepts}
    out = {name: 0 for name in sorted(wanted)}
    for sha, tags in pool.tags.items():
        own = {pool.concept_names[c] for c, _ in pool.links[sha]}
        for t in tags - own:
            if t in wanted:
                out[t] += 1
    return out


def tag_cause(pool: Pool, concepts: Iterable[int]) -> str | None:
    """When the image tags are why distractor roles stay empty (most eligible images carry the tag of every
    other concept, e.g. CLIP's default top-3 tags with three concepts), the sentence naming that cause and the
    fix; else None."""
    names = {pool.concept_names[c] for c in concepts}
    if len(names) < 2 or not pool.tags:
        return None
    every = sum(1 for tags in pool.tags.values() if names <= tags)
    if every * 2 < len(pool.tags):
        return None
    return (f"The tags are the cause: {every} of {len(pool.tags)} eligible images carry the tag of every concept "
            f"({', '.join(sorted(names))}), so none can be a distractor for another concept. Retag with fewer "
            "tags per image ('cultura images tag --overwrite --top-k 1', or tag.top_k in cultura.toml) and rebuild.")


def sample_trials(pool: Pool, kind: str, *, concepts: Iterable[int], countries: Iterable[str],
                  descriptors: Iterable[str] | None = None, per_pair: int = 1,
                  seed: int = 0) -> tuple[list[Trial], dict]:
    """Sample the trials of one benchmark kind. Returns ``(trials, report)``.

    For every cell (concept C, query country L[, descriptor D]) up to ``per_pair`` trials are built; the
    number is capped by the distinct ``cr`` images available (``cr`` images are never reused within a cell;
    distractors are reused only when their pool runs out). Within a role, candidates rotate over strata
    ((country, concept) cells) in a seeded order, so sampling is balanced across countries and concepts. A cell with an empty role pool is reported under
    ``too_few_images``; a trial that cannot avoid a duplicate-cluster clash under ``duplicate_conflicts``.
    Invariant: ``requested_trials == built_trials + missing_trials``."""
    if kind not in KINDS:
        raise unknown("benchmark kind", kind, KINDS)
    roles = KINDS[kind]
    rng = np.random.Generator(np.random.PCG64(seed))
    idx = _Index(pool)
    countries = sorted(set(countries))
    concepts = sorted(set(concepts), key=lambda c: pool.concept_names[c])
    descs = sorted(set(descriptors if descriptors is not None else countries))
    cells = []
    for c in concepts:
        for L in countries:
            if kind == "descriptor":
                cells += [(c, L, D) for D in descs if D != L]
            else:
                cells.append((c, L, None))
    trials: list[Trial] = []
    too_few, dup_conflicts, missing_trials = [], 0, 0
    taken: dict[int, str] = {}   # one member per open duplicate set in the whole benchmark, not only per trial
    for c, L, D in cells:
        need = {"L": L, "D": D}
        strata = {}
        empty_role = None
        for role in roles:
            s = _Strata(idx, role, c, need)
            if s.empty():
                empty_role = role.name
                break
            strata[role.name] = (s, [s.keys[i] for i in rng.permutation(len(s.keys))])
        cell = {"concept": pool.concept_names[c], "query_country": L, "descriptor_country": D}
        if empty_role:
            too_few.append({**cell, "role": empty_role, "available": 0, "missing": per_pair})
            missing_trials += per_pair
            continue
        n_cr = len({e[0] for e in strata["cr"][0].entries()})
        n = min(per_pair, n_cr)
        if n < per_pair:
            too_few.append({**cell, "role": "cr", "available": n_cr, "missing": per_pair - n})
            missing_trials += per_pair - n
        used: dict[str, set[str]] = defaultdict(set)
        for i in range(n):
            t = Trial(c, L, D, i)
            shas: set[str] = set()
            clus: set[int] = set()
            tk = dict(taken)   # this trial's picks join the benchmark's sets only when the trial is kept
            for role in roles:
                s, order = strata[role.name]
                e = _pick(rng, s, order, i, used[role.name], shas, clus, pool, reuse=role.name != "cr",
                          taken=tk)
                if e is None:
                    break
                if e[0] in pool.sets:
                    tk.setdefault(pool.sets[e[0]], e[0])
                used[role.name].add(e[0])
                shas.add(e[0])
                clus |= pool.clusters.get(e[0], set())
                t.candidates.append((role.name, e[0], e[1], e[2]))
            if len(t.candidates) < len(roles):
                dup_conflicts += 1
                missing_trials += 1
                continue
            taken = tk
            trials.append(t)
    report = {"kind": kind, "cells": len(cells), "requested_trials": len(cells) * per_pair,
              "built_trials": len(trials), "missing_trials": missing_trials, "too_few_images": too_few,
              "duplicate_conflicts": dup_conflicts,
              "tag_conflicts": tag_conflicts(pool, concepts)}
    return trials, report


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
        raise BuildError(unrated_message(unrated, native_annotators(project.db), n_links), param="allow_unrated")
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
