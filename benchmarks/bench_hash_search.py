"""Benchmark: all near-duplicate pairs among N random 64-bit hashes (with planted near-duplicates).

Compares :func:`cultura.curate.hashing.hamming_pairs` with imagededup's ``PHash().find_duplicates(
encoding_map=..., max_distance_threshold=T)`` (its default search, ``brute_force_cython``) on the same hashes,
asserts that both find exactly the same pairs and prints the speed-up (target >= 20x) at 10k and 20k hashes,
and imagededup's growth between the two (its brute force is quadratic: 100k took ~25 min, so it is
extrapolated, not run); then times cultura alone on 1M hashes (target <= 60 s on 2 cores). Run::

    .venv/bin/python benchmarks/bench_hash_search.py            # 10k and 20k vs imagededup, then 1M
    .venv/bin/python benchmarks/bench_hash_search.py --quick    # 5k vs imagededup, then 100k
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time

import numpy as np


def planted_hashes(n: int, threshold: int, seed: int = 0, share: float = 0.01) -> np.ndarray:
    """``n`` random hashes; ``share`` of them replaced by copies of others with 0..threshold+2 bits flipped."""
    rng = np.random.default_rng(seed)
    h = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    k = max(1, int(n * share))
    src = rng.choice(n - k, size=k, replace=False)
    copies = h[src].copy()
    for row, flips in enumerate(rng.integers(0, threshold + 3, size=k)):
        for b in rng.choice(64, size=int(flips), replace=False):
            copies[row] ^= np.uint64(1) << np.uint64(b)
    h[n - k:] = copies
    return h


def imagededup_pairs(hashes: np.ndarray, threshold: int, workers: int) -> set[tuple[int, int]]:
    from imagededup.methods import PHash

    logging.getLogger("imagededup").setLevel(logging.WARNING)
    enc = {str(i): f"{int(v):016x}" for i, v in enumerate(hashes)}
    dups = PHash(verbose=False).find_duplicates(encoding_map=enc, max_distance_threshold=threshold,
                                                num_dist_workers=workers)
    return {(min(int(a), int(b)), max(int(a), int(b))) for a, bs in dups.items() for b in bs}


def main(argv=None) -> int:
    from cultura.config import DedupSection
    from cultura.curate.hashing import hamming_pairs

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="Small sizes (5k compared, 100k timed).")
    ap.add_argument("--threshold", type=int, default=DedupSection().phash_threshold,
                    help="Hamming threshold (default: the calibrated pHash default).")
    ap.add_argument("--workers", type=int, default=2, help="Threads (cultura) and processes (imagededup).")
    ap.add_argument("--compare-size", type=int, action="append",
                    help="Hashes compared with imagededup, repeatable (default 10k and 20k; --quick: 5k).")
    ap.add_argument("--large-size", type=int, help="Hashes timed alone (default 1M / 100k).")
    ap.add_argument("--skip-imagededup", action="store_true", help="Only time cultura.")
    args = ap.parse_args(argv)
    sizes = args.compare_size or ([5_000] if args.quick else [10_000, 20_000])
    n_big = args.large_size or (100_000 if args.quick else 1_000_000)
    t = args.threshold
    print(f"threshold={t} bits, workers={args.workers}, cpus={os.cpu_count()}", flush=True)

    ratios, imd_times = [], []
    for n_c in sizes:
        h = planted_hashes(n_c, t)
        start = time.perf_counter()
        ours = hamming_pairs(h, t, workers=args.workers)
        t_ours = time.perf_counter() - start
        print(f"cultura hamming_pairs      n={n_c:>9,}  pairs={len(ours):>7,}  {t_ours:8.2f} s", flush=True)
        if args.skip_imagededup:
            continue
        start = time.perf_counter()
        theirs = imagededup_pairs(h, t, args.workers)
        t_theirs = time.perf_counter() - start
        imd_times.append((n_c, t_theirs))
        print(f"imagededup find_duplicates n={n_c:>9,}  pairs={len(theirs):>7,}  {t_theirs:8.2f} s", flush=True)
        same = {tuple(p) for p in ours.tolist()} == theirs
        print(f"identical pairs: {same}")
        if not same:
            print("MISMATCH between cultura and imagededup", file=sys.stderr)
            return 1
        ratios.append(t_theirs / t_ours)
        print(f"speed-up at {n_c:,}: {ratios[-1]:.1f}x (target >= 20x) -> {'PASS' if ratios[-1] >= 20 else 'FAIL'}",
              flush=True)
    if len(imd_times) >= 2:
        (n0, t0), (n1, t1) = imd_times[0], imd_times[-1]
        exponent = np.log(t1 / t0) / np.log(n1 / n0)
        if exponent >= 1:
            print(f"imagededup growth {n0:,} -> {n1:,}: {t1 / t0:.1f}x (n^{exponent:.2f}); extrapolated to "
                  f"{n_big:,}: {t1 * (n_big / n1) ** exponent / 60:.0f} min (not run: cultura alone below)")
        else:
            print(f"imagededup growth {n0:,} -> {n1:,}: {t1 / t0:.1f}x: sizes too small to extrapolate "
                  "(fixed costs dominate)")

    h = planted_hashes(n_big, t, seed=1)
    start = time.perf_counter()
    big = hamming_pairs(h, t, workers=args.workers)
    t_big = time.perf_counter() - start
    print(f"cultura hamming_pairs     n={n_big:>9,}  pairs={len(big):>7,}  {t_big:8.2f} s "
          f"(target <= 60 s) -> {'PASS' if t_big <= 60 else 'FAIL'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
