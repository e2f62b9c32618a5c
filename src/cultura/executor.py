"""Where per-item model work runs: in this process (``local``, the default) or on a Ray cluster (``ray``).

Hashing, embedding and LM scoring are embarrassingly parallel over images and texts. With the ``ray`` executor
the items a stage must compute (only the cache misses) go to Ray Data ``map_batches`` over a pool of actors;
each actor builds its model once (from the model's spec, on its own CPU or GPU) and computes one *group* of
items per call; the results come back to this process, which writes them into the same cache tables as a
local run. A later run on one machine therefore finds the work done, and the numbers are bit for bit the
local ones (each group is exactly the chunk a local run computes in one go, so every model call sees the
same batch).

Choosing it: ``--executor ray`` on a command, or ``executor = "ray"`` in the command's section of
cultura.toml (``dedup``, ``tag``, ``evaluate``); ``[ray]`` sets the actors (``actors``, ``num_cpus``,
``num_gpus`` per actor: GPU actors when ``num_gpus > 0``; ``min_items``: a job with fewer cache misses runs in
this process, where it is cheaper than starting actors). ``RAY_ADDRESS`` connects to an existing cluster
(without it a local Ray is started on this machine). On a cluster every node needs cultura and the models'
weights, and the project's blobs at the same path (a shared filesystem).

Library code reads the executor of the current context (:func:`current_executor`); an entry point such as
``dedup_images(..., executor="ray")`` or ``run_evaluation(..., executor="ray")`` sets it for its duration with
:func:`use_executor`.

>>> EXECUTORS
('local', 'ray')
>>> current_executor().kind
'local'
>>> with use_executor("ray"):
...     current_executor().kind
'ray'
"""
from __future__ import annotations

import contextlib
import contextvars
import os
from dataclasses import dataclass, replace
from typing import Any, Iterator, Sequence

import numpy as np

from .errors import ConfigError, CulturaError, unknown

EXECUTORS = ("local", "ray")
#: The message when the ``ray`` executor is asked for and Ray is not installed.
#: Jobs with fewer items than this (cache misses) run in this process even under the ray executor.
DEFAULT_MIN_ITEMS = 256
RAY_MISSING = "executor 'ray' needs Ray: pip install 'cultura[ray]' (ray[data]), or use executor 'local'."


@dataclass(frozen=True)
class Executor:
    """An executor choice. ``actors``: Ray actors in the pool (default: as many as the cluster's free CPUs,
    or GPUs, hold at ``num_cpus`` / ``num_gpus`` each); ``num_cpus`` / ``num_gpus``: resources of one actor
    (``num_gpus > 0``: GPU actors, whose models are built on ``cuda``); ``address``: the Ray cluster
    (default ``RAY_ADDRESS``; none: a local Ray); ``min_items``: smaller jobs run in this process;
    ``threads``: torch threads per actor (default: its CPUs). torch's CPU kernels may round the last bit
    differently with another thread count (seen: 3e-8 on a BERT sentence embedding), so Ray's numbers are bit for
    bit a local run's when ``threads`` equals that run's torch thread count (``torch.get_num_threads()``)."""

    kind: str = "local"
    actors: int | None = None
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    address: str | None = None
    min_items: int = DEFAULT_MIN_ITEMS
    threads: int | None = None

    @property
    def actor_threads(self) -> int:
        """torch intra-op threads of one actor: ``threads``, else its CPUs (at least 1)."""
        return int(self.threads) if self.threads else max(1, int(self.num_cpus))

    def wants(self, n_items: int) -> bool:
        """Whether a job of ``n_items`` items (cache misses) goes to Ray: the executor is ``ray`` and the job
        holds at least ``min_items`` (a smaller one is computed in this process, with the same numbers:
        starting a Ray job costs seconds)."""
        return self.is_ray and n_items > 0 and n_items >= self.min_items

    @property
    def is_ray(self) -> bool:
        return self.kind == "ray"

    @property
    def device(self) -> str:
        """The torch device an actor builds its model on."""
        return "cuda" if self.num_gpus > 0 else "cpu"


_CURRENT: contextvars.ContextVar[Executor] = contextvars.ContextVar("cultura_executor", default=Executor())


def current_executor() -> Executor:
    """The executor of the current context (``local`` unless an entry point or :func:`use_executor` set one)."""
    return _CURRENT.get()


def get_executor(value: "str | Executor | None" = None, *, config=None) -> Executor:
    """An :class:`Executor` from a name (``local``/``ray``), an Executor, or None (the current one).

    ``config``: a project's :class:`cultura.config.Config`; its ``[ray]`` section fills the actor settings
    of a ``ray`` executor named by a string. An unknown name is an error naming the argument ``executor``."""
    if value is None:
        return current_executor()
    if isinstance(value, Executor):
        ex = value
    else:
        if value not in EXECUTORS:
            raise unknown("executor", value, EXECUTORS, param="executor")
        ex = Executor(kind=value)
        ray_cfg = getattr(config, "ray", None)
        if ex.is_ray and ray_cfg is not None:
            ex = replace(ex, actors=ray_cfg.actors, num_cpus=ray_cfg.num_cpus, num_gpus=ray_cfg.num_gpus,
                         min_items=ray_cfg.min_items, threads=ray_cfg.threads)
    if ex.kind not in EXECUTORS:
        raise unknown("executor", ex.kind, EXECUTORS, param="executor")
    return ex


@contextlib.contextmanager
def use_executor(value: "str | Executor | None", *, config=None) -> Iterator[Executor]:
    """Run the block with ``value`` as the current executor (None: keep the current one). A ``ray`` executor
    is checked at once (Ray importable), so a missing package fails before any work starts."""
    ex = get_executor(value, config=config)
    if ex.is_ray:
        ray_module()
    token = _CURRENT.set(ex)
    try:
        yield ex
    finally:
        _CURRENT.reset(token)


def ray_module():
    """``import ray``, or a :class:`ConfigError` naming the ``executor`` argument when Ray is missing."""
    try:
        import ray  # deferred: ray is an optional dependency (pip install 'cultura[ray]')
        import ray.data  # noqa: F401  # deferred: ray is an optional dependency (pip install 'cultura[ray]')
    except ImportError:
        raise ConfigError(RAY_MISSING, param="executor") from None
    return ray


def ray_init(address: str | None = None, **kwargs):
    """Connect to ``address`` (default ``RAY_ADDRESS``; none: start a local Ray) unless already connected;
    returns the ``ray`` module."""
    ray = ray_module()
    if not ray.is_initialized():
        ray.init(address=address or os.environ.get("RAY_ADDRESS") or None, log_to_driver=False, **kwargs)
    return ray


def set_torch_threads(n: int) -> None:
    """Give torch ``n`` intra-op threads in this process (a Ray actor); a no-op without torch."""
    try:
        import torch  # deferred: heavy optional dependency, loaded on first use
    except ImportError:  # pragma: no cover - torch-free models
        return
    torch.set_num_threads(max(1, int(n)))


def pool_size(ray, executor: Executor, n_groups: int) -> int:
    """Actors to start: ``executor.actors``, else as many as the cluster's resources hold, at most one per
    group and at least one."""
    if executor.actors:
        n = int(executor.actors)
    else:
        res = ray.cluster_resources()
        n = int(res.get("GPU", 0) // executor.num_gpus) if executor.num_gpus > 0 else \
            int(res.get("CPU", 1) // max(executor.num_cpus, 1e-9))
    return max(1, min(n, n_groups))


def ray_map(groups: Sequence[dict], actor: type, *, executor: Executor, constructor_kwargs: dict | None = None
            ) -> Iterator[dict]:
    """Run ``actor`` (a class built once per Ray actor with ``constructor_kwargs``, called with a numpy batch
    of groups) over ``groups`` (one dict of lists/scalars each) with Ray Data ``map_batches``, one group per
    call, on ``executor``'s pool; yields the output batches (dicts of numpy arrays) as they finish, in no
    particular order (each output row carries what identifies it). An actor reports a failure that stops the
    job as data (a non-empty ``fatal`` column, e.g. a model that cannot be loaded on that node): it is raised
    here as a :class:`CulturaError` (the groups already yielded are kept by the caller)."""
    if not groups:
        return
    ray = ray_init(executor.address)
    from ray.data import DataContext  # deferred: ray is an optional dependency (pip install 'cultura[ray]')

    DataContext.get_current().enable_progress_bars = False  # the caller shows its own progress
    ds = ray.data.from_items(list(groups), override_num_blocks=len(groups))
    kw: dict[str, Any] = {"num_cpus": executor.num_cpus}
    if executor.num_gpus > 0:
        kw["num_gpus"] = executor.num_gpus
    pool = ray.data.ActorPoolStrategy(size=pool_size(ray, executor, len(groups)))
    out = ds.map_batches(actor, fn_constructor_kwargs=constructor_kwargs or {}, batch_size=1,
                         batch_format="numpy", compute=pool, **kw)
    for batch in out.iter_batches(batch_size=None, batch_format="numpy"):
        fatal = [e for e in batch.get("fatal", ()) if e]
        if fatal:
            raise CulturaError(f"On Ray: {fatal[0]}")
        yield batch


def rebuild(recipe: dict, identity: str, make):
    """A Ray actor's model: the pickled instance in ``recipe["object"]``, or ``make(spec, options)`` from the
    spec and options this process used; raises CulturaError unless its identity is this process's
    ``identity`` (other weights on a node)."""
    model = recipe["object"] if "object" in recipe else make(recipe["spec"], dict(recipe["options"]))
    if model.identity != identity:
        raise CulturaError(f"the Ray worker built {model.identity!r}, not {identity!r} as this process did: give "
                           "every node the same weights (or use the local executor).")
    return model


def as_list(value) -> list:
    """A list column's cell (a numpy array, list or tuple from Ray Data) as a plain Python list."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    return list(value)


__all__ = ["EXECUTORS", "Executor", "as_list", "current_executor", "get_executor", "pool_size", "ray_init", "rebuild",
           "ray_map", "ray_module", "set_torch_threads", "use_executor"]
