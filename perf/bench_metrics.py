"""Metric functions vs naive Python loops: speed ratios (and a check that both give the same number).

Run:  .venv/bin/python perf/bench_metrics.py [--size 5000] [--repeat 3]
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

from cultura.evaluate import metrics as M


def _time(fn, repeat: int) -> tuple[float, object]:
    best, out = math.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def cbs_loop(a, b) -> float:
    return sum(1 for x in a for y in b if y > x) / (len(a) * len(b))


def win_rates_loop(s) -> list[float]:
    n, c = len(s), len(s[0])
    m = [0.0] * c
    for row in s:
        best = max(row)
        tied = [j for j in range(c) if row[j] == best]
        for j in tied:
            m[j] += 1 / len(tied)
    return [v / n for v in m]


def lbkl_loop(ranked, labels, k, eps=1e-9) -> float:
    n = len(labels)
    total = 0.0
    for seq in ranked:
        q = dict.fromkeys(labels, 0.0)
        for lab in seq[:k]:
            q[lab] += 1 / k
        total += sum((1 / n) * math.log((1 / n) / (q[lab] + eps)) for lab in labels)
    return total / len(ranked)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=5000, help="|A| = |B| for CBS")
    ap.add_argument("--trials", type=int, default=100_000, help="trials for win_rates")
    ap.add_argument("--queries", type=int, default=3600, help="queries for LBKL (k = 10, 36 languages)")
    ap.add_argument("--repeat", type=int, default=3, help="best of N timings")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []

    a = np.round(-rng.exponential(5, args.size), 2)  # rounded: plenty of ties
    b = np.round(-rng.exponential(5, args.size), 2)
    t_fast, v_fast = _time(lambda: M.cultural_bias_score(a, b), args.repeat)
    al, bl = a.tolist(), b.tolist()
    t_slow, v_slow = _time(lambda: cbs_loop(al, bl), 1)
    rows.append((f"cultural_bias_score |A|=|B|={args.size}", t_fast, t_slow, abs(v_fast - v_slow)))

    s = np.round(rng.random((args.trials, 3)), 3)
    t_fast, v_fast = _time(lambda: M.win_rates(s), args.repeat)
    sl = s.tolist()
    t_slow, v_slow = _time(lambda: win_rates_loop(sl), 1)
    rows.append((f"win_rates {args.trials}x3", t_fast, t_slow, float(np.max(np.abs(v_fast - np.array(v_slow))))))

    langs = [f"l{i}" for i in range(36)]
    ranked = [list(rng.choice(langs, 10)) for _ in range(args.queries)]
    t_fast, v_fast = _time(lambda: M.lbkl(ranked, langs, k=10), args.repeat)
    t_slow, v_slow = _time(lambda: lbkl_loop(ranked, langs, 10), 1)
    rows.append((f"lbkl {args.queries} queries, k=10, N=36", t_fast, t_slow, abs(v_fast - v_slow)))

    print(f"{'benchmark':42s} {'metric s':>10s} {'loop s':>10s} {'speed-up':>9s} {'|diff|':>9s}")
    for name, tf, ts, diff in rows:
        print(f"{name:42s} {tf:10.4f} {ts:10.4f} {ts / tf:8.1f}x {diff:9.2e}")


if __name__ == "__main__":
    main()
