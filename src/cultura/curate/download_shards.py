"""A download spread over processes, split by host: past the ceiling of one event loop.

One event loop fetches, checks and records a few hundred to about 700 images a second on a 2-core machine
(about 1 ms of its CPU per image with ``--check header``, docs/scaling.md). With ``processes`` > 1 the
candidates are split by host into balanced parts (every URL of a host in the same part, so ``download.per_host``
holds as with one process), and each part runs :func:`.download.download_rows` in a process of its own, forked
from the one that started the run: its own event loop, connections, blob thread or decode processes and
database connection, with its share of ``workers``, of the CPUs and of ``decode_processes`` (at least one each). A redirect leaves its host's part: a
target that URLs of several parts redirect to can get ``per_host`` connections from each of them.

What holds as with one process:

- **one download per project**: the project lock and the blob writer's lease (:mod:`cultura.db.blobs`) are open
  files of the parent, inherited by the processes, and given back by closing them (never ``LOCK_UN``, which
  would give them back for every process); they stay held while any of them lives, so no other download (and
  no sweep of blobs) starts before the last one has stopped, even when the parent was killed or interrupted
  twice while it waited for them;
- **no SQLite connection crosses the fork**: SQLite keeps a process's file locks in its memory, so the parent
  closes its own before forking (and collects dropped ones); another still open in the process is one sentence;
- **nothing half-done**: each process renames a blob into place before it commits its row, as one process
  does, so kill -9 of any of them at any moment leaves a state the next run completes;
- **Ctrl-C, or a caller cancelling the run**: the parent tells the processes to stop (they ignore SIGINT: one
  authority); each cancels its requests, commits what it had finished and reports its counts; the run is
  recorded as interrupted with the sum;
- **a parent that dies**: each process notices within :data:`POLL` seconds, stops the same way and exits;
- **a process that fails** (a full disk) **or dies**: the others are stopped, and the run fails with its
  sentence.

Processes are forked (Linux only: elsewhere a download runs in one process), so they start in milliseconds
with everything imported; the parent forks them before it starts any thread of its own, and by default only
from a process without other threads (in a notebook's kernel a download runs in one process unless
``processes`` asks for more).
"""
from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import urllib.parse

import httpx

try:  # POSIX: where a decode pool's processes come from (see _own_forkserver)
    from multiprocessing import forkserver
except ImportError:  # pragma: no cover
    forkserver = None

from ..errors import CulturaError
from ..progress import task as progress_task
from ..project import Project
from .download_rows import Tally

__all__ = ["DECODE_CPUS_PER_LOOP", "OWN_THREADS", "PROCESSES_MIN", "POLL", "check_processes", "forkable",
           "foreign_threads", "host_of", "partition", "processes_for", "run", "split"]

#: From this many candidates on, a header-checked download runs one process per usable CPU (:func:`processes_for`);
#: below it one event loop finishes before more would have paid for themselves.
PROCESSES_MIN = 1000
#: How often (seconds) the parent reads the processes' progress, and each process looks for a stop.
POLL = 0.1


def forkable() -> bool:
    """Whether download processes can be forked here (Linux)."""
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


def check_processes(processes: int | None) -> None:
    """One sentence for a ``processes`` the download cannot run with."""
    if processes is None:
        return
    if processes < 1:
        raise CulturaError(f"processes must be 1 or more, got {processes}; 1 runs one event loop, more split the "
                           "hosts over that many processes.", param="processes")
    if processes > 1 and not forkable():
        raise CulturaError(f"processes={processes} needs forked processes, which only Linux has; use 1 here.",
                           param="processes")


#: CPUs per event loop in a decoding download: per image its loop spends ~1.7 ms and its decode process ~5.5
#: (docs/scaling.md), so a loop keeps about three decode processes busy; with four CPUs each, its decode
#: processes are the limit, not the loop
DECODE_CPUS_PER_LOOP = 4


def processes_for(processes: int | None, rows: list[dict], workers: int, check: str, cpus: int) -> int:
    """The processes a download of ``rows`` runs in: ``processes`` when given, else, from
    :data:`PROCESSES_MIN` candidates on, one per usable CPU for a header-checked download (its event loop is
    its work) and one per :data:`DECODE_CPUS_PER_LOOP` CPUs for a decoding one (each with its share of the
    decode processes; one on fewer CPUs); never more than ``workers`` (each process needs a connection) or
    than the rows' hosts (:func:`partition` caps it)."""
    if processes is None:  # and not from a process with threads of its own (a notebook's kernel): a lock one
        # of them holds at the fork would stay held in the child (Python 3.12 warns of it); asked for, it forks
        per_loop = 1 if check == "header" else DECODE_CPUS_PER_LOOP
        processes = (max(1, cpus // per_loop) if len(rows) >= PROCESSES_MIN and forkable()
                     and not foreign_threads() else 1)
    return max(1, min(processes, workers))


#: cultura's own threads a download process may be forked beside: the command line's progress heartbeat (the
#: processes never report through it, and end without flushing a stream it may have been writing)
OWN_THREADS = frozenset({"cultura-progress"})


def foreign_threads() -> list[str]:
    """The names of this process's other threads that are not cultura's own (:data:`OWN_THREADS`)."""
    me = threading.current_thread()
    return [t.name for t in threading.enumerate() if t is not me and t.name not in OWN_THREADS]


def host_of(url: str) -> str:
    """The host the per-host limit counts ``url`` under (``httpx.URL(url).host``, the downloader's), read the
    fast way where both agree: an ASCII name with no IDNA label (``xn--``; httpx shows those in Unicode)."""
    try:
        host = urllib.parse.urlsplit(url).hostname or ""
    except ValueError:
        return ""
    if host.isascii() and "xn--" not in host:
        return host
    try:
        return httpx.URL(url).host
    except Exception:  # noqa: BLE001 - a URL httpx refuses fails on its own; any part will do
        return host


def partition(rows: list[dict], parts: int) -> list[list[dict]]:
    """``rows`` split into at most ``parts`` non-empty lists, every URL of a host in the same one, balanced by
    count (the largest hosts first, each to the lightest part); one list (maybe empty) when ``parts`` is 1 or
    there is one host. Each list keeps the rows' order."""
    if parts <= 1:
        return [rows]
    by_host: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_host.setdefault(host_of(r["url"]), []).append(i)
    parts = min(parts, len(by_host))
    if parts <= 1:
        return [rows]
    loads = [0] * parts
    chosen: list[list[int]] = [[] for _ in range(parts)]
    for idx in sorted(by_host.values(), key=len, reverse=True):
        k = loads.index(min(loads))
        chosen[k].extend(idx)
        loads[k] += len(idx)
    return [[rows[i] for i in sorted(idx)] for idx in chosen]


def split(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` near-equal whole shares that add up to it (the first ones larger)."""
    return [total // parts + (k < total % parts) for k in range(parts)]


async def run(download_rows, project: Project, parts: list[list[dict]], targets: dict, settings, workers: int,
              decode_processes: int | None, proxies, tally: Tally, progress, *, cpus: int) -> None:
    """Download ``parts`` in as many forked processes (see the module doc), each running ``download_rows``
    (:func:`.download.download_rows`) on its part; ``tally`` gets the sum of their counts, also when the run
    is interrupted or fails."""
    n = len(parts)
    ctx = multiprocessing.get_context("fork")
    counts = ctx.RawArray("q", 2 * n)  # per process: candidates done, images downloaded (one writer each)
    stop = ctx.RawValue("b", 0)  # set to 1: stop. No lock behind it (a process killed holding one would hang the rest)
    conns = split(workers, n)
    decoders = [None] * n if decode_processes is None else [max(1, d) if decode_processes else 0
                                                            for d in split(decode_processes, n)]
    share = max(1, cpus // n)
    _no_connection_crosses(project)
    procs = []
    # the parent's objects (a million candidates' rows) stay shared with the processes: a collection in a
    # process would otherwise write to every page holding one, and copy it
    gc.freeze()
    try:
        for k, part in enumerate(parts):
            recv, send = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_process, name=f"cultura-download-{k}",
                            args=(download_rows, k, project.root, part, targets, settings, conns[k], decoders[k],
                                  share, proxies, counts, stop, send, os.getpid()))
            p.start()
            send.close()
            procs.append((p, recv))
    except BaseException:
        stop.value = 1
        _collect(procs, tally)
        raise
    finally:
        gc.unfreeze()
    results: list[tuple | None] = [None] * n
    total = sum(len(p) for p in parts)
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()  # a process reported or died (its pipe is readable): the run ends without waiting
    watched = [recv.fileno() for _, recv in procs]
    for fd in watched:
        loop.add_reader(fd, wake.set)
    try:
        with progress_task("download", total, progress=progress, ok=0) as bar:
            while True:
                wake.clear()
                _poll(procs, results)
                for k, (_, recv) in enumerate(procs):
                    if results[k] is not None and recv.fileno() in watched:
                        watched.remove(recv.fileno())
                        loop.remove_reader(recv.fileno())
                if any(r is not None and r[0] != "done" for r in results):
                    stop.value = 1  # one failed or died: the others stop too
                done = sum(counts[0::2])
                if done != bar.done:
                    bar.update(done=done, ok=sum(counts[1::2]))
                if all(r is not None for r in results):
                    break
                waiter = asyncio.ensure_future(wake.wait())
                try:  # (asyncio.wait, not wait_for: a cancel arriving with the wake-up is never lost)
                    await asyncio.wait({waiter}, timeout=POLL)
                finally:
                    waiter.cancel()
    finally:
        for fd in watched:
            loop.remove_reader(fd)
        stop.value = 1
        results = _collect(procs, tally, results)
    for k, (state, error, _) in enumerate(results):
        if state == "failed":
            raise error if isinstance(error, BaseException) else CulturaError(str(error))
        if state == "died":
            raise CulturaError(f"Download process {k} died ({error}); what it had finished is saved: rerun the "
                               "download to go on.")


def _no_connection_crosses(project: Project) -> None:
    """No connection to the project's database may be open when the processes are forked: SQLite keeps a
    process's file locks in its memory, and a process forked with a connection open would believe it holds
    locks it does not (a writer could then delete the WAL under it). The project's own is closed here (the
    caller opens a new one after the run), a dropped one still waiting for the garbage collector is collected,
    and one still in use elsewhere in this process is one sentence."""
    project.close_db()
    gc.collect()
    db = os.path.realpath(project.db_path)
    mine = {db, db + "-wal", db + "-shm", db + "-journal"}
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") in mine:
                held.append(fd)
        except OSError:  # the listing's own descriptor, gone by now
            pass
    if held:
        raise CulturaError(f"This process has another connection open to {project.db_path}: close it (p.close()) "
                           "or download with processes=1.", param="processes")


def _poll(procs, results) -> None:
    for k, (p, recv) in enumerate(procs):
        if results[k] is not None:
            continue
        alive = p.is_alive()  # read before the pipe: a process that reported and then exited is not "died"
        if recv.poll():
            try:
                results[k] = recv.recv()
            except (EOFError, OSError):
                results[k] = ("died", _death(p), {})
        elif not alive:
            results[k] = ("died", _death(p), {})


def _death(p) -> str:
    p.join(5)
    code = p.exitcode
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _collect(procs, tally, results=None) -> list:
    """Every process's report, waited for (they stop within :data:`POLL` once told to), added to ``tally``."""
    results = list(results) if results is not None else [None] * len(procs)
    while any(r is None for r in results):
        _poll(procs, results)
        if any(r is None for r in results):
            for k, (p, recv) in enumerate(procs):
                if results[k] is None:
                    recv.poll(POLL)
                    break
    for p, recv in procs:
        p.join()
        recv.close()
    for r in results:
        if r[2]:
            tally.add(r[2])
    return results


def _own_forkserver() -> None:
    """Forget the parent's forkserver (inherited state): this process's decode processes come from its own,
    started when it first needs one, not from a server it cannot wait for."""
    fs = getattr(forkserver, "_forkserver", None)
    if fs is not None:
        fs._forkserver_address = fs._forkserver_alive_fd = fs._forkserver_pid = None
        fs._lock = threading.Lock()


def _process(download_rows, k, root, rows, targets, settings, workers, decode_processes, cpus, proxies, counts,
             stop, send, parent) -> None:
    """A download process: its part of the rows, until done, told to stop, or orphaned; then one report
    ``(state, error, counts)`` on ``send``: ``done``, ``interrupted`` or ``failed``."""
    state, error, tally = "done", None, None
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when the run stops
        signal.set_wakeup_fd(-1)  # the parent's event loop's, inherited: a signal here is not the parent's
        _own_forkserver()
        tally = Tally()
        project = Project(root)

        def advance(r) -> None:
            counts[2 * k] += 1
            if r.ok:
                counts[2 * k + 1] += 1

        async def main() -> str:
            job = asyncio.ensure_future(download_rows(project, rows, targets, settings, workers, decode_processes,
                                                      proxies, tally, advance, cpus=cpus))
            while not job.done():
                if stop.value or os.getppid() != parent:
                    job.cancel()
                    try:
                        await job
                    except asyncio.CancelledError:
                        pass
                    return "interrupted"
                await asyncio.wait([job], timeout=POLL)
            job.result()
            return "done"

        try:
            state = asyncio.run(main())
        finally:
            project.close()
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which fails the run with it
        state, error = ("interrupted", None) if isinstance(e, KeyboardInterrupt) else ("failed", e)
    report = tally.as_dict() if tally is not None else {}
    if error is not None:
        try:  # the parent must be able to read it back: an error that does not survive the trip goes as words
            pickle.loads(pickle.dumps(error))
        except Exception:  # noqa: BLE001 - any failure to pickle or unpickle
            error = f"{type(error).__name__}: {error}"
    try:
        send.send((state, error, report))
    except OSError:  # the parent is gone (killed): its rows are committed, nobody is left to tell
        pass
    # ended here, not by multiprocessing's exit, which flushes the standard streams: one of them may be locked
    # for good by a thread of the parent (the progress heartbeat) that was writing at the fork
    os._exit(0)
