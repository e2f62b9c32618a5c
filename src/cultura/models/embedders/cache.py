"""The embedding cache: table ``embeddings`` (model identity, kind, key, dim, float32 vector, created_at).

Images are keyed by their sha256, texts by the sha256 of their UTF-8 bytes, and the model by
``Embedder.identity`` (which carries the weights checksum), so a rerun with the same model computes nothing:

>>> from cultura.db import open_db
>>> from cultura.models.embedders import get_embedder
>>> db, e = open_db(":memory:"), get_embedder("fake:dim=8")
>>> a = embed_texts_cached(db, e, ["tea", "rice"])
>>> b = embed_texts_cached(db, e, ["rice", "tea", "rice"])
>>> e.stats["texts"], bool((b[1] == a[0]).all())
(2, True)

Results always follow the input order (duplicates included); rows are looked up by key, never by position.
Misses are computed and written chunk by chunk, so an interrupted run keeps what it finished.
"""
from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

import numpy as np

from ...db import now, transaction
from ...db.blobs import blob_files
from ...errors import CulturaError
from ...executor import Executor, as_list, current_executor, ray_map, ray_module, rebuild, set_torch_threads
from ...lazy import lazy
from ...progress import task as progress_task
from .base import Embedder, safe_image, shown
from .registry import get_embedder

pixels = lazy("cultura.pixels")  # Pillow: imported by the first image opened (a cached run opens none)

if TYPE_CHECKING:
    from ...project import Project

SQL_CHUNK = 500          # keys per SELECT … IN (…)
SCAN_MIN = 50_000        # from this many keys, cached rows are read by one scan instead of IN (…) lookups


def text_key(text: str) -> str:
    """Cache key of a text: sha256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _db(project: Project):
    """A Project's database, or the sqlite-utils Database itself (sqlite_utils is imported lazily)."""
    return project if hasattr(project, "conn") and hasattr(project, "execute") else project.db


def chunks(seq, n):
    seq = list(seq)
    for i in range(0, len(seq), n):
        yield seq[i:i + n]


def _lookup(db, model: str, kind: str, keys: Iterable[str]) -> dict[str, np.ndarray]:
    found: dict[str, np.ndarray] = {}
    for part in chunks(keys, SQL_CHUNK):
        marks = ",".join("?" * len(part))
        for key, dim, blob in db.execute(
                f"SELECT key, dim, vector FROM embeddings WHERE model = ? AND kind = ? AND key IN ({marks})",
                [model, kind, *part]).fetchall():
            vec = np.frombuffer(blob, dtype="<f4")
            if vec.shape[0] != dim:
                continue  # a damaged row is recomputed
            found[key] = vec
    return found


def _present(db, model: str, kind: str, keys: Iterable[str]) -> list[str]:
    """The keys of ``keys`` cached for ``model`` (the vectors are not read)."""
    out: list[str] = []
    for part in chunks(keys, SQL_CHUNK):
        marks = ",".join("?" * len(part))
        out += [k for (k,) in db.execute(
            f"SELECT key FROM embeddings WHERE model = ? AND kind = ? AND key IN ({marks}) "
            "AND length(vector) = 4 * dim", [model, kind, *part]).fetchall()]
    return out


def _scan(db, model: str, kind: str, wanted: int) -> Iterator[tuple[str, np.ndarray]] | None:
    """Every cached ``(key, vector)`` of ``model`` and ``kind``, streamed, when ``wanted`` keys are at least
    half of them (else None: a block-by-block reader keeps its lookups): a table scan in storage order
    when they are at least half the table (sequential reads), else the model's index range."""
    rows = db.execute("SELECT count(*) FROM embeddings WHERE model = ? AND kind = ?", [model, kind]).fetchone()[0]
    if 2 * wanted < rows:
        return None
    hint = "NOT INDEXED " if 2 * rows >= db.execute("SELECT count(*) FROM embeddings").fetchone()[0] else ""

    def gen():
        for key, dim, blob in db.execute(
                f"SELECT key, dim, vector FROM embeddings {hint}WHERE model = ? AND kind = ?", [model, kind]):
            vec = np.frombuffer(blob, dtype="<f4")
            if vec.shape[0] == dim:  # a damaged row is recomputed
                yield key, vec
    return gen()


def _store(db, model: str, kind: str, keys: Sequence[str], vectors: np.ndarray) -> None:

    ts = now()
    rows = [{"model": model, "kind": kind, "key": k, "dim": int(v.shape[0]),
             "vector": np.ascontiguousarray(v, dtype="<f4").tobytes(), "created_at": ts}
            for k, v in zip(keys, vectors)]
    with transaction(db):
        db["embeddings"].upsert_all(rows, pk=("model", "kind", "key"))


def _cached(db, embedder: Embedder, kind: str, keys: list[str],
            compute: Callable[[list[str]], np.ndarray], chunk_size: int | None,
            out: np.ndarray | None = None,
            remote: Callable[[list[list[str]]], Iterator[tuple[list[str], np.ndarray]]] | None = None,
            fill: bool = True) -> np.ndarray | int:
    """Rows of ``keys`` in order, from the cache or computed (and stored). Streams: each cached chunk is
    copied into the result as it is read, so memory holds one matrix (``out`` when given, ``(len(keys),
    dim)`` float32) plus one chunk, never a dict of every vector.

    ``remote``: computes the chunks of misses elsewhere (the ``ray`` executor), yielding ``(keys, vectors)``
    per finished chunk in any order; the chunks are the ones ``compute`` would get, and each is stored as it
    arrives, as a local run stores it.

    ``fill=False``: only compute and store the misses; returns how many were computed (no matrix is built)."""
    model = embedder.identity
    first: dict[str, int] = {}
    repeats: list[tuple[int, str]] = []
    for row, k in enumerate(keys):
        if k in first:
            repeats.append((row, k))
        else:
            first[k] = row
    result = out

    def put(k, v):
        nonlocal result
        if not fill:
            return
        if result is None:
            result = np.empty((len(keys), len(v)), dtype=np.float32)
        result[first[k]] = v

    misses = []
    # many keys: one pass over the model's rows (1M: ~7 s of CPU instead of ~40 s of lookups)
    scan = _scan(db, model, kind, len(first)) if fill and len(first) >= SCAN_MIN else None
    if scan is not None:
        have = np.zeros(len(keys), dtype=bool)
        for k, v in scan:
            row = first.get(k)
            if row is not None:
                put(k, v)
                have[row] = True
        misses = [k for k, row in first.items() if not have[row]]
        del have
    for part in () if scan is not None else chunks(first, SQL_CHUNK):
        got = _lookup(db, model, kind, part) if fill else dict.fromkeys(_present(db, model, kind, part))
        for k in part:
            if k in got:
                put(k, got[k])
            else:
                misses.append(k)
    if misses:
        step = chunk_size or max(embedder.batch_size * 8, 256)
        bar = progress_task(f"embedding {kind}s ({model})", len(misses),
                            progress=shown(embedder.progress, len(misses)))
        saved = embedder.progress
        embedder.progress = False  # one bar for the whole job, not one per chunk
        parts = [misses[start:start + step] for start in range(0, len(misses), step)]
        if remote is not None and not current_executor().wants(len(misses)):
            remote = None  # a small job: computed here (same chunks, same numbers)
        done = remote(parts) if remote is not None else ((part, compute(part)) for part in parts)
        try:
            for part, vecs in done:
                _store(db, model, kind, part, vecs)
                for k, v in zip(part, vecs):
                    put(k, v)
                if remote is not None:  # the model calls made on Ray count as this embedder's
                    embedder.stats[f"{kind}_calls"] += math.ceil(len(part) / embedder.batch_size)
                    embedder.stats[f"{kind}s"] += len(part)
                    embedder._dim = embedder._dim or (int(vecs.shape[1]) if len(vecs) else None)
                bar.advance(len(part))
        finally:
            embedder.progress = saved
            bar.close()
    if not fill:
        return len(misses)
    if result is None:
        return np.zeros((0, embedder._dim or 0), dtype=np.float32)
    for row, k in repeats:
        result[row] = result[first[k]]
    return result


#: Where the image files are: sha256s → {sha256: blob path relative to the project} (those not stored left out).
ImageFiles = Callable[[list[str]], dict[str, str]]


def _image_paths(project: Project, shas: list[str], files: ImageFiles | None = None) -> list[str]:
    """The blob file of each image (by sha256): from ``files`` (curation passes the paths its ``images`` rows
    name: :func:`cultura.curate.images.image_files`; models read no curation table), else found by hash in
    the project's content-addressed store (:func:`cultura.db.blobs.blob_files`); an error for one not stored.
    ``project`` is a Project (checked by :func:`_image_loader`, which every caller builds first)."""
    paths = files(shas) if files is not None else blob_files(project.root, shas)
    missing = [s for s in shas if s not in paths]
    if missing:
        raise CulturaError(f"{len(missing)} image(s) have no stored file (first: {missing[0]}): not in the images "
                           "table, or their file went missing. Download them first ('cultura images download'), or "
                           "pass only stored sha256s.")
    return [str(project.blob_path(paths[s])) for s in shas]


def open_image(path, sha: str):
    """The image of blob ``path`` (sha256 ``sha``) as the embedders get it: the picture a browser shows
    (:mod:`cultura.pixels`), bounded by :func:`safe_image`, RGB (or L), fully loaded."""
    try:
        return safe_image(pixels.open_displayed(path, None))  # bounded before any model preprocessing
    except pixels.UNREADABLE as e:
        raise CulturaError(f"Image {sha} at {path} cannot be read ({e}). Re-run 'cultura images download' to "
                           "restore it, or exclude it before embedding.") from e


def _image_loader(project: Project, files: ImageFiles | None = None) -> Callable[[list[str]], list]:
    if not hasattr(project, "blob_path"):
        raise CulturaError("embed_images_cached needs a Project (to find the image files) or a load= function "
                           "that maps a sha256 to a PIL image.")

    def load_many(shas: list[str]) -> list:
        return [open_image(p, s) for p, s in zip(_image_paths(project, shas, files), shas)]

    return load_many


# -- the ray executor --------------------------------------------------------------------------------------

def on_ray(embedder: Embedder, executor: Executor | None = None) -> Executor | None:
    """The ray executor when ``embedder``'s misses may go to Ray (the current executor is ``ray`` and the model
    runs here, not on a server), else None."""
    ex = executor or current_executor()
    return ex if ex.is_ray and not embedder.remote_service else None


class EmbedActor:
    """A Ray Data actor: builds the embedder once (from its :attr:`Embedder.recipe`, on the actor's device, or
    the instance sent pickled) and embeds one chunk of images or texts per call. A user-facing failure (an
    unreadable image, a model that cannot be loaded on this node) comes back as the ``fatal`` column."""

    def __init__(self, recipe: dict, identity: str, batch_size: int, device: str, threads: int, load=None):
        self.error = ""
        self.load = load
        set_torch_threads(threads)
        try:
            emb = rebuild(recipe, identity, lambda spec, opts: get_embedder(spec, **{**opts, "device": device,
                                                                                   "progress": False}))
            emb.batch_size = batch_size
            emb.progress = False
            self.embedder = emb
        except CulturaError as e:
            self.error = str(e)

    def __call__(self, batch: dict) -> dict:
        keys: list[str] = []
        blobs: list[bytes] = []
        errors: list[str] = []
        for i, kind in enumerate(batch["kind"]):
            part = [str(k) for k in as_list(batch["keys"][i])]
            try:
                if self.error:
                    raise CulturaError(self.error)
                if kind == "image":
                    paths = as_list(batch["paths"][i])
                    images = [self.load(k) for k in part] if self.load is not None else \
                        [open_image(p, k) for p, k in zip(paths, part)]
                    vecs = self.embedder.embed_images(images)
                else:
                    lang = str(batch["language"][i]) or None
                    vecs = self.embedder.embed_texts([str(t) for t in as_list(batch["texts"][i])], language=lang)
            except CulturaError as e:
                keys.append("")
                blobs.append(b"")
                errors.append(str(e))
                continue
            keys += part
            blobs += [np.ascontiguousarray(v, dtype="<f4").tobytes() for v in vecs]
            errors += [""] * len(part)
        return {"key": np.array(keys, dtype=object), "vector": np.array(blobs, dtype=object),
                "fatal": np.array(errors, dtype=object)}


def _ray_embed(embedder: Embedder, executor: Executor, kind: str, payload: Callable[[list[str]], dict],
               load=None) -> Callable[[list[list[str]]], Iterator[tuple[list[str], np.ndarray]]]:
    """The ``remote`` of :func:`_cached`: one Ray group per chunk of misses (``payload(keys)`` gives what an
    actor needs beside the keys); yields ``(keys, vectors)`` per finished chunk."""
    recipe = embedder.recipe if embedder.recipe is not None else {"object": embedder}
    if load is not None:
        try:
            ray_module().cloudpickle.dumps(load)
        except Exception as e:  # noqa: BLE001 - any pickling failure
            raise CulturaError(f"The load= function cannot be sent to Ray ({type(e).__name__}: {e}); use the "
                               "local executor, or a function of picklable data.", param="executor") from None

    def remote(parts: list[list[str]]):
        groups = [{"kind": kind, "keys": part, **payload(part)} for part in parts]
        by_key = {k: (g, i) for g, part in enumerate(parts) for i, k in enumerate(part)}
        pending: dict[int, dict[str, np.ndarray]] = {}
        for batch in ray_map(groups, EmbedActor, executor=executor, constructor_kwargs={
                "recipe": recipe, "identity": embedder.identity, "batch_size": embedder.batch_size,
                "device": executor.device, "threads": executor.actor_threads, "load": load}):
            for k, blob in zip(batch["key"].tolist(), batch["vector"].tolist()):
                g, _ = by_key[k]
                pending.setdefault(g, {})[k] = np.frombuffer(blob, dtype="<f4")
                if len(pending[g]) == len(parts[g]):
                    got = pending.pop(g)
                    yield parts[g], np.stack([got[x] for x in parts[g]])

    return remote


def embed_images_cached(project: Project, embedder: Embedder, sha256s: Sequence[str], *,
                        load: Callable[[str], object] | None = None, files: ImageFiles | None = None,
                        chunk_size: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """Embeddings of images given by sha256, one row per input in input order, computing only the misses.

    ``out``: an ``(len(sha256s), dim)`` float32 array to fill and return (the matrix is then held once).

    ``project`` is a Project (misses are read from its blob files: ``files`` says where they are, as
    :func:`cultura.curate.images.image_files` does from the ``images`` rows; by default they are found by
    hash) or a sqlite-utils Database together with ``load`` (a function ``sha256 -> PIL.Image``). Misses are
    embedded ``chunk_size`` at a time (default 8 batches) and written after each chunk. Under the ``ray``
    executor (:mod:`cultura.executor`) the chunks of misses are embedded by Ray actors (the blobs read at the
    same path on every node; ``load`` is sent pickled) and written here, into the same table.
    """
    return _images(project, embedder, sha256s, load, files, chunk_size, out, True)


def cache_images(project: Project, embedder: Embedder, sha256s: Sequence[str], *,
                 load: Callable[[str], object] | None = None, files: ImageFiles | None = None,
                 chunk_size: int | None = None) -> int:
    """Embed and store the images of ``sha256s`` not cached yet, without building the matrix; returns how many
    were embedded. A stage that reads its vectors part by part calls it first, so that the ``ray`` executor
    gets all the work in one job (same chunks, same vectors as :func:`embed_images_cached`)."""
    return _images(project, embedder, sha256s, load, files, chunk_size, None, False)


def _images(project: Project, embedder, sha256s, load, files, chunk_size, out, fill):
    db = _db(project)
    sha256s = list(sha256s)
    if load is not None:
        def loader(shas):
            return [load(s) for s in shas]
    else:
        loader = _image_loader(project, files)
    ex, remote = on_ray(embedder), None
    if ex is not None:
        remote = _ray_embed(embedder, ex, "image", lambda part: {"paths": [] if load is not None else
                                                                 _image_paths(project, part, files)}, load=load)
    return _cached(db, embedder, "image", sha256s, lambda part: embedder.embed_images(loader(part)),
                   chunk_size, out, remote, fill)


def embed_texts_cached(project: Project, embedder: Embedder, texts: Sequence[str], *, language: str | None = None,
                       chunk_size: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """Embeddings of texts, one row per input in input order, computing only texts not cached yet.

    ``out``: an ``(len(texts), dim)`` float32 array to fill and return (a caller streaming blocks reuses one).

    ``language`` goes to :meth:`Embedder.embed_texts`; for a language-aware model it is part of the cache key
    (the same string in two languages is two embeddings)."""
    return _texts(project, embedder, texts, language, chunk_size, out, True)


def cache_texts(project: Project, embedder: Embedder, texts: Sequence[str], *, language: str | None = None,
                chunk_size: int | None = None) -> int:
    """:func:`cache_images` for texts: embed and store the texts not cached yet without building the matrix;
    returns how many were embedded."""
    return _texts(project, embedder, texts, language, chunk_size, None, False)


def _texts(project: Project, embedder, texts, language, chunk_size, out, fill):
    db = _db(project)
    texts = list(texts)
    lang = language if (language and embedder.language_aware) else None

    def key(t: str) -> str:
        return text_key(t) if lang is None else text_key(f"{lang}\x00{t}")

    keys = [key(t) for t in texts]  # each text hashed once
    by_key = dict(zip(keys, texts))
    ex, remote = on_ray(embedder), None
    if ex is not None:
        remote = _ray_embed(embedder, ex, "text", lambda part: {"texts": [by_key[k] for k in part],
                                                                "language": language or ""})
    return _cached(db, embedder, "text", keys,
                   lambda part: embedder.embed_texts([by_key[k] for k in part], language=language), chunk_size,
                   out, remote=remote, fill=fill)


def cache_size(project: Project) -> dict:
    """``{"rows": n, "bytes": n, "models": {identity: {"rows", "bytes", "image", "text"}}}``."""
    db = _db(project)
    models: dict[str, dict] = {}
    for model, kind, n, size in db.execute(
            "SELECT model, kind, count(*), coalesce(sum(length(vector)), 0) FROM embeddings "
            "GROUP BY model, kind ORDER BY model, kind").fetchall():
        m = models.setdefault(model, {"rows": 0, "bytes": 0, "image": 0, "text": 0})
        m["rows"] += n
        m["bytes"] += size
        m[kind] = n
    return {"rows": sum(m["rows"] for m in models.values()),
            "bytes": sum(m["bytes"] for m in models.values()), "models": models}


def clear_cache(project: Project, model: str | Embedder | None = None) -> int:
    """Delete cached embeddings (of one model identity, or all); returns the number of rows removed.

    The cache is derived data: clearing only costs recomputation.
    """
    db = _db(project)
    if isinstance(model, Embedder):
        model = model.identity
    with transaction(db):
        if model is None:
            cur = db.execute("DELETE FROM embeddings")
        else:
            cur = db.execute("DELETE FROM embeddings WHERE model = ?", [model])
    return cur.rowcount
