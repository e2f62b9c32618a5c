"""Downloader throughput and CPU per image against img2dataset, on a local image server with a fixed added latency.

With ``W`` connections and a per-request latency ``L`` the best possible rate is ``W / L`` images per second.
Both tools get the same ``W`` connections: img2dataset ``thread_count=W`` (one process, its own clean venv,
``--peers-python``, ``make peers``; no resize, files and sha256), in each of two settings (``--peer-modes``),
each against the cultura setting that does the same work, in rounds of its own: ``validating``, img2dataset's
own check of every image (decoded; pixels, shorter side and aspect ratio capped at cultura's defaults; the
original bytes kept) against cultura's default ``--check decode`` (the validating decode, which also computes
the hashes); and ``bytes`` (``disable_all_reencoding``: what arrives is stored unchecked) against cultura's
``--check header`` (format, caps and the format's end checked from the bytes, no decode). The CPU that dedup
later spends decoding and hashing what ``--check header`` stored is measured and printed beside, never hidden
in a ratio: img2dataset never does that work. cultura runs ``workers=W`` with ``per_host`` = ``W`` / 8 over the
8 loopback addresses the URLs spread over (``download_candidates``, what ``cultura images download`` runs:
address checks on every hop, streaming under the byte cap, SHA-256, content-addressed blobs, batched SQLite
rows), in the processes it picks itself: one per CPU for ``--check header`` from 1,000 URLs on, each with its
share of the hosts and connections (the round lines say how many).

Each tool runs as its own process; its CPU is that of **every process of its tree** (decode pools, forkserver
workers, img2dataset's pool), user + system, from the kernel's accounting: this process is a child subreaper,
reaps the orphans a tool leaves, and reads ``RUSAGE_CHILDREN`` before and after (interpreter start-up and
imports included, for both). Rates are images / the seconds each tool reports for its download loop.

The first ``--latency`` (default 50 ms) is where the tools, not the server, are the limit; more latencies (e.g.
``--latency 0.05,0.4``) print the latency-bound case apart, where both tools sit near the ideal and the ratio
says little about the downloader. The control client (a minimal asyncio keep-alive client that reads each body
and nothing else) runs before each round; the printout says whether the tools are the limit: the control
reached 95 % of the ideal, or got at least :data:`CONTROL_MARGIN` times the faster tool's rate through the same
server (else the server or the machine is the limit). Rounds alternate the order of the two tools; the ratios printed are the
medians of the per-round ratios, with the load average.

Image sets: ``photos`` (default: the sizes and JPEG qualities of web photos, :data:`ASPECTS`), ``small``
640x480 and ``web`` 1600x1200 (quality 90), all random crops of the real photographs scikit-image and
scikit-learn ship; every URL gets distinct bytes (a comment segment naming the URL after SOI).

    python perf/bench_download.py --peers-python .venv-img2dataset/bin/python [--n 3000] [--workers 128]
                                  [--rounds 3] [--sets photos] [--latency 0.05,0.4] [--no-check]

Loopback is refused by the downloader by default; the benchmark allows its server's ``host:port`` through
``download.allow_hosts``, as the tests do. Exits 1 when, at the first latency and in any peer setting listed,
cultura's rate is below img2dataset's or its CPU per image above, 2 when at the first latency the tools are not
the limit (see the control client above).
"""
from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET = 0.85
CONTROL_OK = 0.95
#: ... or at least this much more than the faster tool: the server could deliver more than either got (the
#: control runs alone, the tools beside the server on the same CPUs: it says the server could serve more, not
#: that the machine was idle while a tool ran)
CONTROL_MARGIN = 1.10
BASES = 32  # distinct pictures per set (each URL gets its own bytes on top)
DECODE_PROCESSES = None  # download_candidates' decode_processes (--decode-processes; None: its default)
HOSTS = 8   # loopback addresses the server listens on (per_host = workers / HOSTS, as 32 / the default 4)


def host_of(i: int) -> str:
    """The loopback address URL ``i`` is served from (round robin over :data:`HOSTS`)."""
    return f"127.0.0.{i % HOSTS + 1}"
SETS = {"small": (640, 480), "web": (1600, 1200), "photos": None}
#: The "photos" set: the sizes and JPEG qualities of photographs on the web: the long side log-normal around
#: 1000 px (most between 500 and 2000, clipped to 320-3000), the usual aspect ratios (landscape twice as often
#: as portrait), quality 75-95.
ASPECTS = [(4 / 3, 4), (3 / 2, 3), (16 / 9, 2), (1.0, 2), (3 / 4, 2), (2 / 3, 1)]


# ------------------------------------------------------------------------------------------ images
def base_jpegs(name: str, count: int = BASES, quality: int = 90) -> list[bytes]:
    """``count`` JPEGs of set ``name``: random crops (60-100 % of each side) of the real photographs shipped
    with scikit-image and scikit-learn, resized (upscaled where the photo is smaller) to the set's size, or,
    for "photos", each to a size and quality drawn like a web photo's (:data:`ASPECTS`)."""
    import numpy as np
    from PIL import Image
    from skimage import data as skdata
    from sklearn.datasets import load_sample_images

    names = ["astronaut", "chelsea", "coffee", "rocket", "camera", "coins", "hubble_deep_field",
             "immunohistochemistry", "retina", "clock"]
    photos = [Image.fromarray(getattr(skdata, n)()).convert("RGB") for n in names]
    photos += [Image.fromarray(a).convert("RGB") for a in load_sample_images().images]
    rng = np.random.default_rng(len(name))
    out = []
    for i in range(count):
        size = SETS[name]
        if size is None:
            ratios, weights = zip(*ASPECTS)
            ratio = ratios[rng.choice(len(ratios), p=np.array(weights) / sum(weights))]
            long = int(np.clip(rng.lognormal(np.log(1000), 0.45), 320, 3000))
            size = (long, int(long / ratio)) if ratio >= 1 else (int(long * ratio), long)
            quality = int(rng.integers(75, 96))
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


def _parents() -> dict[int, int]:
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                out[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    return out


#: Processes of this benchmark that no measured tool owns (the image server): never reaped by run_tree.
KEEP: set[int] = set()


def become_subreaper() -> bool:
    """Make this process the reaper of its descendants' orphans (Linux ``PR_SET_CHILD_SUBREAPER``): a process
    a tool starts that outlives its parent (a forkserver's pool workers) is then reaped here, and its CPU
    counted in this process's ``RUSAGE_CHILDREN`` like every other process of the tool's tree."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children_cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def _orphans() -> list[int]:
    """This process's children other than the running tool and :data:`KEEP` (orphans re-parented here)."""
    me, out = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in KEEP:
            try:
                if int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) == me:
                    out.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return out


def run_tree(argv: list[str], env: dict | None = None) -> tuple[str, float, float]:
    """Run ``argv``; (stdout, wall seconds, CPU seconds of every process of its tree). Kernel accounting, not
    sampling: every process of the tree is reaped by its parent or, orphaned, by this process (a subreaper),
    so ``RUSAGE_CHILDREN`` grows by exactly the CPU of all of them (user + system)."""
    cpu0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    KEEP.add(proc.pid)
    try:
        out, err = proc.communicate()
    finally:
        KEEP.discard(proc.pid)
    wall = time.perf_counter() - t0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the tool's orphans (a forkserver and its workers) end after it
        left = _orphans()
        if not left:
            break
        for pid in left:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        time.sleep(0.05)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv[:2])}... failed: {err[-2000:]}")
    return out, wall, _children_cpu() - cpu0


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


CULTURA = r"""
import json, sys
from cultura.curate.download import download_candidates
from cultura.project import Project
p = Project(sys.argv[1])
dp = None if sys.argv[3] == "auto" else int(sys.argv[3])
summary = download_candidates(p, workers=int(sys.argv[2]), progress=False, decode_processes=dp, check=sys.argv[4])
hashed = p.db.execute("SELECT count(*) FROM images WHERE phash IS NOT NULL").fetchone()[0]
undecoded = p.db.execute("SELECT count(*) FROM image_flags WHERE flag = 'undecoded' AND status = 'open'").fetchone()[0]
print(json.dumps({"ok": summary["by_status"].get("downloaded", 0), "seconds": summary["seconds"],
                  "hashed": hashed, "undecoded": undecoded, "processes": summary["processes"]}))
"""

#: What ``cultura images dedup`` does first for images downloaded with ``--check header``: decode and hash them
#: (in this process's thread pool, as dedup does); its CPU is measured inside, without the start-up.
LATER = r"""
import json, sys, time
from cultura.curate.dedup_inventory import ensure_hashes, load_inventory
from cultura.project import Project
p = Project(sys.argv[1])
c0 = time.process_time()
res = ensure_hashes(p, load_inventory(p))
print(json.dumps({"cpu": time.process_time() - c0, **res}))
"""


def run_cultura(host_port: str, n: int, workers: int, tmp: Path, tag: str,
                check: str = "decode") -> tuple[int, float, float, float, float | None, int]:
    """One ``download_candidates`` run (what ``cultura images download --check <check>`` runs) in its own
    process on a fresh project: (images downloaded, seconds as the downloader reports them, CPU seconds of
    every process of the run, steady rate, and for ``check="header"`` the CPU seconds dedup then spends
    decoding and hashing them, else None; the processes its event loops ran in). ``workers`` connections in all: ``per_host`` is ``workers`` /
    :data:`HOSTS`, so the connection limit is the one img2dataset gets (``thread_count=workers``)."""
    from cultura.project import init_project

    p = init_project(tmp / f"run-{tag}", countries=["US", "JP"])
    s = p.config.download
    port = host_port.rsplit(":", 1)[1]
    s.allow_hosts = [f"{host_of(k)}:{port}" for k in range(HOSTS)]  # loopback is refused unless listed
    s.workers = workers
    s.per_host = max(1, -(-workers // HOSTS))
    p.save_config()
    p.db["candidates"].insert_all([{"url": f"http://{host_of(i)}:{port}/img/{i}.jpg", "status": "pending"}
                                   for i in range(n)])
    root = p.root
    p.close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    out, _, cpu = run_tree([sys.executable, "-c", CULTURA, str(root), str(workers),
                            "auto" if DECODE_PROCESSES is None else str(DECODE_PROCESSES), check], env=env)
    res = json.loads(out.strip().splitlines()[-1])
    steady = steady_rate(root / "blobs", "??/*.jpg")
    if check == "decode":
        if res["hashed"] != res["ok"]:
            raise SystemExit(f"{res['ok']} downloaded but {res['hashed']} images rows with hashes")
        return res["ok"], res["seconds"], cpu, steady, None, res["processes"]
    if res["undecoded"] != res["ok"] or res["hashed"]:
        raise SystemExit(f"--check header: {res['ok']} downloaded, {res['undecoded']} undecoded flags, "
                         f"{res['hashed']} hashed")
    later = json.loads(run_tree([sys.executable, "-c", LATER, str(root)], env=env)[0].strip().splitlines()[-1])
    if later["hashes_computed"] != res["ok"]:
        raise SystemExit(f"dedup hashed {later['hashes_computed']} of {res['ok']} images downloaded with --check header")
    return res["ok"], res["seconds"], cpu, steady, later["cpu"], res["processes"]


IMG2DATASET = r"""
import json, sys, glob
from img2dataset import download
urls, out, workers, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
# validating: img2dataset's own check of each image (decoded, its size, area and aspect ratio capped as cultura's
# are), the original bytes kept (no resize, no re-encode of a JPEG); bytes: what arrives is stored unchecked
checks = dict(disable_all_reencoding=True) if mode == "bytes" else dict(
    skip_reencode=True, max_image_area=MAX_PIXELS, max_aspect_ratio=MAX_ASPECT, min_image_size=MIN_SIDE)
download(url_list=urls, output_folder=out, processes_count=1, thread_count=workers, resize_mode="no",
         output_format="files", input_format="txt", number_sample_per_shard=10**6, timeout=30, retries=0,
         compute_hash="sha256", enable_wandb=False, distributor="multiprocessing", **checks)
stats = [json.load(open(f)) for f in glob.glob(out + "/*_stats.json")]
print(json.dumps({"ok": sum(s["successes"] for s in stats),
                  "seconds": max(s["end_time"] for s in stats) - min(s["start_time"] for s in stats)}))
"""


#: img2dataset's settings compared, each against the cultura setting doing the same work: "validating" decodes
#: every image (pixels and aspect ratio capped at cultura's defaults), as cultura's default ``--check decode``
#: does (which also hashes); "bytes" stores what arrives unchecked, against cultura's ``--check header``
#: (header, caps and end checked; decoding and hashing left to dedup, whose CPU is printed beside).
PEER_MODES = ("validating", "bytes")
CULTURA_CHECK = {"validating": "decode", "bytes": "header"}
MODE_SAYS = {"validating": "decodes every image, against cultura --check decode (decodes and hashes)",
             "bytes": "stores what arrives unchecked, against cultura --check header (header and end checked; "
                      "decoded and hashed by dedup later)"}


def run_img2dataset(python: str, port: int, n: int, workers: int, tmp: Path, tag: str,
                    mode: str = "validating") -> tuple[int, float, float, float]:
    """One img2dataset run (its own venv's ``python``; one process, ``workers`` threads, no resize, files
    written, sha256 computed; ``mode``: :data:`PEER_MODES`) on the same URLs: (images downloaded, seconds of
    its download loop as its own shard statistics report them, CPU seconds of every process of the run,
    steady rate)."""
    from cultura.config import DownloadSection

    caps = DownloadSection()
    urls = tmp / f"urls-{tag}.txt"
    urls.write_text("".join(f"http://{host_of(i)}:{port}/img/{i}.jpg\n" for i in range(n)))
    script = f"MAX_PIXELS, MAX_ASPECT, MIN_SIDE = {caps.max_pixels}, {caps.max_aspect_ratio}, {caps.min_side}\n" + IMG2DATASET
    out, _, cpu = run_tree([python, "-c", script, str(urls), str(tmp / f"i2d-{tag}"), str(workers), mode],
                           env={**os.environ, "NO_ALBUMENTATIONS_UPDATE": "1"})
    res = json.loads(out.strip().splitlines()[-1])
    return res["ok"], res["seconds"], cpu, steady_rate(tmp / f"i2d-{tag}", "*/*.jpg")


def bench_set(name: str, n: int, workers: int, latency: float, rounds: int, tmp: Path,
              peers_python: str | None = None, mode: str = "validating") -> dict:
    bases = base_jpegs(name)
    folder = tmp / f"{name}-{latency}-{mode}-bases"
    folder.mkdir()
    for i, data in enumerate(bases):
        (folder / f"{i:03d}.jpg").write_bytes(data)
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(folder), "--latency", str(latency)],
                              stdout=subprocess.PIPE, text=True)
    KEEP.add(server.pid)
    try:
        line = server.stdout.readline().split()
        if line[:1] != ["PORT"]:
            raise SystemExit(f"image server did not start: {line}")
        port = int(line[1])
        host_port = f"127.0.0.1:{port}"
        ideal = workers / latency
        check = CULTURA_CHECK[mode]
        run_cultura(host_port, min(n, 2 * workers), workers, tmp, f"{name}-{latency}-{mode}-warm", check)  # the OS cache
        if peers_python:
            run_img2dataset(peers_python, port, min(n, 2 * workers), workers, tmp, f"{name}-{latency}-{mode}-warm",
                            mode)
        rows = []
        load0 = os.getloadavg()[0]
        for r in range(rounds):
            tag = f"{name}-{latency}-{mode}-{r}"
            got, c_wall, c_cpu = timed(lambda: asyncio.run(raw_client("127.0.0.1", port, n, workers)))
            i2d = None
            if peers_python and r % 2:  # img2dataset before cultura in odd rounds, after it in even ones
                i2d = run_img2dataset(peers_python, port, n, workers, tmp, tag, mode)
            ok, d_wall, d_cpu, d_steady, later, procs = run_cultura(host_port, n, workers, tmp, tag, check)
            if peers_python and not r % 2:
                i2d = run_img2dataset(peers_python, port, n, workers, tmp, tag, mode)
            row = {"control": got / c_wall, "cultura": ok / d_wall, "ok": ok, "got": got, "c_cpu": c_cpu / n,
                   "d_cpu": d_cpu / max(ok, 1), "steady": d_steady, "load": os.getloadavg()[0],
                   "later_cpu": (later or 0.0) / max(ok, 1)}
            if i2d:
                row.update({"img2dataset": i2d[0] / i2d[1], "i_cpu": i2d[2] / max(i2d[0], 1), "i_ok": i2d[0],
                            "i2d_steady": i2d[3], "vs": (ok / d_wall) / (i2d[0] / i2d[1]),
                            "cpu_vs": (d_cpu / max(ok, 1)) / (i2d[2] / max(i2d[0], 1))})
            rows.append(row)
            print(f"  round {r + 1}: control {got / c_wall:6.1f} img/s ({got / c_wall / ideal:.0%}), cultura "
                  f"{ok / d_wall:6.1f} img/s ({ok / d_wall / ideal:.1%}, {procs} process{'es' if procs > 1 else ''}), CPU/image {d_cpu / max(ok, 1) * 1000:.2f} ms"
                  + (f" (+ {row['later_cpu'] * 1000:.2f} ms at dedup)" if later is not None else "")
                  + (f"; img2dataset ({mode}) {row['img2dataset']:6.1f} img/s ({row['img2dataset'] / ideal:.1%}, {i2d[0]} ok), "
                     f"CPU/image {row['i_cpu'] * 1000:.2f} ms; cultura/img2dataset rate {row['vs']:.3f}x, CPU/image "
                     f"{row['cpu_vs']:.3f}x; steady state (middle 80 % of completions) {d_steady:.1f} against "
                     f"{i2d[3]:.1f} img/s" if i2d else "") + f"; load {row['load']:.1f}", flush=True)
    finally:
        server.terminate()
        server.wait()
        KEEP.discard(server.pid)
    med = {k: statistics.median(row[k] for row in rows) for k in rows[0]}
    kib = sum(len(b) for b in bases) / len(bases) / 1024
    res = {"set": name, "kib": kib, "latency": latency, "ideal": ideal, "ratio": med["cultura"] / ideal,
           "control_ratio": med["control"] / ideal, "all_ok": all(row["ok"] == n and row["got"] == n for row in rows),
           "load": (load0, os.getloadavg()[0]), **med}
    fastest = max(med["cultura"], med.get("img2dataset", 0.0))
    res["server_free"] = med["control"] / ideal >= CONTROL_OK or med["control"] >= CONTROL_MARGIN * fastest
    bound = (f"tools the limit: {med['control'] / max(fastest, 1e-9):.2f}x the faster tool" if res["server_free"] else
             f"BELOW 95% of ideal and within {CONTROL_MARGIN:.2f}x of the faster tool: server/machine the limit")
    print(f"bench_download [{name}: {len(bases)} photos, {kib:.0f} KiB avg, {n} URLs, {workers} connections each "
          f"tool, {latency * 1000:.0f} ms latency, ideal {ideal:.0f} img/s; medians of {rounds} interleaved rounds; "
          f"load average {load0:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs]: cultura "
          f"--check {check} {med['cultura']:.1f} img/s = {res['ratio']:.1%} of ideal, CPU/image "
          f"{med['d_cpu'] * 1000:.2f} ms (every process)"
          + (f", then {med['later_cpu'] * 1000:.2f} ms per image when dedup decodes and hashes them (in no "
             f"ratio: img2dataset never does this work)" if check == "header" else "")
          + f"; control client {med['control'] / ideal:.0%} of ideal ({bound})", flush=True)
    if peers_python:
        print(f"  img2dataset ({mode}: {MODE_SAYS[mode]}) {med['img2dataset']:.1f} img/s = {med['img2dataset'] / ideal:.1%} of ideal, CPU/image "
              f"{med['i_cpu'] * 1000:.2f} ms (every process). cultura / img2dataset, median of the per-round "
              f"ratios: rate {med['vs']:.3f}x ({'PASS' if med['vs'] >= 1 else 'BELOW'}: target >= 1), CPU per "
              f"image {med['cpu_vs']:.3f}x ({'PASS' if med['cpu_vs'] <= 1 else 'ABOVE'}: target <= 1); "
              f"load {load0:.1f} -> {os.getloadavg()[0]:.1f}", flush=True)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3000, help="URLs per run (distinct bytes each)")
    ap.add_argument("--workers", type=int, default=128, help="concurrent connections, the same for both tools "
                    "(128: at 50 ms the control client gets twice what either tool gets through the same server; "
                    "at 32 both tools sit at the control's rate on a 2-core machine, and at 64 within 10 %% of it)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved control + cultura + img2dataset rounds")
    ap.add_argument("--sets", default="photos", help="comma-separated: photos (sizes and qualities of web "
                    "photos), small (640x480), web (1600x1200)")
    ap.add_argument("--latency", default="0.05", help="comma-separated seconds added per request: the first where "
                    "the tools are the limit (50 ms); more (e.g. 0.4) print the latency-bound case apart")
    ap.add_argument("--no-check", action="store_true", help="always exit 0")
    ap.add_argument("--peers-python", default=str(REPO / ".venv-img2dataset" / "bin" / "python"),
                    help="python of a clean venv with img2dataset (make peers); skipped when it does not exist")
    ap.add_argument("--peer-modes", default=",".join(PEER_MODES),
                    help="comma-separated img2dataset settings, each against cultura in rounds of its own: "
                    "validating (decodes and caps every image) against cultura --check decode, bytes (stores what "
                    "arrives unchecked) against cultura --check header; the exit status judges each")
    ap.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--decode-processes", type=int, help="download_candidates(decode_processes=...): 0 threads")
    args = ap.parse_args(argv)
    global DECODE_PROCESSES
    DECODE_PROCESSES = args.decode_processes
    unknown = set(args.peer_modes.split(",")) - set(PEER_MODES)
    if unknown:
        ap.error(f"--peer-modes: {', '.join(sorted(unknown))} is not one of {', '.join(PEER_MODES)}")
    if args.serve:
        serve(args.serve, float(args.latency))
        return 0
    peers = args.peers_python if Path(args.peers_python).exists() else None
    if peers is None:
        print(f"no img2dataset venv at {args.peers_python} (make peers): cultura and the control client only")
    if not become_subreaper():
        print("not a subreaper (not Linux?): the CPU of processes orphaned by a tool is not counted")

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        latencies = [float(x) for x in args.latency.split(",")]
        for k, latency in enumerate(latencies):
            if k == 1:
                print("-- latency-bound (the server's latency, not the tools, sets the rate: says little about "
                      "the downloader) --")
            for name in args.sets.split(","):
                for mode in args.peer_modes.split(","):  # without the peer: cultura's setting for each
                    res = bench_set(name, args.n, args.workers, latency, args.rounds, Path(tmp), peers, mode)
                    res["tool_bound"] = k == 0   # every peer setting at the first latency
                    results.append(res)
    if args.no_check:
        return 0
    if any(not r["server_free"] for r in results if r["tool_bound"]):
        return 2
    return 0 if all(r["all_ok"] and (not peers or not r["tool_bound"] or (r["vs"] >= 1 and r["cpu_vs"] <= 1))
                    for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
