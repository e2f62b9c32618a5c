"""The knowledge base (seed 004 §3.1, Step 0): any table of entities with id, lemma, gloss, text and image
paths, indexed with faiss by a vision-language encoder.

Import files are dumps in the documented :data:`KB_SCHEMA` (JSONL, JSON array, CSV/TSV or Parquet, e.g. a
BabelNet / Wikipedia extract): ``id``, ``lemma``, ``gloss``, ``text`` (the page text the judge reads),
``aliases``, ``images`` (relative paths are relative to the file) and optional ``frequency``. BabelNet /
Wikipedia are what the seed used; any KB in this shape works. Rows are keyed by (kb, id); re-importing
replaces a row. ``docs/reproducing.md (seed 004)`` shows the schema with an example.

One image may belong to several entities (the seed's "mango" and "fruit"): the index keeps, per KB image, the
list of its entities. Image embeddings go through the project's embedding cache keyed by the sha256 of the
file bytes; lemma and gloss embeddings through the text cache.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .... import pixels
from ....db import now, transaction
from ....db.readers import iter_rows
from ....errors import CulturaError
from ....models.embedders import embed_images_cached, embed_texts_cached

if TYPE_CHECKING:
    from ....project import Project

ID_FIELDS = ("id", "entity_id", "synset_id", "babelnet_id")
LEMMA_FIELDS = ("lemma", "title", "name")
TEXT_FIELDS = ("text", "wikipedia", "page_text", "summary")
ALIAS_FIELDS = ("aliases", "senses", "synonyms")
IMAGE_FIELDS = ("images", "image_paths", "image")
CHUNK = 5000



def as_list(value) -> list:
    """A list from a JSON list, a list/array, or a ';'-separated string (None/"" → [])."""
    if value is None:
        return []
    if isinstance(value, str):
        v = value.strip()
        if not v:
            return []
        if v.startswith("["):
            try:
                return list(json.loads(v))
            except json.JSONDecodeError as e:
                raise CulturaError(f"Cannot read the list {v[:60]!r} ({e.msg}).") from None
        return [x.strip() for x in v.split(";") if x.strip()]
    if isinstance(value, dict):
        raise CulturaError(f"Expected a list, got an object {str(value)[:60]!r}.")
    try:
        return list(value)
    except TypeError:
        return [value]

def _first(rec: dict, names) -> object:
    for n in names:
        v = rec.get(n)
        if v not in (None, ""):
            return v
    return None


def _images(value, base: Path) -> list[str]:
    out = []
    for p in as_list(value):
        path = Path(str(p).strip()).expanduser()
        out.append(str(path if path.is_absolute() else (base / path).resolve()))
    return out


def kb_row(rec: dict, *, kb: str, base: Path, source: str, where: str = "") -> dict:
    """One ``kb_entities`` row from a dump record (see :data:`KB_SCHEMA`)."""
    eid = str(_first(rec, ID_FIELDS) or "").strip()
    lemma = str(_first(rec, LEMMA_FIELDS) or "").strip()
    if not eid or not lemma:
        raise CulturaError(f"{where}: a KB entity needs an id ({'/'.join(ID_FIELDS)}) and a lemma "
                           f"({'/'.join(LEMMA_FIELDS)}).")
    freq = rec.get("frequency")
    try:
        freq = float(freq) if freq not in (None, "") else None
    except (TypeError, ValueError):
        raise CulturaError(f"{where}: frequency must be a number, got {freq!r}.") from None
    aliases = [str(a).strip() for a in as_list(_first(rec, ALIAS_FIELDS)) if str(a).strip() and str(a) != lemma]
    return {"kb": kb, "entity_id": eid, "lemma": lemma, "gloss": rec.get("gloss") or None,
            "text": _first(rec, TEXT_FIELDS) or None, "images": json.dumps(_images(_first(rec, IMAGE_FIELDS), base)),
            "aliases": json.dumps(list(dict.fromkeys(aliases)), ensure_ascii=False) if aliases else None,
            "frequency": freq, "source": source, "created_at": now()}


KB_SCHEMA = """One record per entity (JSONL, JSON array, CSV/TSV or Parquet):
  id          required  entity id (also read from entity_id, synset_id, babelnet_id), e.g. bn:03096581n
  lemma       required  the entity's title/lemma (also title, name), embedded for lemma re-ranking
  gloss       optional  a short definition (gloss re-ranking, "Gloss (T)")
  text        optional  the page text the judge reads (also wikipedia, page_text, summary)
  aliases     optional  other names: a list, or a ';'-separated string (also senses, synonyms)
  images      optional  image paths: a list or ';'-separated; relative paths are relative to the dump file
                        (or images_root) (also image_paths, image)
  frequency   optional  a number (a prior; not used by the seed's linking)
"""


def import_kb(project: Project, path: str | Path, *, kb: str = "default",
              images_root: str | Path | None = None) -> dict:
    """Import KB entities from a dump (JSONL / JSON / CSV / Parquet, :data:`KB_SCHEMA`) into ``kb_entities``,
    replacing rows with the same id; streamed and written in atomic chunks of 5,000 entities. Returns
    ``{"kb", "entities", "images", "missing_images"}``."""
    p = Path(path)
    base = Path(images_root).expanduser() if images_root else p.parent
    source = f"import:{p.name}"
    n_rows, paths, chunk = 0, set(), []

    def flush():
        with transaction(project.db):
            project.db["kb_entities"].upsert_all(chunk, pk=("kb", "entity_id"))
        chunk.clear()

    for n, rec in enumerate(iter_rows(p, strict=True), 1):
        row = kb_row(rec, kb=kb, base=base, source=source, where=f"{p} record {n}")
        paths.update(json.loads(row["images"]))
        chunk.append(row)
        n_rows += 1
        if len(chunk) >= CHUNK:
            flush()
    if chunk:
        flush()
    if not n_rows:
        raise CulturaError(f"{p} holds no KB records; add one JSON object (or CSV/Parquet row) per entity.")
    missing = sorted(i for i in paths if not Path(i).exists())
    return {"kb": kb, "entities": n_rows, "images": len(paths), "missing_images": len(missing)}


def list_kb(project: Project, kb: str = "default") -> list[dict]:
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
    text_vecs: dict[str, np.ndarray] = field(default_factory=dict)   # entity page text (for "text-t" linking)
    _text_indexes: dict = field(default_factory=dict, repr=False)

    def text_index(self, key: str):
        """``(entity ids, faiss.IndexFlatIP)`` over the ``lemma`` / ``gloss`` / ``text`` embeddings (built once)."""
        import faiss  # heavy optional dependency, deferred

        if key not in self._text_indexes:
            vecs = {"lemma": self.lemma_vecs, "gloss": self.gloss_vecs, "text": self.text_vecs}[key]
            ids = sorted(vecs)
            dim = self.index.d
            idx = faiss.IndexFlatIP(dim)
            if ids:
                idx.add(np.ascontiguousarray(np.stack([vecs[i] for i in ids]).astype(np.float32)))
            self._text_indexes[key] = (ids, idx)
        return self._text_indexes[key]

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


def build_kb_index(project: Project, embedder, kb: str = "default", *, with_text: bool = False) -> KBIndex:
    """Embed the KB's images (cached), lemmas and glosses (and, ``with_text``, the page texts for the
    "Wikipedia (T)" linking variant) with ``embedder`` and build the faiss index. Unreadable image files are
    skipped and listed in ``skipped_images``."""
    import faiss  # deferred: heavy optional dependency, loaded on first use


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
        return pixels.open_displayed(path_of[key], "RGB")  # the picture a browser shows

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
    texted = [e for e in ents if e.get("text")] if with_text else []
    text = (np.asarray(embed_texts_cached(project.db, embedder, [e["text"] for e in texted]), dtype=np.float32)
            if texted else np.zeros((0, dim), np.float32))
    return KBIndex(kb=kb, encoder=embedder.identity, index=index, image_paths=paths,
                   image_entities=[owners[p] for p in paths], entities={e["entity_id"]: e for e in ents},
                   lemma_vecs=dict(zip(ids, lemmas)), gloss_vecs={e["entity_id"]: v for e, v in zip(glossed, gloss)},
                   skipped_images=skipped, text_vecs={e["entity_id"]: v for e, v in zip(texted, text)})
