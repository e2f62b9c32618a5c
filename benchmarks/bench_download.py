"""Downloader throughput against the local image server with injected latency.

With ``W`` workers and a per-request latency ``L`` the best possible rate is ``W / L`` images per second;
the downloader should reach at least 80 % of it (the rest is HTTP, Pillow validation, hashing, blob writes
and batched SQLite commits). The image server runs in its own process so that it does not share the GIL.

    python benchmarks/bench_download.py [--n 640] [--workers 32] [--latency 0.2] [--no-check]

A control run with a bare asyncio HTTP client against the same server shows what the machine itself allows
(on a shared, loaded machine that, not the downloader, is the limit). Prints one line; exits 1 when the ratio is below the target (unless ``--no-check``).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.80


async def _raw_client(host: str, port: int, n: int, workers: int) -> float:
    """Control: the same GETs with a minimal keep-alive HTTP/1.1 client (no validation, no storage).
    Its rate is what this server and this machine allow right now; returns seconds."""
    import asyncio

    todo = list(range(n))

    async def one():
        reader, writer = await asyncio.open_connection(host, port)
        while todo:
            i = todo.pop()
            writer.write(f"GET /img/{i}.jpg HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next(l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")))
            await reader.readexactly(length)
        writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(workers)))
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1920, help="number of images (distinct URLs)")
    ap.add_argument("--workers", type=int, default=32, help="concurrent downloads")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds the server waits before answering")
    ap.add_argument("--no-check", action="store_true", help="always exit 0")
    args = ap.parse_args(argv)

    from cultura.curate.download import download_candidates
    from cultura.project import init_project

    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "image_server.py"), "--latency",
                               str(args.latency), "--warm", str(args.n)], stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline().split()
        if line[:1] != ["PORT"]:
            raise SystemExit(f"image server did not start: {line}")
        host_port = f"127.0.0.1:{line[1]}"
        with tempfile.TemporaryDirectory() as tmp:
            p = init_project(Path(tmp) / "bench", countries=["US", "JP"])
            s = p.config.download
            s.allow_hosts = [host_port]
            s.workers = s.per_host = args.workers
            p.db["candidates"].insert_all([{"url": f"http://{host_port}/img/{i}.jpg", "status": "pending"}
                                           for i in range(args.n)])
            load = os.getloadavg()[0]
            rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            cpu0 = time.process_time()
            summary = download_candidates(p, workers=args.workers, progress=False)
            cpu_ms = (time.process_time() - cpu0) * 1000 / max(args.n, 1)
            rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            control = asyncio.run(_raw_client("127.0.0.1", int(line[1]), args.n, args.workers))
            ok = summary["by_status"].get("downloaded", 0)
            p.close()
    finally:
        server.terminate()
        server.wait()
    seconds = summary["seconds"]
    rate = ok / seconds
    ideal = args.workers / args.latency
    ratio = rate / ideal
    print(f"bench_download: {ok}/{args.n} images, {args.workers} workers, {args.latency * 1000:.0f} ms latency: "
          f"{seconds:.2f} s, {rate:.1f} img/s = {ratio:.0%} of ideal {ideal:.0f} img/s "
          f"(target {TARGET:.0%}: {'PASS' if ratio >= TARGET else 'BELOW'}); "
          f"peak RSS {rss1 / 1024:.0f} MB (+{(rss1 - rss0) / 1024:.0f} MB during the run); "
          f"{cpu_ms:.1f} ms CPU/image; control (bare HTTP client, same server) {args.n / control:.1f} img/s "
          f"= {args.n / control / ideal:.0%}, so the downloader reached {rate / (args.n / control):.0%} of what "
          f"this machine allowed (load average {load:.1f} on {os.cpu_count()} CPUs)")
    return 0 if (ratio >= TARGET and ok == args.n) or args.no_check else 1


if __name__ == "__main__":
    sys.exit(main())
