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
from typing import Callable, Iterable, Sequence

import numpy as np
from PIL import Image

from ...db import now, transaction
from ...errors import CulturaError
from .base import PROGRESS_MIN_ITEMS, Embedder, _progress, safe_image

SQL_CHUNK = 500          # keys per SELECT … IN (…)


def text_key(text: str) -> str:
    """Cache key of a text: sha256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _db(project):
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


def _store(db, model: str, kind: str, keys: Sequence[str], vectors: np.ndarray) -> None:

    ts = now()
    rows = [{"model": model, "kind": kind, "key": k, "dim": int(v.shape[0]),
             "vector": np.ascontiguousarray(v, dtype="<f4").tobytes(), "created_at": ts}
            for k, v in zip(keys, vectors)]
    with transaction(db):
        db["embeddings"].upsert_all(rows, pk=("model", "kind", "key"))


def _cached(db, embedder: Embedder, kind: str, keys: list[str],
            compute: Callable[[list[str]], np.ndarray], chunk_size: int | None,
            out: np.ndarray | None = None) -> np.ndarray:
    """Rows of ``keys`` in order, from the cache or computed (and stored). Streams: each cached chunk is
    copied into the result as it is read, so memory holds one matrix (``out`` when given, ``(len(keys),
    dim)`` float32) plus one chunk, never a dict of every vector."""
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
        if result is None:
            result = np.empty((len(keys), len(v)), dtype=np.float32)
        result[first[k]] = v

    misses = []
    for part in chunks(first, SQL_CHUNK):
        got = _lookup(db, model, kind, part)
        for k in part:
            if k in got:
                put(k, got[k])
            else:
                misses.append(k)
    if misses:
        step = chunk_size or max(embedder.batch_size * 8, 256)
        show = embedder.progress if embedder.progress is not None else len(misses) > PROGRESS_MIN_ITEMS
        bar = _progress(f"Embedding {kind}s ({model})", len(misses)) if show else None
        saved = embedder.progress
        embedder.progress = False  # one bar for the whole job, not one per chunk
        try:
            for start in range(0, len(misses), step):
                part = misses[start:start + step]
                vecs = compute(part)
                _store(db, model, kind, part, vecs)
                for k, v in zip(part, vecs):
                    put(k, v)
                if bar is not None:
                    bar[0].update(bar[1], advance=len(part))
        finally:
            embedder.progress = saved
            if bar is not None:
                bar[0].stop()
    if result is None:
        return np.zeros((0, embedder._dim or 0), dtype=np.float32)
    for row, k in repeats:
        result[row] = result[first[k]]
    return result


def _image_loader(project) -> Callable[[list[str]], list]:
    if not hasattr(project, "blob_path"):
        raise CulturaError("embed_images_cached needs a Project (to read images.path) or a load= function "
                           "that maps a sha256 to a PIL image.")
    db = project.db

    def load_many(shas: list[str]) -> list:

        paths: dict[str, str] = {}
        for part in chunks(shas, SQL_CHUNK):
            marks = ",".join("?" * len(part))
            paths.update(db.execute(f"SELECT sha256, path FROM images WHERE sha256 IN ({marks})", part).fetchall())
        missing = [s for s in shas if s not in paths]
        if missing:
            raise CulturaError(f"{len(missing)} image(s) are not in the images table (first: {missing[0]}). "
                               "Download them first ('cultura images download'), or pass only stored sha256s.")
        out = []
        for s in shas:
            p = project.blob_path(paths[s])
            try:
                with Image.open(p) as im:
                    im.load()
                    im = safe_image(im)  # bounded before the RGB copy and any model preprocessing
                    out.append(im.convert("RGB") if im.mode not in ("RGB", "L") else im.copy())
            except (OSError, ValueError) as e:
                raise CulturaError(f"Image {s} at {p} cannot be read ({e}). Re-run 'cultura images download' to "
                                   "restore it, or exclude it before embedding.") from e
        return out

    return load_many


def embed_images_cached(project, embedder: Embedder, sha256s: Sequence[str], *,
                        load: Callable[[str], object] | None = None,
                        chunk_size: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """Embeddings of images given by sha256, one row per input in input order, computing only the misses.

    ``out``: an ``(len(sha256s), dim)`` float32 array to fill and return (the matrix is then held once).

    ``project`` is a Project (misses are read from ``images.path``) or a sqlite-utils Database together with
    ``load`` (a function ``sha256 -> PIL.Image``). Misses are embedded ``chunk_size`` at a time (default
    8 batches) and written after each chunk.
    """
    db = _db(project)
    sha256s = list(sha256s)
    if load is not None:
        def loader(shas):
            return [load(s) for s in shas]
    else:
        loader = _image_loader(project)
    return _cached(db, embedder, "image", list(sha256s), lambda part: embedder.embed_images(loader(part)),
                   chunk_size, out)


def embed_texts_cached(project, embedder: Embedder, texts: Sequence[str], *, language: str | None = None,
                       chunk_size: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """Embeddings of texts, one row per input in input order, computing only texts not cached yet.

    ``out``: an ``(len(texts), dim)`` float32 array to fill and return (a caller streaming blocks reuses one).

    ``language`` goes to :meth:`Embedder.embed_texts`; for a language-aware model it is part of the cache key
    (the same string in two languages is two embeddings)."""
    db = _db(project)
    texts = list(texts)
    lang = language if (language and embedder.language_aware) else None

    def key(t: str) -> str:
        return text_key(t) if lang is None else text_key(f"{lang}\x00{t}")

    keys = [key(t) for t in texts]  # each text hashed once
    by_key = dict(zip(keys, texts))
    return _cached(db, embedder, "text", keys,
                   lambda part: embedder.embed_texts([by_key[k] for k in part], language=language), chunk_size,
                   out)


def cache_size(project) -> dict:
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


def clear_cache(project, model: str | Embedder | None = None) -> int:
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
