"""Culture decisions: which cultures a photo stands for when it was found for several (seed 000, App. J).

One rule, the same for byte-identical files and near copies. A photo's culture links are the (concept,
country) pairs whose queries found it (``image_links``) plus, once a dedup review drops a copy, the links of
that dropped copy (the kept copy *is* the photo the other query found: :func:`inherited_links`). When those
links span more than one (concept, country) pair, dedup writes a ``culture_conflict`` flag
(:func:`update_conflict_flags_many`, evidence per ``method/scope``) and the question stays **open** until a
culture decision settles it:

- **relevance ratings**: a current relevance decision for every country of the flag (from a relevance campaign
  or ``cultura import ratings``, through the same door), given to the image or to any copy of it (a member of a duplicate cluster it shares) — :func:`resolve_rated_conflicts`; the build then
  keeps the countries rated at or above its ``min_relevance``;
- **an explicit resolution** by a person: ``cultura images flags --resolve SHA --reason TEXT`` keeps every
  country of the flag, ``--cultures JP,US`` keeps only those (:func:`resolve_flags`).

The dedup review decides which copy stays, never which culture: it resolves the duplicate cluster, not the
flag. Open questions block ``cultura build`` (:func:`require_decided`, one sentence naming the commands);
:func:`decided_links` gives the build each image's links under this rule.

Flags follow dedup's rerun rule: an evidence entry that no longer holds is removed, a flag left with none
becomes ``superseded``, and a ``resolved`` flag is reopened only when its list of pairs grows (a decision
covers the pairs it saw).

>>> FLAG
'culture_conflict'
"""
from __future__ import annotations

import functools
import json
from collections import defaultdict
from typing import TYPE_CHECKING, Callable

from ..db import dumps, now, transaction
from ..errors import CulturaError
from ..lazy import lazy
from .images import open_flagged

np = lazy("numpy")  # for the conflict search only (start-up: status lists flags)
confirm = lazy("cultura.curate.confirm")  # likewise (it imports numpy)

if TYPE_CHECKING:
    from ..project import Project

FLAG = "culture_conflict"
ACTIVE_CLUSTERS = ("open", "resolved")
FIX = ("rate them ('cultura annotate push relevance', then 'cultura annotate pull' and 'cultura annotate "
       "adjudicate', or 'cultura import ratings FILE' for every country of each) or decide by hand "
       "('cultura images flags --resolve SHA256 --cultures CC,CC --reason TEXT')")


class CulturesUndecided(CulturaError):
    """Images found for several cultures have no culture decision yet."""


@functools.lru_cache(maxsize=256)
def _key_text(key: str) -> str:
    return json.dumps(key, ensure_ascii=False)


def _pair_json(inv, pairs) -> list[dict]:
    return [{"concept_id": c, "concept": inv.concept_names.get(c), "country": k} for c, k in pairs]


class _FreshTexts:
    """The ``details`` text of new flags, ``dumps({"evidence": {key: item, ...}, "pairs": [...]})`` with each
    item's pairs as JSON, assembled from pieces encoded once: an evidence item is shared by the members of its
    cluster (its text is built once), and the lists of pairs are few (one text each, by an id)."""

    def __init__(self, evidence_by_key: dict[str, dict], as_text: Callable):
        self.order = list(evidence_by_key)  # the first key, in this order, counts a flag as new
        self.sorted_heads = [(k, _key_text(k) + ": ") for k in sorted(self.order)]
        self.plans: dict[tuple, list[tuple[str, str]]] = {}
        self.as_text = as_text
        self.items: dict[int, tuple[str, int]] = {}  # id(item) -> (its text, the id of its pairs)
        self.pair_ids: dict[tuple, int] = {}
        self.pair_lists: list[tuple] = []
        self.pair_texts: list[str] = []
        self.unions: dict[tuple, str] = {}  # sorted ids of pair lists -> the text of their sorted union
        self.shared: dict[int, str] = {}  # id(value) -> its JSON text, for values shared by many items (params)

    def item(self, ev: dict) -> tuple[str, int]:
        """``(dumps(ev with its pairs as JSON), the id of its pairs)``, built once per item."""
        got = self.items.get(id(ev))
        if got is None:
            pairs = tuple(map(tuple, ev["pairs"]))
            pid = self.pair_ids.setdefault(pairs, len(self.pair_ids))
            if pid == len(self.pair_lists):
                self.pair_lists.append(pairs)
                self.pair_texts.append(self.as_text(pairs))
                if list(pairs) == sorted(set(pairs)):  # a flag with only these pairs lists them as they are
                    self.unions[(pid,)] = self.pair_texts[pid]
            names = tuple(ev)
            plan = self.plans.get(names)
            if plan is None:  # the keys sorted, with their texts, once per shape of item
                plan = self.plans[names] = [(k, _key_text(k) + ": ") for k in sorted(names)]
            parts = []
            for k, head in plan:
                v = ev[k]
                if k == "pairs":
                    parts.append(head + self.pair_texts[pid])
                elif type(v) is int:
                    parts.append(head + str(v))
                elif isinstance(v, (dict, list)):
                    if id(v) not in self.shared:
                        self.shared[id(v)] = dumps(v)
                    parts.append(head + self.shared[id(v)])
                else:
                    parts.append(head + dumps(v))
            got = self.items[id(ev)] = ("{" + ", ".join(parts) + "}", pid)
        return got

    def text(self, mine: dict[str, dict]) -> tuple[str, str]:
        """``(the first key of mine, the details text of a new flag holding mine's items)``."""
        parts, pids = [], []
        for ek, head in self.sorted_heads:
            ev = mine.get(ek)
            if ev is not None:
                text, pid = self.item(ev)
                parts.append(head + text)
                pids.append(pid)
        union = tuple(sorted(set(pids)))  # the union of their pairs depends on which lists, not their order
        pairs = self.unions.get(union)
        if pairs is None:
            lists = [self.pair_lists[p] for p in pids]
            pairs = self.unions[union] = self.as_text(tuple(sorted({p for one in lists for p in one})))
        first = next(ek for ek in self.order if ek in mine)
        # == dumps({"pairs": as_json(pairs), "evidence": {ek: item as JSON}}) (tested)
        return first, '{"evidence": {' + ", ".join(parts) + '}, "pairs": ' + pairs + "}"


def update_conflict_flags_many(project: Project, inv, evidence_by_key: dict[str, dict[int, dict]], *,
                               writes: Callable, bump: Callable) -> dict[str, dict]:
    """Write ``culture_conflict`` flags for several evidence keys (``method/scope``) in one pass over the
    stored flags and one ``writes()`` transaction; ``evidence`` maps an inventory index (``inv``:
    :class:`cultura.curate.dedup.Inventory`) to ``{"pairs": [(concept_id, country), ...], ...}``. A flag
    created is counted as new once, for the first key, in order, that has it. ``bump(db)`` is called once
    after inserts (dedup's change counter). Returns ``{key: {"flagged": n, "new": n}}``."""
    db = project.db
    keys = set(evidence_by_key)
    current = {}
    for sha, d, st in db.execute("SELECT sha256, details, status FROM image_flags WHERE flag = ?", [FLAG]):
        current[sha] = (json.loads(d or "{}"), st)
    pair_json: dict[tuple, list[dict]] = {}
    pair_text: dict[tuple, str] = {}

    def as_json(pairs):
        key = tuple(map(tuple, pairs))
        if key not in pair_json:
            pair_json[key] = _pair_json(inv, key)
        return pair_json[key]

    one_text: dict[tuple, str] = {}  # (concept_id, country) -> dumps of its JSON (a few thousand)

    def as_text(pairs):
        """``dumps(as_json(pairs))``, joined from each pair's text (a list's items are ", "-separated)."""
        key = tuple(map(tuple, pairs))
        text = pair_text.get(key)
        if text is None:
            for p in key:
                if p not in one_text:
                    one_text[p] = dumps(_pair_json(inv, [p])[0])
            text = pair_text[key] = "[" + ", ".join([one_text[p] for p in key]) + "]"
        return text

    by_sha: dict[str, dict[str, dict]] = {}
    ready: dict[int, dict] = {}  # id(evidence item) -> the item with its pairs as JSON (items are shared)
    sha_of = inv.sha
    for ek, evidence in evidence_by_key.items():
        for i, ev in evidence.items():
            by_sha.setdefault(sha_of[i], {})[ek] = ev
    ts = now()
    inserts, updates = [], []
    new_by_key = {k: 0 for k in keys}
    stale = {s for s, (d, _) in current.items() if keys & set(d.get("evidence", {}))}
    fresh = _FreshTexts(evidence_by_key, as_text)
    for sha in sorted(set(by_sha) | stale):  # by sha256: see the writes below
        details, status = current.get(sha, ({}, None))
        mine = by_sha.get(sha, {})
        if status is None:  # a new flag: its text depends only on its (shared) items
            first, text = fresh.text(mine)
            inserts.append((sha, FLAG, text, "open", ts))
            new_by_key[first] += 1  # counted once, for the first key
            continue
        ev = dict(details.get("evidence", {}))
        for ek in keys:
            if ek in mine:
                i = id(mine[ek])
                if i not in ready:
                    ready[i] = dict(mine[ek], pairs=as_json(mine[ek]["pairs"]))
                ev[ek] = ready[i]
            else:
                ev.pop(ek, None)
        pairs = sorted({(p["concept_id"], p["country"]) for e in ev.values() for p in e["pairs"]})
        old_pairs = {(p["concept_id"], p["country"]) for p in details.get("pairs", [])}
        new_details = {"pairs": as_json(pairs), "evidence": ev}
        if "resolution" in details:  # who resolved it and why survives reruns
            new_details["resolution"] = details["resolution"]
        if not ev:
            new_status = "superseded"
        elif status == "superseded" or (status == "resolved" and not set(pairs) <= old_pairs):
            new_status = "open"
        else:
            new_status = status
        if new_details != details or new_status != status:
            updates.append([dumps(new_details), new_status, sha, FLAG])
    if updates or inserts:
        # rows by sha256 (the loop's order): each row's key, and the images row its foreign key names, is next
        # to the last one's in their index, not anywhere in it
        with writes():
            db.conn.executemany("UPDATE image_flags SET details = ?, status = ? WHERE sha256 = ? AND flag = ?",
                                updates)
            db.conn.executemany("INSERT INTO image_flags (sha256, flag, details, status, created_at) "
                                "VALUES (?, ?, ?, ?, ?)", inserts)
            if inserts:
                bump(db)  # culture_conflict inserts fire no trigger (db/schema.py m008)
    return {k: {"flagged": len(evidence_by_key[k]), "new": new_by_key[k]} for k in keys}


def resolve_flags(db, shas, *, resolution: str, by: str = "review", flag: str = FLAG,
                  cultures: list[str] | None = None, reopened: bool = False) -> int:
    """Mark the open ``flag`` rows of ``shas`` resolved, recording ``{"by", "resolution", "at"}`` (and
    ``cultures``, the countries the image stands for, when a person names them) in their details (kept by
    later dedup runs; a flag reopens only when its pairs grow). ``reopened``: also re-decide resolved flags (a
    person changing an earlier decision). Returns how many changed. Called by relevance decisions
    (:func:`resolve_rated_conflicts`) and by ``cultura images flags --resolve``."""
    shas = list(dict.fromkeys(shas))
    states = "('open', 'resolved')" if reopened else "('open')"
    n = 0
    for sha, details in db.execute(
            f"SELECT sha256, details FROM image_flags WHERE flag = ? AND status IN {states} AND sha256 IN "
            f"({','.join('?' * len(shas))})", [flag, *shas]).fetchall() if shas else []:
        d = json.loads(details or "{}")
        d["resolution"] = {"by": by, "resolution": resolution, "at": now()}
        if cultures is not None:
            d["resolution"]["cultures"] = sorted(set(cultures))
        db.execute("UPDATE image_flags SET status = 'resolved', details = ? WHERE sha256 = ? AND flag = ?",
                   [dumps(d), sha, flag])
        n += 1
    return n


def reopen_flags(db, shas, *, flag: str = FLAG) -> int:
    """Reopen resolved ``flag`` rows of ``shas`` (an undo of :func:`resolve_flags`)."""
    n = 0
    for sha in dict.fromkeys(shas):
        cur = db.execute("UPDATE image_flags SET status = 'open' WHERE sha256 = ? AND flag = ? AND "
                         "status = 'resolved'", [sha, flag])
        n += cur.rowcount
    return n


def live_flag_rows(db) -> list[tuple[str, str, str, str | None, str]]:
    """``(sha256, flag, status, details JSON, created_at)`` of every flag no later dedup run superseded, oldest
    first."""
    return db.execute("SELECT sha256, flag, status, details, created_at FROM image_flags "
                      "WHERE status != 'superseded' ORDER BY created_at, sha256").fetchall()


def open_conflicts(db) -> list[str]:
    """The images with an open ``culture_conflict`` flag (a culture question no decision settled yet)."""
    return open_flagged(db, FLAG)


def list_flags(db, *, status: str | None = "open", flag: str | None = None) -> list[dict]:
    """Flags with their pairs (concept × country), the countries in question, and the culture decision
    (``resolved_by``, ``resolution``, ``cultures`` kept), oldest first."""
    sql, args = "SELECT sha256, flag, status, details, created_at FROM image_flags WHERE 1 = 1", []
    if status:
        sql, args = sql + " AND status = ?", [*args, status]
    if flag:
        sql, args = sql + " AND flag = ?", [*args, flag]
    out = []
    for sha, fl, st, details, created in db.execute(sql + " ORDER BY created_at, sha256", args):
        d = json.loads(details or "{}")
        res = d.get("resolution") or {}
        out.append({"sha256": sha, "flag": fl, "status": st,
                    "pairs": ", ".join(f"{p.get('concept')}/{p.get('country')}" for p in d.get("pairs", [])),
                    "countries": sorted({p.get("country") for p in d.get("pairs", [])}),
                    "evidence": ", ".join(sorted(d.get("evidence", {}))),
                    "resolved_by": res.get("by"), "resolution": res.get("resolution"),
                    "cultures": res.get("cultures"), "created_at": created})
    return out


def link_conflicts(inv) -> dict[int, dict]:
    """Images linked to more than one (concept, country) pair (links are distinct triples)."""
    multi = np.flatnonzero(np.bincount(inv.link_img, minlength=inv.n) > 1)
    if not len(multi):
        return {}
    b = inv._bounds()
    concept, country, countries = inv.link_concept.tolist(), inv.link_country.tolist(), inv.countries
    return {i: {"pairs": sorted((concept[k], countries[country[k]]) for k in range(b[i], b[i + 1]))}
            for i in multi.tolist()}


def cluster_conflicts(inv, clusters, ids, params) -> dict[int, dict]:
    """Members of clusters whose members were found for more than one (concept, country) pair (within the
    cluster's concept when it has one). Vectorised; one evidence dict per cluster, shared by its members."""
    if not clusters:
        return {}
    sizes = np.array([len(m) for _, m in clusters], dtype=np.int64)
    flat = np.concatenate([m for _, m in clusters])
    label = np.repeat(np.arange(len(clusters)), sizes)
    cc = np.array([-1 if c is None else c for c, _ in clusters], dtype=np.int64)
    b = inv._bounds()
    count = b[flat + 1] - b[flat]
    which = np.repeat(np.arange(len(flat)), count)
    link = confirm.runs(b[flat], count)
    lab = label[which]
    keep = (cc[lab] < 0) | (inv.link_concept[link] == cc[lab])
    lab, link = lab[keep], link[keep]
    n_c = int(inv.link_concept.max()) + 1 if len(inv.link_concept) else 1
    n_k = max(len(inv.countries), 1)
    key = np.unique((lab * n_c + inv.link_concept[link]) * n_k + inv.link_country[link])
    klab = key // (n_c * n_k)
    conflict = np.flatnonzero(np.bincount(klab, minlength=len(clusters)) > 1)
    starts = np.searchsorted(klab, conflict).tolist()
    ends = np.searchsorted(klab, conflict, side="right").tolist()
    out: dict[int, dict] = {}
    concept_of = (key // n_k % n_c).tolist()
    country_of = [inv.countries[k] for k in (key % n_k).tolist()]
    for c, s0, e0 in zip(conflict.tolist(), starts, ends):
        members = clusters[c][1]
        item = {"pairs": list(zip(concept_of[s0:e0], country_of[s0:e0])), "cluster_id": ids[c],
                "size": len(members), "params": params}
        out.update(dict.fromkeys(members.tolist(), item))
    return out




# ------------------------------------------------------------------------------------------ decisions
def copies(db) -> dict[str, set[str]]:
    """sha256 → the other members of every active (open or resolved) duplicate cluster it belongs to."""
    members: dict[int, list[str]] = defaultdict(list)
    for cid, sha in db.execute(
            "SELECT m.cluster_id, m.sha256 FROM dup_members m JOIN dup_clusters c ON c.id = m.cluster_id "
            f"WHERE c.status IN {ACTIVE_CLUSTERS}"):
        members[cid].append(sha)
    out: dict[str, set[str]] = defaultdict(set)
    for shas in members.values():
        for s in shas:
            out[s].update(x for x in shas if x != s)
    return dict(out)


def inherited_links(db, dropped: set[str]) -> dict[str, dict[tuple[int, str], str]]:
    """Kept sha256 → {(concept_id, country): the dropped copy it came from} for the links of copies that a
    dedup review dropped (``dropped``: the images the current dedup decisions drop, which annotation holds;
    within the cluster's concept for a within-concept cluster). A dropped copy was found by its query; the
    photo that query found is now the kept copy, so the link is the kept copy's question too (decided like its
    own links, never silently lost)."""
    if not dropped:
        return {}
    links: dict[str, set[tuple[int, str]]] = defaultdict(set)
    for sha, cid, cc in db.execute("SELECT sha256, concept_id, country FROM image_links"):
        if sha in dropped:
            links[sha].add((cid, cc))
    out: dict[str, dict[tuple[int, str], str]] = defaultdict(dict)
    clusters: dict[int, tuple[int | None, list[str]]] = {}
    for cid, concept, sha in db.execute(
            "SELECT c.id, c.concept_id, m.sha256 FROM dup_clusters c JOIN dup_members m ON m.cluster_id = c.id "
            f"WHERE c.status IN {ACTIVE_CLUSTERS} ORDER BY c.id, m.sha256"):
        clusters.setdefault(cid, (concept, []))[1].append(sha)
    for concept, shas in clusters.values():
        kept = [s for s in shas if s not in dropped]
        for d in shas:
            if d not in dropped:
                continue
            for c, k in sorted(links.get(d, ())):
                if concept is None or c == concept:
                    for s in kept:
                        out[s].setdefault((c, k), d)
    return dict(out)


def _flags(db) -> dict[str, tuple[str, dict]]:
    return {sha: (st, json.loads(d or "{}")) for sha, st, d in db.execute(
        "SELECT sha256, status, details FROM image_flags WHERE flag = ? AND status IN ('open', 'resolved')",
        [FLAG])}


def resolve_rated_conflicts(db, campaign: str, rated: dict[str, set[str]]) -> int:
    """Resolve the open culture-conflict flag of every image rated (``rated``: sha256 → the countries of its
    current relevance decisions; on the image or on a copy of it) for each country of its flagged pairs: the
    ratings now say which cultures the image stands for (the build keeps those rated at or above its
    threshold)."""
    twins = copies(db)
    done = []
    for sha, (st, details) in _flags(db).items():
        if st != "open":
            continue
        need = {p["country"] for p in details.get("pairs", [])}
        have = set(rated.get(sha, ()))
        for other in twins.get(sha, ()):
            have |= rated.get(other, set())
        if need and need <= have:
            done.append(sha)
    with transaction(db):
        return resolve_flags(db, done, by=f"relevance review {campaign}", resolution="cultures rated")


def open_questions(db, excluded: dict[str, str]) -> list[dict]:
    """The open culture questions that block a build: images with an open ``culture_conflict`` flag that
    nothing else keeps out of the pool (``excluded``: sha256 → first exclusion reason, as
    :func:`cultura.annotate.pool.image_exclusions` gives: ``culture_conflict`` only when no other reason applies;
    a dropped copy's question is its kept copy's)."""
    out = []
    for row in list_flags(db, status="open", flag=FLAG):
        if excluded.get(row["sha256"]) == FLAG:
            out.append(row)
    return out


def require_decided(db, excluded: dict[str, str]) -> None:
    """Raise :class:`CulturesUndecided` (one sentence naming the commands) while any culture question is open."""
    rows = open_questions(db, excluded)
    if not rows:
        return
    shown = "; ".join(f"{r['sha256'][:12]} ({r['pairs']})" for r in rows[:3])
    more = f" and {len(rows) - 3} more" if len(rows) > 3 else ""
    raise CulturesUndecided(
        f"{len(rows)} image{'s' if len(rows) != 1 else ''} found for more than one culture "
        f"{'have' if len(rows) != 1 else 'has'} no culture decision yet ({shown}{more}): {FIX}, then rebuild "
        "('cultura images flags' lists them).")


def decided_links(db, raw_links: dict[str, set[tuple[int, str]]], ratings: dict[tuple[str, str], float], *,
                  dropped: set[str], active: set[int] | None = None) -> tuple[dict[str, set[tuple[int, str]]], dict]:
    """Each image's culture links under the one rule (module doc): its own links plus those inherited from
    dropped copies; for an image with a resolved flag, only the countries its decision supports (a person's
    ``cultures``, else every rated or flagged country: ``ratings`` then filter them); an inherited link with no
    decision is kept only for a country the image was found for itself. ``ratings`` ((sha256, country) →
    value) is returned extended with the ratings of copies for the countries an image inherited from them.
    ``raw_links`` maps sha256 → {(concept_id, country)}; ``dropped``: the copies the dedup review dropped
    (:func:`inherited_links`); ``active``: the concepts that count (None: all)."""
    inherited = inherited_links(db, dropped)
    flags = _flags(db)
    ratings = dict(ratings)
    twins = copies(db) if inherited or flags else {}
    out: dict[str, set[tuple[int, str]]] = {}
    for sha in raw_links:
        own = set(raw_links.get(sha, ()))
        links = set(own)
        st, details = flags.get(sha, (None, {}))
        decided = st == "resolved"
        own_countries = {k for _, k in own}
        for (c, k), _src in inherited.get(sha, {}).items():
            if active is not None and c not in active:
                continue
            if decided or k in own_countries:
                links.add((c, k))
        if decided:
            keep = (details.get("resolution") or {}).get("cultures")
            if keep is not None:
                links = {(c, k) for c, k in links if k in set(keep)}
        for c, k in links:
            if (sha, k) not in ratings:
                for other in sorted(twins.get(sha, ())):
                    if (other, k) in ratings:
                        ratings[(sha, k)] = ratings[(other, k)]
                        break
        out[sha] = links
    return out, ratings


__all__ = ["FLAG", "CulturesUndecided", "update_conflict_flags_many", "resolve_flags", "reopen_flags",
           "list_flags", "live_flag_rows", "open_conflicts", "link_conflicts", "cluster_conflicts", "copies",
           "inherited_links", "resolve_rated_conflicts", "open_questions", "require_decided", "decided_links"]
