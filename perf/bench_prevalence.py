"""The prevalence suite at Crossmodal-3600 scale through the real path: SQLite embedding cache → top-k → metrics.

    nice -n 5 python perf/bench_prevalence.py                 # 3,600 images × 260,000 captions, dim 512
    python perf/bench_prevalence.py --images 300 --captions 20000 --json

Builds a project (in ``--workdir``, default a temporary folder) with 3,600 images, ~260k captions in 36
languages (≈72 per image, as in XM3600) in the ``captions`` table, and every image's and caption's embedding
in the ``embeddings`` cache table under the identity of the ``fake:dim=512`` embedder, written the way the
cache writes them (float32 little-endian blobs keyed by image sha256 / sha256 of the text). The vectors are
planted (a caption = its image's vector + noise + a language direction), so the metrics are not trivial.
Then, each in a fresh process so that its peak RSS is its own:

- ``first run``: ``cultura --project DIR evaluate run --model fake:dim=512 --suite prevalence`` called in
  process through the click command (the same code as the console script): caption pool → cache reads →
  top-k → metrics with bootstrap CIs → result rows stored. Nothing is embedded (every vector is cached);
  with ``--cold`` the captions' vectors are not cached and the first run embeds them (fake embedder);
- ``rerun``: the same command again;
- ``ideal`` (the baseline): only the unavoidable work — the caption and image vectors read from SQLite in
  table order (a sequential scan, no lookup by key) into one preallocated matrix, then the suite's top-k on it
  (no caption pool, no keys, no metrics, no result rows); its memory is the matrix itself;
- ``previous`` (``--previous``, default on): the path before streaming, for reference — caption pool, the
  whole caption matrix read through ``embed_texts``, the partition-based 256 × 16384 block top-k, metrics
  (no result rows stored).

Printed per process: wall time, CPU time (user + system), peak RSS minus the process's RSS just before the
step (``VmHWM`` reset through ``/proc/self/clear_refs``; the imports are not counted), that peak divided by
the caption matrix (captions × dim × 4 B, the matrix any in-memory method holds) and by the goal (1.5 × that
matrix), and the load average.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MODEL = "fake:dim={dim}"
# Crossmodal-3600's 36 languages
XM_LANGS = ["ar", "bn", "cs", "da", "de", "el", "en", "es", "fa", "fi", "fil", "fr", "he", "hi", "hr", "hu", "id", "it", "ja", "ko", "mi", "nl", "no", "pl", "pt", "quz", "ro", "ru", "sv", "sw", "te", "th", "tr", "uk", "vi", "zh"]
WORDS = ["a", "the", "of", "in", "on", "with", "and", "red", "blue", "small", "large", "old", "new", "street", "market", "temple", "dish", "bowl", "rice", "tea", "woman", "man", "child", "dog", "cat", "house", "river", "mountain", "bicycle", "car", "bus", "tree", "flower", "table", "chair", "window", "road", "shop", "sign", "food", "fruit", "fish", "boat", "beach", "sky", "cloud", "light", "night", "festival", "dress", "hat"]


# -- measurement helpers (used in the child processes) --------------------------------------------

def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux ≥ 4.0); False when the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class Meter:
    """Wall, CPU and peak RSS above the RSS at entry."""

    def __enter__(self):
        self.reset = _reset_peak()
        self.base_kb = _status_kb("VmRSS")
        self.base_hwm_kb = _status_kb("VmHWM")
        r = resource.getrusage(resource.RUSAGE_SELF)
        self.cpu0, self.t0 = r.ru_utime + r.ru_stime, time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.t0
        r = resource.getrusage(resource.RUSAGE_SELF)
        self.cpu = r.ru_utime + r.ru_stime - self.cpu0
        self.peak_kb = _status_kb("VmHWM")
        return False

    def report(self) -> dict:
        return {"wall_s": round(self.wall, 2), "cpu_s": round(self.cpu, 2),
                "baseline_rss_mb": round(self.base_kb * 1024 / 1e6, 1),
                "peak_rss_extra_mb": round((self.peak_kb - self.base_kb) * 1024 / 1e6, 1),
                "peak_reset": self.reset, "loadavg": [round(x, 2) for x in os.getloadavg()]}


# -- building the project --------------------------------------------------------------------------

def _unit(x: np.ndarray) -> np.ndarray:
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def build(root: Path, a: dict) -> dict:
    """A project with images, captions and their cached embeddings (see the module docstring)."""
    from cultura.db import now, transaction
    from cultura.models.embedders import get_embedder
    from cultura.models.embedders.cache import text_key
    from cultura.project import init_project

    t0 = time.perf_counter()
    project = init_project(root, countries=["US", "JP"])
    db = project.db
    model = get_embedder(MODEL.format(dim=a["dim"])).identity
    rng = np.random.default_rng(0)
    n_img, n_cap, dim = a["images"], a["captions"], a["dim"]
    langs = XM_LANGS[:a["languages"]]
    bias = _unit(rng.standard_normal((1, dim), dtype=np.float32))[0]    # shared by every image …
    img_vecs = _unit(rng.standard_normal((n_img, dim), dtype=np.float32) / np.sqrt(dim) + 0.3 * bias)
    lang_pull = np.linspace(0.08, 0.0, len(langs), dtype=np.float32)   # … and by captions of earlier languages
    # sorted, so generation order is the pool's order (image, language, idx): the cache rows lie in the order a
    # first run of the suite would have written them
    shas = sorted(hashlib.sha256(f"image {i}".encode()).hexdigest() for i in range(n_img))
    ts = now()
    # captions per (image, language): n_cap spread evenly, the remainder to the first pairs
    pairs = n_img * len(langs)
    per_pair = np.full(pairs, n_cap // pairs)
    per_pair[:n_cap % pairs] += 1
    owner = np.repeat(np.arange(pairs) // len(langs), per_pair)
    lang_of = np.repeat(np.arange(pairs) % len(langs), per_pair)
    idx_of = np.concatenate([np.arange(c) for c in per_pair]) if n_cap else np.zeros(0, int)
    with transaction(db):
        db.conn.executemany(
            "INSERT INTO images (sha256, path, format, width, height, bytes, status, created_at) "
            "VALUES (?, ?, 'jpeg', 640, 480, 50000, 'ok', ?)",
            [(s, f"blobs/{s[:2]}/{s}.jpg", ts) for s in shas])
        db.conn.executemany(
            "INSERT INTO embeddings (model, kind, key, dim, vector, created_at) VALUES (?, 'image', ?, ?, ?, ?)",
            [(model, s, dim, v.astype("<f4").tobytes(), ts) for s, v in zip(shas, img_vecs)])
    step = 20_000
    for s in range(0, n_cap, step):
        e = min(n_cap, s + step)
        words = rng.integers(0, len(WORDS), (e - s, 9))
        texts = [f"{' '.join(WORDS[w] for w in ws)} #{j}" for j, ws in zip(range(s, e), words)]
        vec = (0.15 * img_vecs[owner[s:e]] + rng.standard_normal((e - s, dim), dtype=np.float32) / np.sqrt(dim)
               + lang_pull[lang_of[s:e], None] * bias)
        vec = _unit(vec.astype(np.float32))
        with transaction(db):
            db.conn.executemany(
                "INSERT INTO captions (image_sha256, language, idx, text, source, created_at) "
                "VALUES (?, ?, ?, ?, 'import:bench', ?)",
                [(shas[o], langs[li], int(ix), t, ts)
                 for o, li, ix, t in zip(owner[s:e], lang_of[s:e], idx_of[s:e], texts)])
            if not a["cold"]:
                db.conn.executemany(
                    "INSERT INTO embeddings (model, kind, key, dim, vector, created_at) VALUES (?, 'text', ?, ?, ?, ?)",
                    [(model, text_key(t), dim, v.astype("<f4").tobytes(), ts) for t, v in zip(texts, vec)])
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = sum(f.stat().st_size for f in root.glob("cultura.db*"))
    return {"build_s": round(time.perf_counter() - t0, 1), "db_mb": round(size / 1e6, 1), "model": model}


# -- child processes -------------------------------------------------------------------------------

def child_cli(root: str, a: dict) -> dict:
    """``cultura evaluate run`` in this process, measured from just before the command."""
    from cultura.cli import cli

    args = ["--project", root, "evaluate", "run", "--model", MODEL.format(dim=a["dim"]), "--suite", "prevalence",
            "--option", f"n_resamples={a['n_resamples']}", "--json"]
    if a["image_chunk"]:
        args += ["--option", f"image_chunk={a['image_chunk']}"]
    if a["text_chunk"]:
        args += ["--option", f"text_chunk={a['text_chunk']}"]
    with open(os.devnull, "w") as devnull:
        saved, sys.stdout = sys.stdout, devnull
        try:
            with Meter() as m:
                cli.main(args=args, prog_name="cultura", standalone_mode=False)
        finally:
            sys.stdout = saved
    con = sqlite3.connect(Path(root) / "cultura.db")
    run_id, status, n = con.execute("SELECT id, status, n_results FROM eval_runs ORDER BY id DESC LIMIT 1").fetchone()
    vals = dict(con.execute("SELECT metric, value FROM eval_results WHERE run_id = ? AND metric IN "
                            "('acc@10', 'ndcg@10', 'lbkl@10', 'dlbkl@10')", [run_id]).fetchall())
    digest = hashlib.sha256(json.dumps(con.execute(
        "SELECT metric, value, ci_low, ci_high, n, \"group\" FROM eval_results WHERE run_id = ? ORDER BY id",
        [run_id]).fetchall()).encode()).hexdigest()
    return {**m.report(), "status": status, "n_results": n, "metrics": vals, "results_sha256": digest[:16]}


def child_ideal(root: str, a: dict) -> dict:
    """The unavoidable work: vectors read from SQLite in table order into one matrix, then the top-k."""
    from cultura.evaluate.suites.retrieval.prevalence import (
        IMAGE_CHUNK,
        TEXT_CHUNK,
        topk_chunked,
    )
    from cultura.models.embedders import get_embedder

    model = get_embedder(MODEL.format(dim=a["dim"])).identity
    con = sqlite3.connect(Path(root) / "cultura.db")
    out = {}
    with Meter() as m:
        with Meter() as r:
            mats = {}
            for kind in ("image", "text"):
                n = con.execute("SELECT count(*) FROM embeddings WHERE model = ? AND kind = ?",
                                [model, kind]).fetchone()[0]
                mat = np.empty((n, a["dim"]), dtype=np.float32)
                for i, (blob,) in enumerate(con.execute("SELECT vector FROM embeddings WHERE model = ? AND kind = ?",
                                                        [model, kind])):
                    mat[i] = np.frombuffer(blob, dtype="<f4")
                mats[kind] = mat
        with Meter() as t:
            topk_chunked(mats["image"], mats["text"], 99, query_chunk=a["image_chunk"] or IMAGE_CHUNK,
                         doc_chunk=a["text_chunk"] or TEXT_CHUNK)
    out.update(m.report())
    out["read"] = {k: r.report()[k] for k in ("wall_s", "cpu_s")}
    out["topk"] = {k: t.report()[k] for k in ("wall_s", "cpu_s")}
    return out


def _previous_topk(queries, docs, k, *, query_chunk=256, doc_chunk=16384):
    """The block top-k before the threshold filter (np.partition of every block), kept as the reference."""
    n_q, n_d = queries.shape[0], docs.shape[0]
    k = min(int(k), n_d)
    out_idx = np.empty((n_q, k), dtype=np.int64)
    out_val = np.empty((n_q, k), dtype=np.float32)
    for qs in range(0, n_q, query_chunk):
        q = queries[qs:qs + query_chunk]
        best_neg = np.zeros((q.shape[0], 0), dtype=np.float32)
        best_idx = np.zeros((q.shape[0], 0), dtype=np.int64)
        for ds in range(0, n_d, doc_chunk):
            neg = q @ docs[ds:ds + doc_chunk].T
            np.negative(neg, out=neg)
            kk = min(k, neg.shape[1])
            kth = np.partition(neg, kk - 1, axis=1)[:, kk - 1:kk]
            rows, cols = np.nonzero(neg <= kth)
            if rows.shape[0] == neg.shape[0] * kk:
                part = cols.reshape(neg.shape[0], kk).astype(np.int64)
            else:
                part = np.argpartition(neg, kk - 1, axis=1)[:, :kk]
            vals = np.take_along_axis(neg, part, axis=1)
            del neg
            cand_neg = np.concatenate([best_neg, vals], axis=1)
            cand_idx = np.concatenate([best_idx, part + ds], axis=1)
            if cand_neg.shape[1] > k:
                keep = np.argpartition(cand_neg, k - 1, axis=1)[:, :k]
                cand_neg = np.take_along_axis(cand_neg, keep, axis=1)
                cand_idx = np.take_along_axis(cand_idx, keep, axis=1)
            best_neg, best_idx = cand_neg, cand_idx
        order = np.lexsort((best_idx, best_neg), axis=1)
        out_val[qs:qs + query_chunk] = -np.take_along_axis(best_neg, order, axis=1)
        out_idx[qs:qs + query_chunk] = np.take_along_axis(best_idx, order, axis=1)
    return out_idx, out_val


def child_previous(root: str, a: dict) -> dict:
    """The path before streaming: whole caption matrix from the cache, partition top-k, then the metrics."""
    from cultura.evaluate.common import embed_images, embed_texts, language_tiers
    from cultura.evaluate.data import caption_pool
    from cultura.evaluate.suites.retrieval.prevalence import prevalence_rows
    from cultura.models.embedders import get_embedder
    from cultura.project import Project

    project = Project(root)
    emb = get_embedder(MODEL.format(dim=a["dim"]))
    with Meter() as m:
        pool = caption_pool(project)
        img = embed_images(project, emb, pool.image_sha256)
        txt = embed_texts(project, emb, pool.texts)
        idx, val = _previous_topk(img, txt, 99, query_chunk=256, doc_chunk=16384)  # the previous defaults
        del txt
        rows = prevalence_rows(pool, idx, val, ks=[5, 10, 25, 50, 99],
                               tiers=language_tiers(project, set(pool.languages)), n_resamples=a["n_resamples"])
    return {**m.report(), "metrics": {r["metric"]: r["value"] for r in rows
                                      if r["metric"] in ("acc@10", "ndcg@10", "lbkl@10", "dlbkl@10")}}


CHILDREN = {"cli": child_cli, "ideal": child_ideal, "previous": child_previous}


def _spawn(mode: str, root: Path, a: dict) -> dict:
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, __file__, "--_child", mode, "--_root", str(root), "--_args", json.dumps(a)],
                          env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"child {mode} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=3600)
    ap.add_argument("--captions", type=int, default=260_000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--languages", type=int, default=36)
    ap.add_argument("--n-resamples", type=int, default=1000)
    ap.add_argument("--image-chunk", type=int, default=0, help="suite option image_chunk (0: the suite's default)")
    ap.add_argument("--text-chunk", type=int, default=0, help="suite option text_chunk (0: the suite's default)")
    ap.add_argument("--cold", action="store_true",
                    help="leave the captions' vectors out of the cache: the first run embeds them with the fake "
                         "embedder (random vectors, hash-seeded) and writes them block by block")
    ap.add_argument("--previous", action=argparse.BooleanOptionalAction, default=True,
                    help="also measure the previous in-memory path (the whole caption matrix)")
    ap.add_argument("--workdir", default=None, help="project folder to build in (default: a temporary folder, "
                                                     "removed at the end); reused when it holds a built project")
    ap.add_argument("--json", action="store_true", help="print JSON only")
    ap.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--_root", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--_args", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a._child:
        print(json.dumps(CHILDREN[a._child](a._root, json.loads(a._args))))
        return None
    args = {k: v for k, v in vars(a).items() if not k.startswith("_")}
    tmp = None
    if a.workdir:
        root = Path(a.workdir)
    else:
        tmp = tempfile.mkdtemp(prefix="bench_prevalence_")
        root = Path(tmp) / "project"
    try:
        if (root / "cultura.db").exists():
            built = {"reused": str(root)}
        else:
            built = build(root, args)
        matrix_mb = a.captions * a.dim * 4 / 1e6
        result = {"params": args, "build": built, "caption_matrix_mb": round(matrix_mb, 1),
                  "goal_mb": round(1.5 * matrix_mb, 1)}
        if not a.cold:
            result["ideal"] = _spawn("ideal", root, args)
        result["first_run"] = _spawn("cli", root, args)
        result["rerun"] = _spawn("cli", root, args)
        if a.cold:
            result["ideal"] = _spawn("ideal", root, args)
        if a.previous:
            result["previous"] = _spawn("previous", root, args)
        for name in ("ideal", "first_run", "rerun", "previous"):
            if name in result:
                r = result[name]
                r["peak_over_matrix"] = round(r["peak_rss_extra_mb"] / matrix_mb, 2)
                r["peak_over_goal"] = round(r["peak_rss_extra_mb"] / (1.5 * matrix_mb), 2)
        for name in ("first_run", "rerun", "previous"):
            if name in result:
                result[name]["wall_over_ideal"] = round(result[name]["wall_s"] / result["ideal"]["wall_s"], 2)
        if "previous" in result:
            result["same_metrics_as_previous"] = all(
                abs(result["first_run"]["metrics"][k] - v) < 1e-12 for k, v in result["previous"]["metrics"].items())
        result["rerun_same_results"] = result["first_run"]["results_sha256"] == result["rerun"]["results_sha256"]
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(result, indent=1))
    if not a.json:
        lines = [(f"\nprevalence at {a.images} images × {a.captions} captions (dim {a.dim}, {a.languages} languages); "
                  f"caption matrix {matrix_mb:.0f} MB, goal peak ≤ {1.5 * matrix_mb:.0f} MB (1.5×)")]
        for name, what in (("ideal", "ideal: SQLite → one matrix → top-k"),
                           ("first_run", "first run: cultura evaluate run"), ("rerun", "rerun: the same command"),
                           ("previous", "previous path: whole matrix + partition top-k")):
            if name in result:
                r = result[name]
                lines.append(f"  {what:<48} wall {r['wall_s']:7.1f} s  CPU {r['cpu_s']:7.1f} s  peak +"
                             f"{r['peak_rss_extra_mb']:7.0f} MB = {r['peak_over_matrix']:.2f}× matrix "
                             f"({r['peak_over_goal']:.2f}× goal)" + (f"  {r['wall_over_ideal']:.2f}× ideal wall"
                                                                     if "wall_over_ideal" in r else "")
                             + f"  load {r['loadavg'][0]}")
        print("\n".join(lines), file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
