"""The reviewed pool: the one definition of which images a benchmark, an export or an image-pool suite may use.

An image is left out, with the first reason that applies (in this order):

- ``image_excluded``: ``images.status`` is not ``ok`` (excluded by hand with ``cultura images exclude`` or
  by ingest);
- ``duplicate_dropped``: the current dedup-review decision drops it (a reviewer kept another copy);
- ``filter_removed``: the current filter decision removes it;
- ``culture_conflict``: an open ``culture_conflict`` flag (found for more than one culture and no culture
  decision yet: relevance ratings, or ``cultura images flags --resolve``; the build refuses while one is
  open, see :mod:`cultura.curate.cultures_decide`);
- ``unreviewed``: filter decisions exist but none for this image (only when ``require_review``).

Build, export and every suite that reads the project's own images (latent, attribution …) read this module, so
"the benchmark dropped a copy" and "the latent probe counted it" cannot disagree.

>>> from cultura.db import open_db
>>> image_exclusions(open_db(":memory:"))
{}
"""
from __future__ import annotations

EXCLUSION_REASONS = ("image_excluded", "duplicate_dropped", "filter_removed", "culture_conflict", "unreviewed")

REASON_TEXT = {
    "image_excluded": "excluded by hand or at ingest (images.status)",
    "culture_conflict": "found for more than one culture; no culture decision yet",
    "duplicate_dropped": "a duplicate that reviewers dropped (another copy kept)",
    "filter_removed": "removed by the filter review",
    "unreviewed": "no filter decision while other images have one",
    "low_relevance": "every culture rated below the relevance threshold",
}


def current_decisions(db, kind: str) -> dict[str, str]:
    """sha256 → label of the newest current (not superseded) decision of ``kind`` per image."""
    latest: dict[str, str] = {}
    for sha, label in db.execute("SELECT sha256, label FROM decisions WHERE kind = ? AND superseded = 0 "
                                 "AND sha256 IS NOT NULL ORDER BY id", [kind]):
        latest[sha] = label
    return latest


def filter_reviewed(db) -> bool:
    """True when any current filter decision exists (the project has been through the filter review)."""
    return db.execute("SELECT 1 FROM decisions WHERE kind = 'filter' AND superseded = 0 LIMIT 1").fetchone() \
        is not None


def image_exclusions(db, *, require_review: bool = False) -> dict[str, str]:
    """sha256 → reason for every image outside the reviewed pool (see the module doc for the reasons).

    ``require_review``: when filter decisions exist, an image without one is ``unreviewed``."""
    out: dict[str, str] = {}
    for sha, status in db.execute("SELECT sha256, status FROM images WHERE status != 'ok'"):
        out[sha] = "image_excluded"
    for sha, label in current_decisions(db, "dedup").items():
        if label == "drop":
            out.setdefault(sha, "duplicate_dropped")
    filt = current_decisions(db, "filter")
    for sha, label in filt.items():
        if label == "remove":
            out.setdefault(sha, "filter_removed")
    for (sha,) in db.execute("SELECT sha256 FROM image_flags WHERE flag = 'culture_conflict' AND status = 'open'"):
        out.setdefault(sha, "culture_conflict")
    if require_review and filt:
        for (sha,) in db.execute("SELECT sha256 FROM images WHERE status = 'ok'"):
            if sha not in filt:
                out.setdefault(sha, "unreviewed")
    return out


def exclusion_summary(db, *, require_review: bool = False) -> list[dict]:
    """One row per reason: ``reason``, ``images``, ``what`` (for reports and ``cultura status``)."""
    counts: dict[str, int] = {}
    for r in image_exclusions(db, require_review=require_review).values():
        counts[r] = counts.get(r, 0) + 1
    return [{"reason": r, "images": counts[r], "what": REASON_TEXT[r]} for r in EXCLUSION_REASONS if r in counts]
