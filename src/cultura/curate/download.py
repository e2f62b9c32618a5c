"""The image downloader: pending ``candidates`` → validated, content-addressed ``images``.

One asyncio loop, ``workers`` concurrent downloads and at most ``per_host`` per host, streamed through the
downloader's own HTTP/1.1 client (:mod:`.fetcher`: every connection address-checked, keep-alive per host). A
worker hands each fetched body on and takes its next URL at once; the validating decode and the blob write
run off the connection (at most ``workers`` bodies wait for them).

Each URL gets connect/read timeouts, a wall-clock cap per attempt, retries with exponential back-off on
408/425/429/5xx, timeouts and connection errors (``Retry-After`` honoured up to ``retry_after_max``; a
certificate that does not verify is final: ``tls_error``), at most ``max_redirects`` redirects each re-checked
against the address policy of :mod:`.safety`, a byte cap enforced while streaming (``Content-Length`` is not
trusted), and ``X-Robots-Tag: noai``/``noimageai``. Requests go through the proxy of ``download.proxy`` or the
environment (:mod:`.proxies`).

The URL requested is the URL given, byte for byte; what is stored and written in details is its display form
(:func:`cultura.redact.display_url`). Where a candidate is stored without its secret (``?token=[redacted]``),
the exact URL is read again from its ``urls:`` file (:mod:`.exact_urls`), on every run.

Content is trusted from its bytes, never from ``Content-Type``: an image served as ``text/plain`` is
accepted, HTML served as ``image/jpeg`` is not. Sniffing (:mod:`.sniff`) runs in a thread or a process pool
(Pillow, restricted to :data:`ALLOWED_FORMATS` so no exotic decoder ever sees web data): HTML, SVG, non-images,
truncated or corrupt files, decompression bombs (more than ``max_pixels``) and images whose shorter side is below
``min_side`` are refused. ``file://`` URLs (the local-folder provider) are read from disk and validated the
same way.

``check`` (``download.check``, ``--check``): ``decode`` (the default) decodes every image as above, which also
gives its perceptual hashes. ``header`` checks a JPEG, PNG or WebP from its header and its end only: format,
caps, and a missing end marker refused as ``truncated`` (:func:`.sniff.incomplete`). The check costs a tenth of
the decode, the download about a quarter of its CPU per image. Such an image is stored without hashes and gets an
open ``undecoded`` flag (:data:`.images.UNDECODED`), which keeps it out of the reviewed pool until ``cultura
images dedup`` decodes and hashes it (or a decoding download finds the same bytes again: its hashes are kept and
the flag resolved). An image that then fails to decode is flagged ``unreadable`` and stays out of the pool.

``processes`` (``--processes``): a run can be split by host over processes, each with its own event loop
(:mod:`.download_shards`; by default, from 1,000 candidates on, one per CPU for a header check, where the
event loop is the work, and one per four CPUs when decoding, where the decode processes are).

Every candidate ends with ``status`` ``downloaded``, ``failed`` or ``skipped`` (policy refusals) and a
``reason`` from :data:`REASONS`. Resumability: blobs are renamed into place before their rows are committed
(small batches written by the event loop only), and each run starts by sweeping files without rows
(:func:`.blobs.sweep_blobs`), so kill -9 at any moment leaves nothing half-done; rerunning picks up the
candidates still ``pending``.

Library use::

    from cultura.curate.download import download_candidates
    summary = download_candidates(project, workers=32)

or, for one URL (``settings`` is a ``DownloadSection``)::

    async with make_client(settings) as client:
        result = await fetch_image(client, url, settings)
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import json
import os
import time
from typing import TYPE_CHECKING, Callable, get_args

import httpx

from .. import db as dbmod
from ..config import DownloadSection
from ..db.blobs import blob_writer, store_blob
from .blobs import check_blobs, sweep_blobs
from ..errors import CulturaError
from ..progress import Progress
from ..progress import task as progress_task
from .exact_urls import Unavailable, request_urls
from .fetch_one import REASONS, FetchResult, _fail, fetch_body  # noqa: F401 - REASONS: re-exported (its API)
from .fetcher import make_client  # noqa: F401 - make_client: re-exported (the downloader's API)
from .proxies import proxies_for
from .decode_workers import DECODE_POOL_MIN, decode_workers, default_processes
from . import download_shards as shards
from .download_rows import DownloadRows, Tally
from .sniff import (  # noqa: F401 - sniff_image, validate_image, ImageInfo: re-exported (the downloader's API)
    ALLOWED_FORMATS,
    HASH_FIELDS,
    ImageInfo,
    _Failure,
    header_only,
    sniff_image,
    validate_image,
)

if TYPE_CHECKING:
    from ..project import Project

try:  # POSIX file locks; elsewhere the downloader runs without a project lock
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

__all__ = ["REASONS", "ALLOWED_FORMATS", "FetchResult", "ImageInfo", "download_candidates",
           "adownload_candidates", "fetch_image", "make_client", "sniff_image", "store_blob", "DownloadLocked"]


#: validations allowed at once, beyond one per spare CPU, once every URL of a run is taken
WIDE_VALIDATIONS = 4


class DownloadLocked(CulturaError):
    """Another downloader holds this project's lock."""


# ---------------------------------------------------------------------------------------------- one URL

async def fetch_image(client: httpx.AsyncClient, url: str, settings, *,
                      slot: Callable[[str], contextlib.AbstractAsyncContextManager] | None = None) -> FetchResult:
    """Download and validate one image URL (``http(s)://`` or ``file://``); never raises for bad input.

    ``settings`` is a ``DownloadSection``. ``client`` should come from :func:`make_client` (any other client
    gets a resolve-and-check before each hop instead). ``slot(host)``, when given, returns an async context
    manager held around each request (the per-host limit); it is released while backing off. The validating
    decode runs in a thread.
    """
    return await _validate_body(await fetch_body(client, url, settings, slot=slot), settings)


async def _validate_body(r: FetchResult, settings) -> FetchResult:
    """The validating decode of a fetched body (:func:`.sniff.sniff_image`: format allow-list, pixel and
    aspect caps, HTML/SVG refusal, the hashes); ``r`` unchanged when it is already a failure."""
    if r.status != "fetched":
        return r
    return (await asyncio.to_thread(_checked, r, settings))[0]


def _checked(r: FetchResult, settings, *, digest: bool = True) -> tuple[FetchResult, bool]:
    """``(r accepted or refused, accepted)``: the body checked as ``download.check`` says (without its sha256
    when ``digest`` is False: the blob write computes it)."""
    try:
        return _accepted(r, sniff_image(r.data, digest=digest, **_sniff_options(r, settings))), True
    except _Failure as e:
        return _refused(r, e), False


def _validate_and_store(project: Project, r: FetchResult, settings) -> tuple[FetchResult, str | None]:
    """:func:`_validate_body` and the blob write in one call (one thread hop per image, not two)."""
    r, ok = _checked(r, settings)
    return r, store_blob(project, r.data, r.format, sha256=r.sha256)[1] if ok else None


def _sniff_options(r: FetchResult, settings) -> dict:
    web = {"content_type": _content_type(r)} if r.http_status is not None else {}
    return {**_caps(settings), **web}


def _caps(settings) -> dict:
    """The caps every validating decode applies (:func:`.sniff.sniff_image`), in a thread or a decode process,
    and whether it decodes (``download.check``)."""
    return {"max_pixels": settings.max_pixels, "min_side": settings.min_side,
            "max_aspect_ratio": settings.max_aspect_ratio, "decode": settings.check != "header"}


def _content_type(r: FetchResult) -> str | None:
    """The ``Content-Type`` a body was served with (None for a ``file://`` body, which has none)."""
    return r.content_type if r.http_status is not None else None


def _refused(r: FetchResult, e: _Failure) -> FetchResult:
    if r.http_status is None:  # file://
        return _fail(r.url, e, r.attempts)
    e.http_status, e.content_type = r.http_status, r.content_type
    return _fail(r.url, e, r.attempts, final_url=r.final_url, redirects=r.redirects)


def _accepted(r: FetchResult, info: ImageInfo) -> FetchResult:
    r.status, r.sha256, r.format, r.width, r.height = "downloaded", info.sha256, info.format, info.width, info.height
    r.hashes = tuple(getattr(info, f) for f in HASH_FIELDS)
    r.decoded = info.decoded
    return r


# ----------------------------------------------------------------------------------------------- the stage

@contextlib.contextmanager
def _project_lock(project: Project):
    """One downloader per project (the orphan sweep must not race another writer of blobs)."""
    project.blobs.mkdir(parents=True, exist_ok=True)
    path = project.blobs / ".download.lock"
    if fcntl is None:  # pragma: no cover - not POSIX: no lock
        yield
        return
    with open(path, "a+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DownloadLocked(f"Another download is running on {project.root} (lock {path}); wait for it "
                                 "to finish or stop it, then rerun.") from None
        # given back when the file closes, not by LOCK_UN: the download processes forked from this one share the
        # lock, and it must stay held until the last of them has stopped (even when this one is interrupted
        # twice while it waits for them, or killed)
        yield


def _usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the platform has one, else all of them)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _round_robin_by_host(rows: list[dict]) -> collections.deque:
    """Interleave hosts so that one big host does not make every worker wait on its per-host limit."""
    by_host: dict[str, collections.deque] = {}
    for r in rows:  # the host the per-host limit counts the URL under
        by_host.setdefault(shards.host_of(r["url"]), collections.deque()).append(r)
    out: collections.deque = collections.deque()
    queues = list(by_host.values())
    while queues:
        for q in queues:
            out.append(q.popleft())
        queues = [q for q in queues if q]
    return out


async def adownload_candidates(project: Project, *, workers: int | None = None, retry_failed: bool = False,
                               limit: int | None = None, progress: Progress = None,
                               decode_processes: int | None = None, check: str | None = None,
                               processes: int | None = None) -> dict:
    """Async form of :func:`download_candidates` (for code already inside an event loop)."""
    settings = project.config.download
    if check is not None:
        if check not in CHECKS:
            raise CulturaError(f"check must be one of {', '.join(CHECKS)}, got {check!r}; 'decode' decodes every "
                               "image while downloading, 'header' leaves that to dedup.", param="check")
        settings = settings.model_copy(update={"check": check})
    n_workers = workers or settings.workers
    if n_workers < 1:
        raise CulturaError(f"workers must be at least 1 (got {n_workers}); 32 suits most connections.", param="workers")
    if decode_processes is not None and decode_processes < 0:
        raise CulturaError(f"decode_processes must be 0 (threads) or more, got {decode_processes}.",
                           param="decode_processes")
    shards.check_processes(processes)
    db = project.db
    # read once: a proxy the downloader cannot use is one sentence before any work, and the run records the
    # proxies its client uses
    proxies = proxies_for(settings.proxy)
    with _project_lock(project), blob_writer(project):
        swept = sweep_blobs(project)  # removes nothing while another process (an import) is writing blobs
        swept.update(check_blobs(project))  # rows whose file is gone: back to pending, fetched again below
        reexamined = reexamine_policy_skips(db, settings.allow_hosts, everything=retry_failed)
        statuses = ["pending", "failed"] if retry_failed else ["pending"]
        sql = (f"SELECT id, url FROM candidates WHERE status IN ({','.join('?' * len(statuses))}) ORDER BY id"
               + (" LIMIT ?" if limit else ""))
        rows = [dict(id=r[0], url=r[1]) for r in db.execute(sql, [*statuses, *([limit] if limit else [])])]
        # the URL as given where the project stores it without its secret (read again from its urls: file)
        targets: dict[int, str | Unavailable] = request_urls(db, rows)
        cpus = _usable_cpus()
        parts = shards.partition(rows, shards.processes_for(processes, rows, n_workers, settings.check, cpus))
        run_id = dbmod.start_run(db, "download", {"workers": n_workers, "retry_failed": retry_failed,
                                                  "check": settings.check, "processes": len(parts),
                                                  "limit": limit, "candidates": len(rows),
                                                  "allow_hosts": _policy(settings.allow_hosts),
                                                  "proxy": proxies.describe()})
        tally = Tally()
        t0 = time.monotonic()
        status, error = "done", None
        try:
            if len(parts) > 1:
                try:  # (it closes the project's connection before it forks: a fresh one records the end)
                    await shards.run(download_rows, project, parts, targets, settings, n_workers,
                                     decode_processes, proxies, tally, progress if rows else False, cpus=cpus)
                finally:
                    db = project.db
            else:
                with progress_task("download", len(rows), progress=progress if rows else False, ok=0) as bar:
                    def advance(r: FetchResult) -> None:
                        bar.advance(ok=tally.by_status["downloaded"])
                    await download_rows(project, rows, targets, settings, n_workers, decode_processes, proxies,
                                        tally, advance)
        except (asyncio.CancelledError, KeyboardInterrupt):
            status, error = "interrupted", "interrupted"
            raise
        except BaseException as e:
            status, error = "failed", f"{type(e).__name__}: {e}"
            raise
        finally:
            seconds = time.monotonic() - t0
            processed = sum(tally.by_status.values())
            summary = {"candidates": len(rows), "processed": processed,
                       "by_status": dict(tally.by_status), "by_reason": dict(sorted(tally.by_reason.items())),
                       "new_images": tally.new_images, "bytes": tally.bytes, "seconds": round(seconds, 3),
                       "per_second": round(processed / seconds, 2) if seconds > 0 else None,
                       "processes": len(parts), "swept": swept, "reexamined_skips": reexamined, "run_id": run_id}
            dbmod.finish_run(db, run_id, summary, status=status, error=error)
        # every blob this download wrote is in place: record the folders' state now, so the next stage (dedup,
        # tagging) lists only what changes after this instead of every folder (seconds at 1M images)
        check_blobs(project)
    return summary


async def download_rows(project: Project, rows: list[dict], targets: dict, settings, n_workers: int,
                        decode_processes: int | None, proxies, tally: Tally,
                        advance: Callable[[FetchResult], None], cpus: int | None = None) -> None:
    """Download ``rows`` (candidates ``{"id", "url"}``) in this process's event loop with ``n_workers``
    connections, writing their rows as they finish; ``tally`` counts what is done (also when interrupted),
    ``advance(result)`` is called after each candidate; ``cpus``: the CPUs this loop's threads and decode
    processes are sized by (default: every usable one). The caller holds the project's lock."""
    db = project.db
    cpus = cpus or _usable_cpus()
    todo = _round_robin_by_host(rows)
    if decode_processes is None:  # auto: one decode process per CPU for a batch worth their start; a
        # header check costs less than sending the body to a process does (it runs on the event loop)
        decode_processes = (default_processes(cpus)
                            if len(rows) >= DECODE_POOL_MIN and settings.check == "decode" else 0)
    writer = DownloadRows(db)
    sems: dict[str, asyncio.Semaphore] = {}

    def slot(host: str) -> asyncio.Semaphore:
        return sems.setdefault(host, asyncio.Semaphore(settings.per_host))

    # Validation and the blob write run off the connection: a worker hands the fetched bytes on and takes
    # its next URL at once (at most ``n_workers`` bodies wait to be validated, so at most twice that many
    # are held in memory); the per-image CPU no longer adds to every request's round trip.
    backlog = asyncio.Semaphore(n_workers)
    # While URLs remain, validations run at most one per CPU beyond the event loop's (the decode threads
    # would otherwise take the cores the loop needs); once every URL is taken, the rest run as wide as the
    # thread pool allows (the last wave's validations are then all that is left).
    validating = asyncio.Semaphore(max(1, cpus - 1))
    widened = False
    finishing: set[asyncio.Task] = set()
    broken: list[BaseException] = []

    def record(cand: dict, r: FetchResult, rel: str | None) -> None:
        if r.ok:
            tally.bytes += r.nbytes or 0
        writer.add(cand["id"], r, rel)
        tally.by_status[r.status] += 1
        if r.reason:
            tally.by_reason[r.reason] += 1
        advance(r)

    async def finish(cand: dict, r: FetchResult) -> None:
        try:
            if decoder is None and settings.check == "header" and header_only(r.data):
                # the header check (~0.2 ms) runs on the event loop: a thread running Pillow's header
                # parsing would hold the GIL the loop waits for after each of its system calls. The sha256
                # (~0.6 ms for a web photo; hashlib releases the GIL) and the blob write go to a blob
                # thread: a disk that stalls must not stall every connection.
                r, ok = _checked(r, settings, digest=False)
                rel = None
                if ok:
                    r.sha256, rel = await asyncio.get_running_loop().run_in_executor(
                        blob_threads, store_blob, project, r.data, r.format)
            elif decoder is None:  # a thread validates and writes
                async with validating:
                    r, rel = await asyncio.to_thread(_validate_and_store, project, r, settings)
            else:  # a decode process validates and writes the blob
                try:
                    info, rel = await decoder.validate(r.data, _content_type(r))
                    r = _accepted(r, info)
                except _Failure as e:
                    r, rel = _refused(r, e), None
            r.data = None
            record(cand, r, rel)
        finally:
            backlog.release()

    def finished(task: asyncio.Task) -> None:
        finishing.discard(task)
        if not task.cancelled() and task.exception() is not None:
            broken.append(task.exception())

    async def worker(client):
        nonlocal widened
        while todo and not broken:
            cand = todo.popleft()
            if not todo and not widened:
                widened = True
                for _ in range(WIDE_VALIDATIONS):
                    validating.release()
            target = targets.get(cand["id"], cand["url"])
            if isinstance(target, Unavailable):
                record(cand, FetchResult(url=cand["url"], status="failed", reason="secret_not_stored",
                                         detail=target.detail), None)
                continue
            r = await fetch_body(client, target, settings, slot=slot)
            if r.status != "fetched":
                record(cand, r, None)
                continue
            await backlog.acquire()
            task = asyncio.ensure_future(finish(cand, r))
            finishing.add(task)
            task.add_done_callback(finished)

    async def run_all(client):
        tasks = [asyncio.ensure_future(worker(client))
                 for i in range(min(n_workers, len(rows)))]
        try:
            await asyncio.gather(*tasks)
            while finishing:  # the last bodies being validated and written
                await asyncio.gather(*finishing)
            if broken:  # a blob write failed (disk full, ...): the run fails with it
                raise broken[0]
        except BaseException:
            for t in [*tasks, *finishing]:
                t.cancel()
            await asyncio.gather(*tasks, *finishing, return_exceptions=True)
            raise

    try:
        async with contextlib.AsyncExitStack() as stack:
            decoder = blob_threads = None
            if settings.check == "header":
                # one blob thread per CPU beyond the event loop's: every thread takes the GIL from the loop
                # between its system calls (on 2 CPUs the default pool's 6 threads cost the loop about 8 %
                # of its rate against one). Shut down before the run ends: no blob is written after it.
                blob_threads = concurrent.futures.ThreadPoolExecutor(max(1, cpus - 1),
                                                                     thread_name_prefix="cultura-blobs")
                stack.callback(blob_threads.shutdown, wait=True, cancel_futures=True)
            if rows and decode_processes:
                decoder = await stack.enter_async_context(
                    decode_workers(decode_processes, project.root, _caps(settings)))
            client = await stack.enter_async_context(make_client(settings, max_connections=n_workers,
                                                                     proxies=proxies))
            await run_all(client)
    finally:
        writer.flush()
        tally.new_images = writer.new_images


#: ``download.check`` values (see the module doc), as the configuration declares them
CHECKS: tuple[str, ...] = get_args(DownloadSection.model_fields["check"].annotation)

#: skip reasons that depend on cultura's own policy (``download.allow_hosts``), so a policy change or an explicit
#: retry re-examines them; a publisher's refusal (``robots_noai``) is not re-examined
POLICY_SKIPS = ("blocked_address",)


def _policy(allow_hosts) -> list[str]:
    return sorted({a.strip().lower() for a in allow_hosts if a.strip()})


def _host_port(url: str) -> str | None:
    try:
        u = httpx.URL(url)
    except Exception:  # noqa: BLE001 - a malformed URL is never allowed
        return None
    port = u.port or {"http": 80, "https": 443}.get(u.scheme)
    return f"{u.host.lower()}:{port}" if u.host and port else None


def reexamine_policy_skips(db, allow_hosts, *, everything: bool = False) -> int:
    """Put candidates skipped by cultura's address policy (:data:`POLICY_SKIPS`) back to ``pending`` when the
    policy may now let them through: ``download.allow_hosts`` differs from the one the last download ran under,
    or lists the URL's ``host:port``; ``everything`` (``--retry-failed``): all of them. Each is checked again on
    fetch, so a re-examined URL that the policy still refuses is skipped again with the same reason (no dead
    end, no loosening). Returns how many went back to pending."""
    policy = _policy(allow_hosts)
    rows = db.execute(f"SELECT id, url FROM candidates WHERE status = 'skipped' AND reason IN "
                      f"({','.join('?' * len(POLICY_SKIPS))})", list(POLICY_SKIPS)).fetchall()
    if not rows:
        return 0
    last = db.execute("SELECT params FROM runs WHERE stage = 'download' AND status != 'running' "
                      "ORDER BY id DESC LIMIT 1").fetchone()
    before = json.loads(last[0] or "{}").get("allow_hosts") if last else None
    changed = before is not None and before != policy
    ids = [i for i, url in rows if everything or changed or _host_port(url) in policy]
    if ids:
        with dbmod.transaction(db):
            for part in dbmod.chunks(ids, 500):
                db.execute(f"UPDATE candidates SET status = 'pending', reason = NULL, detail = NULL, updated_at = ? "
                           f"WHERE id IN ({','.join('?' * len(part))})", [dbmod.now(), *part])
    return len(ids)


def download_candidates(project: Project, *, workers: int | None = None, retry_failed: bool = False,
                        limit: int | None = None, progress: Progress = None,
                        decode_processes: int | None = None, check: str | None = None,
                        processes: int | None = None) -> dict:
    """Download every ``pending`` candidate (and ``failed`` ones with ``retry_failed``), at most ``limit``.
    Candidates skipped by the address policy are re-examined first (:func:`reexamine_policy_skips`: after a
    change of ``download.allow_hosts``, or all of them with ``retry_failed``).

    Returns ``{"candidates", "processed", "by_status": {status: n}, "by_reason": {reason: n}, "new_images",
    "bytes", "seconds", "per_second", "processes", "swept", "run_id"}``. Safe to interrupt (Ctrl-C or kill -9)
    and rerun; a rerun with nothing pending does no network I/O. Raises :class:`DownloadLocked` when another
    download runs on the same project. ``decode_processes``: processes for the validating decode (0: threads; None: one
    per usable CPU from :data:`DECODE_POOL_MIN` candidates on, else threads) — the same checks. ``check``:
    ``decode`` or ``header`` (see the module doc; None: ``download.check``). ``processes``: event loops, each in
    its own process with its share of the hosts and of ``workers`` (:mod:`.download_shards`; None: one per
    usable CPU for a header check, one per four when decoding, from :data:`.download_shards.PROCESSES_MIN`
    candidates on; else one).
    """
    return asyncio.run(adownload_candidates(project, workers=workers, retry_failed=retry_failed,
                                            limit=limit, progress=progress, decode_processes=decode_processes,
                                            check=check, processes=processes))
