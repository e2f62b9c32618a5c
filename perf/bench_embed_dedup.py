"""Benchmark: the embedding dedup method at 1M images × 512-d, through the real path, against its goals.

Builds (once, into ``--dir``; reused when it exists) a million-image project with ``benchmarks/
bench_dedup_1m.build`` (``--n`` images, ``--concepts`` concepts × 16 countries, each image found by a search
result) and stores one 512-d embedding per image in the embedding cache (table ``embeddings``) under the
identity of the ``fake:dim=512`` embedder, so ``dedup_images(methods=["embedding"])`` reads every vector from
the cache and computes none. The vectors are concept-clustered like CLIP image embeddings (a shared
direction, concept centres, 20 visual modes per concept, per-image noise: same-concept cosine ~0.62,
other-concept ~0.33, a typical image's nearest non-duplicate neighbour at cosine ~0.88, 10% of them
>= 0.91); ``--planted`` of the images (5%) are replaced by a near-copy of another image of their concept at
a cosine drawn uniformly from 0.90 to 0.995.

Then, each in a fresh process (so each peak RSS is its own), it measures:

1. ``dedup_images(methods=["embedding"], scope="within-concept")``: phases (inventory, cache read, search,
   clusters and writes), wall and CPU seconds, peak RSS against the matrix's size; then, in the same process
   and on the same matrix, the baseline: a faiss ``IndexFlatIP`` range search per concept (the same exact
   work done by faiss, which copies each concept's rows into its index). Both must return the same pairs.
2. ``dedup_images(..., scope="global")`` with the default ``embedding_index = "auto"`` (IVF above 100k
   rows): the same figures; then the IVF recall at full size, estimated on ``--recall-sample`` random
   rows: the exact pairs of those rows (each row against all ``n``, blocked products) against the IVF pairs
   touching them.
3. At ``--exact-n`` images (100k; an exact global search at 1M takes hours) generated the same way, in
   memory: the exact global search (:func:`cosine_pairs`, the baseline) and the IVF search, their times,
   and the IVF recall against the exact pairs at thresholds 0.95 (the default) and 0.90 (harder: pairs
   further apart). The exact search at 1M is extrapolated from it (``n**2``).

Goals (at 1M × 512-d): within-concept <= 2 min, global <= 15 min, memory <= 1.5× the matrix.
Each figure is printed as a ratio against its goal and against its baseline. Run::

    .venv/bin/python perf/bench_embed_dedup.py --dir /tmp/embed1m        # 1M (build ~12 min, once; 4 GB)
    .venv/bin/python perf/bench_embed_dedup.py --n 100000 --exact-n 20000  # a quick run
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

EMBEDDER = "fake:dim=512"
DIM = 512
GOALS = {"within_s": 120.0, "global_s": 900.0, "memory_x": 1.5}
MODES = 20


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def vm(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def concept_vectors(rng, k: int, n: int, d: int, planted: float, shared: np.ndarray) -> np.ndarray:
    """``n`` unit vectors of one concept (see the module docstring), ``planted`` of them near-copies of
    another of the concept's images at cosine U(0.90, 0.995)."""
    unit = lambda a: a / np.linalg.norm(a, axis=-1, keepdims=True)
    centre = unit(rng.standard_normal(d, dtype=np.float32))
    modes = unit(rng.standard_normal((MODES, d), dtype=np.float32))
    w = rng.uniform(0.28, 0.5, (n, 1)).astype(np.float32)
    x = unit(0.55 * shared + 0.5 * centre + 0.45 * modes[rng.integers(0, MODES, n)]
             + w * unit(rng.standard_normal((n, d), dtype=np.float32)))
    m = int(round(n * planted))
    if m and n > 1:
        perm = rng.permutation(n)
        dst, pool = perm[:m], perm[m:]
        src = pool[rng.integers(0, len(pool), m)] if len(pool) else perm[(np.arange(m) + 1) % n]
        cos = rng.uniform(0.90, 0.995, (m, 1)).astype(np.float32)
        u = rng.standard_normal((m, d), dtype=np.float32)
        u = unit(u - (u * x[src]).sum(1, keepdims=True) * x[src])
        x[dst] = unit(cos * x[src] + np.sqrt(1 - cos ** 2) * u)
    return x.astype(np.float32)


def clustered(n: int, per_concept: int, d: int, planted: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shared = rng.standard_normal(d, dtype=np.float32)
    shared /= np.linalg.norm(shared)
    x = np.empty((n, d), dtype=np.float32)
    for k, s in enumerate(range(0, n, per_concept)):
        e = min(n, s + per_concept)
        x[s:e] = concept_vectors(rng, k, e - s, d, planted, shared)
    return x


def build(root: Path, n: int, n_concepts: int, planted: float, seed: int = 0) -> None:
    """bench_dedup_1m's project, then one cached embedding per image, concept by concept."""
    import bench_dedup_1m
    from cultura.db import now, transaction
    from cultura.models.embedders import get_embedder
    from cultura.project import Project

    bench_dedup_1m.build(root, n, n_concepts, 0.05, seed)
    p = Project(root)
    db = p.db
    model = get_embedder(EMBEDDER).identity
    rows = db.execute("SELECT i.sha256, min(q.concept_id) FROM images i JOIN candidates c ON c.sha256 = i.sha256 "
                      "JOIN search_results r ON r.candidate_id = c.id JOIN queries q ON q.id = r.query_id "
                      "GROUP BY i.sha256").fetchall()
    by_concept: dict[int, list[str]] = {}
    for sha, c in rows:
        by_concept.setdefault(c, []).append(sha)
    del rows
    rng = np.random.default_rng(seed + 1)
    shared = rng.standard_normal(DIM, dtype=np.float32)
    shared /= np.linalg.norm(shared)
    ts = now()
    for c in sorted(by_concept):
        shas = by_concept[c]
        x = concept_vectors(rng, c, len(shas), DIM, planted, shared)
        with transaction(db):
            db.conn.executemany("INSERT INTO embeddings (model, kind, key, dim, vector, created_at) "
                                "VALUES (?, 'image', ?, ?, ?, ?)",
                                ((model, s, DIM, v.astype("<f4").tobytes(), ts) for s, v in zip(shas, x)))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    p.close()


def reset(root: Path) -> None:
    from cultura.db import transaction
    from cultura.project import Project

    p = Project(root)
    with transaction(p.db):
        for table in ("dup_members", "dup_clusters", "dedup_runs", "image_flags", "dedup_state"):
            p.db.execute(f"DELETE FROM {table}")
    p.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    p.close()


def child_dedup(root: str, scope: str, threshold: float, recall_sample: int, skip_baseline: bool) -> dict:
    """One ``dedup_images`` call through the real path (cache -> search -> clusters), timed by phase."""
    from cultura.curate import dedup, vector_search
    from cultura.models.embedders import get_embedder
    from cultura.project import Project

    phases: dict[str, list[float]] = {}
    kept: dict = {"rows": [], "n_pairs": 0}

    def timed(mod, name, label, keep=False):
        fn = getattr(mod, name)

        def wrapper(*a, **kw):
            t, c = time.perf_counter(), cpu_s()
            try:
                out = fn(*a, **kw)
            finally:
                ph = phases.setdefault(label, [0.0, 0.0])
                ph[0] += time.perf_counter() - t
                ph[1] += cpu_s() - c
            if keep:  # the search: keep the matrix (no copy) and what it searched, for the checks after
                kept["x"] = a[0]
                kept["rows"].append(kw.get("rows"))
                kept["pairs"] = out
                kept["n_pairs"] += len(out)
            return out
        setattr(mod, name, wrapper)

    timed(dedup, "load_inventory", "load_inventory")
    timed(dedup, "embed_images_cached", "cache_read")
    timed(vector_search, "similar_pairs", "search", keep=True)
    timed(dedup, "scoped_clusters", "scoped_clusters")
    timed(dedup, "_save_clusters", "save_clusters")
    timed(dedup, "update_conflict_flags_many", "conflict_flags")
    p = Project(root)
    p.db  # opening imports every area's schema module: not dedup's time
    emb = get_embedder(EMBEDDER)
    import faiss

    rss0 = vm("VmRSS")
    t, c = time.perf_counter(), cpu_s()
    res = dedup.dedup_images(p, methods=["embedding"], embedder=emb, embedding_threshold=threshold, scope=scope,
                             progress=False)
    out = {"scope": scope, "total_s": time.perf_counter() - t, "cpu_s": cpu_s() - c, "load": os.getloadavg()[0],
           "phases": phases, "rss_before_mb": rss0, "peak_rss_mb": vm("VmHWM"), "summary": res,
           "computed": emb.stats.get("images", 0)}
    x = kept.get("x")
    out["matrix_mb"] = x.nbytes / 2**20 if x is not None else 0.0
    out["n"], out["pairs"] = (len(x) if x is not None else 0), res.get("clusters", {})
    out["index"] = json.loads(p.db.execute("SELECT params FROM dedup_runs WHERE method = 'embedding' "
                                           "ORDER BY id DESC").fetchone()[0])["index"]
    if scope == "within-concept" and not skip_baseline and x is not None:
        import faiss

        # the baseline: the same per-concept exact work done by a faiss flat range search
        t, c = time.perf_counter(), cpu_s()
        n_pairs = 0
        for rows in kept["rows"]:
            xs = np.ascontiguousarray(x[rows])
            index = faiss.IndexFlatIP(xs.shape[1])
            index.add(xs)
            lims, _, ids = index.range_search(xs, threshold - 1e-6)
            q = np.repeat(np.arange(len(xs)), np.diff(lims).astype(np.int64))
            n_pairs += int((q < ids).sum())
        out["baseline_s"], out["baseline_cpu_s"] = time.perf_counter() - t, cpu_s() - c
        out["baseline_pairs"] = n_pairs
        out["search_pairs"] = kept["n_pairs"]
    if scope == "global" and recall_sample and x is not None:
        # recall at full size on a random sample of rows: their exact pairs (each against all n) vs IVF's
        rng = np.random.default_rng(7)
        n = len(x)
        sample = np.sort(rng.choice(n, min(recall_sample, n), replace=False))
        t0, c0 = time.perf_counter(), cpu_s()
        exact = []
        for s in range(0, len(sample), 1024):
            q = sample[s:s + 1024]
            xq = x[q]
            for d in range(0, n, 16384):
                qi, dj = np.nonzero(xq @ x[d:d + 16384].T >= threshold - 1e-6)
                gi, gj = q[qi], dj + d
                keep = gi != gj
                exact.append(np.stack([np.minimum(gi, gj), np.maximum(gi, gj)], 1)[keep])
        ex = {tuple(r) for r in np.concatenate(exact).tolist()} if exact else set()
        pairs = kept["pairs"]
        touch = np.isin(pairs[:, 0], sample) | np.isin(pairs[:, 1], sample)
        got = {tuple(r) for r in pairs[touch].tolist()}
        out["recall_sample"] = {"rows": len(sample), "exact_pairs": len(ex), "found": len(ex & got),
                                "not_exact": len(got - ex), "s": time.perf_counter() - t0, "cpu_s": cpu_s() - c0}
    p.close()
    return out


def child_exact(n: int, per_concept: int, thresholds: list[float], planted: float) -> dict:
    """In memory at a size where the exact global search runs: exact (baseline) vs IVF, recall per threshold."""
    from cultura.curate import vector_search as vs

    x = clustered(n, per_concept, DIM, planted, seed=11)
    t_lo = min(thresholds)
    t, c = time.perf_counter(), cpu_s()
    ex = vs.cosine_pairs(x, t_lo)
    exact_s, exact_cpu = time.perf_counter() - t, cpu_s() - c
    t, c = time.perf_counter(), cpu_s()
    ivf = vs.ivf_cosine_pairs(x, t_lo)  # the candidates do not depend on the threshold: filtered below
    ivf_s, ivf_cpu = time.perf_counter() - t, cpu_s() - c
    sim_ex = np.einsum("ij,ij->i", x[ex[:, 0]], x[ex[:, 1]])
    sim_ivf = np.einsum("ij,ij->i", x[ivf[:, 0]], x[ivf[:, 1]])
    out = {"n": n, "exact_s": exact_s, "exact_cpu_s": exact_cpu, "ivf_s": ivf_s, "ivf_cpu_s": ivf_cpu,
           "nlist": vs.auto_nlist(n), "nprobe": vs.DEFAULT_NPROBE, "load": os.getloadavg()[0], "recall": {}}
    for th in sorted(thresholds, reverse=True):
        e = {tuple(r) for r in ex[sim_ex >= th - 1e-6].tolist()}
        g = {tuple(r) for r in ivf[sim_ivf >= th - 1e-6].tolist()}
        out["recall"][str(th)] = {"exact_pairs": len(e), "found": len(e & g), "not_exact": len(g - e)}
    return out


def run_child(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def show_run(r: dict, goal_s: float, scale: float) -> None:
    print(f"  {'phase':<16} {'wall':>8}   {'CPU':>8}")
    for k, (wall, cpu) in r["phases"].items():
        print(f"  {k:<16} {wall:8.1f} s {cpu:8.1f} s")
    print(f"  {'end to end':<16} {r['total_s']:8.1f} s {r['cpu_s']:8.1f} s   goal <= {goal_s * scale:.0f} s "
          f"({goal_s:.0f} s at 1M{', scaled linearly' if scale != 1 else ''}): ratio {r['total_s'] / (goal_s * scale):.2f}"
          f" (1-min load average {r['load']:.1f} on {os.cpu_count()} cores: wall includes waiting for others)")
    mat = r["matrix_mb"]
    grow = r["peak_rss_mb"] - r["rss_before_mb"]
    print(f"  memory: matrix {mat:.0f} MB ({r['n']:,} x {DIM} float32); peak RSS {r['peak_rss_mb']:.0f} MB = "
          f"{r['peak_rss_mb'] / mat:.2f}x the matrix (interpreter and imports included, {r['rss_before_mb']:.0f} MB "
          f"before the call); growth during the call {grow:.0f} MB = {grow / mat:.2f}x: goal <= 1.5x, ratio "
          f"{grow / mat / GOALS['memory_x']:.2f}")
    s = r["summary"]
    print(f"  clusters {s['clusters']}, images in clusters {s['images_in_clusters']}, embeddings computed "
          f"{r['computed']} (all read from the cache); index {json.dumps(r['index'])}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="Images in the project (default 1M).")
    ap.add_argument("--concepts", type=int, default=200)
    ap.add_argument("--planted", type=float, default=0.05, help="Share of images that are near-copies.")
    ap.add_argument("--threshold", type=float, default=0.95)
    ap.add_argument("--exact-n", type=int, default=100_000, help="Size of the exact-vs-IVF comparison (0: skip).")
    ap.add_argument("--recall-sample", type=int, default=4096, help="Rows whose exact pairs are searched at --n.")
    ap.add_argument("--dir", help="Project folder (built when missing; default: a temporary folder).")
    ap.add_argument("--skip", default="", help="Comma-separated: within,global,exact.")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        if kind == "exact":
            res = child_exact(int(rest[0]), int(rest[1]), [float(v) for v in rest[2].split(",")], float(rest[3]))
        else:
            res = child_dedup(rest[0], kind, float(rest[1]), int(rest[2]), rest[3] == "1")
        print(json.dumps(res, default=float))
        return 0
    skip = set(filter(None, args.skip.split(",")))
    per = max(1, args.n // args.concepts)
    print(f"embedding dedup, {args.n:,} images x {DIM}-d in {args.concepts} concepts (~{per:,} images each), "
          f"{args.planted:.0%} planted near-copies at cosine 0.90-0.995, threshold {args.threshold}; "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    results = {}
    if not {"within", "global"} <= skip:
        tmp = None
        if args.dir:
            root = Path(args.dir)
        else:
            tmp = tempfile.TemporaryDirectory(prefix="bench_embed_dedup_")
            root = Path(tmp.name) / "p"
        if not (root / "cultura.db").exists():
            t = time.perf_counter()
            build(root, args.n, args.concepts, args.planted)
            print(f"built the project and its embedding cache in {time.perf_counter() - t:.0f} s at {root}")
        else:
            reset(root)
            print(f"reusing {root} (dedup outputs cleared)")
        scale = args.n / 1_000_000
        if "within" not in skip:
            r = results["within"] = run_child(["--child", "within-concept", str(root), str(args.threshold), "0", "0"])
            print("\n1. within-concept: dedup_images(methods=['embedding'], scope='within-concept') through the "
                  "cache (a fresh process)")
            show_run(r, GOALS["within_s"], scale)
            search = r["phases"]["search"]
            print(f"  baseline (same exact per-concept work): faiss IndexFlatIP range search per concept "
                  f"{r['baseline_s']:.1f} s wall, {r['baseline_cpu_s']:.1f} s CPU, {r['baseline_pairs']:,} pairs "
                  f"(cultura {r['search_pairs']:,}: {'the same' if r['search_pairs'] == r['baseline_pairs'] else 'DIFFERENT'}); "
                  f"cultura's search {search[0]:.1f} s wall, {search[1]:.1f} s CPU: "
                  f"ratio (cultura / faiss flat, CPU) {search[1] / max(r['baseline_cpu_s'], 1e-9):.2f}")
        if "global" not in skip:
            r = results["global"] = run_child(["--child", "global", str(root), str(args.threshold),
                                               str(args.recall_sample), "1"])
            print("\n2. global: dedup_images(methods=['embedding'], scope='global'), embedding_index = 'auto' "
                  "(a fresh process)")
            show_run(r, GOALS["global_s"], scale)
            rs = r.get("recall_sample")
            if rs:
                print(f"  recall at {r['n']:,} on {rs['rows']:,} random rows (their exact pairs, each row against all "
                      f"{r['n']:,}: {rs['s']:.0f} s): {rs['found']}/{rs['exact_pairs']} = "
                      f"{rs['found'] / max(rs['exact_pairs'], 1):.4f}; pairs not in the exact set: {rs['not_exact']}")
        if tmp is not None:
            tmp.cleanup()
    if "exact" not in skip and args.exact_n:
        r = results["exact"] = run_child(["--child", "exact", str(args.exact_n), str(per), "0.95,0.9",
                                          str(args.planted)])
        print(f"\n3. global at {r['n']:,} images (in memory, same generator): exact blocked search (the baseline) "
              f"vs IVF (nlist {r['nlist']}, nprobe {r['nprobe']}); load average {r['load']:.1f}")
        print(f"  exact {r['exact_s']:.1f} s wall, {r['exact_cpu_s']:.1f} s CPU; IVF {r['ivf_s']:.1f} s wall, "
              f"{r['ivf_cpu_s']:.1f} s CPU: ratio (IVF / exact, CPU) {r['ivf_cpu_s'] / r['exact_cpu_s']:.3f}")
        for th, v in r["recall"].items():
            print(f"  threshold {th}: IVF recall {v['found']}/{v['exact_pairs']} = "
                  f"{v['found'] / max(v['exact_pairs'], 1):.4f}, pairs not in the exact set {v['not_exact']} "
                  f"(precision is exact by construction)")
        ext = r["exact_cpu_s"] * (args.n / r["n"]) ** 2
        print(f"  exact global at {args.n:,} extrapolated (n**2): {ext / 3600:.1f} h of CPU")
        if "global" in results:
            g = results["global"]
            from cultura.curate.vector_search import choose

            print(f"  -> global at {args.n:,}: {choose(g['n']).upper()} {g['cpu_s']:.0f} s CPU end to end vs the exact search's "
                  f"extrapolated {ext:.0f} s CPU: ratio {g['cpu_s'] / ext:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
