"""Embedding throughput through the `Embedder` versus the bare model, and the cost of a cached rerun.

    python perf/bench_embed.py                       # openclip:cultura-tiny, 256 images, CPU
    python perf/bench_embed.py --model openclip:ViT-B-32 --n 128 --batch-size 32
    python perf/bench_embed.py --json

Measures, on the same PIL images and the same batches:

- ``bare``: the open_clip transform + ``torch.stack`` + ``model.encode_image`` under ``inference_mode`` (what a
  hand-written loop does), and ``forward_only`` (encode_image on already preprocessed tensors);
- ``embedder``: ``Embedder.embed_images`` (batching, the same preprocessing, float32 NumPy, L2
  normalisation, call counting);
- ``preprocess_only``: the transform + ``torch.stack`` alone, reported separately;
- ``share`` = (preprocess alone + forward alone) / embedder time (target ≥ 0.85): the Embedder against its two
  necessary parts timed apart; ``share_of_forward`` = forward alone / embedder time (how much of the model's
  raw speed the end-to-end path keeps; on the tiny model preprocessing dominates); the hand loop runs the
  same code as the Embedder, so its ratio is printed but is not a baseline; texts: bare / embedder;
- ``cached``: ``embed_images_cached`` into a temporary project: the first run embeds everything, a rerun must
  make ZERO model calls; its wall time is reported.

Each timing is the best of ``--repeat`` rounds (bare and embedder interleaved) after a warm-up.
Random-init models only: no weights are downloaded.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _images(n: int, size: int, seed: int = 0):
    from PIL import Image

    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)) for _ in range(n)]


def _best(fns: dict, repeat: int) -> dict:
    """Best time of each function over ``repeat`` rounds, the functions interleaved within a round so that
    a busy neighbour slows all of them alike."""
    times: dict = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    return {k: min(v) for k, v in times.items()}


def run(model: str = "openclip:cultura-tiny", n: int = 256, batch_size: int = 32, image_size: int = 256,
        repeat: int = 5, threads: int | None = None) -> dict:
    import torch

    from cultura.models.embedders import embed_images_cached, get_embedder
    from cultura.project import init_project

    if threads:
        torch.set_num_threads(threads)
    emb = get_embedder(model, device="cpu", batch_size=batch_size, progress=False)
    ims = _images(n, image_size)
    texts = [f"a photo of item number {i} from a market" for i in range(n)]
    batches = [ims[i:i + batch_size] for i in range(0, n, batch_size)]
    tbatches = [texts[i:i + batch_size] for i in range(0, n, batch_size)]
    m, pre, tok = emb.model, emb.preprocess, emb.tokenizer

    def bare_images():
        with torch.inference_mode():
            for b in batches:
                m.encode_image(torch.stack([pre(im.convert("RGB")) for im in b]))

    tensors = [torch.stack([pre(im.convert("RGB")) for im in b]) for b in batches]

    def forward_only():
        with torch.inference_mode():
            for x in tensors:
                m.encode_image(x)

    def preprocess_only():
        for b in batches:
            torch.stack([pre(im.convert("RGB")) for im in b])

    def bare_texts():
        with torch.inference_mode():
            for b in tbatches:
                m.encode_text(tok(b))

    # warm-up
    emb.embed_images(batches[0])
    emb.embed_texts(tbatches[0])
    bare_images()
    res: dict = {"model": emb.identity, "n": n, "batch_size": batch_size, "image_size": image_size,
                 "torch_threads": torch.get_num_threads(), "repeat": repeat}
    best = _best({"bare": bare_images, "emb": lambda: emb.embed_images(ims), "fwd": forward_only,
                  "pre": preprocess_only, "tbare": bare_texts, "temb": lambda: emb.embed_texts(texts)}, repeat)
    t_bare, t_emb, t_fwd, t_pre, tt_bare, tt_emb = (best[k] for k in ("bare", "emb", "fwd", "pre", "tbare", "temb"))
    res["images"] = {"bare_s": t_bare, "embedder_s": t_emb, "forward_only_s": t_fwd, "preprocess_only_s": t_pre,
                     "bare_per_s": n / t_bare, "embedder_per_s": n / t_emb, "forward_only_per_s": n / t_fwd,
                     "preprocess_only_per_s": n / t_pre,
                     # like for like: the Embedder against its two necessary parts timed alone
                     "share": (t_pre + t_fwd) / t_emb, "share_of_forward": t_fwd / t_emb,
                     "share_vs_hand_loop": t_bare / t_emb}
    res["texts"] = {"bare_s": tt_bare, "embedder_s": tt_emb, "bare_per_s": n / tt_bare,
                    "embedder_per_s": n / tt_emb, "share": tt_bare / tt_emb}

    # cached rerun
    with tempfile.TemporaryDirectory() as d:
        project = init_project(os.path.join(d, "bench"), countries=["US"])
        import hashlib
        import io

        shas, rows = [], []
        for im in ims:
            buf = io.BytesIO()
            im.save(buf, format="PNG")
            data = buf.getvalue()
            sha = hashlib.sha256(data).hexdigest()
            rel = f"blobs/{sha[:2]}/{sha}.png"
            os.makedirs(os.path.dirname(project.root / rel), exist_ok=True)
            (project.root / rel).write_bytes(data)
            shas.append(sha)
            rows.append({"sha256": sha, "path": rel, "format": "png", "width": image_size,
                         "height": image_size, "bytes": len(data), "created_at": "2024-01-01T00:00:00"})
        project.db["images"].insert_all(rows)
        emb.reset_stats()
        t = time.perf_counter()
        first = embed_images_cached(project, emb, shas)
        t_first = time.perf_counter() - t
        calls_first = dict(emb.stats)
        emb.reset_stats()
        t = time.perf_counter()
        again = embed_images_cached(project, emb, shas)
        t_again = time.perf_counter() - t
        res["cached"] = {"first_s": t_first, "first_model_calls": calls_first["image_calls"],
                         "first_images": calls_first["images"], "rerun_s": t_again,
                         "rerun_model_calls": emb.stats["image_calls"], "rerun_images": emb.stats["images"],
                         "rerun_identical": bool(np.array_equal(first, again))}
        project.close()
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="openclip:cultura-tiny",
                    help="an openclip spec without weights, e.g. openclip:cultura-tiny or openclip:ViT-B-32")
    ap.add_argument("--n", type=int, default=256, help="number of images (and texts)")
    ap.add_argument("--batch-size", type=int, default=32, help="inputs per model call")
    ap.add_argument("--image-size", type=int, default=256, help="side of the synthetic input images")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per measurement (best is kept)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    res = run(args.model, args.n, args.batch_size, args.image_size, args.repeat, args.threads)
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        i, t, c = res["images"], res["texts"], res["cached"]
        print(f"model {res['model']}  n={res['n']}  batch={res['batch_size']}  threads={res['torch_threads']}")
        print(f"images: model forward alone on preprocessed tensors {i['forward_only_per_s']:.1f}/s; "
              f"preprocessing alone (transform + stack) {i['preprocess_only_per_s']:.1f}/s")
        print(f"        embedder (preprocess + forward + normalise) {i['embedder_per_s']:.1f}/s = "
              f"{i['share']:.1%} of preprocessing + forward timed apart (target >= 85%); "
              f"{i['share_of_forward']:.1%} of the forward alone; hand loop {i['bare_per_s']:.1f}/s "
              f"({i['share_vs_hand_loop']:.1%}: the same code, not a baseline)")
        print(f"texts:  bare {t['bare_per_s']:.1f}/s  embedder {t['embedder_per_s']:.1f}/s  share {t['share']:.1%}")
        print(f"cache:  first {c['first_s']:.2f}s ({c['first_model_calls']} calls, {c['first_images']} images)  "
              f"rerun {c['rerun_s'] * 1000:.1f} ms ({c['rerun_model_calls']} calls), identical={c['rerun_identical']}")
    ok = res["cached"]["rerun_model_calls"] == 0 and res["images"]["share"] >= 0.85
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
