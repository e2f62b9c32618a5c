"""The one check of a stored benchmark version against the current state of the project.

A benchmark is built from the state of one moment; later decisions may make it untrue: an image excluded by hand
(``cultura images exclude``), removed by the filter review or dropped by the dedup review, a culture question
opened by a new copy, a relevance rating (a campaign or ``cultura import ratings``) that takes a culture away, a
culture decision, a duplicate set two of whose members the benchmark holds, a query its suites read withdrawn or
rewritten. :func:`check_benchmark` recomputes the pool the build drew from (:func:`.eligible.load_pool` with the
version's own options) and says, in words, what of the version no longer holds. Build runs it on the version it
is about to write, export and ``--push-to-hub`` refuse a version it finds unsupported (unless asked to export it
as built, and then the dataset card says what changed: :func:`as_built_section`), ``cultura build check`` shows
it, and the commands that only read a version (evaluate, stats) warn with it.

Duplicate sets are judged as sets: images joined by open duplicate clusters (directly or through another member)
are one photograph until a dedup review decides; a benchmark holds at most one member of such a set, and no trial
holds two members of any duplicate cluster.
"""
from __future__ import annotations

import json
from collections import defaultdict
from typing import TYPE_CHECKING

from ..annotate.decisions import current_per_image
from ..annotate.pool import IMAGE_ITSELF, image_exclusions
from ..curate.clusters import live_cluster_members, open_sets
from ..curate.benchmark_queries import live_queries
from ..errors import CulturaError
from .eligible import Pool, load_pool
from .readiness import NotReady, check_ready, unrated_links
from .roles import KINDS

if TYPE_CHECKING:
    from ..project import Project


class NotSupported(CulturaError):
    """A benchmark version the current state no longer supports (the message names what changed and the fix)."""


#: What each reason an image left the pool means, as a phrase after "N images …".
LEFT_POOL = {
    "image_excluded": "excluded by hand or at ingest ('cultura images exclude')",
    "unreadable": "whose stored file dedup could not decode (flagged unreadable)",
    "undecoded": "stored after a header check and not yet decoded ('cultura images dedup')",
    "duplicate_dropped": "dropped by the dedup review",
    "filter_removed": "removed by the filter review",
    "culture_conflict": "with an open culture question",
    "unreviewed": "without a filter decision while others have one",
    "low_relevance": "rated below the relevance threshold for every culture",
    "not_linked": "no longer found for an active concept",
}

def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def rebuild_command(bench: dict) -> str:
    """The command that builds a new version of ``bench`` (a ``benchmarks`` row) with its options."""
    p = json.loads(bench.get("params") or "{}")
    cmd = f"cultura build {bench['kind']}"
    if bench["name"] != bench["kind"]:
        cmd += f" --name {bench['name']}"
    if bench.get("seed"):
        cmd += f" --seed {bench['seed']}"
    if p.get("per_pair", 1) != 1:
        cmd += f" --per-pair {p['per_pair']}"
    for flag in ("allow_unreviewed", "allow_random_tags", "allow_unrated"):
        if p.get(flag):
            cmd += " --" + flag.replace("_", "-")
    if p.get("min_relevance", 4.0) not in (4.0, None):
        cmd += f" --min-relevance {p['min_relevance']}"
    return cmd


def _candidates(db, bid: int) -> list[tuple]:
    return db.execute(
        "SELECT i.id, i.query_country, i.descriptor_country, c.role, c.sha256, c.concept_id, c.country "
        "FROM benchmark_candidates c JOIN benchmark_items i ON i.id = c.item_id WHERE i.benchmark_id = ? "
        "ORDER BY i.id, c.position", [bid]).fetchall()


def duplicate_findings(db, cands: list[tuple]) -> list[dict]:
    """Duplicate sets the candidates break: two members of one open set anywhere in the benchmark, or two
    members of one live duplicate cluster in one trial (``cands``: rows of :func:`_candidates`)."""
    sets = open_sets(db)
    holders: dict[int, set[str]] = defaultdict(set)
    for _, _, _, _, sha, _, _ in cands:
        if sha in sets:
            holders[sets[sha]].add(sha)
    across = {s: shas for s, shas in holders.items() if len(shas) > 1}
    clusters: dict[str, set[int]] = defaultdict(set)
    for cid, sha in live_cluster_members(db):
        clusters[sha].add(cid)
    per_trial: dict[int, list[str]] = defaultdict(list)
    for iid, _, _, _, sha, _, _ in cands:
        per_trial[iid].append(sha)
    within = set()
    for iid, shas in per_trial.items():
        seen: dict[int, str] = {}
        for sha in shas:
            for cid in clusters.get(sha, ()):
                if cid in seen and seen[cid] != sha:
                    within.add(iid)
                seen.setdefault(cid, sha)
    out = []
    if across:
        out.append({"what": "duplicate_set", "count": len(across),
                    "images": sorted(s for shas in across.values() for s in shas),
                    "text": f"{_plural(len(across), 'duplicate set')} with two or more members in it "
                            "(one photograph twice, no dedup review yet)"})
    if within:
        out.append({"what": "duplicate_in_trial", "count": len(within), "images": [],
                    "text": f"{_plural(len(within), 'trial')} holding two copies of one photograph"})
    return out


def state_findings(project: Project, bench: dict, pool: Pool | None = None) -> list[dict]:
    """What of ``bench`` (a ``benchmarks`` row) the current state no longer supports: one dict per kind of change
    (``what``, ``count``, ``images``, ``text``: a phrase). ``pool``: the build's own pool, when the build checks the
    version it is writing (the same options)."""
    db = project.db
    params = json.loads(bench.get("params") or "{}")
    cands = _candidates(db, bench["id"])
    shas = sorted({r[4] for r in cands})
    if "per_pair" not in params:
        # not drawn from this project's pool (a released benchmark, its images and roles the release's, or rows
        # written by another tool): only what is wrong with an image itself and duplicate sets count
        excl = image_exclusions(db)
        found = []
        for reason in IMAGE_ITSELF:
            gone = [s for s in shas if excl.get(s) == reason]
            if gone:
                found.append({"what": reason, "count": len(gone), "images": gone,
                              "text": f"{_plural(len(gone), 'image')} {LEFT_POOL[reason]}"})
        return found + duplicate_findings(db, cands)
    min_rel = params.get("min_relevance", 4.0)
    if pool is None:
        pool = load_pool(project, allow_unreviewed=True, min_relevance=min_rel, allow_random_tags=True)
    out: list[dict] = []
    left: dict[str, list[str]] = defaultdict(list)
    gone = [s for s in shas if s not in pool.links]
    unlinked = image_exclusions(db, require_review=True) if any(s not in pool.excluded for s in gone) else {}
    for sha in gone:
        left[pool.excluded.get(sha) or unlinked.get(sha) or "not_linked"].append(sha)
    for reason in LEFT_POOL:  # every reason the pool gives has its phrase (tested)
        if left.get(reason):
            out.append({"what": reason, "count": len(left[reason]), "images": left[reason],
                        "text": f"{_plural(len(left[reason]), 'image')} {LEFT_POOL[reason]}"})
    rel = {(d["sha256"], d["country"]): d["value"] for d in current_per_image(db, "relevance")
           if d["value"] is not None}
    low, lost, forbidden = set(), set(), set()
    forbids = {r.name: r.forbid for r in KINDS.get(bench["kind"], ())}
    for _, L, D, role, sha, cid, k in cands:
        if sha not in pool.links:
            continue
        if (cid, k) not in pool.links[sha]:
            if pool.ratings and rel.get((sha, k), min_rel) < min_rel:
                low.add((sha, k))
            else:
                lost.add((sha, k))
        need = {"L": L, "D": D}
        if pool.cultures(sha) & {need[f] for f in forbids.get(role, ()) if need[f]}:
            forbidden.add((sha, role, L, D))
    if low:
        out.append({"what": "low_relevance_link", "count": len(low), "images": sorted({s for s, _ in low}),
                    "text": f"{_plural(len(low), 'image × culture link')} rated below {min_rel:g} "
                            f"({', '.join(sorted({k for _, k in low}))})"})
    if lost:
        out.append({"what": "culture_decided", "count": len(lost), "images": sorted({s for s, _ in lost}),
                    "text": f"{_plural(len(lost), 'image × culture link')} a culture decision took away"})
    if forbidden:
        out.append({"what": "role_broken", "count": len(forbidden), "images": sorted({f[0] for f in forbidden}),
                    "text": f"{_plural(len(forbidden), 'candidate')} now standing for a culture its role "
                            "rules out"})
    if pool.ratings and not params.get("allow_unrated"):
        unrated = unrated_links(pool.links, pool.rated, [s for s in shas if s in pool.links])
        n = sum(unrated.values())
        if n:
            out.append({"what": "unrated", "count": n, "images": [],
                        "text": f"{_plural(n, 'image × culture link')} with no relevance rating "
                                f"({', '.join(unrated)})"})
    out += duplicate_findings(db, cands)
    snap = {(r[0], r[1], r[2], r[3]): r[4] for r in db.execute(
        "SELECT concept_id, country, language, variant, text FROM benchmark_query_snapshot WHERE benchmark_id = ?",
        [bench["id"]])}
    live = {(q["concept_id"], q["country"], q["language"], q["variant"]): q["text"] for q in live_queries(db)}
    changed = sorted(k for k, text in snap.items() if live.get(k) != text)
    if changed:
        out.append({"what": "queries_changed", "count": len(changed), "images": [],
                    "text": f"{_plural(len(changed), 'query')} its suites read rewritten or withdrawn since"})
    return out


def check_benchmark(project: Project, bench: dict, *, pool: Pool | None = None) -> dict:
    """The one check of a benchmark version (a ``benchmarks`` row) against the current state.

    Returns ``{"benchmark", "supported", "changes"`` (:func:`state_findings`), ``"ready"`` (None, or the sentence
    of an incomplete version), ``"rebuild"`` (the command), ``"message"`` (one sentence naming what changed and
    the rebuild; None when supported)}."""
    ref = f"{bench['name']}@{bench['version']}"
    try:
        check_ready(project, bench)
        ready = None
    except NotReady as e:
        ready = str(e)
    changes = state_findings(project, bench, pool) if bench.get("status") == "ready" else []
    cmd = rebuild_command(bench)
    message = None
    if ready:
        message = ready
    elif changes:
        message = (f"Benchmark {ref} no longer matches the current state ({'; '.join(c['text'] for c in changes)}): "
                   f"rebuild it with '{cmd}' and use the new version, or export this one with --as-built "
                   "(the dataset card then says what changed since).")
    return {"benchmark": ref, "supported": not (ready or changes), "ready": ready, "changes": changes,
            "rebuild": cmd, "message": message}


def require_supported(project: Project, bench: dict, *, as_built: bool = False) -> dict:
    """Raise :class:`NotSupported` (one sentence) unless the current state supports ``bench``; with
    ``as_built``, only an incomplete version is refused and the check is returned for the dataset card."""
    res = check_benchmark(project, bench)
    if res["ready"]:
        raise NotReady(res["ready"], param="benchmarks")
    if res["changes"] and not as_built:
        raise NotSupported(res["message"], param="benchmarks")
    return res


def as_built_section(checks: list[dict]) -> str:
    """The dataset card's section for versions exported as built although the state changed since (empty when
    none did): what changed, per version, and the command that rebuilds it."""
    changed = [c for c in checks if c["changes"]]
    if not changed:
        return ""
    lines = ["", "## Changed since the build", "",
             "Exported as built (--as-built): the project's current state no longer supports every trial below."]
    for c in changed:
        lines.append(f"- **{c['benchmark']}**: {'; '.join(x['text'] for x in c['changes'])}. "
                     f"Rebuild: `{c['rebuild']}`.")
    return "\n".join(lines) + "\n"


def read_warning(check: dict) -> str | None:
    """The warning of a command that only reads a version (evaluate, stats, view) a later change made untrue: one
    sentence naming what changed and the rebuild; None when nothing did."""
    if not check["changes"]:   # an incomplete version is export's refusal; reading it says nothing new
        return None
    what = "; ".join(c["text"] for c in check["changes"])
    return (f"Benchmark {check['benchmark']} no longer matches the current state ({what}): what this command reads "
            f"is the version as built; rebuild it with '{check['rebuild']}' for one that does.")


def check_versions(project: Project, benches: list[dict]) -> list[dict]:
    """:func:`check_benchmark` of each ``benchmarks`` row, the pool read once per relevance threshold (the
    commands that read many versions: the view)."""
    pools: dict = {}
    out = []
    for b in benches:
        params = json.loads(b.get("params") or "{}")
        pool = None
        if b.get("status") == "ready" and "per_pair" in params:
            mr = params.get("min_relevance", 4.0)
            if mr not in pools:
                pools[mr] = load_pool(project, allow_unreviewed=True, min_relevance=mr, allow_random_tags=True)
            pool = pools[mr]
        out.append(check_benchmark(project, b, pool=pool))
    return out


def ready_versions(project: Project) -> list[dict]:
    """Every ready ``benchmarks`` row, oldest first (what the view shows)."""
    return [dict(r) for r in project.db.query("SELECT * FROM benchmarks WHERE status = 'ready' ORDER BY id")]
