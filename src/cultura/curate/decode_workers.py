"""The downloader's decode processes: the validating decode, the hashes and the blob write, off the event loop.

:func:`decode_workers` starts ``processes`` worker processes (forked from a forkserver that has imported the
decode's modules once, :data:`PRELOAD`). Each worker reads a body from its socket, runs
:func:`.sniff.sniff_image` on it (format allow-list, byte-derived type, pixel, side and aspect caps, truncation,
the hashes, SHA-256) and, when it is an image, writes its blob (:func:`cultura.db.blobs.store_blob`: a temp
file renamed into place) before it answers. The event loop's side of an image is one write of the body to a
socket and one read of a short answer: no thread wakes per image, no GIL is shared with the decode, and the
body is never sent back.

Why processes and not threads: the decode releases the GIL, but the hashes' numpy and Python parts hold it, and
the event loop needs it for every request. In a thread the loop waited for them (on 2 busy cores it kept the
download at a seventh of img2dataset's rate); in processes sized by the CPUs a 16-core machine decodes on 16.

A worker that dies on a body (a decoder crash) costs that body alone: it is refused as ``corrupt`` ("the
decoder process died on it"), the bodies queued behind it go to a new worker, and the run goes on. A blob
write that fails (a full disk) fails the run, as it does in a thread.
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
import multiprocessing
import os
import pickle
import socket
import struct
import types
from pathlib import Path

from ..db.blobs import store_blob
from . import lanczos
from .sniff import ImageInfo, _Failure, sniff_image

__all__ = ["DECODE_POOL_MIN", "PRELOAD", "DecodeWorkers", "decode_workers", "default_processes"]

#: Modules a worker needs, imported once by the forkserver the workers are forked from (scipy's DCT would
#: otherwise be imported by every worker on its first image).
PRELOAD = ("cultura.curate.decode_workers", "scipy.fftpack", "threadpoolctl")
#: From this many candidates on the stage validates in decode processes (:func:`default_processes`); fewer are
#: validated in a thread, where starting the processes (a forkserver importing numpy, Pillow and scipy) would
#: cost more than it saves.
DECODE_POOL_MIN = 256
_HEADER = struct.Struct("!i")  # multiprocessing.Connection's framing: a signed 4-byte length, then the bytes


def default_processes(cpus: int) -> int:
    """Decode processes for a machine with ``cpus`` usable CPUs: one per CPU (the event loop's own share is
    small: one write and one read per image)."""
    return max(1, cpus)


def _serve(conn, root: str | None, options: dict) -> None:
    """A worker's loop: two messages in, the content type (UTF-8, empty for none) then the body, and
    ``(info, failure, relpath, error)`` out, in order. The body is its own message, not pickled: it arrives as
    the bytes the decode reads, with no copy made on either side beyond the socket's."""
    project = types.SimpleNamespace(root=Path(root)) if root else None
    lanczos.one_blas_thread()  # one decode process per CPU: BLAS threads would only compete with them
    while True:
        try:
            content_type = conn.recv_bytes().decode() or None
            data = conn.recv_bytes()
        except EOFError:
            return
        info = failure = rel = error = None
        try:
            info = sniff_image(data, content_type=content_type, **options)
            if project is not None:
                rel = store_blob(project, data, info.format, sha256=info.sha256)[1]
        except _Failure as e:
            failure = (e.reason, e.detail, e.nbytes)
        except Exception as e:  # noqa: BLE001 - a blob write that failed (disk full): the run fails with it
            error = e
        conn.send_bytes(pickle.dumps((info, failure, rel, error), protocol=pickle.HIGHEST_PROTOCOL))


class _Worker:
    __slots__ = ("process", "reader", "writer", "waiting", "reading")

    def __init__(self, process, reader, writer):
        self.process, self.reader, self.writer = process, reader, writer
        self.waiting: collections.deque = collections.deque()  # (future, (content type, body)) in the order sent
        self.reading: asyncio.Task | None = None


class DecodeWorkers:
    """``processes`` decode workers (see the module docstring); :meth:`validate` is what the stage awaits."""

    def __init__(self, processes: int, root: str | Path | None, options: dict):
        self.processes, self.root, self.options = processes, str(root) if root else None, dict(options)
        self.workers: list[_Worker] = []
        self.ctx = multiprocessing.get_context("forkserver" if "forkserver" in multiprocessing.get_all_start_methods()
                                               else "spawn")
        if self.ctx.get_start_method() == "forkserver":
            self.ctx.set_forkserver_preload(list(PRELOAD))
        self.closed = False
        self.starting: asyncio.Task | None = None

    def start(self) -> None:
        """Start the workers in the background: the forkserver starts (imports) in a thread while the first
        requests are in flight; :meth:`validate` waits for them."""
        async def spawn_all():
            conns = await asyncio.to_thread(lambda: [self._spawn() for _ in range(self.processes)])
            for process, ours in conns:
                self.workers.append(await self._attach(process, ours))
        self.starting = asyncio.ensure_future(spawn_all())

    def _spawn(self):
        ours, theirs = self.ctx.Pipe(duplex=True)
        process = self.ctx.Process(target=_serve, args=(theirs, self.root, self.options), daemon=True,
                                   name="cultura-decode")
        process.start()
        theirs.close()
        return process, ours

    async def _attach(self, process, conn) -> _Worker:
        sock = socket.socket(fileno=os.dup(conn.fileno()))
        conn.close()
        reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 16)
        worker = _Worker(process, reader, writer)
        worker.reading = asyncio.ensure_future(self._read(worker))
        return worker

    async def _read(self, worker: _Worker) -> None:
        """Answers of ``worker``, in the order its bodies were sent; on its death, :meth:`_replace`."""
        while True:
            try:
                size = _HEADER.unpack(await worker.reader.readexactly(4))[0]
                answer = pickle.loads(await worker.reader.readexactly(size))
            except (asyncio.IncompleteReadError, ConnectionError):
                if not self.closed:
                    try:
                        await self._replace(worker)
                    except Exception as e:  # no new worker (the forkserver is gone): its bodies fail, never hang
                        for fut, _ in worker.waiting:
                            if not fut.done():
                                fut.set_exception(e)
                        raise
                return
            fut, _ = worker.waiting.popleft()
            if not fut.done():
                fut.set_result(answer)

    async def _replace(self, dead: _Worker) -> None:
        """A worker died: its current body is refused, the ones behind it are sent to a new worker. Until the
        new one is in its place, bodies still go to the dead one's queue and are sent on with the rest."""
        dead.writer.close()
        process, conn = await asyncio.to_thread(self._spawn)
        worker = await self._attach(process, conn)
        if dead in self.workers:  # one step: the list is never without a worker to send to
            self.workers[self.workers.index(dead)] = worker
        else:
            self.workers.append(worker)
        await asyncio.to_thread(dead.process.join, 5)
        code = dead.process.exitcode
        if dead.waiting:
            fut, _ = dead.waiting.popleft()
            if not fut.done():
                fut.set_result((None, ("corrupt", f"the decoder process died on it (exit code {code})", None),
                                None, None))
        for fut, payload in dead.waiting:
            self._send(worker, fut, payload)
        dead.waiting.clear()

    def _send(self, worker: _Worker, fut: asyncio.Future, payload: tuple[bytes, bytes]) -> None:
        worker.waiting.append((fut, payload))
        ctype, data = payload
        worker.writer.write(_HEADER.pack(len(ctype)) + ctype + _HEADER.pack(len(data)))
        worker.writer.write(data)

    async def validate(self, data: bytes, content_type: str | None) -> tuple[ImageInfo, str | None]:
        """``(info, blob relpath)`` of a valid body, its blob written; raises ``_Failure`` otherwise."""
        if not self.starting.done() or not self.workers:
            await self.starting  # raises what the start raised
        fut = asyncio.get_running_loop().create_future()
        payload = ((content_type or "").encode(), data)
        worker = min(self.workers, key=lambda w: len(w.waiting))
        self._send(worker, fut, payload)
        with contextlib.suppress(ConnectionError):  # the worker died: _replace settles or re-sends this body
            await worker.writer.drain()
        info, failure, rel, error = await fut
        if error is not None:
            raise error
        if failure is not None:
            raise _Failure(failure[0], failure[1], nbytes=failure[2])
        return info, rel

    async def close(self) -> None:
        self.closed = True
        if self.starting is not None:
            with contextlib.suppress(BaseException):
                await self.starting
        for w in self.workers:
            w.writer.close()  # the worker reads EOF and returns
        for w in self.workers:
            if w.reading is not None:
                w.reading.cancel()
        await asyncio.gather(*(w.reading for w in self.workers if w.reading), return_exceptions=True)
        await asyncio.to_thread(lambda: [w.process.join(30) for w in self.workers])
        for w in self.workers:
            if w.process.is_alive():  # pragma: no cover - a worker stuck in a decode
                w.process.kill()
                w.process.join()


@contextlib.asynccontextmanager
async def decode_workers(processes: int, root: str | Path | None, options: dict):
    """Started :class:`DecodeWorkers` (``root``: the project whose blobs they write; None: they write none),
    closed (every worker joined) on exit. ``options``: :func:`.sniff.sniff_image`'s caps."""
    pool = DecodeWorkers(processes, root, options)
    try:
        pool.start()
        yield pool
    finally:
        await pool.close()
