"""Benchmark: images/second of ``compute_hashes`` as a share of the same decode alone (like for like).

Writes N generated JPEGs at 640x480 and N/4 at 1600x1200 (web size; ``synthetic_image``, quality 90) to a
temporary folder, reads them once so the OS cache is warm, then times (best of ``--repeats``):

- the baseline: the very decode ``compute_hashes`` does (open, reduced grey draft for JPEG, convert to L)
  and nothing else, on the same number of threads (and on 1 thread);
- ``compute_hashes(paths)`` (decode + pHash, dHash and centre pHash) — target >= 80% of the baseline;
- imagehash for reference (open + ``imagehash.phash`` + ``imagehash.dhash``: a full-resolution RGB decode,
  1 thread: not like for like, printed as such).

Run::

    .venv/bin/python benchmarks/bench_hashing.py            # 500 + 125 images
    .venv/bin/python benchmarks/bench_hashing.py --quick    # 100 + 25 images
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 images instead of 500.")
    ap.add_argument("-n", type=int, help="Number of images (default 500, or 100 with --quick).")
    ap.add_argument("--repeats", type=int, default=3, help="Timed repetitions; the best is kept.")
    ap.add_argument("--workers", type=int, help="compute_hashes threads (default: its own default).")
    args = ap.parse_args(argv)
    n = args.n or (100 if args.quick else 500)

    workers = args.workers or min(8, os.cpu_count() or 1)
    for size in [(640, 480), (1600, 1200)]:
        run_size(n if size[0] < 1000 else max(20, n // 4), size, workers, args.repeats)
    return 0


def run_size(n: int, size: tuple[int, int], workers: int, repeats: int) -> None:
    import imagehash
    from PIL import Image

    from cultura.curate.hashing import compute_hashes, prepare_decode, synthetic_image

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(n):
            p = Path(tmp) / f"{i:05d}.jpg"
            synthetic_image(i, size).save(p, "JPEG", quality=90)
            paths.append(p)
        nbytes = sum(p.stat().st_size for p in paths)
        print(f"\n{n} JPEGs {size[0]}x{size[1]}, {nbytes / n / 1024:.0f} KiB each on average; {workers} threads",
              flush=True)
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

        t = {k: best_of(f, repeats) for k, f in [("decode", decode), ("decode1", decode_single), ("ours", ours),
                                                 ("ours1", ours_single)]}
        t["ref"] = best_of(reference, max(1, repeats - 1))
    rate = {k: n / v for k, v in t.items()}
    print(f"baseline: the same reduced grey decode alone, {workers} threads   {rate['decode']:8.0f} img/s")
    print(f"compute_hashes (decode + pHash, dHash, centre pHash), {workers} thr. {rate['ours']:8.0f} img/s")
    print(f"baseline, 1 thread                                       {rate['decode1']:8.0f} img/s")
    print(f"compute_hashes, 1 thread                                 {rate['ours1']:8.0f} img/s")
    print(f"imagehash phash+dhash (full RGB decode, 1 thread)        {rate['ref']:8.0f} img/s")
    share = rate["ours"] / rate["decode"]
    print(f"like for like, compute_hashes / its own decode: {share:.0%} with {workers} threads, "
          f"{rate['ours1'] / rate['decode1']:.0%} with 1 (target >= 80%) -> {'PASS' if share >= 0.8 else 'FAIL'}; "
          f"vs imagehash (not like for like: full decode): {rate['ours'] / rate['ref']:.1f}x")


if __name__ == "__main__":
    sys.exit(main())
