"""Downloader throughput against a local image server with a fixed added latency, beside a bare HTTP client.

With ``W`` workers and a per-request latency ``L`` the best possible rate is ``W / L`` images per second.
cultura's downloader (``download_candidates``, what ``cultura images download`` runs: address checks on every
connection, streaming under the byte cap, the validating decode that also computes pHash/dHash/centre pHash,
SHA-256, content-addressed blob writes, batched SQLite rows) should reach at least 85 % of it, and at least
img2dataset's rate on the same server in the same rounds (``--peers-python``: img2dataset installed in its
own venv, the ``bench`` extra's peer; one process, W threads, no resize, files and sha256, its download
loop's seconds from its own shard statistics). The URLs spread over 8 loopback addresses (127.0.0.1-8, one
port), so cultura runs with its default per-host limit (``download.per_host``), as a real crawl would.

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

    python perf/bench_download.py [--n 640] [--workers 32] [--rounds 3] [--sets small,web]
                                        [--latency-small 0.4] [--latency-web 0.8] [--no-check]

Two rates are printed for cultura and img2dataset: over the **whole run** (images / the seconds each tool
reports for its download loop: start-up and the validation of the last wave included) and in the **steady
state** (the slope of completions against time over the middle 80 % of completions, each completion being a
written image file's mtime: cultura's blobs, img2dataset's files; the same measure for both, as in the
way the downloader was first measured against it). The ratio against img2dataset is the median of the per-round ratios.

Loopback is refused by the downloader by default; the benchmark allows its server's ``host:port`` through
``download.allow_hosts``, as the tests do. Exits 1 when cultura's median is below 85 % of the ideal (or its
steady state below img2dataset's), 2 when the control itself is below 95 % (the measurement then says
nothing about the downloader).
"""
from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 0.85
CONTROL_OK = 0.95
BASES = 16  # distinct pictures per set (each URL gets its own bytes on top)
DECODE_PROCESSES = None  # download_candidates' decode_processes (--decode-processes; None: its default)
HOSTS = 8   # loopback addresses the server listens on: 32 workers / the default per_host 4


def host_of(i: int) -> str:
    """The loopback address URL ``i`` is served from (round robin over :data:`HOSTS`)."""
    return f"127.0.0.{i % HOSTS + 1}"
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
        # one port on HOSTS loopback addresses (127.0.0.1 ... 127.0.0.N): the URLs spread over N hosts, so
        # the downloader runs with its default per-host limit (download.per_host) and still W connections
        first = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
        port = first.sockets[0].getsockname()[1]
        others = [await asyncio.start_server(handle, f"127.0.0.{k}", port, backlog=1024)
                  for k in range(2, HOSTS + 1)]
        print("PORT", port, flush=True)
        async with first:
            await asyncio.gather(first.serve_forever(), *(o.serve_forever() for o in others))

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

    async def one(k):
        nonlocal done
        reader, writer = await asyncio.open_connection(host_of(k), port)
        while todo:
            i = todo.pop()
            writer.write(f"GET /img/{i}.jpg HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            await reader.readexactly(length)
            done += 1
        writer.close()

    await asyncio.gather(*(one(k) for k in range(workers)))
    return done


def steady_rate(folder: Path, pattern: str) -> float:
    """Images per second in the steady state: the least-squares slope of completion count against time over
    the middle 80 % of completions, each completion being a written image file's mtime (the same measure for
    cultura's blobs and img2dataset's files; the start-up and the last wave's tail are left out, as in the
    way the downloader was first measured against it)."""
    import numpy as np

    times = np.sort([p.stat().st_mtime_ns / 1e9 for p in folder.glob(pattern)])
    lo, hi = int(len(times) * 0.1), int(len(times) * 0.9)
    if hi - lo < 4:
        return float("nan")
    return float(np.polyfit(times[lo:hi] - times[lo], np.arange(lo, hi), 1)[0])


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
    port = host_port.rsplit(":", 1)[1]
    s.allow_hosts = [f"{host_of(k)}:{port}" for k in range(HOSTS)]  # loopback is refused unless listed
    s.workers = workers  # per_host stays the default: the URLs spread over HOSTS addresses
    p.db["candidates"].insert_all([{"url": f"http://{host_of(i)}:{port}/img/{i}.jpg", "status": "pending"}
                                   for i in range(n)])
    summary, _, cpu = timed(lambda: download_candidates(p, workers=workers, progress=False,
                                                        decode_processes=DECODE_PROCESSES))
    stored = p.db.execute("SELECT count(*) FROM images WHERE phash IS NOT NULL").fetchone()[0]
    p.close()
    ok = summary["by_status"].get("downloaded", 0)
    if stored != ok:
        raise SystemExit(f"{ok} downloaded but {stored} images rows with hashes")
    return ok, summary["seconds"], cpu, steady_rate(p.root / "blobs", "??/*.jpg")


IMG2DATASET = r"""
import json, sys, glob
from img2dataset import download
urls, out, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
download(url_list=urls, output_folder=out, processes_count=1, thread_count=workers, resize_mode="no",
         output_format="files", input_format="txt", number_sample_per_shard=10**6, timeout=30, retries=0,
         disable_all_reencoding=True, compute_hash="sha256", enable_wandb=False, distributor="multiprocessing")
stats = [json.load(open(f)) for f in glob.glob(out + "/*_stats.json")]
print(json.dumps({"ok": sum(s["successes"] for s in stats),
                  "seconds": max(s["end_time"] for s in stats) - min(s["start_time"] for s in stats)}))
"""


def run_img2dataset(python: str, port: int, n: int, workers: int, tmp: Path, tag: str) -> tuple[int, float]:
    """One img2dataset run (its own venv's ``python``; one process, ``workers`` threads, no resize, files
    written, sha256 computed) on the same URLs: (images downloaded, seconds of its download loop as its own
    shard statistics report them: interpreter start-up and imports excluded, as for cultura)."""
    urls = tmp / f"urls-{tag}.txt"
    urls.write_text("".join(f"http://{host_of(i)}:{port}/img/{i}.jpg\n" for i in range(n)))
    out = subprocess.run([python, "-c", IMG2DATASET, str(urls), str(tmp / f"i2d-{tag}"), str(workers)],
                         capture_output=True, text=True, timeout=1800)
    if out.returncode:
        raise SystemExit(f"img2dataset failed: {out.stderr.strip().splitlines()[-3:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return res["ok"], res["seconds"], steady_rate(tmp / f"i2d-{tag}", "*/*.jpg")


def bench_set(name: str, n: int, workers: int, latency: float, rounds: int, tmp: Path,
              peers_python: str | None = None) -> dict:
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
        if peers_python:
            run_img2dataset(peers_python, port, min(n, 2 * workers), workers, tmp, f"{name}-warm")
        for r in range(rounds):
            s0 = proc_cpu(server.pid)
            got, c_wall, c_cpu = timed(lambda: asyncio.run(raw_client("127.0.0.1", port, n, workers)))
            s1 = proc_cpu(server.pid)
            i2d = None
            if peers_python and r % 2:  # img2dataset before cultura in odd rounds, after it in even ones
                i2d = run_img2dataset(peers_python, port, n, workers, tmp, f"{name}-{r}")
            ok, d_wall, d_cpu, d_steady = run_cultura(host_port, n, workers, tmp, f"{name}-{r}")
            s2 = proc_cpu(server.pid)
            if peers_python and not r % 2:
                i2d = run_img2dataset(peers_python, port, n, workers, tmp, f"{name}-{r}")
            rows.append({"control": got / c_wall, "cultura": ok / d_wall, "ok": ok, "got": got,
                         "c_cpu": c_cpu / n, "d_cpu": d_cpu / n, "srv_c": (s1 - s0) / n, "srv_d": (s2 - s1) / n,
                         "img2dataset": i2d[0] / i2d[1] if i2d else float("nan"), "steady": d_steady,
                         "i2d_steady": i2d[2] if i2d else float("nan")})
            print(f"  round {r + 1}: control {got / c_wall:6.1f} img/s ({got / c_wall / ideal:.0%}), cultura "
                  f"{ok / d_wall:6.1f} img/s ({ok / d_wall / ideal:.1%}; steady {d_steady / ideal:.1%}), CPU/image {d_cpu / n * 1000:.2f} ms "
                  f"(control {c_cpu / n * 1000:.2f} ms)"
                  + (f", img2dataset {i2d[0] / i2d[1]:6.1f} img/s ({i2d[0] / i2d[1] / ideal:.1%}; steady "
                     f"{i2d[2] / ideal:.1%}; {i2d[0]} ok)"
                     if i2d else "") + f", load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        server.terminate()
        server.wait()
    med = {k: statistics.median(row[k] for row in rows) for k in rows[0]}
    vs_control = statistics.median(row["cultura"] / row["control"] for row in rows)
    vs_i2d = statistics.median(row["cultura"] / row["img2dataset"] for row in rows) if peers_python else None
    vs_i2d_steady = (statistics.median(row["steady"] / row["i2d_steady"] for row in rows)
                     if peers_python else None)
    kib = sum(len(b) for b in bases) / len(bases) / 1024
    res = {"set": name, "size": size, "kib": kib, "latency": latency, "ideal": ideal, "vs_control": vs_control,
           "ratio": med["cultura"] / ideal, "control_ratio": med["control"] / ideal,
           "all_ok": all(row["ok"] == n and row["got"] == n for row in rows),
           "load": (load0, os.getloadavg()[0]), "vs_img2dataset": vs_i2d,
           "vs_img2dataset_steady": vs_i2d_steady, **med}
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
    if peers_python:
        print(f"  img2dataset {med['img2dataset']:.1f} img/s = {med['img2dataset'] / ideal:.1%} of ideal over the "
              f"whole run, {med['i2d_steady'] / ideal:.1%} in the steady state; cultura {res['ratio']:.1%} and "
              f"{med['steady'] / ideal:.1%}. cultura / img2dataset (median of the per-round ratios): steady state "
              f"{vs_i2d_steady:.3f}x ({'PASS' if vs_i2d_steady >= 1 else 'BELOW'}: target >= 1), whole run "
              f"{vs_i2d:.3f}x (start-up and the last wave's validation included)", flush=True)
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
    ap.add_argument("--peers-python", help="python of a venv with img2dataset (the bench extra's peer), run "
                    "interleaved with cultura on the same server; skipped when not given")
    ap.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--latency", type=float, default=0.2, help=argparse.SUPPRESS)
    ap.add_argument("--decode-processes", type=int, help="download_candidates(decode_processes=...): 0 threads")
    args = ap.parse_args(argv)
    global DECODE_PROCESSES
    DECODE_PROCESSES = args.decode_processes
    if args.serve:
        serve(args.serve, args.latency)
        return 0

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.sets.split(","):
            latency = args.latency_small if name == "small" else args.latency_web
            results.append(bench_set(name, args.n, args.workers, latency, args.rounds, Path(tmp),
                                     args.peers_python))
    if args.no_check:
        return 0
    if any(r["control_ratio"] < CONTROL_OK for r in results):
        return 2
    return 0 if all(r["ratio"] >= TARGET and r["all_ok"] and (r["vs_img2dataset_steady"] or 1) >= 1
                    for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
