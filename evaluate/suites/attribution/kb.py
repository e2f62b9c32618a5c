"""The knowledge base (seed 004 §3.1, Step 0): any table of entities with id, lemma, gloss, text and image
paths, indexed with faiss by a vision-language encoder.

Import files are JSONL or CSV with columns ``id`` (or ``entity_id``), ``lemma``, ``gloss``, ``text`` (the
Wikipedia-style description the judge reads), ``images`` (a JSON list, or paths separated by ``;``; relative
paths are relative to the file) and optional ``frequency``. BabelNet / Wikipedia are what the seed used; any
KB in this shape works. Rows are keyed by (kb, id); re-importing replaces a row.

One image may belong to several entities (the seed's "mango" and "fruit"): the index keeps, per KB image, the
list of its entities. Image embeddings go through the project's embedding cache keyed by the sha256 of the
file bytes; lemma and gloss embeddings through the text cache.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ....db import now, transaction
from ....db.readers import read_rows
from ....errors import CulturaError


def _images(value, base: Path) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        v = value.strip()
        items = json.loads(v) if v.startswith("[") else [p for p in v.split(";") if p.strip()]
    else:
        items = list(value)
    out = []
    for p in items:
        path = Path(str(p).strip()).expanduser()
        out.append(str(path if path.is_absolute() else (base / path).resolve()))
    return out


def import_kb(project, path: str | Path, *, kb: str = "default") -> dict:
    """Import KB entities from JSONL/CSV into ``kb_entities`` (replacing rows with the same id). Returns
    ``{"kb", "entities", "images", "missing_images"}``."""

    p = Path(path)
    rows = []
    for n, r in enumerate(read_rows(p, strict=True), 1):
        eid = str(r.get("id") or r.get("entity_id") or "").strip()
        lemma = str(r.get("lemma") or r.get("title") or "").strip()
        if not eid or not lemma:
            raise CulturaError(f"{p} row {n}: a KB entity needs 'id' and 'lemma' columns.")
        freq = r.get("frequency")
        rows.append({"kb": kb, "entity_id": eid, "lemma": lemma, "gloss": r.get("gloss") or None,
                     "text": r.get("text") or None, "images": json.dumps(_images(r.get("images"), p.parent)),
                     "frequency": float(freq) if freq not in (None, "") else None,
                     "source": f"import:{p.name}", "created_at": now()})
    if not rows:
        raise CulturaError(f"{p} holds no KB rows; add one JSON object (or CSV row) per entity.")
    with transaction(project.db):
        project.db["kb_entities"].upsert_all(rows, pk=("kb", "entity_id"))
    paths = {i for r in rows for i in json.loads(r["images"])}
    missing = sorted(i for i in paths if not Path(i).exists())
    return {"kb": kb, "entities": len(rows), "images": len(paths), "missing_images": len(missing)}


def list_kb(project, kb: str = "default") -> list[dict]:
    """The entities of ``kb`` (images decoded), ordered by id."""
    out = []
    for r in project.db.query("SELECT * FROM kb_entities WHERE kb = ? ORDER BY entity_id", [kb]):
        r = dict(r)
        r["images"] = json.loads(r["images"] or "[]")
        out.append(r)
    return out


def file_key(path: str) -> str:
    """Cache key of a KB image: sha256 of its bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass
class KBIndex:
    """A faiss inner-product index over the KB's image embeddings (unit-norm, so cosine), the entities of
    each indexed image, and the entities' lemma / gloss embeddings."""

    kb: str
    encoder: str
    index: object                                   # faiss.IndexFlatIP
    image_paths: list[str]
    image_entities: list[list[str]]
    entities: dict[str, dict]
    lemma_vecs: dict[str, np.ndarray] = field(default_factory=dict)
    gloss_vecs: dict[str, np.ndarray] = field(default_factory=dict)
    skipped_images: list[str] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.image_paths)

    @property
    def fingerprint(self) -> str:
        """Content hash of the KB (ids, lemmas, glosses, image lists): cached links are keyed by it, so a
        re-imported KB is linked afresh."""
        h = hashlib.sha256()
        for eid in sorted(self.entities):
            e = self.entities[eid]
            h.update(json.dumps([eid, e["lemma"], e.get("gloss"), e["images"]], ensure_ascii=False).encode())
        return h.hexdigest()[:12]

    @property
    def key(self) -> str:
        return f"{self.kb}#{self.fingerprint}"


def build_kb_index(project, embedder, kb: str = "default") -> KBIndex:
    """Embed the KB's images (cached), lemmas and glosses with ``embedder`` and build the faiss index.
    Unreadable image files are skipped and listed in ``skipped_images``."""
    import faiss
    from PIL import Image

    from ....models.embedders import embed_images_cached, embed_texts_cached

    ents = list_kb(project, kb)
    if not ents:
        raise CulturaError(f"Knowledge base {kb!r} is empty. Import one with 'cultura kb import FILE --kb {kb}'.")
    owners: dict[str, list[str]] = {}
    for e in ents:
        for p in e["images"]:
            owners.setdefault(p, [])
            if e["entity_id"] not in owners[p]:
                owners[p].append(e["entity_id"])
    paths, keys, skipped = [], [], []
    for p in owners:
        try:
            keys.append(file_key(p))
            paths.append(p)
        except OSError:
            skipped.append(p)
    path_of = dict(zip(keys, paths))

    def load(key):
        with Image.open(path_of[key]) as im:
            return im.convert("RGB")

    vecs = (np.asarray(embed_images_cached(project.db, embedder, keys, load=load), dtype=np.float32)
            if keys else np.zeros((0, 1), np.float32))
    dim = vecs.shape[1] if len(keys) else embedder.dim
    index = faiss.IndexFlatIP(dim)
    if len(keys):
        index.add(np.ascontiguousarray(vecs))
    ids = [e["entity_id"] for e in ents]
    lemmas = np.asarray(embed_texts_cached(project.db, embedder, [e["lemma"] for e in ents]), dtype=np.float32)
    glossed = [e for e in ents if e.get("gloss")]
    gloss = (np.asarray(embed_texts_cached(project.db, embedder, [e["gloss"] for e in glossed]), dtype=np.float32)
             if glossed else np.zeros((0, dim), np.float32))
    return KBIndex(kb=kb, encoder=embedder.identity, index=index, image_paths=paths,
                   image_entities=[owners[p] for p in paths], entities={e["entity_id"]: e for e in ents},
                   lemma_vecs=dict(zip(ids, lemmas)), gloss_vecs={e["entity_id"]: v for e, v in zip(glossed, gloss)},
                   skipped_images=skipped)
