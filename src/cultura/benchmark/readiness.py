"""What makes a benchmark one you can vouch for: complete query coverage, rated culture links, balanced candidate
positions, and an account of what changed between versions.

- **Queries** (:data:`QUERY_USE`): each kind's suites read some query variants per trial. The ``required`` ones
  must exist for every trial (a descriptor trial without its short descriptor query ``mention_<D>`` is not
  evaluated); the ``optional`` ones are read when present. A benchmark's snapshot holds exactly the variants its
  trials use (:func:`used_variants`), so adding variants a benchmark does not use never changes its hash.
- **Relevance**: when relevance ratings are used, every image × culture link of the images a benchmark keeps is
  rated (:func:`unrated_links`); unrated links are refused unless the build was told to keep them
  (``allow_unrated``), which the report and the dataset card record.
- **Positions** (:func:`position_orders`): the candidates of each trial are placed in a seeded order, balanced
  in blocks of ``k`` trials (a Latin square per block: each role takes each position once per block), so no role
  sits at a fixed position; the role stays in its own column.
- **Readiness** (:func:`check_ready`): export refuses a benchmark that is not ready or not complete.
- **Card data** (:func:`card_data`): plain dicts for the dataset card — coverage per country and per rule, role ×
  position counts, the shuffle seed.

>>> used_variants("descriptor", "JP", required_only=True)
('mention_JP',)
>>> sorted(position_counts([[("cr", 0), ("lb", 1)], [("cr", 1), ("lb", 0)]])["cr"])
[0, 1]
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import TYPE_CHECKING, Iterable

import numpy as np

from ..annotate.decisions import native_annotators, rated_links
from ..curate.concepts import concept_names
from ..errors import CulturaError

if TYPE_CHECKING:
    from ..project import Project


#: Query variants the suites read per trial, by benchmark kind ("{D}": the trial's descriptor country).
QUERY_USE: dict[str, dict[str, tuple[str, ...]]] = {
    "association": {"required": ("short",), "optional": ("task", "casual")},
    "descriptor": {"required": ("mention_{D}",),
                   "optional": ("short", "task", "casual", "task_mention_{D}", "casual_mention_{D}")},
}
#: What makes a missing variant (the command named in refusals).
QUERY_FIX = {
    "short": "run 'cultura build queries --short-only' (or set a native term with 'cultura concepts set-term')",
    "mention": "run 'cultura build mention-queries' (--method llm, or --method pattern where the language has "
               "one) or set each by hand with 'cultura build set-query CONCEPT COUNTRY mention_CC TEXT'",
}
#: A second random stream of the benchmark seed, for candidate positions (the sampling stream is unchanged).
POSITION_STREAM = 0x706F73
POSITION_METHOD = "latin-square blocks"


class NotReady(CulturaError):
    """A benchmark is incomplete or not ready (the message names the fix)."""


# ------------------------------------------------------------------ queries

def used_variants(kind: str, descriptor_country: str | None, *, required_only: bool = False) -> tuple[str, ...]:
    """The query variants the suites read for one trial of ``kind`` (only the required ones when asked)."""
    use = QUERY_USE.get(kind, {"required": (), "optional": ()})
    names = use["required"] + (() if required_only else use["optional"])
    out = []
    for v in names:
        if "{D}" in v:
            if not descriptor_country:
                continue
            v = v.format(D=descriptor_country)
        out.append(v)
    return tuple(out)


def missing_queries(kind: str, trials: Iterable[tuple], have: set[tuple]) -> list[tuple]:
    """``(concept_id, country, language, variant)`` keys required by ``trials`` (tuples ``(concept_id,
    query_country, query_language, descriptor_country)``) and absent from ``have``, sorted, each once."""
    out = set()
    for cid, L, lang, D in trials:
        for v in used_variants(kind, D, required_only=True):
            if (cid, L, lang, v) not in have:
                out.add((cid, L, lang, v))
    return sorted(out)


def missing_query_message(missing: list[tuple], n_trials: int, names: dict, *, n_missing_trials: int,
                          then: str) -> str:
    """One sentence: how many trials lack which variants (a few examples) and the command that makes them."""
    shown = ", ".join(f"{v} for {names.get(c, c)} × {k}" for c, k, _, v in missing[:4])
    more = f" and {len(missing) - 4} more" if len(missing) > 4 else ""
    kinds = sorted({"mention" if "mention_" in v else "short" for *_, v in missing})
    fix = "; ".join(QUERY_FIX[k] for k in kinds)
    return (f"{n_missing_trials} of {n_trials} trials lack a query their suites need ({shown}{more}): {fix}, "
            f"then {then}.")


# ------------------------------------------------------------------ relevance coverage

def unrated_links(links: dict[str, set[tuple[int, str]]], rated: set[tuple[str, str]],
                  shas: Iterable[str]) -> dict[str, int]:
    """Per country: links ``(image, country)`` of the images ``shas`` with no relevance rating."""
    out: dict[str, int] = defaultdict(int)
    for sha in set(shas):
        for k in {k for _, k in links.get(sha, ())}:
            if (sha, k) not in rated:
                out[k] += 1
    return dict(sorted(out.items()))


def unrated_message(unrated: dict[str, int], natives: dict[str, int], n_links: int) -> str:
    """One sentence naming the countries with unrated links (those lacking a native annotator first) and the fix."""
    n = sum(unrated.values())
    lacking = [k for k in unrated if not natives.get(k)]
    others = [k for k in unrated if natives.get(k)]
    why = []
    if lacking:
        why.append(f"no active annotator is native to {', '.join(lacking)}")
    if others:
        why.append(f"{', '.join(others)} not yet rated")
    per = ", ".join(f"{k}: {v}" for k, v in unrated.items())
    add = lacking[0] if lacking else "CC"
    return (f"{n} of {n_links} image × culture links this benchmark would keep have no relevance rating ({per}; "
            f"{'; '.join(why)}): add native annotators ('cultura annotate annotators add NAME --email E --country "
            f"{add}'), then 'cultura annotate push relevance', pull and adjudicate, or pass --allow-unrated to "
            "keep unrated links (the dataset card says so).")


# ------------------------------------------------------------------ positions

def position_orders(n_trials: int, n_roles: int, seed: int) -> list[list[int]]:
    """Per trial, the position of each role (in role order): seeded, balanced in blocks of ``n_roles`` trials.

    Block ``b`` draws a base permutation ``p`` and an order of the ``n_roles`` cyclic shifts ``s``; trial ``j`` of
    the block puts role ``r`` at ``(p[r] + s[j]) % n_roles``. Each role then takes each position exactly once per
    complete block, so over ``n`` trials every role × position count is ``n // n_roles`` or one more.

    >>> position_orders(3, 3, 0) == position_orders(3, 3, 0)
    True
    >>> sorted(sum(position_orders(6, 3, 1), []))
    [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2]
    """
    rng = np.random.default_rng([int(seed) % 2 ** 64, POSITION_STREAM])
    out: list[list[int]] = []
    while len(out) < n_trials:
        base = rng.permutation(n_roles)
        shifts = rng.permutation(n_roles)
        for s in shifts:
            if len(out) == n_trials:
                break
            out.append([int((base[r] + s) % n_roles) for r in range(n_roles)])
    return out


def position_counts(trials: Iterable[Iterable[tuple[str, int]]]) -> dict[str, list[int]]:
    """Role → number of trials with that role at position 0, 1, … (from ``(role, position)`` pairs)."""
    trials = [list(t) for t in trials]
    k = max((p for t in trials for _, p in t), default=-1) + 1
    out: dict[str, list[int]] = {}
    for t in trials:
        for role, p in t:
            out.setdefault(role, [0] * k)[p] += 1
    return out


def position_balance(counts: dict[str, list[int]]) -> dict:
    """Pearson's χ² of the role × position table against independence, with its p-value (the same numbers as
    ``scipy.stats.chi2_contingency(table, correction=False)``; computed here so that build imports no scipy)."""
    table = np.array([counts[r] for r in sorted(counts)], dtype=float)
    if table.ndim != 2 or table.shape[0] < 2 or table.shape[1] < 2 or (table.sum(axis=0) == 0).any():
        return {"chi2": None, "p": None, "dof": None}
    expected = np.outer(table.sum(axis=1), table.sum(axis=0)) / table.sum()
    stat = float(((table - expected) ** 2 / expected).sum())
    dof = (table.shape[0] - 1) * (table.shape[1] - 1)
    return {"chi2": stat, "p": chi2_sf(stat, dof), "dof": dof}


def chi2_sf(x: float, dof: int) -> float:
    """P(X ≥ x) for X ~ χ²(dof), integer dof ≥ 1 (closed form: a Poisson sum, with erfc for odd dof).

    >>> round(chi2_sf(3.841458820694124, 1), 6), round(chi2_sf(5.991464547107979, 2), 6)
    (0.05, 0.05)
    """
    if x <= 0:
        return 1.0
    h = x / 2.0
    if dof % 2 == 0:
        term, total = 1.0, 1.0
        for i in range(1, dof // 2):
            term *= h / i
            total += term
        return float(min(1.0, math.exp(-h) * total))
    total = math.erfc(math.sqrt(h))
    for i in range(1, (dof - 1) // 2 + 1):
        total += math.exp(-h + (i - 0.5) * math.log(h) - math.lgamma(i + 0.5))
    return float(min(1.0, total))


# ------------------------------------------------------------------ versions

def signature(conn, benchmark_id: int) -> dict:
    """What a stored benchmark consists of: ``items`` (key → concept, countries and (role, position, image)),
    ``queries`` (key → text), ``seed`` and ``params``."""
    row = conn.execute("SELECT seed, params FROM benchmarks WHERE id = ?", [benchmark_id]).fetchone()
    items = {}
    for iid, key in conn.execute("SELECT id, item_key FROM benchmark_items WHERE benchmark_id = ?", [benchmark_id]):
        items[key] = sorted(tuple(r) for r in conn.execute(
            "SELECT role, position, sha256 FROM benchmark_candidates WHERE item_id = ?", [iid]))
    queries = {(r[0], r[1], r[2], r[3]): r[4] for r in conn.execute(
        "SELECT concept_id, country, language, variant, text FROM benchmark_query_snapshot WHERE benchmark_id = ?",
        [benchmark_id])}
    return {"items": items, "queries": queries, "seed": row[0] if row else None,
            "params": json.loads(row[1] or "{}") if row else {}}


def describe_changes(old: dict | None, new: dict) -> list[str]:
    """Phrases saying what differs between two :func:`signature` dicts (empty when nothing does)."""
    if old is None:
        return ["first version"]
    out = []
    if old["seed"] != new["seed"]:
        out.append(f"seed {old['seed']} → {new['seed']}")
    keys = sorted(set(old["params"]) | set(new["params"]))
    changed = [k for k in keys if old["params"].get(k) != new["params"].get(k)]
    if changed:
        out.append("options " + ", ".join(f"{k} {old['params'].get(k)!r} → {new['params'].get(k)!r}"
                                          for k in changed))
    oi, ni = old["items"], new["items"]
    added = len(set(ni) - set(oi))
    removed = len(set(oi) - set(ni))
    diff = sum(1 for k in set(ni) & set(oi) if [tuple(x) for x in ni[k]] != [tuple(x) for x in oi[k]])
    if added or removed or diff:
        out.append(f"trials +{added} −{removed}, {diff} with other candidates or positions")
    oq, nq = old["queries"], new["queries"]
    qa, qr = len(set(nq) - set(oq)), len(set(oq) - set(nq))
    qd = sum(1 for k in set(nq) & set(oq) if nq[k] != oq[k])
    if qa or qr or qd:
        out.append(f"queries +{qa} −{qr}, {qd} with another text")
    return out


# ------------------------------------------------------------------ readiness and the card

def _items(db, bid: int) -> list[tuple]:
    return db.execute("SELECT id, concept_id, query_country, query_language, descriptor_country "
                      "FROM benchmark_items WHERE benchmark_id = ?", [bid]).fetchall()


def check_ready(project: Project, bench: dict) -> None:
    """Raise :class:`NotReady` (one sentence naming the fix) unless ``bench`` (a ``benchmarks`` row) is ready and
    complete: status ``ready``, every trial has the queries its suites need, and, when relevance ratings were
    used, no unrated link kept without ``allow_unrated``."""
    db = project.db
    ref = f"{bench['name']}@{bench['version']}"
    if bench.get("status") != "ready":
        raise NotReady(f"Benchmark {ref} is {bench.get('status')!r}, not ready: rebuild it with 'cultura build "
                       f"{bench['kind']}' and export the new version.", param="benchmarks")
    items = _items(db, bench["id"])
    have = {tuple(r) for r in db.execute("SELECT concept_id, country, language, variant FROM "
                                         "benchmark_query_snapshot WHERE benchmark_id = ?", [bench["id"]])}
    missing = missing_queries(bench["kind"], [r[1:] for r in items], have)
    if missing:
        names = concept_names(db)
        miss = set(missing)
        n_bad = sum(1 for _, c, L, lang, D in items
                    if any((c, L, lang, v) in miss for v in used_variants(bench["kind"], D, required_only=True)))
        raise NotReady(f"Benchmark {ref} is incomplete and is not exported: " + missing_query_message(
            missing, len(items), names, n_missing_trials=n_bad,
            then=f"rebuild it with 'cultura build {bench['kind']}' and export the new version"), param="benchmarks")
    rep = json.loads(bench.get("report") or "{}")
    rel = rep.get("relevance") or {}
    if rel.get("unrated_links") and not rel.get("allow_unrated"):
        raise NotReady(f"Benchmark {ref} keeps {rel['unrated_links']} unrated image × culture links: rebuild it "
                       "once every link is rated, or with --allow-unrated to publish them as unrated.",
                       param="benchmarks")


def card_data(project: Project, bench: dict, roles: Iterable[str] | None = None) -> dict:
    """Plain data for the dataset card of one benchmark (a ``benchmarks`` row): ``positions`` (method, seed,
    role × position counts and the χ² balance test), ``coverage_by_country`` (trials as query country, images
    and rated / unrated culture links per country, native annotators), ``coverage_by_rule`` (per role rule:
    trials filled; per required query variant: trials that have it) and ``relevance`` (used, allow_unrated,
    unrated links). ``roles``: the kind's roles in their order (default: sorted)."""
    db = project.db
    bid, kind = bench["id"], bench["kind"]
    rep = json.loads(bench.get("report") or "{}")
    items = _items(db, bid)
    cands = db.execute("SELECT c.item_id, c.role, c.position, c.sha256, c.country FROM benchmark_candidates c "
                       "JOIN benchmark_items i ON i.id = c.item_id WHERE i.benchmark_id = ? ORDER BY c.item_id, "
                       "c.position", [bid]).fetchall()
    by_item: dict[int, list] = defaultdict(list)
    for iid, role, pos, sha, k in cands:
        by_item[iid].append((role, pos))
    counts = position_counts(by_item.values())
    pos = rep.get("positions") or {}
    rated = rated_links(db)
    natives = native_annotators(db)
    per_country: dict[str, dict] = defaultdict(lambda: {"trials": 0, "images": set(), "rated": set(),
                                                       "unrated": set()})
    for _, _, L, _, _ in items:
        per_country[L]["trials"] += 1
    for _, _, _, sha, k in cands:
        pc = per_country[k]
        pc["images"].add(sha)
        (pc["rated"] if (sha, k) in rated else pc["unrated"]).add(sha)
    rel = rep.get("relevance") or {}
    used = bool(rel.get("used", rep.get("min_relevance") is not None))
    by_country = [{"country": k, "trials": v["trials"], "images": len(v["images"]),
                   "rated_links": len(v["rated"]) if used else None,
                   "unrated_links": len(v["unrated"]) if used else None,
                   "native_annotators": natives.get(k, 0)} for k, v in sorted(per_country.items())]
    roles = list(roles) if roles is not None else sorted(counts)
    n = len(items)
    have_role: dict[str, int] = defaultdict(int)
    for t in by_item.values():
        for role, _ in t:
            have_role[role] += 1
    smp = rep.get("sampling") or {}
    short_by_role: dict[str, int] = defaultdict(int)
    for h in smp.get("too_few_images", []):
        short_by_role[h["role"]] += h.get("missing", 1)
    have = {tuple(r) for r in db.execute("SELECT concept_id, country, language, variant FROM "
                                         "benchmark_query_snapshot WHERE benchmark_id = ?", [bid])}
    by_rule = [{"rule": f"role {r}", "trials": have_role.get(r, 0), "of": n,
                "cells_short": short_by_role.get(r, 0)} for r in roles]
    for v in QUERY_USE.get(kind, {}).get("required", ()) + QUERY_USE.get(kind, {}).get("optional", ()):
        ok = sum(1 for _, c, L, lang, D in items if "{D}" not in v or D
                 if (c, L, lang, v.format(D=D)) in have)
        by_rule.append({"rule": f"query {v.replace('{D}', '<CC>')}", "trials": ok, "of": n,
                        "required": v in QUERY_USE[kind]["required"]})
    return {"benchmark": f"{bench['name']}@{bench['version']}", "kind": kind,
            "positions": {"method": pos.get("method"), "seed": pos.get("seed", bench.get("seed")),
                          "roles": roles, "counts": counts, **position_balance(counts)},
            "coverage_by_country": by_country, "coverage_by_rule": by_rule,
            "relevance": {"used": used, "allow_unrated": bool(rel.get("allow_unrated")),
                          "unrated_links": int(rel.get("unrated_links") or 0),
                          "unrated_by_country": rel.get("unrated_by_country") or {}}}
