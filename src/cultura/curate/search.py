"""Image search: turn queries into candidates (URLs to download) with full provenance.

Providers form a registry (``register_provider``): ``ddgs`` (DuckDuckGo through the ``ddgs`` package),
``urls:PATH`` (a JSONL/CSV/Parquet list of URLs — the shape img2dataset consumes), ``folder:DIR``
(local images laid out ``DIR/<COUNTRY>/<concept>/*.jpg``). ``ingest_img2dataset`` reads an img2dataset
output folder back in. Outside packages add providers through the ``cultura.search_providers`` entry point
group (the name is the provider's, the value its factory); a provider that answers one query at a time
subclasses :class:`QueryProvider` and writes only :meth:`QueryProvider.search` (``docs/plugins.md``).

Every result is stored once per (query, provider, rank) with every field the provider returned; a query's
search is recorded in ``searches`` after its results, in one transaction, so reruns skip done queries and a
crash never leaves half a query. Bad input rows go to ``ingest_rejects`` with a reason.
"""
from __future__ import annotations

import json
import math
import os
import random
import time
import urllib.parse
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .. import pixels
from ..bounds import from_field
from ..config import SearchSection
from ..db import dumps, finish_run, now, start_run, transaction
from ..db.readers import ERROR, read_rows
from ..errors import CulturaError, unknown
from ..names import BadName, check_concept
from ..progress import Progress, track
from ..redact import display_url, known_secrets, scrub, scrub_obj, strip_userinfo
from .concepts import add_concepts, build_queries, get_concept, normalise
from .exact_urls import record_sources

if TYPE_CHECKING:
    from ..project import Project

#: The file suffixes ``folder:`` takes: those of every format the downloader accepts (:mod:`cultura.pixels`).
IMAGE_SUFFIXES = frozenset(pixels.SUFFIXES)

ProviderFactory = Callable[[str | None], "Provider"]
_PROVIDERS: dict[str, ProviderFactory] = {}
ENTRY_POINT_GROUP = "cultura.search_providers"
_plugins_loaded = False


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Register a search provider; ``factory(argument)`` gets the text after ``name:`` (or None)."""
    _PROVIDERS[name] = factory


def _load_plugins() -> None:
    """The providers of installed packages (entry point group ``cultura.search_providers``), once; a provider
    registered by name before (built in, or by a test) wins."""
    global _plugins_loaded
    if not _plugins_loaded:
        _plugins_loaded = True
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            _PROVIDERS.setdefault(ep.name, lambda arg, ep=ep: ep.load()(arg))


def get_provider(spec: str) -> "Provider":
    """A provider from a spec such as ``ddgs``, ``urls:list.jsonl`` or ``folder:images/``."""
    name, _, arg = spec.partition(":")
    if name not in _PROVIDERS:
        _load_plugins()
    if name not in _PROVIDERS:
        raise unknown("search provider", name, [f"{k}" for k in _PROVIDERS],
                      hint="Use ddgs, urls:PATH (JSONL/CSV/Parquet) or folder:DIR.")
    try:
        return _PROVIDERS[name](arg or None)
    except CulturaError:
        raise
    except (TypeError, ValueError) as e:  # a plugin's refusal of its argument, in its own words
        raise CulturaError(f"Search provider {name!r}: {e}", param="provider") from None


def uses_queries(spec: str | Provider) -> bool:
    """Whether the provider searches the project's queries (``ddgs``, a :class:`QueryProvider`) rather than
    reading its own input (``urls:``, ``folder:``)."""
    return bool(getattr(get_provider(spec) if isinstance(spec, str) else spec, "uses_queries", False))


class Provider:
    """Turns the project's queries (or a list of its own) into stored results; ``run`` returns counts."""

    name = "?"
    #: searches the project's queries (made from the concepts and terms before a search), not its own input
    uses_queries = False

    def run(self, project: Project, *, per_query: int, refresh: bool = False, progress: Progress = None) -> dict:
        raise NotImplementedError


class QueryProvider(Provider):
    """A provider that answers one query at a time: a subclass sets ``name`` and writes :meth:`search`; the rest
    (which queries are pending, storing each query's results in one transaction, refusing URLs that cannot be
    candidates, a failure as a row with its reason, progress) is done here, as for every provider."""

    uses_queries = True

    def search(self, query: dict, per_query: int) -> list[dict]:
        """Up to ``per_query`` results for ``query`` (a ``queries`` row: ``text``, ``language``, ``country``,
        ``region``…), each a dict with ``image`` (the image URL) and optionally ``title``, ``url`` (the page),
        ``thumbnail``, ``width``, ``height``. An exception fails this query (with its message as the reason)."""
        raise NotImplementedError

    def run(self, project: Project, *, per_query: int, refresh: bool = False, progress: Progress = None) -> dict:
        db = project.db
        queries = _pending_queries(db, self.name, refresh)
        counts = {"queries": len(queries), "done": 0, "failed": 0, "results": 0, "rejected": 0}
        for q in track(queries, f"searching ({self.name})", progress=progress):
            try:
                results = self.search(dict(q), per_query)
            except Exception as e:  # noqa: BLE001 - one query's failure is a row with its reason, the rest go on
                _record_failure(db, q["id"], self.name, f"{type(e).__name__}: {e}", 1)
                counts["failed"] += 1
                continue
            kept = _valid_results(db, f"{self.name}:{q['text']}", results or [], counts)
            counts["results"] += _store_results(db, q["id"], self.name, kept[:per_query])
            counts["done"] += 1
        return counts


def _valid_results(db, source: str, results: list, counts: dict) -> list[dict]:
    """The results whose image URL can be a candidate; the others become ``ingest_rejects`` rows."""
    kept = []
    for r in results:
        reason = check_url(r.get("image")) if isinstance(r, dict) else "result is not an object"
        if reason:  # e.g. file:///etc/passwd from a result: refused without touching the disk
            with transaction(db):
                _reject(db, source, None, r, reason)
            counts["rejected"] = counts.get("rejected", 0) + 1
        else:
            kept.append(r)
    return kept


# ------------------------------------------------------------------------------------------ storage

def _store_results(db, query_id: int, provider: str, results: list[dict], *, append: bool = False) -> int:
    """Store one query's results (and their candidates) and mark the query searched — one transaction.

    ``append``: keep what is stored and add only results whose URL this query × provider does not have yet,
    ranked after the existing ones (new rows in a ``urls:`` file, new files in a ``folder:``). Returns the
    number of results written."""
    # no user:password@ (nor any other known secret) is ever stored, exported or pushed
    secrets = known_secrets()
    results = [scrub_obj({k: strip_userinfo(v) if isinstance(v, str) else v for k, v in r.items()}, secrets=secrets)
               for r in results]
    with transaction(db):
        if append:
            have = {u for (u,) in db.execute(
                "SELECT c.url FROM search_results sr JOIN candidates c ON c.id = sr.candidate_id "
                "WHERE sr.query_id = ? AND sr.provider = ?", [query_id, provider])}
            last = db.execute("SELECT coalesce(max(rank), 0) FROM search_results WHERE query_id = ? AND "
                              "provider = ?", [query_id, provider]).fetchone()[0]
            results = [r for r in results if r["image"] not in have]
            for pos, r in enumerate(results, start=1):
                r["rank"] = last + pos
        for rank, r in enumerate(results, start=1):
            url = r["image"]
            db.execute("INSERT OR IGNORE INTO candidates (url, status, updated_at) VALUES (?, 'pending', ?)",
                       [url, now()])
            cid = db.execute("SELECT id FROM candidates WHERE url = ?", [url]).fetchone()[0]
            db.execute(
                """INSERT INTO search_results (query_id, provider, rank, candidate_id, url, thumbnail, title,
                       source_page, width, height, raw, found_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)
                   ON CONFLICT (query_id, provider, rank) DO UPDATE SET candidate_id = excluded.candidate_id,
                       url = excluded.url, thumbnail = excluded.thumbnail, title = excluded.title,
                       source_page = excluded.source_page, width = excluded.width, height = excluded.height,
                       raw = excluded.raw, found_at = excluded.found_at""",
                [query_id, provider, r.get("rank") or rank, cid, r.get("original_url") or url, r.get("thumbnail"),
                 r.get("title"),
                 r.get("url") or r.get("source_page"), _int(r.get("width")), _int(r.get("height")),
                 dumps(r), now()])
        n_total = len(results) if not append else db.execute(
            "SELECT count(*) FROM search_results WHERE query_id = ? AND provider = ?", [query_id, provider]).fetchone()[0]
        db.execute("""INSERT INTO searches (query_id, provider, status, n_results, error, attempts, searched_at)
                      VALUES (?, ?, 'done', ?, NULL, coalesce((SELECT attempts FROM searches WHERE query_id = ?
                      AND provider = ?), 0) + 1, ?)
                      ON CONFLICT (query_id, provider) DO UPDATE SET status = 'done', n_results = excluded.n_results,
                      error = NULL, attempts = excluded.attempts, searched_at = excluded.searched_at""",
                   [query_id, provider, n_total, query_id, provider, now()])
    return len(results)


def _record_failure(db, query_id: int, provider: str, error: str, attempts: int) -> None:
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


def _rank(v) -> tuple[int | None, str | None]:
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


def _reject(db, source: str, line: int | None, raw, reason: str) -> bool:
    """Record a rejected input row once (a rerun of the same input adds nothing; ``line`` may be NULL, which
    the UNIQUE constraint alone does not dedupe). True when a new row was written."""
    raw = dumps(scrub_obj(raw))
    cur = db.execute(
        """INSERT OR IGNORE INTO ingest_rejects (source, line, raw, reason, created_at) SELECT ?,?,?,?,?
           WHERE NOT EXISTS (SELECT 1 FROM ingest_rejects WHERE source = ? AND line IS ? AND reason = ?
                             AND raw IS ?)""",
        [source, line, raw, reason, now(), source, line, reason, raw])
    return cur.rowcount > 0


# ------------------------------------------------------------------------------------------ ddgs

class RateLimiter:
    """Minimum interval between calls, and exponential back-off with full jitter."""

    def __init__(self, min_interval: float, base: float, cap: float, *, sleep=time.sleep, clock=time.monotonic,
                 rng: random.Random | None = None):
        self.min_interval, self.base, self.cap = min_interval, base, cap
        self.sleep, self.clock = sleep, clock
        self.rng = rng or random.Random()
        self._last = None

    def wait(self) -> None:
        if self._last is not None:
            gap = self.min_interval - (self.clock() - self._last)
            if gap > 0:
                self.sleep(gap)
        self._last = self.clock()

    def backoff(self, attempt: int) -> float:
        delay = self.rng.uniform(0, min(self.cap, self.base * 2 ** (attempt - 1)))
        self.sleep(delay)
        return delay


class DDGSProvider(Provider):
    """DuckDuckGo image search via ``ddgs``: ``DDGS().images(query, region=…, safesearch=…, max_results=…)``.

    ``client_factory`` lets tests inject a fake ``DDGS`` that returns recorded result dicts and raises
    ``RatelimitException`` on demand."""

    name = "ddgs"
    uses_queries = True

    def __init__(self, arg=None, *, client_factory=None, sleep=time.sleep):
        self.client_factory = client_factory
        self.sleep = sleep

    def _client(self):
        if self.client_factory is not None:
            return self.client_factory()
        from ddgs import DDGS  # deferred: heavy optional dependency, loaded on first use

        return DDGS(timeout=20)

    def run(self, project: Project, *, per_query: int, refresh: bool = False, progress: Progress = None) -> dict:
        from ddgs.exceptions import (  # deferred: heavy optional dependency, loaded on first use
            DDGSException,
            RatelimitException,
            TimeoutException,
        )

        cfg = project.config.search
        db = project.db
        queries = _pending_queries(db, self.name, refresh)
        limiter = RateLimiter(cfg.min_interval, cfg.backoff_base, cfg.backoff_max, sleep=self.sleep)
        client = self._client()
        counts = {"queries": len(queries), "done": 0, "failed": 0, "results": 0}
        for q in track(queries, "searching", progress=progress):
            for attempt in range(1, cfg.max_attempts + 1):
                limiter.wait()
                try:
                    results = client.images(q["text"], region=q["region"] or "wt-wt", safesearch=cfg.safesearch,
                                            max_results=per_query, backend=cfg.backend)
                except (RatelimitException, TimeoutException) as e:  # transient: back off and retry
                    if attempt == cfg.max_attempts:
                        kind = "ratelimited" if isinstance(e, RatelimitException) else "timeout"
                        _record_failure(db, q["id"], self.name, f"{kind}: {e}", attempt)
                        counts["failed"] += 1
                        break
                    limiter.backoff(attempt)
                    continue
                except DDGSException as e:
                    # "No results found" is an empty result, not a failure
                    if "no results" in str(e).lower():
                        results = []
                    else:
                        _record_failure(db, q["id"], self.name, f"{type(e).__name__}: {e}", attempt)
                        counts["failed"] += 1
                        break
                kept = _valid_results(db, f"ddgs:{q['text']}", results or [], counts)
                counts["results"] += _store_results(db, q["id"], self.name, kept[:per_query])
                counts["done"] += 1
                break
        return counts


def _pending_queries(db, provider: str, refresh: bool) -> list[dict]:
    sql = """SELECT q.* FROM queries q JOIN concepts c ON c.id = q.concept_id
             WHERE q.status = 'active' AND c.status = 'active' AND q.kind IN ('english', 'native')"""
    if not refresh:
        sql += " AND NOT EXISTS (SELECT 1 FROM searches s WHERE s.query_id = q.id AND s.provider = ? " \
               "AND s.status = 'done')"
        return [dict(r) for r in db.query(sql + " ORDER BY q.id", [provider])]
    return [dict(r) for r in db.query(sql + " ORDER BY q.id")]


# ------------------------------------------------------------------------------------------ urls: and folder:

def _query_for(db, project: Project, concept_id: int, country, language: str | None, text: str | None,
               kind: str) -> int:
    lang = language or country.language
    text = text or f"{db['concepts'].get(concept_id)['name']} {country.name}"
    db.execute("""INSERT OR IGNORE INTO queries (concept_id, country, language, kind, text, region, status,
                  created_at) VALUES (?,?,?,?,?,?, 'active', ?)""",
               [concept_id, country.code, lang, kind, text, country.ddg_region, now()])
    return db.execute("SELECT id FROM queries WHERE concept_id=? AND country=? AND language=? AND kind=? AND text=?",
                      [concept_id, country.code, lang, kind, text]).fetchone()[0]


class UrlsProvider(Provider):
    """``urls:PATH``: rows with at least ``url, concept, country`` (optional ``language, query, rank, title,
    source_page``). Unknown concepts are added (source ``import:urls``); bad rows go to ``ingest_rejects``."""

    name = "urls"

    def __init__(self, arg):
        if not arg:
            raise CulturaError("The urls provider needs a file: urls:PATH (JSONL, CSV or Parquet).", param="provider")
        self.path = Path(arg)

    def run(self, project: Project, *, per_query: int, refresh: bool = False, progress: Progress = None) -> dict:
        if not self.path.exists():
            raise CulturaError(f"{self.path} does not exist. Give the path of a JSONL/CSV/Parquet URL list.")
        rows = read_rows(self.path)
        if rows and not any("url" in r or ERROR in r for r in rows):  # a file without the column at all
            raise CulturaError(f"{self.path} has no 'url' column (columns: {', '.join(rows[0])}). It needs at "
                               "least url, concept, country.")
        db = project.db
        source = f"urls:{self.path}"
        codes = {c.code for c in project.countries}
        grouped: dict[int, list[dict]] = {}
        rejected = 0
        # URLs stored without their secret (a token=, key=… value, user:password@): the row they are read again
        # from when downloaded (curate/exact_urls.py); two URLs that differ only there would be one candidate
        secrets, shown, read_again = known_secrets(), {}, []
        where = str(self.path.resolve())  # once, not per row: a signed list can hold a million URLs
        with transaction(db):
            for i, row in enumerate(rows, start=1):
                reason = row.get(ERROR)
                url = str(row.get("url") or "").strip()
                country_code = str(row.get("country") or "").strip().upper()
                concept, bad_name = check_concept(row.get("concept"))
                rank, bad_rank = _rank(row.get("rank"))
                if not reason:
                    if (reason := check_url(url)):
                        pass
                    elif bad_name:
                        reason = bad_name
                    elif not concept:
                        reason = "missing concept"
                    elif bad_rank:
                        reason = bad_rank
                    elif country_code not in codes:
                        reason = (f"country {country_code or '(empty)'} is not a project country "
                                  f"({', '.join(sorted(codes))})")
                    else:
                        display = display_url(url, secrets=secrets)
                        first_url, first_line = shown.setdefault(display, (url, i))
                        if first_url != url:
                            reason = (f"differs from row {first_line} only in a secret (a token, key or password), "
                                      "which the project does not store, so both would be one image; give each "
                                      "image a URL that differs elsewhere")
                        elif display != url:
                            read_again.append((display, where, i))
                if reason:
                    rejected += 1
                    _reject(db, source, i, row, reason)
                    continue
                add_concepts(project, [concept], source="import:urls")
                cid = db.execute("SELECT id FROM concepts WHERE name = ?", [concept]).fetchone()[0]
                country = project.country(country_code)
                qid = _query_for(db, project, cid, country, row.get("language") or None, row.get("query") or None,
                                 "import")
                grouped.setdefault(qid, []).append({
                    **{k: v for k, v in row.items() if k != "url"},
                    "image": url, "title": row.get("title"), "url": row.get("source_page"),
                    "rank": rank, "width": row.get("width"), "height": row.get("height")})
        done = skipped = n = 0
        for qid, results in grouped.items():
            results.sort(key=lambda r: (r["rank"] is None, r["rank"] or 0))
            for pos, r in enumerate(results, start=1):
                r["rank"] = r["rank"] or pos
            searched = db.execute("SELECT 1 FROM searches WHERE query_id=? AND provider=? AND status='done'",
                                  [qid, self.name]).fetchone()
            # a query searched before keeps its results; rows added to the file since are appended
            added = _store_results(db, qid, self.name, results, append=bool(searched) and not refresh)
            n += added
            if added or not searched or refresh:
                done += 1
            else:
                skipped += 1
        with transaction(db):  # also for rows searched before: a rerun with the file repairs a lost record
            record_sources(db, read_again)
        return {"rows": len(rows), "rejected": rejected, "queries": done, "skipped_queries": skipped, "results": n}


class FolderProvider(Provider):
    """``folder:DIR``: local images laid out ``DIR/<COUNTRY>/<concept>/*.<suffix>``, each suffix of
    :data:`IMAGE_SUFFIXES` (JPEG, PNG, GIF, WebP, BMP, TIFF, AVIF)."""

    name = "folder"

    def __init__(self, arg):
        if not arg:
            raise CulturaError("The folder provider needs a directory: folder:DIR.", param="provider")
        self.root = Path(arg).resolve()

    def run(self, project: Project, *, per_query: int, refresh: bool = False, progress: Progress = None) -> dict:
        if not self.root.is_dir():
            raise CulturaError(f"{self.root} is not a directory. Lay images out as DIR/<COUNTRY>/<concept>/*.jpg.")
        db = project.db
        source = f"folder:{self.root}"
        codes = {c.code for c in project.countries}
        counts = {"files": 0, "rejected": 0, "queries": 0, "results": 0}

        def entries(d: Path) -> list[Path]:
            """``d``'s entries that stay inside the tree: a symlink leading out of it is a reject row and
            is never followed (nor is anything outside the tree opened)."""
            out = []
            for p in sorted(d.iterdir()):
                if p.is_symlink():
                    target = Path(os.path.realpath(p))
                    if target != self.root and self.root not in target.parents:
                        with transaction(db):
                            _reject(db, source, None, {"path": str(p)}, "symlink leads out of the folder (not followed)")
                        counts["rejected"] += 1
                        continue
                out.append(p)
            return out

        for cdir in [p for p in entries(self.root) if p.is_dir()]:
            code = cdir.name.upper()
            if code not in codes:
                with transaction(db):
                    _reject(db, source, None, {"path": str(cdir)},
                            f"folder {cdir.name} is not a project country ({', '.join(sorted(codes))})")
                counts["rejected"] += 1
                continue
            country = project.country(code)
            for kdir in [p for p in entries(cdir) if p.is_dir()]:
                inside = entries(kdir)
                files = [p for p in inside if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES]
                others = [p for p in inside if p.is_file() and p.suffix.lower() not in IMAGE_SUFFIXES]
                with transaction(db):
                    for o in others:
                        _reject(db, source, None, {"path": str(o)}, f"not an image file type ({o.suffix or 'none'})")
                    counts["rejected"] += len(others)
                    try:
                        concept = normalise(kdir.name.replace("_", " "))
                    except BadName as e:  # the folder's name is refused: a reject row, the others go on
                        _reject(db, source, None, {"path": str(kdir)}, f"folder {e.reason}")
                        counts["rejected"] += 1
                        continue
                    add_concepts(project, [concept], source="import:folder")
                    cid = get_concept(db, concept)["id"]
                    qid = _query_for(db, project, cid, country, None, f"folder:{cdir.name}/{kdir.name}", "folder")
                counts["files"] += len(files)
                searched = db.execute("SELECT 1 FROM searches WHERE query_id=? AND provider=? AND status='done'",
                                      [qid, self.name]).fetchone()
                results = [{"image": p.as_uri(), "title": p.name, "url": None, "path": str(p)} for p in files]
                # files added since the last search are picked up without refresh (appended)
                added = _store_results(db, qid, self.name, results, append=bool(searched) and not refresh)
                counts["results"] += added
                if added or not searched or refresh:
                    counts["queries"] += 1
        return counts


register_provider("ddgs", lambda arg: DDGSProvider(arg))
register_provider("urls", UrlsProvider)
register_provider("folder", FolderProvider)


#: Results kept per query: the range of search.per_query.
PER_QUERY = from_field(SearchSection, "per_query")


def search_images(project: Project, *, provider: str | None = None, per_query: int | None = None, refresh: bool = False,
                  progress: Progress = None) -> dict:
    """Run one provider over the project's queries (ddgs, a :class:`QueryProvider`: the queries are made from
    the concepts and terms first) or over its own input (urls:, folder:). Returns counts."""
    spec = provider or project.config.search.provider
    prov = get_provider(spec) if isinstance(spec, str) else spec
    if uses_queries(prov):
        build_queries(project)
    per_query = PER_QUERY.check(per_query or project.config.search.per_query, "per_query")
    run = start_run(project.db, "images.search", {"provider": getattr(prov, "name", str(spec)),
                                                  "per_query": per_query, "refresh": refresh})
    try:
        summary = prov.run(project, per_query=per_query, refresh=refresh, progress=progress)
    except BaseException as e:
        finish_run(project.db, run, status="interrupted" if isinstance(e, KeyboardInterrupt) else "failed",
                   error=str(e))
        raise
    finish_run(project.db, run, summary)
    return summary


# ------------------------------------------------------------------------------------------ img2dataset

def ingest_img2dataset(project: Project, directory: str | Path) -> dict:
    """Read an img2dataset output folder (shards of ``<key>.jpg`` + ``<key>.json``) back in.

    Each sidecar JSON must carry ``url`` and ``status``, and the additional columns ``concept`` and
    ``country`` (run img2dataset with ``--save_additional_columns '["concept","country"]'``). Successful
    samples become candidates pointing at the local file (provenance: the original URL in the search
    result); failed samples are recorded in ``ingest_rejects`` with img2dataset's error message."""
    root = Path(directory)
    if not root.is_dir():
        raise CulturaError(f"{root} is not a directory. Give the img2dataset output folder.")
    db = project.db
    source = f"img2dataset:{root.resolve()}"
    codes = {c.code for c in project.countries}
    sidecars = sorted(root.rglob("*.json"))
    sidecars = [p for p in sidecars if not p.name.endswith("_stats.json")]
    if not sidecars:
        raise CulturaError(f"No img2dataset sidecar .json files under {root}. Is this an img2dataset output "
                           "folder written with output_format 'files'?")
    grouped: dict[int, list[dict]] = {}
    rejected = 0
    with transaction(db):
        for i, side in enumerate(sidecars):
            try:
                meta = json.loads(side.read_text("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                meta = {"status": "unreadable", "error_message": f"sidecar is not UTF-8 JSON ({e})"}
            if not isinstance(meta, dict):
                meta = {"status": "unreadable", "error_message": "sidecar is JSON but not an object"}
            img = next((side.with_suffix(s) for s in (".jpg", ".jpeg", ".png", ".webp")
                        if side.with_suffix(s).exists()), None)
            reason = None
            if meta.get("status") == "unreadable":
                reason = meta["error_message"]
            elif meta.get("status") not in (None, "success"):
                reason = f"img2dataset: {meta.get('error_message') or meta.get('status')}"
            elif img is None:
                reason = "image file missing next to its sidecar"
            elif root.resolve() not in Path(os.path.realpath(img)).parents:
                reason = "image file is a symlink out of the folder (not followed)"
            elif not meta.get("concept"):
                reason = "missing additional column 'concept'"
            elif check_concept(meta["concept"])[1]:
                reason = check_concept(meta["concept"])[1]
            elif str(meta.get("country", "")).upper() not in codes:
                reason = f"country {meta.get('country')!r} is not a project country"
            if reason:
                _reject(db, source, i, {"sidecar": str(side), "url": meta.get("url")}, reason)
                rejected += 1
                continue
            concept = normalise(meta["concept"])
            add_concepts(project, [concept], source="import:img2dataset")
            cid = get_concept(db, concept)["id"]
            country = project.country(str(meta["country"]).upper())
            qid = _query_for(db, project, cid, country, meta.get("language"), meta.get("query"), "import")
            grouped.setdefault(qid, []).append({"image": img.resolve().as_uri(), "url": meta.get("source_page"),
                                                "original_url": meta.get("url"), "title": meta.get("caption"),
                                                "width": meta.get("original_width"),
                                                "height": meta.get("original_height"), "key": meta.get("key")})
    n = 0
    for qid, results in grouped.items():
        results.sort(key=lambda r: str(r.get("key")))
        n += _store_results(db, qid, "img2dataset", results)
    return {"samples": len(sidecars), "rejected": rejected, "results": n}
