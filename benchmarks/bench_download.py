"""Downloader throughput against a local image server with a fixed added latency, beside a bare HTTP client.

With ``W`` workers and a per-request latency ``L`` the best possible rate is ``W / L`` images per second.
cultura's downloader (``download_candidates``, what ``cultura images download`` runs: address checks on every
connection, streaming under the byte cap, the validating decode that also computes pHash/dHash/centre pHash,
SHA-256, content-addressed blob writes, batched SQLite rows) should reach at least 80 % of it.

The server is this file run with ``--serve``: a separate process, one asyncio loop serving JPEG bytes held in
memory after ``asyncio.sleep(L)``, HTTP/1.1 keep-alive. Every URL gets distinct bytes (the JPEG of one of a
few base images with a comment segment naming the URL inserted after SOI: a distinct SHA-256, the same decode
cost). The control client (a minimal asyncio keep-alive HTTP/1.1 client that reads each body and nothing
else) runs against the same server before every measured run: control, cultura, control, cultura, ...;
medians over the rounds are printed. The control reaching >= 95 % of ``W / L`` is the check that neither
the server nor the machine is the limit; the printout says so, or says it is not.

Image sets: ``small`` 640x480 and ``web`` 1600x1200 JPEGs (quality 90) made from random crops of the real
photographs scikit-image and scikit-learn ship. The latency of each set is chosen so that ``W / L`` images
per second cost well under one of the 2 shared cores: the CPU the downloader spends per image is measured and
printed (its process, all threads; the server's CPU apart).

    python benchmarks/bench_download.py [--n 640] [--workers 32] [--rounds 3] [--sets small,web]
                                        [--latency-small 0.4] [--latency-web 0.8] [--no-check]

Loopback is refused by the downloader by default; the benchmark allows its server's ``host:port`` through
``download.allow_hosts``, as the tests do. Exits 1 when cultura's median is below 80 % of the ideal, 2 when
the control itself is below 95 % (the measurement then says nothing about the downloader).
"""
from __future__ import annotations

import argparse
import asyncio
import io
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 0.80
CONTROL_OK = 0.95
BASES = 16  # distinct pictures per set (each URL gets its own bytes on top)
SETS = {"small": (640, 480), "web": (1600, 1200)}


# ------------------------------------------------------------------------------------------ images
def base_jpegs(size: tuple[int, int], count: int = BASES, quality: int = 90) -> list[bytes]:
    """``count`` JPEGs of ``size``: random crops (60-100 % of each side) of the real photographs shipped with
    scikit-image and scikit-learn, resized (upscaled where the photo is smaller)."""
    import numpy as np
    from PIL import Image
    from skimage import data as skdata
    from sklearn.datasets import load_sample_images

    names = ["astronaut", "chelsea", "coffee", "rocket", "camera", "coins", "hubble_deep_field",
             "immunohistochemistry", "retina", "clock"]
    photos = [Image.fromarray(getattr(skdata, n)()).convert("RGB") for n in names]
    photos += [Image.fromarray(a).convert("RGB") for a in load_sample_images().images]
    rng = np.random.default_rng(size[0])
    out = []
    for i in range(count):
        im = photos[i % len(photos)]
        w, h = im.size
        cw, ch = int(w * rng.uniform(0.6, 1.0)), int(h * rng.uniform(0.6, 1.0))
        x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        buf = io.BytesIO()
        im.crop((x, y, x + cw, y + ch)).resize(size, Image.Resampling.LANCZOS).save(buf, "JPEG", quality=quality)
        out.append(buf.getvalue())
    return out


def unique_parts(bases: list[bytes], i: int) -> list[bytes]:
    """The bytes served for URL ``i`` as parts: base ``i % len(bases)`` with a COM segment after SOI."""
    base = bases[i % len(bases)]
    note = f"bench_download url {i} (cultura)".encode()
    return [base[:2], b"\xff\xfe" + struct.pack(">H", len(note) + 2) + note, memoryview(base)[2:]]


# ------------------------------------------------------------------------------------------ server
def serve(folder: Path, latency: float) -> None:
    """The server process: serves ``/img/<i>.jpg`` from the JPEGs in ``folder`` after ``latency`` seconds."""
    bases = [p.read_bytes() for p in sorted(folder.glob("*.jpg"))]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b"\r\n", 1)[0].split(b" ")[1]
                try:
                    i = int(path.rsplit(b"/", 1)[1].split(b".")[0])
                except ValueError:
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    continue
                await asyncio.sleep(latency)
                parts = unique_parts(bases, i)
                size = sum(len(p) for p in parts)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n" % size)
                writer.writelines(parts)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, IndexError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
        print("PORT", server.sockets[0].getsockname()[1], flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


# ------------------------------------------------------------------------------------------ clients
async def raw_client(host: str, port: int, n: int, workers: int) -> int:
    """Control: the same GETs with a minimal keep-alive HTTP/1.1 client (each body read, nothing else done
    with it). Returns the number of bodies received."""
    todo = list(range(n - 1, -1, -1))
    done = 0

    async def one():
        nonlocal done
        reader, writer = await asyncio.open_connection(host, port)
        while todo:
            i = todo.pop()
            writer.write(f"GET /img/{i}.jpg HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            await reader.readexactly(length)
            done += 1
        writer.close()

    await asyncio.gather(*(one() for _ in range(workers)))
    return done


def timed(fn):
    """(result, wall seconds, CPU seconds of this process, all threads)."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def run_cultura(host_port: str, n: int, workers: int, tmp: Path, tag: str) -> tuple[int, float, float]:
    """One downloader run on a fresh project: (images downloaded, seconds as the downloader reports them,
    CPU seconds of this process during the run)."""
    from cultura.curate.download import download_candidates
    from cultura.project import init_project

    p = init_project(tmp / f"run-{tag}", countries=["US", "JP"])
    s = p.config.download
    s.allow_hosts = [host_port]  # loopback is refused unless listed (as in the tests)
    s.workers = s.per_host = workers
    p.db["candidates"].insert_all([{"url": f"http://{host_port}/img/{i}.jpg", "status": "pending"}
                                   for i in range(n)])
    summary, _, cpu = timed(lambda: download_candidates(p, workers=workers, progress=False))
    stored = p.db.execute("SELECT count(*) FROM images WHERE phash IS NOT NULL").fetchone()[0]
    p.close()
    ok = summary["by_status"].get("downloaded", 0)
    if stored != ok:
        raise SystemExit(f"{ok} downloaded but {stored} images rows with hashes")
    return ok, summary["seconds"], cpu


def bench_set(name: str, n: int, workers: int, latency: float, rounds: int, tmp: Path) -> dict:
    size = SETS[name]
    folder = tmp / f"{name}-bases"
    folder.mkdir()
    bases = base_jpegs(size)
    for i, data in enumerate(bases):
        (folder / f"{i:03d}.jpg").write_bytes(data)
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(folder), "--latency", str(latency)],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline().split()
        if line[:1] != ["PORT"]:
            raise SystemExit(f"image server did not start: {line}")
        port = int(line[1])
        host_port = f"127.0.0.1:{port}"
        ideal = workers / latency
        run_cultura(host_port, min(n, 2 * workers), workers, tmp, f"{name}-warm")  # warm-up: imports, TLS context, caches
        rows = []
        load0 = os.getloadavg()[0]
        for r in range(rounds):
            s0 = proc_cpu(server.pid)
            got, c_wall, c_cpu = timed(lambda: asyncio.run(raw_client("127.0.0.1", port, n, workers)))
            s1 = proc_cpu(server.pid)
            ok, d_wall, d_cpu = run_cultura(host_port, n, workers, tmp, f"{name}-{r}")
            s2 = proc_cpu(server.pid)
            rows.append({"control": got / c_wall, "cultura": ok / d_wall, "ok": ok, "got": got,
                         "c_cpu": c_cpu / n, "d_cpu": d_cpu / n, "srv_c": (s1 - s0) / n, "srv_d": (s2 - s1) / n})
            print(f"  round {r + 1}: control {got / c_wall:6.1f} img/s ({got / c_wall / ideal:.0%}), cultura "
                  f"{ok / d_wall:6.1f} img/s ({ok / d_wall / ideal:.0%}), CPU/image {d_cpu / n * 1000:.2f} ms "
                  f"(control {c_cpu / n * 1000:.2f} ms), load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        server.terminate()
        server.wait()
    med = {k: statistics.median(row[k] for row in rows) for k in rows[0]}
    vs_control = statistics.median(row["cultura"] / row["control"] for row in rows)
    kib = sum(len(b) for b in bases) / len(bases) / 1024
    res = {"set": name, "size": size, "kib": kib, "latency": latency, "ideal": ideal, "vs_control": vs_control,
           "ratio": med["cultura"] / ideal, "control_ratio": med["control"] / ideal,
           "all_ok": all(row["ok"] == n and row["got"] == n for row in rows),
           "load": (load0, os.getloadavg()[0]), **med}
    print(f"bench_download [{name}: {size[0]}x{size[1]} JPEG, {kib:.0f} KiB avg, {n} URLs, {workers} workers, "
          f"{latency * 1000:.0f} ms latency, ideal {ideal:.0f} img/s; medians of {rounds} interleaved rounds]: "
          f"cultura {med['cultura']:.1f} img/s = {res['ratio']:.0%} of ideal (target {TARGET:.0%}: "
          f"{'PASS' if res['ratio'] >= TARGET else 'BELOW'}), {vs_control:.0%} of the control client in the same "
          f"rounds; control {med['control']:.1f} img/s = {res['control_ratio']:.0%} of ideal "
          f"({'server and machine not the limit' if res['control_ratio'] >= CONTROL_OK else 'BELOW 95%: the server or the machine is the limit, not a valid measurement'}); "
          f"CPU per image: cultura {med['d_cpu'] * 1000:.2f} ms (all its threads; = "
          f"{med['d_cpu'] * ideal:.2f} cores at the ideal rate), control client {med['c_cpu'] * 1000:.2f} ms, server "
          f"{med['srv_d'] * 1000:.2f} ms; load average {load0:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
          flush=True)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=640, help="URLs per run (distinct bytes each)")
    ap.add_argument("--workers", type=int, default=32, help="concurrent downloads")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved control + cultura rounds per set")
    ap.add_argument("--sets", default="small,web", help="comma-separated: small (640x480), web (1600x1200)")
    ap.add_argument("--latency-small", type=float, default=0.4, help="seconds added per request, small set")
    ap.add_argument("--latency-web", type=float, default=0.8, help="seconds added per request, web set")
    ap.add_argument("--no-check", action="store_true", help="always exit 0")
    ap.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--latency", type=float, default=0.2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        serve(args.serve, args.latency)
        return 0

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.sets.split(","):
            latency = args.latency_small if name == "small" else args.latency_web
            results.append(bench_set(name, args.n, args.workers, latency, args.rounds, Path(tmp)))
    if args.no_check:
        return 0
    if any(r["control_ratio"] < CONTROL_OK for r in results):
        return 2
    return 0 if all(r["ratio"] >= TARGET and r["all_ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
