"""Benchmark: all near-duplicate pairs among N 64-bit hashes, cultura against the peers in one run.

Compared, interleaved (each round runs every tool, in a rotating order, so a change of machine load hits
all alike), medians of the rounds:

- ``cultura``: :func:`cultura.curate.hashing.hamming_pairs`;
- ``faiss``: a plain faiss ``IndexBinaryFlat``: ``add`` all codes, one ``range_search`` of all against all,
  pairs ``i < j`` kept (faiss's own threads);
- ``imagededup``: ``PHash().find_duplicates(encoding_map=..., max_distance_threshold=T)`` (its default
  search, ``brute_force_cython``), up to ``--imagededup-max`` hashes (it is quadratic in Python objects).

Imports (imagededup pulls torch) and the encoding map happen before the timed blocks. The pairs of every
tool are compared (identical pairs asserted). Hashes are random with 1 % planted near-copies (``uniform``)
or drawn from real pHash statistics (``real``: the bit frequencies, correlations and near pairs of pHashes
of real photographs, see :func:`real_like_hashes`). Printed: the median seconds, each peer's
time over cultura's (> 1: cultura faster) and the load average. Run::

    .venv/bin/python perf/bench_hash_search.py                 # 1k, 10k, 100k; 5 rounds
    .venv/bin/python perf/bench_hash_search.py --quick         # 1k, 5k; 3 rounds
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np


def planted_hashes(n: int, threshold: int, seed: int = 0, share: float = 0.01) -> np.ndarray:
    """``n`` random hashes; ``share`` of them replaced by copies of others with 0..threshold+2 bits flipped."""
    rng = np.random.default_rng(seed)
    h = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    return plant(h, threshold, rng, share)


def plant(h: np.ndarray, threshold: int, rng, share: float = 0.01) -> np.ndarray:
    """Replace ``share`` of ``h`` by copies of others with 0..threshold+2 bits flipped (in place)."""
    n = len(h)
    k = max(1, int(n * share))
    src = rng.choice(n - k, size=k, replace=False)
    copies = h[src].copy()
    for row, flips in enumerate(rng.integers(0, threshold + 3, size=k)):
        for b in rng.choice(64, size=int(flips), replace=False):
            copies[row] ^= np.uint64(1) << np.uint64(b)
    h[n - k:] = copies
    return h


#: The photographs the real crops are taken from, in turn: these of scikit-image, then scikit-learn's two.
SKIMAGE_PHOTOS = ["astronaut", "chelsea", "coffee", "rocket", "camera", "coins", "moon", "hubble_deep_field",
                  "immunohistochemistry", "retina", "clock", "cell", "brick", "grass", "gravel"]
N_PHOTOS = len(SKIMAGE_PHOTOS) + 2


def real_hashed_crops():
    """cultura's hashes (``hashing.hash_images``: full views) of 400 random crops (40-100 % a side) of the
    photographs scikit-image and scikit-learn ship: the real sample both hash benchmarks draw from."""
    from PIL import Image
    from skimage import data as skdata
    from sklearn.datasets import load_sample_images

    from cultura.curate import hashing

    src = [Image.fromarray(getattr(skdata, n)()).convert("L") for n in SKIMAGE_PHOTOS]
    src += [Image.fromarray(a).convert("L") for a in load_sample_images().images]
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.fakes, from a checkout
    from tests.fakes.real_photos import random_crops

    return hashing.hash_images(random_crops(src, 400, np.random.default_rng(7), low=0.4))


def real_phash_sample() -> np.ndarray:
    """pHashes of real photographs: :func:`real_hashed_crops`' pHashes."""
    return real_hashed_crops().phash


def real_like_hashes(n: int, threshold: int, seed: int = 0, sample: np.ndarray | None = None) -> np.ndarray:
    """``n`` hashes with the statistics of real pHashes: each new hash is a sampled real pHash with a share of
    its bits (drawn per hash, uniform in 0..0.6) re-drawn from each bit's frequency among the real ones, then
    1 % planted near-copies. So bit biases are kept (the DC term's bit is
    almost always set), and so are the real pairs' distances, near pairs included (re-drawing half of every
    hash's bits would make them binomial, ten times fewer near pairs than real photographs have): the
    multi-index search's harder case (uneven bands, many candidates), crops of one photograph included (the
    dedup benchmark, ``bench_dedup_1m``, draws pictures that are not copies instead)."""
    sample = real_phash_sample() if sample is None else sample
    rng = np.random.default_rng(seed)
    bits = np.unpackbits(sample.astype(">u8").view(np.uint8).reshape(-1, 8), axis=1).astype(bool)
    freq = bits.mean(axis=0)
    base = bits[rng.integers(0, len(bits), n)]
    redraw = rng.random((n, 64)) < rng.uniform(0, 0.6, n)[:, None]
    drawn = rng.random((n, 64)) < freq
    out = np.where(redraw, drawn, base)
    h = np.packbits(out, axis=1).view(">u8").reshape(-1).astype(np.uint64)
    return plant(h, threshold, rng)


def faiss_pairs(hashes: np.ndarray, threshold: int) -> np.ndarray:
    """Plain faiss: one IndexBinaryFlat, one all-against-all range search, ``i < j`` kept."""
    import faiss  # imported before the timed blocks by main(); cached here

    codes = np.ascontiguousarray(hashes).view(np.uint8).reshape(-1, 8)
    index = faiss.IndexBinaryFlat(64)
    index.add(codes)
    lims, _, ids = index.range_search(codes, threshold + 1)
    q = np.repeat(np.arange(len(hashes), dtype=np.int64), np.diff(lims).astype(np.int64))
    keep = q < ids
    return np.stack([q[keep], ids[keep].astype(np.int64)], axis=1)


def imagededup_pairs(enc: dict, threshold: int, workers: int) -> np.ndarray:
    from imagededup.methods import PHash

    dups = PHash(verbose=False).find_duplicates(encoding_map=enc, max_distance_threshold=threshold,
                                                num_dist_workers=workers)
    return np.array(sorted({(min(int(a), int(b)), max(int(a), int(b))) for a, bs in dups.items() for b in bs}),
                    dtype=np.int64).reshape(-1, 2)


def as_set(pairs) -> set[tuple[int, int]]:
    return {tuple(p) for p in np.asarray(pairs).tolist()}


def compare(h: np.ndarray, threshold: int, rounds: int, workers: int, with_imagededup: bool) -> dict:
    """Median seconds per tool over ``rounds`` interleaved rounds; pairs checked identical."""
    from cultura.curate.hashing import hamming_pairs

    tools = {"cultura": lambda: hamming_pairs(h, threshold, workers=workers),
             "faiss": lambda: faiss_pairs(h, threshold)}
    if with_imagededup:
        enc = {str(i): f"{int(v):016x}" for i, v in enumerate(h)}   # built outside the timed block
        tools["imagededup"] = lambda: imagededup_pairs(enc, threshold, workers)
    times: dict[str, list[float]] = {k: [] for k in tools}
    pairs: dict[str, set] = {}
    names = list(tools)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            out = tools[name]()
            times[name].append(time.perf_counter() - start)
            pairs.setdefault(name, as_set(out))
    same = all(p == pairs["cultura"] for p in pairs.values())
    return {"median_s": {k: statistics.median(v) for k, v in times.items()}, "pairs": len(pairs["cultura"]),
            "identical": same}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1k and 5k hashes, 3 rounds.")
    ap.add_argument("--size", type=int, action="append", help="Hash counts (repeatable).")
    ap.add_argument("--rounds", type=int, help="Interleaved rounds per size (default 5; --quick 3).")
    ap.add_argument("--threshold", type=int, default=10, help="Hamming threshold (the pHash default).")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="Threads (cultura), processes "
                    "(imagededup); faiss uses its own OpenMP threads.")
    ap.add_argument("--imagededup-max", type=int, default=20_000, help="Largest size imagededup is run on.")
    ap.add_argument("--kind", choices=["uniform", "real", "both"], default="both")
    args = ap.parse_args(argv)
    sizes = args.size or ([1_000, 5_000] if args.quick else [1_000, 10_000, 100_000])
    rounds = args.rounds or (3 if args.quick else 5)
    t = args.threshold
    # imports outside the timed blocks: faiss, and imagededup (which imports torch)
    import faiss  # noqa: F401

    logging.getLogger("imagededup").setLevel(logging.ERROR)
    import imagededup.methods  # noqa: F401

    import cultura.curate.hashing  # noqa: F401

    kinds = ["uniform", "real"] if args.kind == "both" else [args.kind]
    sample = real_phash_sample() if "real" in kinds else None
    print(f"threshold={t} bits, workers={args.workers}, cpus={os.cpu_count()}, rounds={rounds}", flush=True)
    ok = True
    for kind in kinds:
        for n in sizes:
            h = planted_hashes(n, t) if kind == "uniform" else real_like_hashes(n, t, sample=sample)
            load = os.getloadavg()[0]
            res = compare(h, t, rounds, args.workers, n <= args.imagededup_max)
            med = res["median_s"]
            ratios = "  ".join(f"{k}/cultura={med[k] / med['cultura']:.2f}x" for k in med if k != "cultura")
            print(f"{kind:7s} n={n:>9,} pairs={res['pairs']:>8,} identical={res['identical']}  "
                  + "  ".join(f"{k} {v:8.3f} s" for k, v in med.items()) + f"  | {ratios}  load {load:.1f}",
                  flush=True)
            ok &= res["identical"]
    if not ok:
        print("MISMATCH: the tools found different pairs", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
