"""Where per-image work runs: in this process (``local``, the default) or on a Ray cluster (``ray``).

Hashing is embarrassingly parallel over images. With ``executor="ray"`` (``dedup.executor = "ray"`` in
cultura.toml, ``cultura images dedup --executor ray``, or ``dedup_images(..., executor="ray")``) the blobs
are hashed by Ray Data ``map_batches`` (through :func:`cultura.executor.ray_map`) with a pool of CPU
actors, each running the very same :func:`cultura.curate.hashing.hash_images`; the results come back
to this process, which writes them into the same ``images`` columns as a local run, so a later run on one
machine sees the work (and the hashes are bit for bit the local ones: tested on a local Ray).
``RAY_ADDRESS`` connects to an existing cluster; without it a local Ray is started. On a cluster the blob
paths must be readable at the same path on every node (a shared filesystem).

>>> EXECUTORS
('local', 'ray')
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import CulturaError
from ..executor import EXECUTORS, Executor, as_list, current_executor, get_executor, ray_init, ray_map
from . import confirm, hashing

#: Images per Ray batch (one actor call).
RAY_BATCH = 256


class _HashActor:
    """A Ray Data actor: hashes one group of paths with :func:`hashing.hash_images` (one thread: Ray gives
    each actor one CPU)."""

    def __call__(self, batch: dict) -> dict:
        idx = [i for group in batch["i"] for i in as_list(group)]
        paths = [str(p) for group in batch["path"] for p in as_list(group)]
        fatal = ""
        try:
            res = hashing.hash_images(paths, workers=1)
        except CulturaError as e:  # a file that cannot be read: the job stops with its sentence (ray_map)
            fatal, idx, paths, res = str(e), [-1], [""], hashing.HashResult.zeros(1)
        errors = [res.errors.get(k, "") for k in range(len(paths))]
        return {"i": np.asarray(idx, dtype=np.int64), "phash": res.phash, "dhash": res.dhash,
                "phash_centre": res.phash_centre, "phash_variants": res.phash_variants, "sizes": res.sizes,
                "fine": res.fine.reshape(len(paths), -1),
                "error": np.array(errors, dtype=object), "fatal": np.array([fatal] * len(paths), dtype=object)}


def hash_paths(paths: Sequence[str | Path], *, executor: "str | Executor | None" = "local",
               actors: int | None = None, batch_size: int = RAY_BATCH) -> hashing.HashResult:
    """:func:`hashing.hash_images` of image files, run by ``executor`` (a name, a
    :class:`cultura.executor.Executor`, or None for the current one); same result either way."""
    ex = get_executor(executor)
    if isinstance(executor, str) and current_executor().kind == ex.kind:
        ex = current_executor()  # the one an entry point set, with the [ray] settings of cultura.toml
    paths = [str(p) for p in paths]
    if not ex.is_ray or not paths:
        return hashing.hash_images(paths)
    if actors:
        ex = replace(ex, actors=actors)
    ex = replace(ex, num_gpus=0.0)  # hashing runs on CPUs
    n = len(paths)
    groups = [{"i": list(range(s, min(s + batch_size, n))), "path": paths[s:s + batch_size]}
              for s in range(0, n, batch_size)]
    res = hashing.HashResult.zeros(n)
    ph, dh, pc, pv, sizes, fine = res.phash, res.dhash, res.phash_centre, res.phash_variants, res.sizes, res.fine
    errors = res.errors
    for batch in ray_map(groups, _HashActor, executor=ex):
        i = np.asarray(batch["i"], dtype=np.int64)
        ph[i] = np.asarray(batch["phash"]).astype(np.uint64)
        dh[i] = np.asarray(batch["dhash"]).astype(np.uint64)
        pc[i] = np.asarray(batch["phash_centre"]).astype(np.uint64)
        pv[i] = np.asarray(list(batch["phash_variants"])).astype(np.uint64).reshape(len(i), -1)
        sizes[i] = np.asarray(list(batch["sizes"])).astype(np.int64).reshape(len(i), 2)
        fine[i] = np.asarray(list(batch["fine"])).astype(np.uint64).reshape(len(i), len(confirm.FINE_VIEWS), 2)
        for k, err in zip(i.tolist(), batch["error"].tolist()):
            if err:
                errors[k] = str(err)
    res.errors = dict(sorted(errors.items()))
    return res


__all__ = ["EXECUTORS", "hash_paths", "ray_init"]
