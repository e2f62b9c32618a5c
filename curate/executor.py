"""Where per-image work runs: in this process (``local``, the default) or on a Ray cluster (``ray``).

Hashing is embarrassingly parallel over images. With ``executor="ray"`` (``dedup.executor = "ray"`` in
cultura.toml, or ``dedup_images(..., executor="ray")``) the blobs are hashed by Ray Data ``map_batches``
with a pool of CPU actors, each running the very same :func:`cultura.curate.hashing.hash_images`; the
results come back to this process, which writes them into the same ``images`` columns as a local run, so a
later run on one machine sees the work (and the hashes are bit for bit the local ones: tested on a local
Ray). ``RAY_ADDRESS`` (or ``address=``) connects to an existing cluster; without it a local Ray is started.
On a cluster the blob paths must be readable at the same path on every node (a shared filesystem).

>>> EXECUTORS
('local', 'ray')
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import ConfigError
from . import hashing

EXECUTORS = ("local", "ray")
#: Images per Ray batch (one actor call).
RAY_BATCH = 256


class _HashActor:
    """A Ray Data actor: hashes one batch of paths with :func:`hashing.hash_images` (one thread: Ray gives
    each actor one CPU)."""

    def __call__(self, batch: dict) -> dict:
        paths = [str(p) for p in batch["path"]]
        res = hashing.hash_images(paths, workers=1)
        errors = [res.errors.get(k, "") for k in range(len(paths))]
        return {"i": np.asarray(batch["i"], dtype=np.int64), "phash": res.phash, "dhash": res.dhash,
                "phash_centre": res.phash_centre, "error": np.array(errors, dtype=object)}


def ray_init(address: str | None = None, **kwargs):
    """Connect to ``address`` (default ``RAY_ADDRESS``; none: start a local Ray) unless already connected."""
    try:
        import ray  # deferred: ray is an optional dependency (pip install 'cultura[ray]')
    except ImportError:
        raise ConfigError("executor 'ray' needs Ray: pip install 'cultura[ray]' (ray[data]).",
                          param="executor") from None
    if not ray.is_initialized():
        ray.init(address=address or os.environ.get("RAY_ADDRESS") or None, log_to_driver=False, **kwargs)
    return ray


def hash_paths(paths: Sequence[str | Path], *, executor: str = "local", actors: int | None = None,
               batch_size: int = RAY_BATCH) -> hashing.HashResult:
    """:func:`hashing.hash_images` of image files, run by ``executor``; same result either way."""
    if executor not in EXECUTORS:
        raise ConfigError(f"Unknown executor {executor!r}; use one of {', '.join(EXECUTORS)}.", param="executor")
    paths = [str(p) for p in paths]
    if executor == "local" or not paths:
        return hashing.hash_images(paths)
    ray = ray_init()
    n = len(paths)
    actors = actors or max(1, int(ray.available_resources().get("CPU", 1)))
    ds = ray.data.from_items([{"i": i, "path": p} for i, p in enumerate(paths)])
    out = ds.map_batches(_HashActor, batch_size=batch_size, batch_format="numpy", num_cpus=1,
                         concurrency=min(actors, max(1, -(-n // batch_size))))
    ph = np.zeros(n, dtype=np.uint64)
    dh = np.zeros(n, dtype=np.uint64)
    pc = np.zeros(n, dtype=np.uint64)
    errors: dict[int, str] = {}
    for batch in out.iter_batches(batch_size=None, batch_format="numpy"):
        i = np.asarray(batch["i"], dtype=np.int64)
        ph[i] = np.asarray(batch["phash"]).astype(np.uint64)
        dh[i] = np.asarray(batch["dhash"]).astype(np.uint64)
        pc[i] = np.asarray(batch["phash_centre"]).astype(np.uint64)
        for k, err in zip(i.tolist(), batch["error"].tolist()):
            if err:
                errors[k] = str(err)
    return hashing.HashResult(ph, dh, dict(sorted(errors.items())), pc)


__all__ = ["EXECUTORS", "hash_paths", "ray_init"]
