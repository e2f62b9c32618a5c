"""Benchmark: the embedding method's pair search (cosine >= threshold), within-concept and global.

Builds ``--n`` random L2-normalised ``--dim``-d vectors (float32) in concepts of ``--per-concept`` images
(5,000 = 1M images over 200 concepts, the project of issue 15), 5% of them near-copies (cosine ~0.97) of
another vector of their concept, and times, in this process:

- within-concept: :func:`cultura.curate.dedup.concept_pairs` with :func:`cosine_pairs` per concept (what
  ``dedup --scope within-concept`` runs);
- global: one exact :func:`cosine_pairs` over all vectors (blocked products, upper triangle);
- the former implementation for the ratio: one faiss ``IndexFlatIP`` range search over everything (it also
  ran for within-concept scope), which holds a second copy of the matrix.

Prints seconds, found pairs (both searches must find every planted pair inside a concept), peak memory
above the matrix (``VmHWM`` growth over the matrix's own size), and the extrapolation to 1M images: the
within-concept search grows linearly with the number of concepts at a fixed concept size, the exact global
search with the square of ``n``. Run::

    .venv/bin/python benchmarks/bench_embed_dedup.py             # 50k x 512-d, concepts of 5,000
    .venv/bin/python benchmarks/bench_embed_dedup.py --n 20000
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np


def vm(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main(argv=None) -> int:
    from cultura.curate.dedup import Inventory, concept_pairs, cosine_pairs

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--per-concept", type=int, default=5_000)
    ap.add_argument("--threshold", type=float, default=0.95)
    ap.add_argument("--skip-faiss", action="store_true", help="Skip the former global faiss flat search.")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    n, d = args.n, args.dim
    x = rng.standard_normal((n, d), dtype=np.float32)
    k = int(n * 0.05)
    concept = np.arange(n) // args.per_concept
    src = np.array([rng.integers(c * args.per_concept, min((c + 1) * args.per_concept, n))
                    for c in concept[n - k:]])
    src = np.minimum(src, n - k - 1)
    x[n - k:] = x[src] + 0.25 * rng.standard_normal((k, d), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    concept[n - k:] = concept[src]
    matrix_mb = x.nbytes / 2**20
    inv = Inventory(sha=[""] * n, pixels=np.zeros(n, np.int64), nbytes=np.zeros(n, np.int64),
                    phash=np.zeros(n, np.uint64), dhash=np.zeros(n, np.uint64), has_phash=np.ones(n, bool),
                    has_dhash=np.ones(n, bool), link_img=np.arange(n), link_concept=concept,
                    link_country=np.zeros(n, np.int64), countries=["US"], concept_names={})
    base = vm("VmHWM")
    t, c = time.perf_counter(), time.process_time()
    within = concept_pairs(inv, np.ones(n, bool), lambda g: cosine_pairs(x[g], args.threshold))
    t_within, c_within = time.perf_counter() - t, time.process_time() - c
    hwm_within = vm("VmHWM") - base
    t, c = time.perf_counter(), time.process_time()
    glob = cosine_pairs(x, args.threshold)
    t_global, c_global = time.perf_counter() - t, time.process_time() - c
    hwm_global = vm("VmHWM") - base
    planted = {(min(a, b), max(a, b)) for a, b in zip(src.tolist(), range(n - k, n))}
    got_w = set(map(tuple, within.tolist()))
    got_g = set(map(tuple, glob.tolist()))
    print(f"{n:,} x {d}-d float32 ({matrix_mb:.0f} MB), concepts of {args.per_concept:,}, "
          f"{len(planted):,} planted pairs, threshold {args.threshold}")
    print(f"  (load average {__import__('os').getloadavg()[0]:.1f}; CPU seconds are user + system of all threads)")
    print(f"  within-concept (per-concept exact search): {t_within:7.2f} s (CPU {c_within:.2f} s), {len(within):,} pairs, "
          f"planted found {len(planted & got_w) / len(planted):.3f}, memory above the matrix "
          f"{hwm_within:.0f} MB ({hwm_within / matrix_mb:.2f}x)")
    print(f"  global (exact, blocked, upper triangle):   {t_global:7.2f} s (CPU {c_global:.2f} s), {len(glob):,} pairs, "
          f"planted found {len(planted & got_g) / len(planted):.3f}, memory above the matrix "
          f"{hwm_global:.0f} MB (a fixed 64 MB block of similarities, whatever n)")
    if not args.skip_faiss:
        import faiss

        t = time.perf_counter()
        index = faiss.IndexFlatIP(d)
        index.add(x)
        for s in range(0, n, 4096):
            index.range_search(x[s:s + 4096], args.threshold - 1e-6)
        t_faiss = time.perf_counter() - t
        print(f"  former: faiss IndexFlatIP range search over everything (also used for within-concept): "
              f"{t_faiss:.2f} s -> within-concept now {t_faiss / t_within:.1f}x faster, global "
              f"{t_faiss / t_global:.2f}x (the flat index holds a second copy of the matrix: +1x)")
    scale = 1_000_000 / n
    print(f"extrapolated to 1M images (same concept size): within-concept {t_within * scale / 60:.1f} min wall "
          f"here, {c_within * scale / 60:.1f} min of CPU "
          f"(goal <= 2 min), exact global {t_global * scale ** 2 / 3600:.1f} h (goal <= 15 min: needs an "
          f"approximate index, not built; see docs/scaling.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
