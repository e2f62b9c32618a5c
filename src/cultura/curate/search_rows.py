"""The rows of a search, stored: every result a provider returns is either stored (a ``search_results`` row and
its ``candidates`` row, in one transaction with the query's ``searches`` record) or an ``ingest_rejects`` row with
its reason. Nothing is dropped silently: a result that repeats a (query, rank) pair, one beyond
``search.per_query`` and one whose URL cannot be a candidate are reject rows, and a candidate no stored result
lists is never downloaded. Every provider (``curate/search.py``, ``curate/search_lists.py``) stores through here,
and its summary says ``rows`` (in) = ``stored`` + ``rejected``.
"""
from __future__ import annotations

import math
import urllib.parse
from typing import TYPE_CHECKING

from ..db import dumps, now, transaction
from ..progress import Progress
from ..redact import known_secrets, scrub, scrub_obj, strip_userinfo

if TYPE_CHECKING:
    from ..project import Project


class Provider:
    """Turns the project's queries (or a list of its own) into stored results; ``run`` returns counts, with
    ``rows`` (results or input rows read), ``stored`` and ``rejected`` (``rows = stored + rejected``)."""

    name = "?"
    #: searches the project's queries (made from the concepts and terms before a search), not its own input
    uses_queries = False

    def run(self, project: Project, *, per_query: int, refresh: bool = False, progress: Progress = None) -> dict:
        raise NotImplementedError


def valid_results(db, source: str, results: list, per_query: int | None = None) -> tuple[list[dict], int]:
    """The results whose image URL can be a candidate, at most ``per_query`` of them; the others become
    ``ingest_rejects`` rows. Returns (kept, rejected)."""
    kept, refused = [], []
    for r in results:
        reason = check_url(r.get("image")) if isinstance(r, dict) else "result is not an object"
        if not reason and per_query is not None and len(kept) >= per_query:
            reason = f"beyond search.per_query ({per_query}): the provider returned more results than asked"
        if reason:  # e.g. file:///etc/passwd from a result: refused without touching the disk
            refused.append((r, reason))
        else:
            kept.append(r)
    if refused:  # one write for all of them, and none (no write lock taken) when every result is kept
        with transaction(db):
            for r, reason in refused:
                reject(db, source, None, r, reason)
    return kept, len(refused)


def store_results(db, query_id: int, provider: str, results: list[dict], *, source: str,
                  append: bool = False) -> dict:
    """Store one query's results (and their candidates) and mark the query searched — one transaction.

    A result's rank is its ``rank`` when given, else its position; a result that repeats a rank an earlier one of
    this query holds is a reject row of ``source`` (its ``line``, when the result carries ``_line``). ``append``:
    keep what is stored and add only results whose URL this query × provider does not have yet, ranked after the
    existing ones (new rows in a ``urls:`` file, new files in a ``folder:``). Returns ``written`` (new rows),
    ``already`` (rows stored by an earlier run) and ``rejected``."""
    # no user:password@ (nor any other known secret) is ever stored, exported or pushed
    secrets = known_secrets()
    lines = [r.get("_line") for r in results]
    results = [scrub_obj({k: strip_userinfo(v) if isinstance(v, str) else v for k, v in r.items() if k != "_line"},
                         secrets=secrets) for r in results]
    out = {"written": 0, "already": 0, "rejected": 0}
    with transaction(db):
        text = (db.execute("SELECT text FROM queries WHERE id = ?", [query_id]).fetchone() or ["?"])[0]
        seen: dict[int, int] = {}
        ranked = []
        for pos, (r, line) in enumerate(zip(results, lines), start=1):
            rank = r.get("rank") or pos
            if rank in seen:  # a unique (query, provider, rank) would otherwise overwrite the earlier row
                where = f"row {seen[rank]}" if seen[rank] else "an earlier result"
                reject(db, source, line, r, f"repeats rank {rank} of query {text!r} ({where} has it); give "
                                             "each row of a query its own rank")
                out["rejected"] += 1
                continue
            seen[rank] = line or 0
            ranked.append({**r, "rank": rank})
        results = ranked
        if append:
            have = {u for (u,) in db.execute(
                "SELECT c.url FROM search_results sr JOIN candidates c ON c.id = sr.candidate_id "
                "WHERE sr.query_id = ? AND sr.provider = ?", [query_id, provider])}
            last = db.execute("SELECT coalesce(max(rank), 0) FROM search_results WHERE query_id = ? AND "
                              "provider = ?", [query_id, provider]).fetchone()[0]
            out["already"] = sum(r["image"] in have for r in results)
            results = [r for r in results if r["image"] not in have]
            for pos, r in enumerate(results, start=1):
                r["rank"] = last + pos
        for r in results:
            url = r["image"]
            # a candidate left unlisted by an earlier refresh comes back when a result lists it again
            db.execute("""INSERT INTO candidates (url, status, updated_at) VALUES (?, 'pending', ?)
                          ON CONFLICT (url) DO UPDATE SET status = 'pending', reason = NULL, detail = NULL
                          WHERE candidates.status = 'skipped' AND candidates.reason = 'unlisted'""", [url, now()])
            cid = db.execute("SELECT id FROM candidates WHERE url = ?", [url]).fetchone()[0]
            before = db.execute("SELECT candidate_id FROM search_results WHERE query_id = ? AND provider = ? "
                                "AND rank = ?", [query_id, provider, r["rank"]]).fetchone()
            db.execute(
                """INSERT INTO search_results (query_id, provider, rank, candidate_id, url, thumbnail, title,
                       source_page, width, height, raw, found_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)
                   ON CONFLICT (query_id, provider, rank) DO UPDATE SET candidate_id = excluded.candidate_id,
                       url = excluded.url, thumbnail = excluded.thumbnail, title = excluded.title,
                       source_page = excluded.source_page, width = excluded.width, height = excluded.height,
                       raw = excluded.raw, found_at = excluded.found_at""",
                [query_id, provider, r["rank"], cid, r.get("original_url") or url, r.get("thumbnail"),
                 r.get("title"),
                 r.get("url") or r.get("source_page"), _int(r.get("width")), _int(r.get("height")),
                 dumps(r), now()])
            if before and before[0] != cid:
                _unlist(db, before[0])
        out["written"] = len(results)
        n_total = len(results) if not append else db.execute(
            "SELECT count(*) FROM search_results WHERE query_id = ? AND provider = ?", [query_id, provider]).fetchone()[0]
        db.execute("""INSERT INTO searches (query_id, provider, status, n_results, error, attempts, searched_at)
                      VALUES (?, ?, 'done', ?, NULL, coalesce((SELECT attempts FROM searches WHERE query_id = ?
                      AND provider = ?), 0) + 1, ?)
                      ON CONFLICT (query_id, provider) DO UPDATE SET status = 'done', n_results = excluded.n_results,
                      error = NULL, attempts = excluded.attempts, searched_at = excluded.searched_at""",
                   [query_id, provider, n_total, query_id, provider, now()])
    return out


def _unlist(db, candidate_id: int) -> None:
    """A candidate whose only result was replaced (a refreshed search ranked another URL there) is not downloaded:
    an image is fetched only for a stored row."""
    db.execute("""UPDATE candidates SET status = 'skipped', reason = 'unlisted',
                  detail = 'no stored search result lists this URL any more', updated_at = ?
                  WHERE id = ? AND status = 'pending'
                  AND NOT EXISTS (SELECT 1 FROM search_results WHERE candidate_id = ?)""",
               [now(), candidate_id, candidate_id])


def record_failure(db, query_id: int, provider: str, error: str, attempts: int) -> None:
    with transaction(db):
        db.execute("""INSERT INTO searches (query_id, provider, status, n_results, error, attempts, searched_at)
                      VALUES (?, ?, 'failed', 0, ?, ?, ?)
                      ON CONFLICT (query_id, provider) DO UPDATE SET status = 'failed', error = excluded.error,
                      attempts = searches.attempts + excluded.attempts, searched_at = excluded.searched_at""",
                   [query_id, provider, scrub(error), attempts, now()])


def check_url(url, *, schemes=("http", "https")) -> str | None:
    """Why ``url`` cannot be a candidate (``None`` when it can): every provider passes its URLs through this
    one check. Only ``schemes`` (http/https for anything that came from the web or a list), a host, no
    whitespace or control characters. The reason never depends on anything outside the URL itself (a
    ``file://`` result is refused without looking at the disk)."""
    if not isinstance(url, str) or not url.strip():
        return "missing url"
    url = url.strip()
    if any(ord(ch) < 33 or ord(ch) == 127 for ch in url):
        return "url contains whitespace or control characters"
    try:
        p = urllib.parse.urlsplit(url)
        p.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError as e:
        return f"url cannot be parsed ({e})"
    if p.scheme.lower() not in schemes:
        return "url is not http(s)" if "file" not in schemes else f"url scheme {p.scheme or '(none)'!r} not allowed"
    if p.scheme.lower() in ("http", "https") and not p.hostname:
        return "url has no host"
    return None


#: Largest rank a ``urls:`` row may give (SQLite stores 64-bit integers; a rank is a position in a list).
MAX_RANK = 2**31 - 1


def _int(v):
    """``v`` as an integer within +-:data:`MAX_RANK`, else ``None`` (a provider's width/height are informational:
    an absurd value is dropped, never an ``OverflowError`` from SQLite)."""
    try:
        n = int(v) if v not in (None, "") else None
    except (TypeError, ValueError, OverflowError):
        return None
    return n if n is None or abs(n) <= MAX_RANK else None


def parse_rank(v) -> tuple[int | None, str | None]:
    """A ``urls:`` row's rank: ``(rank, None)`` (``None`` or 0 when not given: the row's position decides), or
    ``(None, reason)`` for a value that is not a whole number in 0..:data:`MAX_RANK` (1e20, 2**63, 1e308, -3,
    "abc", NaN)."""
    if v is None or (isinstance(v, str) and not v.strip()):
        return None, None
    shown = repr(v) if len(repr(v)) <= 40 else repr(v)[:40] + "…"
    n = None
    if isinstance(v, (int, str)) and not isinstance(v, bool):
        try:
            n = int(v)
        except ValueError:
            pass
    if n is None and not isinstance(v, bool):
        try:
            f = float(v)
        except (TypeError, ValueError):
            return None, f"rank {shown} is not a whole number"
        if not math.isfinite(f) or f != int(f):
            return None, f"rank {shown} is not a whole number"
        n = int(f)
    if n is None:
        return None, f"rank {shown} is not a whole number"
    if not 0 <= n <= MAX_RANK:
        return None, f"rank {shown} is out of range (1 to {MAX_RANK:,})"
    return n, None


def reject(db, source: str, line: int | None, raw, reason: str) -> bool:
    """Record a rejected input row once (a rerun of the same input adds nothing; ``line`` may be NULL, which
    the UNIQUE constraint alone does not dedupe). True when a new row was written."""
    raw = dumps(scrub_obj(raw))
    cur = db.execute(
        """INSERT OR IGNORE INTO ingest_rejects (source, line, raw, reason, created_at) SELECT ?,?,?,?,?
           WHERE NOT EXISTS (SELECT 1 FROM ingest_rejects WHERE source = ? AND line IS ? AND reason = ?
                             AND raw IS ?)""",
        [source, line, raw, reason, now(), source, line, reason, raw])
    return cur.rowcount > 0


# ------------------------------------------------------------------------------------------ queries of a list

def query_for(db, project: Project, concept_id: int, country, language: str | None, text: str | None,
              kind: str) -> int:
    """The query an input row's results belong to: the project's own query when one has the same concept,
    country, text and language (a row without a language matches any), so a listed result counts for the query
    a web search would have made; else a query of ``kind`` made for the list."""
    text = text or f"{db['concepts'].get(concept_id)['name']} {country.name}"
    same = db.execute("""SELECT id FROM queries WHERE concept_id = ? AND country = ? AND text = ?
                         AND (language = ? OR ? IS NULL) AND status IN ('active', 'imported')
                         ORDER BY kind NOT IN ('english', 'native'), language != ?, id LIMIT 1""",
                      [concept_id, country.code, text, language, language, country.language]).fetchone()
    if same:
        return same[0]
    lang = language or country.language
    db.execute("""INSERT OR IGNORE INTO queries (concept_id, country, language, kind, text, region, status,
                  created_at) VALUES (?,?,?,?,?,?, 'active', ?)""",
               [concept_id, country.code, lang, kind, text, country.ddg_region, now()])
    return db.execute("SELECT id FROM queries WHERE concept_id=? AND country=? AND language=? AND kind=? AND text=?",
                      [concept_id, country.code, lang, kind, text]).fetchone()[0]
