"""Sampling the trials of one benchmark kind from the eligible pool: role pools by (country, concept) stratum,
candidates rotated over strata in a seeded order, one member per open duplicate set in the whole benchmark
(what :func:`cultura.benchmark.build.build_benchmark` draws, then checks and stores)."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from ..errors import unknown
from .eligible import Pool
from .roles import KINDS, Role


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
