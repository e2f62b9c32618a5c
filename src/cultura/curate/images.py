"""Curate's image tables read back: the stored images (``images``), what found them (``image_links``: concept
× country × query; ``candidates`` and ``search_results``: the URL and page), their tags and captions.

Curate owns these tables; annotation, build, export, evaluation and the view read them through the functions
here (plain rows, no policy), so every area that depends on curated images imports curate.
"""
from __future__ import annotations

import functools
from typing import Callable, Iterable

from ..db import chunks, dumps

SQL_CHUNK = 500
#: ``image_flags`` an image's bytes get: ``undecoded``, stored after a header check only (``download.check =
#: "header"``) and not yet decoded by dedup; ``unreadable``, dedup could not decode it. Both keep an image out
#: of the reviewed pool while open.
UNDECODED = "undecoded"
UNREADABLE = "unreadable"


def open_flagged(db, flag: str) -> list[str]:
    """sha256 of the images with an open ``flag`` in ``image_flags``."""
    return [r[0] for r in db.execute("SELECT sha256 FROM image_flags WHERE flag = ? AND status = 'open'", [flag])]


#: A stage resolving an open flag as a person's resolution does (:func:`.cultures_decide.resolve_flags`): the flag
#: keeps when and why it was raised, and its details gain ``resolution`` (who, how, when: :func:`resolution`).
#: Parameters: the resolution's JSON, the image's sha256, the flag.
RESOLVE_OPEN_FLAG = ("UPDATE image_flags SET status = 'resolved', "
                     "details = json_set(coalesce(details, '{}'), '$.resolution', json(?)) "
                     "WHERE sha256 = ? AND flag = ? AND status = 'open'")


def resolution(by: str, how: str, at: str) -> str:
    """The JSON of a flag's ``resolution``: who resolved it (``by``), how, and when (``at``)."""
    return dumps({"by": by, "resolution": how, "at": at})


# ------------------------------------------------------------------ images

def image_count(db) -> int:
    return db.execute("SELECT COUNT(*) FROM images").fetchone()[0]


def excluded_images(db) -> list[tuple[str, str]]:
    """``(sha256, status)`` of every image whose status is not ``ok`` (excluded by hand or at ingest, missing)."""
    return db.execute("SELECT sha256, status FROM images WHERE status != 'ok'").fetchall()


def ok_images(db) -> list[str]:
    return [r[0] for r in db.execute("SELECT sha256 FROM images WHERE status = 'ok'")]


def image_paths(db, shas: Iterable[str] | None = None) -> dict[str, str]:
    """sha256 → blob path (relative to the project) of every image, or of those among ``shas``."""
    if shas is None:
        return dict(db.execute("SELECT sha256, path FROM images").fetchall())
    out: dict[str, str] = {}
    for part in chunks(list(dict.fromkeys(shas)), SQL_CHUNK):
        marks = ",".join("?" * len(part))
        out.update(db.execute(f"SELECT sha256, path FROM images WHERE sha256 IN ({marks})", part).fetchall())
    return out


def image_files(db) -> Callable[[list[str]], dict[str, str]]:
    """The ``files`` of the image embedders (:func:`cultura.models.embedders.embed_images_cached`): sha256s →
    the blob paths their ``images`` rows name."""
    return functools.partial(image_paths, db)


def ok_image_paths(db) -> list[tuple[str, str]]:
    """``(sha256, path)`` of the ``ok`` images, by sha256."""
    return db.execute("SELECT sha256, path FROM images WHERE status = 'ok' ORDER BY sha256").fetchall()


def image_rows(db, *, by_sha: bool = True) -> list[dict]:
    """Every image: sha256, path, format, width, height, bytes, status, reason (by sha256, else as stored)."""
    return [dict(r) for r in db.query("SELECT sha256, path, format, width, height, bytes, status, reason "
                                      "FROM images" + (" ORDER BY sha256" if by_sha else ""))]


def ok_image_links(db) -> list[tuple[str, str, str | None, str | None, str, str]]:
    """One row per ``ok`` image that a query found: ``(sha256, path, url, any_url, concepts, countries)``
    — ``url`` the first downloaded URL, ``any_url`` the first of any candidate, ``concepts`` and ``countries``
    comma-joined (distinct), by sha256."""
    return db.execute(
        f"""SELECT i.sha256, i.path, {_URLS}, GROUP_CONCAT(DISTINCT co.name) AS concepts,
                   GROUP_CONCAT(DISTINCT l.country) AS countries
            FROM images i JOIN image_links l ON l.sha256 = i.sha256 JOIN concepts co ON co.id = l.concept_id
            WHERE i.status = 'ok' GROUP BY i.sha256 ORDER BY i.sha256""").fetchall()


def image_urls(db, shas: Iterable[str]) -> list[tuple[str, str, str | None, str | None]]:
    """``(sha256, path, url, any_url)`` of the images among ``shas`` (URLs as :func:`ok_image_links`)."""
    shas = list(shas)
    marks = ",".join("?" * len(shas))
    return db.execute(f"SELECT i.sha256, i.path, {_URLS} FROM images i WHERE i.sha256 IN ({marks})",
                      shas).fetchall()


_URLS = ("(SELECT MIN(c.url) FROM candidates c WHERE c.sha256 = i.sha256 AND c.status = 'downloaded') AS url,"
         " (SELECT MIN(c.url) FROM candidates c WHERE c.sha256 = i.sha256) AS any_url")


def first_sources(db) -> dict[str, tuple[str | None, str, str | None]]:
    """sha256 → ``(title, url, source page)`` of the first search result that found it."""
    out: dict[str, tuple] = {}
    for sha, title, url, page in db.execute(
            "SELECT c.sha256, sr.title, c.url, sr.source_page FROM candidates c JOIN search_results sr "
            "ON sr.candidate_id = c.id WHERE c.sha256 IS NOT NULL ORDER BY sr.id"):
        out.setdefault(sha, (title, url, page))
    return out


# ------------------------------------------------------------------ links: concept × country per image

def links(db, sha: str | None = None) -> list[tuple[str, int, str]]:
    """``(sha256, concept_id, country)`` of every link (``image_links``; one image's with ``sha``)."""
    if sha is not None:
        return db.execute("SELECT sha256, concept_id, country FROM image_links WHERE sha256 = ?", [sha]).fetchall()
    return db.execute("SELECT l.sha256, l.concept_id, l.country FROM image_links l").fetchall()


def links_ranked(db) -> list[tuple[str, int, str, int]]:
    """``(sha256, concept_id, country, rank)`` of every link (the rank of the search result)."""
    return db.execute("SELECT sha256, concept_id, country, rank FROM image_links").fetchall()


def named_links(db, *, distinct_concepts: bool = False) -> list[tuple]:
    """``(sha256, concept name, country)`` of every link; ``distinct_concepts``: ``(sha256, concept name)``
    once each."""
    if distinct_concepts:
        return db.execute("SELECT DISTINCT l.sha256, co.name FROM image_links l JOIN concepts co "
                          "ON co.id = l.concept_id").fetchall()
    return db.execute("SELECT l.sha256, c.name, l.country FROM image_links l JOIN concepts c "
                      "ON c.id = l.concept_id").fetchall()


def image_countries(db) -> dict[str, set[str]]:
    """sha256 → the countries whose queries found it."""
    out: dict[str, set[str]] = {}
    for sha, c in db.execute("SELECT DISTINCT sha256, country FROM image_links"):
        out.setdefault(sha, set()).add(c)
    return out


def active_ok_links(db) -> list[tuple[str, int, str, str, str]]:
    """``(sha256, concept_id, concept name, country, query kind)`` of the links of ``ok`` images to active
    concepts."""
    return db.execute(
        "SELECT l.sha256, l.concept_id, c.name, l.country, l.query_kind FROM image_links l "
        "JOIN concepts c ON c.id = l.concept_id JOIN images i ON i.sha256 = l.sha256 "
        "WHERE c.status = 'active' AND i.status = 'ok'").fetchall()


def link_provenance(db) -> list[dict]:
    """Every link with its query: sha256, concept_id, country, language, query (text), query_kind, provider,
    rank, source_page, found_at."""
    return [dict(r) for r in db.query(
        "SELECT l.sha256, l.concept_id, l.country, l.language, q.text AS query, l.query_kind, "
        "l.provider, l.rank, l.source_page, l.found_at FROM image_links l JOIN queries q ON q.id = l.query_id")]


# ------------------------------------------------------------------ tags

def tag_rows(db, *, by_score: bool = False) -> list[tuple[str, str, float, str]]:
    """``(sha256, tag, score, source)`` of every image tag (``by_score``: highest score first)."""
    return db.execute("SELECT sha256, tag, score, source FROM image_tags"
                      + (" ORDER BY score DESC" if by_score else "")).fetchall()


def tag_sources(db) -> list[str]:
    """The distinct sources (models) of the stored tags."""
    return [r[0] for r in db.execute("SELECT DISTINCT source FROM image_tags")]


# ------------------------------------------------------------------ captions (imported with the images)

def has_captions(db) -> bool:
    return "captions" in db.table_names() and db["captions"].count > 0


def caption_rows(db) -> list[dict]:
    """Every caption: image_sha256, language, idx, text, source."""
    if not db["captions"].exists():
        return []
    return [dict(r) for r in db.query("SELECT image_sha256, language, idx, text, source FROM captions")]


def iter_captions(db, source: str | None = None):
    """``(image_sha256, language, text)`` of the captions (of one ``source``), by image, language and index:
    a cursor, for pools of hundreds of thousands of captions."""
    where, args = ("WHERE source = ?", [source]) if source else ("", [])
    return db.execute(f"SELECT image_sha256, language, text FROM captions {where} "
                      "ORDER BY image_sha256, language, idx", args)


def caption_languages(db) -> list[str]:
    """Languages of the captions of ``ok`` images, empty when none were imported."""
    if not db["captions"].exists():
        return []
    return [r[0] for r in db.execute("SELECT DISTINCT c.language FROM captions c JOIN images i ON "
                                     "i.sha256 = c.image_sha256 WHERE i.status = 'ok' ORDER BY 1")]


def captions_in(db, language: str) -> list[tuple[str, str]]:
    """``(image_sha256, text)`` of the captions in ``language`` of ``ok`` images (by image, index, source)."""
    return db.execute(
        "SELECT c.image_sha256, c.text FROM captions c JOIN images i ON i.sha256 = c.image_sha256 "
        "WHERE c.language = ? AND i.status = 'ok' ORDER BY c.image_sha256, c.idx, c.source", [language]).fetchall()
