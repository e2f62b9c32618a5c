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

Joining a cluster is checked first, in a few seconds (:func:`check_ray_cluster`): an address where nothing
listens, something that is no Ray cluster, or a cluster that refuses this process's authentication token (Ray
turns token authentication on by default; with ``RAY_ADDRESS`` set, Ray sends a token only under
``RAY_AUTH_MODE=token``, read from ``RAY_AUTH_TOKEN`` or the file ``RAY_AUTH_TOKEN_PATH``, default
``~/.ray/auth_token``) is one sentence naming those settings, instead of Ray's minute of retries.

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
import socket
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
        address = ray_address(ex.address)
        if address is not None:
            check_ray_cluster(address)  # before any work, not at the first job sent to Ray
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
    returns the ``ray`` module. A cluster that cannot be joined is a :class:`ConfigError` naming
    ``RAY_ADDRESS`` and Ray's token settings."""
    ray = ray_module()
    if ray.is_initialized():
        return ray
    address = ray_address(address)
    if address is None:
        ray.init(address=None, log_to_driver=False, **kwargs)
        return ray
    check_ray_cluster(address)
    try:
        ray.init(address=address, log_to_driver=False, **kwargs)
    except (ConnectionError, RuntimeError, ray.exceptions.RayError) as e:
        raise ConfigError(f"Cannot join the Ray cluster at RAY_ADDRESS={address} ({_first_line(e)}): "
                          f"{_RAY_FIX}", param="executor") from None
    return ray


#: Seconds the check of a cluster's address waits for each answer.
RAY_CONNECT_TIMEOUT = 5.0
#: What to do about a cluster that cannot be joined (the end of every such sentence).
_RAY_FIX = ("check RAY_ADDRESS (the head node's host:port, 6379 by default) and, for a cluster with token "
            "authentication, set RAY_AUTH_MODE=token and the cluster's token in RAY_AUTH_TOKEN (or in a file "
            "named by RAY_AUTH_TOKEN_PATH, default ~/.ray/auth_token), or unset RAY_ADDRESS to run Ray on this "
            "machine.")
#: What to do about a cluster that refuses the token.
_RAY_TOKEN_FIX = ("set RAY_AUTH_MODE=token and the cluster's token in RAY_AUTH_TOKEN (or in a file named by "
                  "RAY_AUTH_TOKEN_PATH, default ~/.ray/auth_token; 'ray get-auth-token' on the head node prints "
                  "it), or unset RAY_ADDRESS to run Ray on this machine.")
#: The HTTP/2 client preface and an empty SETTINGS frame: a gRPC server (Ray's GCS) answers with its SETTINGS.
_H2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def _first_line(e: BaseException) -> str:
    """The first line of an error of Ray's (whose messages run on for lines), without its full stop: quoted
    inside the one sentence that says what to do."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0].rstrip(".")


def ray_address(address: str | None = None) -> str | None:
    """The Ray cluster to join: ``address``, else ``RAY_ADDRESS``; None when a local Ray is to start."""
    address = (address or os.environ.get("RAY_ADDRESS") or "").strip()
    return None if address in ("", "local") else address


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` Ray connects to for ``address`` (``ray://`` stripped; ``localhost`` becomes this node's
    address, as Ray does), or None for ``auto`` (a cluster Ray finds on this machine)."""
    if address == "auto":
        return None
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep:
        host, port = hostport, "10001" if address.startswith("ray://") else "6379"
    host = host.strip("[]")
    if not address.startswith("ray://"):
        try:
            from ray._private.services import resolve_ip_for_localhost  # deferred: ray is optional (and heavy)

            host = resolve_ip_for_localhost(host)
        except Exception:  # Ray's internals moved: probe the address as given
            pass
    try:
        return host, int(port)
    except ValueError:
        raise ConfigError(f"RAY_ADDRESS={address} is not host:port: {_RAY_FIX}", param="executor") from None


def check_ray_cluster(address: str, *, timeout: float = RAY_CONNECT_TIMEOUT) -> None:
    """Raise :class:`ConfigError` (one sentence naming ``RAY_ADDRESS`` and Ray's token settings) unless a Ray
    cluster at ``address`` answers within ``timeout`` seconds and accepts this process's authentication token.

    Ray itself retries an unreachable or refusing cluster for up to a minute, printing a warning every few
    seconds, and then raises a bare ``ConnectionError``: this check speaks to the cluster first (a TCP
    connection, the HTTP/2 greeting of its gRPC server, then Ray's own GCS client, which reports a refused
    token at once)."""
    hp = _host_port(address)
    if hp is None:
        return
    try:
        conn = socket.create_connection(hp, timeout=timeout)
    except OSError as e:
        reason = "no answer" if isinstance(e, TimeoutError) else (e.strerror or type(e).__name__).lower()
        raise ConfigError(f"Cannot reach the Ray cluster at RAY_ADDRESS={address} ({reason}): {_RAY_FIX}",
                          param="executor") from None
    head, problem = b"", None
    with conn:
        try:
            conn.settimeout(timeout)
            conn.sendall(_H2_HELLO)
            while len(head) < 9:
                chunk = conn.recv(9 - len(head))
                if not chunk:
                    break
                head += chunk
        except TimeoutError:
            problem = f"no answer within {timeout:g} s"
        except OSError:  # reset or broken: closed by the other end
            pass
    if problem is None and len(head) < 9:
        problem = "the connection was closed"
    elif problem is None and head[3] != 0x04:  # not a SETTINGS frame: nothing that speaks gRPC
        problem = "it answered in another protocol"
    if problem is not None:
        raise ConfigError(f"Nothing at RAY_ADDRESS={address} answers as a Ray cluster ({problem}): {_RAY_FIX}",
                          param="executor")
    if address.startswith("ray://"):
        return
    _check_ray_token(address, f"{hp[0]}:{hp[1]}")


@contextlib.contextmanager
def _c_stderr_silenced():
    """File descriptor 2 sent to /dev/null for the block: Ray's C++ client logs each refusal there itself (a
    warning line no setting turns off), and the check says it in one sentence instead."""
    try:
        saved = os.dup(2)
    except OSError:  # no stderr at all
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _check_ray_token(address: str, gcs: str) -> None:
    """Ray's GCS client refuses a wrong or missing token at once (``ray.init`` would retry for 20 s)."""
    ray = ray_module()
    try:
        from ray._raylet import GcsClient  # deferred: ray is an optional dependency
    except ImportError:  # Ray's internals moved: ray.init reports what it finds
        return
    try:
        with _c_stderr_silenced():
            GcsClient(address=gcs)
    except getattr(ray.exceptions, "AuthenticationError", ()):
        sent = os.environ.get("RAY_AUTH_MODE", "").lower() == "token"
        what = ("refused this process's authentication token" if sent else
                "needs an authentication token, and none is sent without RAY_AUTH_MODE=token")
        raise ConfigError(f"The Ray cluster at RAY_ADDRESS={address} {what}: {_RAY_TOKEN_FIX}",
                          param="executor") from None
    except ray.exceptions.RayError as e:
        raise ConfigError(f"The Ray cluster at RAY_ADDRESS={address} does not answer ({_first_line(e)}): "
                          f"{_RAY_FIX}", param="executor") from None


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


__all__ = ["EXECUTORS", "Executor", "as_list", "check_ray_cluster", "current_executor", "get_executor", "pool_size",
           "ray_address", "ray_init", "rebuild", "ray_map", "ray_module", "set_torch_threads", "use_executor"]
