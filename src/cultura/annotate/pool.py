"""The reviewed pool: the one definition of which images a benchmark, an export or an image-pool suite may use.

An image is left out, with the first reason that applies (in this order):

- ``image_excluded``: ``images.status`` is not ``ok`` (excluded by hand with ``cultura images exclude`` or
  by ingest);
- ``unreadable``: an open ``unreadable`` flag (dedup could not decode the stored file);
- ``undecoded``: an open ``undecoded`` flag (downloaded with ``--check header`` and not yet decoded by
  ``cultura images dedup``);
- ``duplicate_dropped``: the current dedup-review decision drops it (a reviewer kept another copy);
- ``filter_removed``: the current filter decision removes it;
- ``culture_conflict``: an open ``culture_conflict`` flag (found for more than one culture and no culture
  decision yet: relevance ratings, or ``cultura images flags --resolve``; the build refuses while one is
  open, see :mod:`cultura.curate.cultures_decide`);
- ``unreviewed``: filter decisions exist but none for this image (only when ``require_review``).

Build, export and every suite that reads the project's own images (latent, attribution …) read this module, so
"the benchmark dropped a copy" and "the latent probe counted it" cannot disagree. It combines curation's state
of an image (its status, its culture flags) with the review's decisions, so it belongs to annotation, above
curation; :func:`list_images` and :func:`list_clusters` (``cultura images list`` / ``clusters``) show the same
state per image and per duplicate set.

>>> from cultura.db import open_db
>>> image_exclusions(open_db(":memory:"))
{}
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..bounds import COUNT
from ..curate import clusters as dup, images as curated
from ..curate.cultures_decide import open_conflicts
from .decisions import current_decisions

if TYPE_CHECKING:
    from ..project import Project

EXCLUSION_REASONS = ("image_excluded", "unreadable", "undecoded", "duplicate_dropped", "filter_removed",
                     "culture_conflict", "unreviewed")

#: The reasons that concern an image's own bytes or status, not a decision about it: no annotator gets such an
#: image, and a benchmark holding one is untrue whatever pool it was drawn from.
IMAGE_ITSELF = ("image_excluded", "unreadable", "undecoded")

REASON_TEXT = {
    "image_excluded": "excluded by hand or at ingest (images.status)",
    "unreadable": "dedup could not decode the stored file (after an error that has passed: cultura images flags "
                  "--resolve SHA256 --flag unreadable --reason TEXT, and the next dedup decodes it again)",
    "undecoded": "downloaded with --check header and not decoded yet: run cultura images dedup",
    "culture_conflict": "found for more than one culture; no culture decision yet",
    "duplicate_dropped": "a duplicate that reviewers dropped (another copy kept)",
    "filter_removed": "removed by the filter review",
    "unreviewed": "no filter decision while other images have one",
    "low_relevance": "every culture rated below the relevance threshold",
}


def image_exclusions(db, *, require_review: bool = False) -> dict[str, str]:
    """sha256 → reason for every image outside the reviewed pool (see the module doc for the reasons).

    ``require_review``: when filter decisions exist, an image without one is ``unreviewed``."""
    out: dict[str, str] = {}
    for sha, _status in curated.excluded_images(db):
        out[sha] = "image_excluded"
    for flag in (curated.UNREADABLE, curated.UNDECODED):  # the flags are also the reasons' names
        for sha in curated.open_flagged(db, flag):
            out.setdefault(sha, flag)
    for sha, label in current_decisions(db, "dedup").items():
        if label == "drop":
            out.setdefault(sha, "duplicate_dropped")
    filt = current_decisions(db, "filter")
    for sha, label in filt.items():
        if label == "remove":
            out.setdefault(sha, "filter_removed")
    for sha in open_conflicts(db):
        out.setdefault(sha, "culture_conflict")
    if require_review and filt:
        for sha in curated.ok_images(db):
            if sha not in filt:
                out.setdefault(sha, "unreviewed")
    return out


def exclusion_summary(db, *, require_review: bool = False) -> list[dict]:
    """One row per reason: ``reason``, ``images``, ``what`` (for reports and ``cultura status``)."""
    counts: dict[str, int] = {}
    for r in image_exclusions(db, require_review=require_review).values():
        counts[r] = counts.get(r, 0) + 1
    return [{"reason": r, "images": counts[r], "what": REASON_TEXT[r]} for r in EXCLUSION_REASONS if r in counts]


# ------------------------------------------------------------------ inspect images and duplicate sets

def list_images(project: Project, *, concept: str | None = None, country: str | None = None, status: str | None = None,
                pool: str | None = None, limit: int | None = None) -> list[dict]:
    """One row per image: sha256, size, status, the concept × country pairs that found it, tags, whether it is
    in the reviewed pool (``pool``: ``in`` or ``out``), and when out, ``reason`` (the code,
    :data:`EXCLUSION_REASONS`) and ``detail`` (the reason stored with a hand exclusion, else what the code
    means). The ``pool`` argument filters: ``in`` or ``out``."""
    limit = COUNT.check_optional(limit, "limit")
    db = project.db
    excl = image_exclusions(db, require_review=True)
    links: dict[str, set[str]] = {}
    for sha, name, cc in curated.named_links(db):
        if (concept is None or name == concept) and (country is None or cc == country.upper()):
            links.setdefault(sha, set()).add(f"{name}/{cc}")
    tags: dict[str, list[str]] = {}
    for sha, tag, _score, _source in curated.tag_rows(db, by_score=True):
        tags.setdefault(sha, []).append(tag)
    out = []
    for r in curated.image_rows(db):
        sha, st, reason = r["sha256"], r["status"], r["reason"]
        if (concept or country) and sha not in links:
            continue
        if status and st != status:
            continue
        in_pool = sha not in excl
        if pool and (pool == "in") != in_pool:
            continue
        why = None if in_pool else excl[sha]
        out.append({"sha256": sha, "size": f"{r['width']}x{r['height']}", "status": st,
                    "found_for": ", ".join(sorted(links.get(sha, ()))),
                    "tags": ", ".join(dict.fromkeys(tags.get(sha, []))),
                    "pool": "in" if in_pool else "out", "reason": why,
                    "detail": None if in_pool else (reason if why == "image_excluded" and reason else REASON_TEXT[why]),
                    "path": r["path"]})
        if limit and len(out) >= limit:
            break
    return out


def list_clusters(project: Project, *, status: str | None = "open") -> list[dict]:
    """Duplicate clusters with their members, representative first: ``members`` is a list of
    ``{"sha256" (full), "distance", "countries", "decision"}`` (:func:`members_text` is the one-line view)."""
    db = project.db
    dedup = current_decisions(db, "dedup")
    cc = curated.image_countries(db)
    out = []
    for cid, method, scope, rep, size, st in dup.list_cluster_rows(db, status):
        mem = dup.ordered_members(db, cid, rep)
        out.append({"cluster": cid, "method": method, "scope": scope, "status": st, "size": size,
                    "members": [{"sha256": s, "distance": d, "countries": sorted(cc.get(s, ())),
                                 "decision": dedup.get(s)} for s, d in mem],
                    "representative": rep})
    return out


def members_text(members: list[dict]) -> str:
    """The members of a cluster on one line for a table: ``sha256[:12] (d=distance, countries, decision)``."""
    return " | ".join(f"{m['sha256'][:12]} (d={m['distance']:g}, {','.join(m['countries']) or '-'}"
                      f"{', ' + m['decision'] if m['decision'] else ''})" for m in members)
