"""Benchmark: ``cultura view`` on a 10k-image project (thumbnails included), against plain Pillow thumbnailing.

Builds a project in a temporary folder: N JPEGs at 640x480 (random crops of the real photographs scikit-image
and scikit-learn ship), 50 concepts × 4 countries, a few hundred planted duplicate sets and culture flags, and
an association benchmark built by ``build_benchmark``. Then, timed (wall clock and CPU time of this process):

- the baseline: plain Pillow thumbnailing of the same images, one thread (``Image.open``, ``thumbnail``
  to 192 px, save JPEG) — what a script written by hand would do, thumbnails only, no page;
- ``build_view`` cold (every thumbnail and page made);
- ``build_view`` again with nothing changed (goal: seconds; writes nothing);
- ``build_view`` after adding 20 images (goal: makes 20 thumbnails and rewrites only the pages they touch).

Printed: each time, images/s, and the cold view's time as a ratio of the baseline (it makes every page too,
and thumbnails on a thread pool with JPEG draft decoding, so it is expected at or below 1).

Run::

    .venv/bin/python perf/bench_view.py             # 10,000 images
    .venv/bin/python perf/bench_view.py --quick     # 1,000 images
"""
from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

COUNTRIES = ["US", "JP", "TH", "DE"]


def timed(fn):
    """(result, wall seconds, CPU seconds of this process)."""
    start, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - start, time.process_time() - cpu


def photo_sources():
    from PIL import Image
    from skimage import data as skdata
    from sklearn.datasets import load_sample_images

    names = ["astronaut", "chelsea", "coffee", "rocket", "camera", "coins", "moon", "hubble_deep_field",
             "immunohistochemistry", "retina", "clock", "cell"]  # shipped with scikit-image (no download)
    out = [Image.fromarray(getattr(skdata, name)()).convert("RGB") for name in names]
    out += [Image.fromarray(a).convert("RGB") for a in load_sample_images().images]
    return out


def jpeg(i: int, sources, rng) -> bytes:
    from PIL import Image

    src = sources[i % len(sources)]
    w, h = src.size
    cw, ch = int(w * rng.uniform(0.5, 1.0)), int(h * rng.uniform(0.5, 1.0))
    x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
    im = src.crop((x, y, x + cw, y + ch)).resize((640, 480), Image.Resampling.BILINEAR)
    buf = io.BytesIO()
    im.save(buf, format="JPEG", quality=85)
    return buf.getvalue()


def make_project(root: Path, n: int, seed: int = 0):
    from cultura.benchmark.build import build_benchmark
    from cultura.db import now, transaction
    from cultura.db.blobs import store_blob
    from cultura.project import init_project

    p = init_project(root, countries=COUNTRIES)
    db = p.db
    rng = np.random.default_rng(seed)
    sources = photo_sources()
    n_concepts = 50
    ts = now()
    shas = []
    with transaction(db):
        cids = [db["concepts"].insert({"name": f"concept {k}", "source": "manual", "created_at": ts}).last_pk
                for k in range(n_concepts)]
        qid = {}
        for cid in cids:
            for cc in COUNTRIES:
                lang = p.country(cc).language
                db["terms"].insert({"concept_id": cid, "country": cc, "language": lang, "term": f"term {cid} {cc}",
                                    "source": "manual", "updated_at": ts})
                qid[(cid, cc)] = db["queries"].insert({"concept_id": cid, "country": cc, "language": lang,
                                                       "kind": "native", "text": f"q {cid} {cc}",
                                                       "created_at": ts}).last_pk
        cells = [(cid, cc) for cid in cids for cc in COUNTRIES]
        for i in range(n):
            data = jpeg(i, sources, rng)
            sha, rel = store_blob(p, data, "JPEG")
            db["images"].insert({"sha256": sha, "path": rel, "format": "jpeg", "width": 640, "height": 480,
                                 "bytes": len(data), "created_at": ts}, ignore=True)
            url = f"https://example.test/{i}.jpg"
            cand = db["candidates"].insert({"url": url, "status": "downloaded", "sha256": sha,
                                            "updated_at": ts}).last_pk
            cid, cc = cells[i % len(cells)]
            db["search_results"].insert({"query_id": qid[(cid, cc)], "provider": "bench", "rank": i // len(cells) + 1,
                                         "candidate_id": cand, "url": url, "title": f"photo {i} <b>",
                                         "source_page": f"https://example.test/page/{i}", "found_at": ts})
            shas.append(sha)
        run = db["dedup_runs"].insert({"method": "phash", "scope": "global", "created_at": ts}).last_pk
        for k in range(n // 50):  # planted duplicate sets of 2-4 images, and a flag on each set's second image
            members = [shas[j] for j in rng.choice(n, size=int(rng.integers(2, 5)), replace=False)]
            cl = db["dup_clusters"].insert({"run_id": run, "method": "phash", "scope": "global",
                                            "representative": members[0], "size": len(members),
                                            "created_at": ts}).last_pk
            for j, s in enumerate(members):
                db["dup_members"].insert({"cluster_id": cl, "sha256": s, "distance": float(j)}, ignore=True)
            db["image_flags"].insert({"sha256": members[1], "flag": "culture_conflict", "status": "open",
                                      "details": '{"pairs": [{"concept": "concept 1", "country": "US"}, '
                                                 '{"concept": "concept 1", "country": "JP"}]}',
                                      "created_at": ts}, ignore=True)
    bench = build_benchmark(p, "association", allow_unreviewed=True, per_pair=2, seed=seed)
    return p, shas, cells, qid, sources, rng, bench


def baseline(paths: list[Path], out: Path) -> None:
    """Plain Pillow: open, thumbnail to 192 px, save a JPEG; one image after the other."""
    from PIL import Image

    out.mkdir(parents=True, exist_ok=True)
    for k, src in enumerate(paths):
        with Image.open(src) as im:
            im.thumbnail((192, 192))
            im.convert("RGB").save(out / f"{k}.jpg", "JPEG", quality=82)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1,000 images instead of 10,000")
    ap.add_argument("-n", type=int, default=None, help="number of images")
    args = ap.parse_args(argv)
    n = args.n or (1000 if args.quick else 10_000)
    from cultura.db import now
    from cultura.db.blobs import store_blob
    from cultura.view.site import build_view

    with tempfile.TemporaryDirectory(prefix="bench_view_") as tmp:
        t0 = time.perf_counter()
        p, shas, cells, qid, sources, rng, bench = make_project(Path(tmp) / "proj", n)
        print(f"project: {n} images, {len(cells)} concept × country cells, {bench['n_items']} trials "
              f"(made in {time.perf_counter() - t0:.0f} s)")
        paths = [p.blob_path(r[0]) for r in p.db.execute("SELECT path FROM images")]
        for f in paths:  # warm the OS cache for both sides alike
            f.read_bytes()
        _, b_wall, b_cpu = timed(lambda: baseline(paths, Path(tmp) / "baseline"))
        res, v_wall, v_cpu = timed(lambda: build_view(p))
        print(f"baseline (plain Pillow thumbnails, 1 thread): {b_wall:7.1f} s wall  {b_cpu:7.1f} s CPU  "
              f"{n / b_wall:6.0f} images/s")
        print(f"cultura view, cold:                           {v_wall:7.1f} s wall  {v_cpu:7.1f} s CPU  "
              f"{n / v_wall:6.0f} images/s  ({res['thumbnails_made']} thumbnails, {res['pages_written']} pages)")
        print(f"ratio view / baseline: {v_wall / b_wall:.2f} wall, {v_cpu / b_cpu:.2f} CPU")
        res2, w_wall, w_cpu = timed(lambda: build_view(p))
        print(f"cultura view, rerun (nothing changed):        {w_wall:7.1f} s wall  {w_cpu:7.1f} s CPU  "
              f"({res2['thumbnails_made']} thumbnails made, {res2['pages_written']} pages written)")
        db, ts = p.db, now()
        for k in range(20):
            data = jpeg(n + k, sources, rng)
            sha, rel = store_blob(p, data, "JPEG")
            db["images"].insert({"sha256": sha, "path": rel, "format": "jpeg", "width": 640, "height": 480,
                                 "bytes": len(data), "created_at": ts}, ignore=True)
            url = f"https://example.test/new/{k}.jpg"
            cand = db["candidates"].insert({"url": url, "status": "downloaded", "sha256": sha,
                                            "updated_at": ts}).last_pk
            db["search_results"].insert({"query_id": qid[cells[k]], "provider": "bench", "rank": 10_000 + k,
                                         "candidate_id": cand, "url": url, "found_at": ts})
        res3, a_wall, a_cpu = timed(lambda: build_view(p))
        print(f"cultura view, after adding 20 images:         {a_wall:7.1f} s wall  {a_cpu:7.1f} s CPU  "
              f"({res3['thumbnails_made']} thumbnails made, {res3['pages_written']} pages written of "
              f"{res3['pages_written'] + res3['pages_unchanged']})")
        p.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
