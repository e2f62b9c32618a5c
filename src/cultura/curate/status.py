"""Curation's status and corrections: its counts per stage, country and concept (``cultura status`` adds the
other areas': :mod:`cultura.benchmark.status`), failed downloads, images excluded or included by hand, culture
flags resolved by hand, and what to do first when a stage has nothing to work on."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..bounds import COUNT
from ..db import transaction
from ..errors import CulturaError
from .cultures_decide import FLAG, list_flags, reopen_flags, resolve_flags
from .images import UNREADABLE

if TYPE_CHECKING:
    from ..project import Project


def _scalar(db, sql, params=()):
    return db.execute(sql, params).fetchone()[0]


def _group(db, sql, params=()):
    return {r[0] if r[0] is not None else "(none)": r[1] for r in db.execute(sql, params).fetchall()}


def curation_counts(project: Project) -> dict:
    """Curation's part of ``cultura status`` (:func:`cultura.benchmark.status.project_status` adds the other
    areas'): ``stages`` and ``failures`` of the curation stages, ``per_country``, ``per_concept``."""
    db = project.db
    stages = {
        "concepts": _group(db, "SELECT status, count(*) FROM concepts GROUP BY status"),
        "terms": _scalar(db, "SELECT count(*) FROM terms"),
        "queries": _group(db, "SELECT kind || ':' || status, count(*) FROM queries GROUP BY kind, status"),
        "searches": _group(db, "SELECT provider || ':' || status, count(*) FROM searches GROUP BY provider, status"),
        "search_results": _scalar(db, "SELECT count(*) FROM search_results"),
        "candidates": _group(db, "SELECT status, count(*) FROM candidates GROUP BY status"),
        "images": _group(db, "SELECT status, count(*) FROM images GROUP BY status"),
        "hashed_images": _scalar(db, "SELECT count(*) FROM images WHERE phash IS NOT NULL"),
        "duplicate_clusters": _group(db, "SELECT method || ':' || status, count(*) FROM dup_clusters "
                                         "GROUP BY method, status"),
        "flags": _group(db, "SELECT flag || ':' || status, count(*) FROM image_flags GROUP BY flag, status"),
        "tagged_images": _group(db, "SELECT source, count(*) FROM image_tag_status WHERE status='done' "
                                    "GROUP BY source"),
        "ingest_rejects": _scalar(db, "SELECT count(*) FROM ingest_rejects"),
    }
    failures = {
        "downloads": _group(db, "SELECT reason, count(*) FROM candidates WHERE status IN ('failed','skipped') "
                                "GROUP BY reason ORDER BY 2 DESC"),
        "searches": _group(db, "SELECT substr(error, 1, instr(error || ':', ':') - 1), count(*) FROM searches "
                               "WHERE status = 'failed' GROUP BY 1"),
        "ingest": _group(db, "SELECT reason, count(*) FROM ingest_rejects GROUP BY reason"),
        "tagging": _group(db, "SELECT source, count(*) FROM image_tag_status WHERE status = 'failed' GROUP BY source"),
    }
    per_country = []
    for c in project.countries:
        per_country.append({
            "country": c.code, "name": c.name,
            "queries": _scalar(db, "SELECT count(*) FROM queries WHERE country = ?", [c.code]),
            "searched": _scalar(db, "SELECT count(*) FROM searches s JOIN queries q ON q.id = s.query_id "
                                    "WHERE q.country = ? AND s.status = 'done'", [c.code]),
            "results": _scalar(db, "SELECT count(*) FROM search_results sr JOIN queries q ON q.id = sr.query_id "
                                   "WHERE q.country = ?", [c.code]),
            "downloaded": _scalar(db, "SELECT count(DISTINCT c.id) FROM candidates c JOIN search_results sr ON "
                                      "sr.candidate_id = c.id JOIN queries q ON q.id = sr.query_id WHERE q.country = ? "
                                      "AND c.status = 'downloaded'", [c.code]),
            "images": _scalar(db, "SELECT count(DISTINCT sha256) FROM image_links WHERE country = ?", [c.code]),
        })
    per_concept = [dict(r) for r in db.query(
        """SELECT c.name AS concept, l.country, count(DISTINCT l.sha256) AS images FROM image_links l
           JOIN concepts c ON c.id = l.concept_id JOIN images i ON i.sha256 = l.sha256 AND i.status = 'ok'
           WHERE c.status = 'active' GROUP BY c.name, l.country ORDER BY c.name, l.country""")]
    return {"stages": stages, "failures": failures, "per_country": per_country, "per_concept": per_concept}


# ------------------------------------------------------------------ inspect and correct images

def resolve_shas(db, prefixes) -> list[str]:
    """Full sha256s for sha256 prefixes (at least 6 hex characters, unique)."""
    out = []
    for p in prefixes:
        p = str(p).strip().lower()
        if len(p) < 6:
            raise CulturaError(f"Image id {p!r} is too short: give at least 6 characters of its sha256 (see "
                               "'cultura images list').")
        rows = [r[0] for r in db.execute("SELECT sha256 FROM images WHERE sha256 LIKE ? ORDER BY sha256",
                                         [p + "%"])]
        if not rows:
            raise CulturaError(f"No image whose sha256 starts with {p!r} (see 'cultura images list').")
        if len(rows) > 1:
            raise CulturaError(f"{p!r} matches {len(rows)} images; give more characters.")
        out.append(rows[0])
    return out


def list_failures(project: Project, *, limit: int | None = 50) -> list[dict]:
    """Candidates that failed or were skipped, with their reason (grouped by reason, oldest first)."""
    limit = COUNT.check_optional(limit, "limit")
    return [dict(r) for r in project.db.query(
        "SELECT id, url, status, reason, detail, http_status FROM candidates WHERE status IN ('failed','skipped') "
        "ORDER BY reason, id LIMIT ?", [-1 if limit is None else limit])]


def set_image_status(project: Project, prefixes, *, exclude: bool, reason: str | None = None) -> dict:
    """Exclude images by hand (``images.status = 'excluded'`` with the reason; they leave the reviewed pool)
    or include them again. Nothing is deleted."""
    if exclude and not (reason and reason.strip()):
        raise CulturaError("Excluding an image needs a reason (stored with it and shown in reports).")
    db = project.db
    shas = resolve_shas(db, prefixes)
    with transaction(db):
        for sha in shas:
            db.execute("UPDATE images SET status = ?, reason = ? WHERE sha256 = ?",
                       ["excluded" if exclude else "ok", reason.strip() if exclude else None, sha])
    return {"images": len(shas), "status": "excluded" if exclude else "ok", "reason": reason if exclude else None,
            "sha256": shas}


def flags(project: Project, *, status: str | None = "open") -> list[dict]:
    """Image flags (culture conflicts, unreadable files) with their pairs and resolution."""
    return list_flags(project.db, status=status)


#: Flags a person resolves by hand: a culture question, and an unreadable image to be decoded again.
HAND_FLAGS = (FLAG, UNREADABLE)


def resolve_image_flags(project: Project, prefixes, *, reason: str, reopen: bool = False,
                        cultures: list[str] | None = None, flag: str = FLAG) -> dict:
    """Resolve (or ``reopen``) the culture-conflict flags of the given images by hand, with a reason: a culture
    decision. ``cultures`` (country codes): the countries the image stands for, each one it was found for
    (itself or through a dropped copy); the build keeps only those links. Without it every flagged country is
    kept. With it, an already resolved flag is decided again (a person changing an earlier decision).

    ``flag="unreadable"``: the image dedup could not decode goes back to the pool and the next dedup decodes it
    again (after an error that has passed: a full disk, memory); bytes still unreadable are flagged again."""
    if flag not in HAND_FLAGS:
        raise CulturaError(f"Only {' and '.join(HAND_FLAGS)} flags are resolved by hand, not {flag!r} (an "
                           "'undecoded' flag is resolved by 'cultura images dedup').", param="flag")
    if cultures is not None and flag != FLAG:
        raise CulturaError(f"--cultures decides a culture question; a {flag} flag has none.", param="cultures")
    if not reopen and not (reason and reason.strip()):
        raise CulturaError("Resolving a flag by hand needs a reason (stored with it); pass --reason TEXT.",
                           param="reason")
    db = project.db
    shas = resolve_shas(db, prefixes)
    if cultures is not None and not reopen:
        cultures = [c.strip().upper() for c in cultures if c.strip()]
        if not cultures:
            raise CulturaError("No country given to keep; pass --cultures CC,CC (the countries the image stands "
                               "for) or leave it out to keep every flagged country.", param="cultures")
        rows = {r["sha256"]: r for r in list_flags(db, status=None, flag=FLAG)}
        for sha in shas:
            found = rows.get(sha, {}).get("countries") or []
            bad = [c for c in cultures if c not in found]
            if sha in rows and bad:
                raise CulturaError(f"Image {sha[:12]} was not found for {', '.join(bad)} (its flag covers "
                                   f"{', '.join(found)}); a decision keeps only countries a query found it for.",
                                   param="cultures")
    with transaction(db):
        n = reopen_flags(db, shas, flag=flag) if reopen else resolve_flags(
            db, shas, by="hand", resolution=reason.strip(), cultures=cultures, reopened=cultures is not None,
            flag=flag)
    out = {"images": len(shas), ("reopened" if reopen else "resolved"): n}
    if cultures is not None and not reopen:
        out["cultures"] = sorted(set(cultures))
    return out


# ------------------------------------------------------------------ empty states

def nothing_to_do(project: Project, stage: str) -> str | None:
    """When ``stage`` (search, download, dedup, translate, tag) has nothing to work on in this project, the
    sentence that says what to do first; else None."""
    db = project.db
    n_concepts = _scalar(db, "SELECT count(*) FROM concepts WHERE status = 'active'")
    if stage in ("search", "translate", "tag") and not n_concepts:
        return ("No concepts yet, so there is nothing to " + stage + ". Load or add some first: 'cultura concepts "
                "load --preset 3xcm', 'cultura concepts add NAME …' or 'cultura concepts generate' (or search a "
                "folder laid out COUNTRY/concept/: 'cultura images search --provider folder:DIR').")
    if stage == "download" and not _scalar(db, "SELECT count(*) FROM candidates"):
        return ("No candidate images yet, so there is nothing to download. Find some first: 'cultura images "
                "search' (web search, or --provider urls:FILE / folder:DIR).")
    if stage in ("dedup", "tag") and not _scalar(db, "SELECT count(*) FROM images"):
        return (f"No stored images yet, so there is nothing to {stage}. Download them first: 'cultura images "
                "download' (after 'cultura images search').")
    return None
