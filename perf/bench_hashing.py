"""Benchmark: images/second of ``compute_hashes`` as a share of the same decode alone (like for like).

Writes JPEGs (quality 90) to a temporary folder: N generated ones (``synthetic_image``: shapes and light
noise) at 640x480, N at 640x480 made from the real photographs scikit-image and scikit-learn ship (random
crops, resized), and N/4 of each at 1600x1200 (web size). The OS cache is warmed, then each timed round
runs, one after the other (interleaved, so a change of machine load hits both sides alike):

- the baseline: the very decode ``compute_hashes`` does (open, reduced grey draft for JPEG, convert to L)
  and nothing else, on the same number of threads, then on 1 thread;
- ``compute_hashes(paths)`` (decode + pHash, dHash and centre pHash), on the same threads, then on 1;
- the peers, in the same interleaved rounds: PIL + imagehash (open + ``imagehash.phash`` +
  ``imagehash.dhash``, 1 thread, against ``compute_hashes`` on 1 thread) and imagededup 0.3.3
  (``PHash().encode_images(folder, num_enc_workers=threads)``, against ``compute_hashes`` on the same
  threads); imagededup (and torch, which it imports) is imported before the timed rounds. Their hashes do
  the same job but differ: cultura hashes a reduced decode's content box (docs/dedup_calibration.md), and
  imagededup's pHash differs from imagehash's by a bit or two on large images (its own resize).

Printed per set: images/s (best round, wall clock) and CPU ms per image (this process, median round), and
``compute_hashes`` as a share of the baseline — target >= 80% — on wall clock (median of the per-round
ratios) and on CPU time (what the shared machine's load does not distort).

Run::

    .venv/bin/python perf/bench_hashing.py            # 500 + 125 images per kind
    .venv/bin/python perf/bench_hashing.py --quick    # 100 + 25 images per kind
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

TARGET = 0.80


def timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one call."""
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


def photo_sources():
    """The real photographs shipped with scikit-image and scikit-learn, as RGB PIL images."""
    from PIL import Image
    from skimage import data as skdata
    from sklearn.datasets import load_sample_images

    names = ["astronaut", "chelsea", "coffee", "rocket", "camera", "coins", "moon", "hubble_deep_field",
             "immunohistochemistry", "retina", "clock", "cell"]  # shipped with scikit-image (no download)
    out = [Image.fromarray(getattr(skdata, name)()).convert("RGB") for name in names]
    out += [Image.fromarray(a).convert("RGB") for a in load_sample_images().images]
    return out


def photo_image(i: int, size: tuple[int, int], sources):
    """A ``size`` image from a random crop (60-100% of each side) of one of the real photographs."""
    from PIL import Image

    rng = np.random.default_rng(i)
    im = sources[i % len(sources)]
    w, h = im.size
    cw, ch = int(w * rng.uniform(0.6, 1.0)), int(h * rng.uniform(0.6, 1.0))
    x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
    return im.crop((x, y, x + cw, y + ch)).resize(size, Image.Resampling.LANCZOS)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 images instead of 500 (25 instead of 125 at web size).")
    ap.add_argument("-n", type=int, help="Number of 640x480 images per kind (default 500, or 100 with --quick).")
    ap.add_argument("--repeats", type=int, default=5, help="Timed rounds (interleaved).")
    ap.add_argument("--workers", type=int, help="compute_hashes threads (default: its own default).")
    ap.add_argument("--kinds", default="synthetic,photo", help="Comma-separated: synthetic, photo.")
    args = ap.parse_args(argv)
    n = args.n or (100 if args.quick else 500)

    workers = args.workers or min(8, os.cpu_count() or 1)
    sources = photo_sources() if "photo" in args.kinds else None
    for kind in args.kinds.split(","):
        for size in [(640, 480), (1600, 1200)]:
            run_size(kind, n if size[0] < 1000 else max(20, n // 4), size, workers, args.repeats, sources)
    return 0


def run_size(kind: str, n: int, size: tuple[int, int], workers: int, repeats: int, sources) -> float:
    import logging

    import imagehash
    from imagededup.methods import PHash
    from cultura.curate.hashing import compute_hashes, prepare_decode, synthetic_image
    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(n):
            p = Path(tmp) / f"{i:05d}.jpg"
            im = synthetic_image(i, size) if kind == "synthetic" else photo_image(i, size, sources)
            im.save(p, "JPEG", quality=90)
            paths.append(p)
        nbytes = sum(p.stat().st_size for p in paths)
        print(f"\n{n} {kind} JPEGs {size[0]}x{size[1]}, {nbytes / n / 1024:.0f} KiB each on average; "
              f"{workers} threads", flush=True)
        for p in paths:  # warm the OS cache
            p.read_bytes()

        def decode_one(p):  # the same reduced grey decode compute_hashes does, and nothing else
            with Image.open(p) as im:
                prepare_decode(im)
                im.convert("L")

        def decode():
            with ThreadPoolExecutor(max_workers=workers) as pool:
                list(pool.map(decode_one, paths))

        def decode_single():
            for p in paths:
                decode_one(p)

        def ours():
            compute_hashes(paths, workers=workers)

        def ours_single():
            compute_hashes(paths, workers=1)

        def reference():
            for p in paths:
                with Image.open(p) as im:
                    imagehash.phash(im)
                    imagehash.dhash(im)

        logging.getLogger("imagededup").setLevel(logging.ERROR)
        imd = PHash(verbose=False)

        def imagededup():
            imd.encode_images(image_dir=tmp, num_enc_workers=workers)

        ours_single()  # warm caches (imports, per-size coefficient matrices) outside the timed rounds
        load = os.getloadavg()[0]
        order = [("decode", decode), ("ours", ours), ("decode1", decode_single), ("ours1", ours_single),
                 ("imagehash1", reference), ("imagededup", imagededup)]
        rounds = {k: [] for k, _ in order}
        for r in range(repeats):
            for k, f in order[r % len(order):] + order[:r % len(order)]:
                rounds[k].append(timed(f))
        ref = (statistics.median(w for w, _ in rounds["imagehash1"]), 0.0)
        load = max(load, os.getloadavg()[0])

    rate = {k: n / min(w for w, _ in v) for k, v in rounds.items()}
    cpu_ms = {k: statistics.median(c for _, c in v) * 1000 / n for k, v in rounds.items()}
    wall_share = statistics.median(d[0] / o[0] for d, o in zip(rounds["decode"], rounds["ours"]))
    wall_share1 = statistics.median(d[0] / o[0] for d, o in zip(rounds["decode1"], rounds["ours1"]))
    cpu_share = statistics.median(d[1] / o[1] for d, o in zip(rounds["decode1"], rounds["ours1"]))
    print(f"baseline: the same reduced grey decode alone, {workers} threads   {rate['decode']:8.0f} img/s")
    print(f"compute_hashes (decode + pHash views, dHash), {workers} threads   {rate['ours']:8.0f} img/s")
    print(f"baseline, 1 thread                                       {rate['decode1']:8.0f} img/s")
    print(f"compute_hashes, 1 thread                                 {rate['ours1']:8.0f} img/s")
    print(f"imagehash phash+dhash (full RGB decode, 1 thread)        {n / ref[0]:8.0f} img/s")
    imd_wall = statistics.median(w for w, _ in rounds["imagededup"])
    print(f"imagededup PHash.encode_images, {workers} processes             {n / imd_wall:8.0f} img/s")
    r_ih = statistics.median(i[0] / o[0] for i, o in zip(rounds["imagehash1"], rounds["ours1"]))
    r_imd = statistics.median(i[0] / o[0] for i, o in zip(rounds["imagededup"], rounds["ours"]))
    print(f"ratios (peer time / cultura time, median of {repeats} interleaved rounds; > 1: cultura faster): "
          f"PIL+imagehash / compute_hashes (1 thread) {r_ih:.2f}x; imagededup encode_images / compute_hashes "
          f"({workers} workers) {r_imd:.2f}x; load average up to {load:.1f}")
    print(f"CPU per image (median of {repeats} rounds, 1 thread): decode alone {cpu_ms['decode1']:.3f} ms, "
          f"compute_hashes {cpu_ms['ours1']:.3f} ms (with {workers} threads: {cpu_ms['decode']:.3f} / "
          f"{cpu_ms['ours']:.3f} ms); load average up to {load:.1f} on {os.cpu_count()} CPUs")
    print(f"like for like, compute_hashes / its own decode (median of {repeats} interleaved rounds): "
          f"wall {wall_share:.0%} with {workers} threads, {wall_share1:.0%} with 1; CPU time {cpu_share:.0%} "
          f"(target >= {TARGET:.0%}) -> {'PASS' if min(wall_share, cpu_share) >= TARGET else 'BELOW'}; "
          f"vs imagehash (not like for like: full decode): {rate['ours'] / (n / ref[0]):.1f}x")
    return cpu_share


if __name__ == "__main__":
    sys.exit(main())
