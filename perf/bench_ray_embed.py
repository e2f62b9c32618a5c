"""Image embedding through the cache on a local Ray (``--executor ray``) versus in this process.

    python perf/bench_ray_embed.py                      # openclip:cultura-tiny, 512 images, 2 actors
    python perf/bench_ray_embed.py --n 2048 --actors 2 --model openclip:ViT-B-32/path/to/weights.pt
    python perf/bench_ray_embed.py --json

Both runs embed the same images (web-size JPEG blobs in a temporary project, ``--size`` px) into an empty
embedding cache with :func:`embed_images_cached`: ``local`` in this process (torch's default threads), ``ray``
with Ray Data actors on a local Ray started first (its start-up is timed apart and not counted). Printed:
images/s of each, ``ratio`` = ray / local throughput (what the Ray path gives on THIS machine: on one machine
it can only share the same cores, so the ratio measures its overhead; on a cluster it is what scales), and
whether the vectors are bit for bit equal (they must be when the actors have the local run's torch threads,
``--threads``, default torch.get_num_threads()). CPU: this process's CPU time, and the machine's (all
processes, from /proc/stat) since Ray's actors are other processes. Random-init models: nothing is downloaded.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _machine_cpu() -> float:
    """CPU seconds (user + system) used by every process of the machine so far."""
    with open("/proc/stat") as f:
        parts = f.readline().split()[1:]
    return (int(parts[0]) + int(parts[1]) + int(parts[2])) / os.sysconf("SC_CLK_TCK")


def _project(root, n: int, size: int):
    from cultura.curate.hashing import synthetic_image
    from cultura.db import now, transaction
    from cultura.db.blobs import store_blob
    from cultura.project import init_project

    p = init_project(root, countries=["US"])
    shas, rows = [], []
    for k in range(n):
        buf = io.BytesIO()
        synthetic_image(k, (size, size * 3 // 4)).save(buf, "JPEG", quality=85)
        data = buf.getvalue()
        sha, rel = store_blob(p, data, "jpeg")
        rows.append({"sha256": sha, "path": rel, "format": "jpeg", "width": size, "height": size * 3 // 4,
                     "bytes": len(data), "created_at": now()})
        shas.append(sha)
    with transaction(p.db):
        p.db["images"].insert_all(rows, pk="sha256")
    return p, shas


def _timed(fn):
    w, c, m = time.perf_counter(), time.process_time(), _machine_cpu()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c, _machine_cpu() - m


def run(model: str = "openclip:cultura-tiny", n: int = 512, size: int = 640, actors: int = 2,
        batch_size: int = 32, threads: int | None = None) -> dict:
    import ray
    import torch

    from cultura.executor import Executor, use_executor
    from cultura.models.embedders import embed_images_cached, get_embedder

    threads = threads or torch.get_num_threads()
    with tempfile.TemporaryDirectory() as tmp:
        here, shas = _project(os.path.join(tmp, "local"), n, size)
        there, _ = _project(os.path.join(tmp, "ray"), n, size)
        emb = get_embedder(model, batch_size=batch_size, progress=False)
        emb.embed_images([])  # model built before timing (both runs)
        (_, start_s, _, _) = _timed(lambda: ray.init(num_cpus=os.cpu_count(), include_dashboard=False,
                                                      log_to_driver=False))
        try:
            local, l_wall, l_cpu, l_mcpu = _timed(lambda: embed_images_cached(here, emb, shas))
            ex = Executor("ray", actors=actors, min_items=0, threads=threads)
            on_ray = get_embedder(model, batch_size=batch_size, progress=False)
            with use_executor(ex):
                remote, r_wall, r_cpu, r_mcpu = _timed(lambda: embed_images_cached(there, on_ray, shas))
        finally:
            ray.shutdown()
    return {"model": emb.identity, "images": n, "size": f"{size}x{size * 3 // 4}", "actors": actors,
            "actor_threads": threads, "local_threads": torch.get_num_threads(), "ray_start_s": round(start_s, 2),
            "local": {"wall_s": round(l_wall, 2), "img_per_s": round(n / l_wall, 1), "cpu_s": round(l_cpu, 2),
                      "machine_cpu_s": round(l_mcpu, 2)},
            "ray": {"wall_s": round(r_wall, 2), "img_per_s": round(n / r_wall, 1), "driver_cpu_s": round(r_cpu, 2),
                    "machine_cpu_s": round(r_mcpu, 2)},
            "ratio": round(l_wall / r_wall, 3), "bit_for_bit": bool(np.array_equal(local, remote)),
            "load_avg_1m": round(os.getloadavg()[0], 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="openclip:cultura-tiny")
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--size", type=int, default=640, help="image width in px (height 3/4 of it)")
    ap.add_argument("--actors", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None, help="torch threads per actor (default: this process's)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    res = run(a.model, a.n, a.size, a.actors, a.batch_size, a.threads)
    if a.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"{res['model']}: {res['images']} images {res['size']}, Ray: {res['actors']} actors x "
          f"{res['actor_threads']} torch threads (local: {res['local_threads']}); Ray start {res['ray_start_s']} s "
          "(not counted)")
    for k in ("local", "ray"):
        r = res[k]
        print(f"  {k:5s} {r['img_per_s']:8.1f} img/s  wall {r['wall_s']:.2f} s  this process CPU "
              f"{r.get('cpu_s', r.get('driver_cpu_s'))} s  machine CPU {r['machine_cpu_s']} s")
    print(f"  ratio ray/local throughput: {res['ratio']:.2f}  (same cores: this is Ray's overhead on one machine)"
          f"  bit for bit: {res['bit_for_bit']}  load {res['load_avg_1m']}")
    return 0 if res["bit_for_bit"] else 1


if __name__ == "__main__":
    sys.exit(main())
