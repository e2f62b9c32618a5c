"""Benchmark: images/second of ``compute_hashes`` as a share of a bare Pillow decode loop over the same files.

Writes N generated 640x480 JPEGs (``synthetic_image``, quality 90) to a temporary folder, reads them once so
the OS cache is warm, then times (best of ``--repeats``):

- a bare decode loop: ``Image.open(path)`` + ``.load()`` per file, one thread;
- ``compute_hashes(paths)`` (pHash and dHash, thread pool) — target >= 80% of the decode loop's rate;
- ``compute_hashes(paths, workers=1)`` — the reduced decode alone, without threads;
- imagehash for reference: open + ``imagehash.phash`` + ``imagehash.dhash`` per file, one thread.

Run::

    .venv/bin/python benchmarks/bench_hashing.py            # 500 images
    .venv/bin/python benchmarks/bench_hashing.py --quick    # 100 images
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv=None) -> int:
    import imagehash
    from PIL import Image

    from cultura.curate.hashing import compute_hashes, synthetic_image

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 images instead of 500.")
    ap.add_argument("-n", type=int, help="Number of images (default 500, or 100 with --quick).")
    ap.add_argument("--repeats", type=int, default=3, help="Timed repetitions; the best is kept.")
    ap.add_argument("--workers", type=int, help="compute_hashes threads (default: its own default).")
    args = ap.parse_args(argv)
    n = args.n or (100 if args.quick else 500)

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(n):
            p = Path(tmp) / f"{i:05d}.jpg"
            synthetic_image(i, (640, 480)).save(p, "JPEG", quality=90)
            paths.append(p)
        size = sum(p.stat().st_size for p in paths)
        print(f"{n} JPEGs 640x480, {size / n / 1024:.0f} KiB each on average", flush=True)
        for p in paths:  # warm the OS cache
            p.read_bytes()

        def decode():
            for p in paths:
                with Image.open(p) as im:
                    im.load()

        def ours():
            compute_hashes(paths, workers=args.workers)

        def ours_single():
            compute_hashes(paths, workers=1)

        def reference():
            for p in paths:
                with Image.open(p) as im:
                    imagehash.phash(im)
                    imagehash.dhash(im)

        t_decode = best_of(decode, args.repeats)
        t_ours = best_of(ours, args.repeats)
        t_single = best_of(ours_single, args.repeats)
        t_ref = best_of(reference, max(1, args.repeats - 1))

    rate = {k: n / t for k, t in [("decode", t_decode), ("ours", t_ours), ("single", t_single), ("ref", t_ref)]}
    print(f"bare decode loop (open+load, 1 thread)     {rate['decode']:8.0f} img/s")
    print(f"compute_hashes (pHash+dHash, thread pool)   {rate['ours']:8.0f} img/s")
    print(f"compute_hashes (pHash+dHash, 1 thread)      {rate['single']:8.0f} img/s")
    print(f"imagehash phash+dhash (1 thread, reference) {rate['ref']:8.0f} img/s")
    share = rate["ours"] / rate["decode"]
    print(f"compute_hashes / decode: {share:.0%} (target >= 80%) -> {'PASS' if share >= 0.8 else 'FAIL'}; "
          f"1 thread: {rate['single'] / rate['decode']:.0%}; vs imagehash: {rate['ours'] / rate['ref']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
