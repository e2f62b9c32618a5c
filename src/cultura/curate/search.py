"""Image search: turn queries into candidates (URLs to download) with full provenance.

Providers form a registry (``register_provider``): ``ddgs`` (DuckDuckGo through the ``ddgs`` package),
``urls:PATH`` (a JSONL/CSV/Parquet list of URLs — the shape img2dataset consumes), ``folder:DIR``
(local images laid out ``DIR/<COUNTRY>/<concept>/*.jpg``). ``ingest_img2dataset`` reads an img2dataset
output folder back in. Outside packages add providers through the ``cultura.search_providers`` entry point
group (the name is the provider's, the value its factory); a provider that answers one query at a time
subclasses :class:`QueryProvider` and writes only :meth:`QueryProvider.search` (``docs/plugins.md``).

Every result is stored once per (query, provider, rank) with every field the provider returned; a query's
search is recorded in ``searches`` after its results, in one transaction, so reruns skip done queries and a
crash never leaves half a query. Every result or input row is stored or an ``ingest_rejects`` row with its
reason (``curate/search_rows.py``); providers reading their own input live in ``curate/search_lists.py``.
"""
from __future__ import annotations

import random
import time
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Callable

from ..bounds import from_field
from ..config import SearchSection
from ..db import finish_run, start_run
from ..errors import CulturaError, unknown
from ..progress import Progress, track
from ..redact import scrub
from .concepts import build_queries
from .search_lists import IMAGE_SUFFIXES, FolderProvider, UrlsProvider, ingest_img2dataset  # noqa: F401 - re-exported
from .search_rows import (  # noqa: F401 - re-exported: providers outside this package store through them
    MAX_RANK,
    Provider,
    check_url,
    record_failure,
    store_results,
    valid_results,
)

if TYPE_CHECKING:
    from ..project import Project

#: Queries of one provider failing one after another, none answered in between, after which a search stops and
#: says why (offline, a bad key: every query would fail the same way, one at a time, for minutes).
FAILURES_IN_A_ROW = 5

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
        counts = _counts(queries)
        streak = _Streak(self.name)
        for q in track(queries, f"searching ({self.name})", progress=progress):
            try:
                results = self.search(dict(q), per_query)
            except Exception as e:  # noqa: BLE001 - one query's failure is a row with its reason, the rest go on
                error = f"{type(e).__name__}: {e}"
                record_failure(db, q["id"], self.name, error, 1)
                counts["failed"] += 1
                streak.failed(error, counts)
                continue
            streak.answered()
            _store(db, q, self.name, results or [], per_query, counts)
        return counts


def _counts(queries: list) -> dict:
    return {"queries": len(queries), "done": 0, "failed": 0, "rows": 0, "stored": 0, "rejected": 0, "results": 0}


def _store(db, q: dict, provider: str, results: list, per_query: int, counts: dict) -> None:
    """One query's answer: every result stored or a reject row (``rows = stored + rejected``)."""
    source = f"{provider}:{q['text']}"
    kept, refused = valid_results(db, source, results, per_query)
    out = store_results(db, q["id"], provider, kept, source=source)
    counts["rows"] += len(results)
    counts["rejected"] += refused + out["rejected"]
    counts["stored"] += out["written"]
    counts["results"] += out["written"]
    counts["done"] += 1


class _Streak:
    """Failures in a row: at :data:`FAILURES_IN_A_ROW` with none answered between, the search stops with one
    sentence (the failed queries are rows, searched again on the next run)."""

    def __init__(self, provider: str):
        self.provider, self.n = provider, 0

    def answered(self) -> None:
        self.n = 0

    def failed(self, error: str, counts: dict) -> None:
        self.n += 1
        if self.n >= FAILURES_IN_A_ROW:
            left = counts["queries"] - counts["done"] - counts["failed"]
            raise CulturaError(
                f"Search stopped: the last {self.n} queries to {self.provider} all failed ({scrub(error)[:200]}), "
                f"so the {left} left would most likely fail too; check the network or the provider, then rerun "
                "'cultura images search' (failed queries are searched again).", param="provider")


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
        counts = _counts(queries)
        streak = _Streak(self.name)
        for q in track(queries, "searching", progress=progress):
            for attempt in range(1, cfg.max_attempts + 1):
                limiter.wait()
                try:
                    results = client.images(q["text"], region=q["region"] or "wt-wt", safesearch=cfg.safesearch,
                                            max_results=per_query, backend=cfg.backend)
                except (RatelimitException, TimeoutException) as e:  # transient: back off and retry
                    if attempt == cfg.max_attempts:
                        kind = "ratelimited" if isinstance(e, RatelimitException) else "timeout"
                        record_failure(db, q["id"], self.name, f"{kind}: {e}", attempt)
                        counts["failed"] += 1
                        streak.failed(f"{kind}: {e}", counts)
                        break
                    limiter.backoff(attempt)
                    continue
                except DDGSException as e:
                    # "No results found" is an empty result, not a failure
                    if "no results" in str(e).lower():
                        results = []
                    else:
                        record_failure(db, q["id"], self.name, f"{type(e).__name__}: {e}", attempt)
                        counts["failed"] += 1
                        streak.failed(f"{type(e).__name__}: {e}", counts)
                        break
                streak.answered()
                _store(db, q, self.name, results or [], per_query, counts)
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
