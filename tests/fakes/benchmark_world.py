"""A benchmark world: small ready benchmarks inserted directly into the tables, and the planted-bias fake.

``make_benchmarks(project)`` stores concept × country images, benchmark queries, an association benchmark and
(optionally) a descriptor benchmark. :class:`Planted` knows each image's concept and culture from its pixels
and each query's concept, language culture and descriptor from a lookup table, and builds vectors from
orthogonal concept / culture directions, so the strength of a planted bias is a single number a test turns.

The other fixture worlds: :mod:`tests.fakes.world` (curation rows: concepts, terms, queries, candidates,
images) and :mod:`tests.fakes.drawn_world` (drawn images served on 127.0.0.1 for the curation pipeline).
"""
from __future__ import annotations

import io

import numpy as np
from PIL import Image

from cultura.db import now
from cultura.db.blobs import store_blob
from cultura.models.embedders import FakeEmbedder

COUNTRIES = ["US", "JP", "TH", "DE"]
LANG = {"US": "en", "JP": "ja", "TH": "th", "DE": "de"}
FAST = {"n_resamples": 100, "projection": "pca"}


# -- a small world ---------------------------------------------------------------------------------

def _png(ci: int, ki: int, copy: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (4, 4), (ci, ki, copy)).save(buf, format="PNG")
    return buf.getvalue()


def make_benchmarks(project, *, n_concepts: int = 8, per_cell: int = 2, descriptor: bool = True,
               name: str = "xcm", countries=COUNTRIES, lang=LANG) -> dict:
    """Concepts × countries images, an association benchmark (every concept × query country × copy) and,
    with ``descriptor``, a descriptor benchmark (every concept × query country × descriptor country).
    ``countries``/``lang`` replace the default four countries and their languages (countries may share one)."""
    COUNTRIES, LANG = list(countries), dict(lang)  # noqa: N806 (the module defaults' names, shadowed)
    db = project.db
    ts = now()
    meta: dict[str, tuple] = {}          # query text -> (concept idx, language country idx, descriptor idx)
    cids, img = [], {}
    with db.conn:
        for ci in range(n_concepts):
            cids.append(db["concepts"].insert({"name": f"concept{ci}", "source": "manual", "created_at": ts}).last_pk)
            for ki, cc in enumerate(COUNTRIES):
                for copy in range(per_cell):
                    data = _png(ci, ki, copy)
                    sha, rel = store_blob(project, data, "png")
                    db["images"].insert({"sha256": sha, "path": rel, "format": "png", "width": 4, "height": 4,
                                         "bytes": len(data), "created_at": ts}, replace=True)
                    img[(ci, cc, copy)] = sha

        def query(ci, cc, variant, text, dcc=None):
            db["benchmark_queries"].insert({
                "concept_id": cids[ci], "country": cc, "language": LANG[cc], "variant": variant,
                "descriptor_country": dcc, "text": text, "source": "manual", "status": "ok", "updated_at": ts})
            meta[text] = (ci, COUNTRIES.index(cc), COUNTRIES.index(dcc) if dcc else None)

        for ci in range(n_concepts):
            for cc in COUNTRIES:
                query(ci, cc, "short", f"concept{ci} [{LANG[cc]}]")
                query(ci, cc, "task", f"I need concept{ci} for homework [{LANG[cc]}]")
                for dcc in COUNTRIES:
                    if dcc != cc:
                        query(ci, cc, f"mention_{dcc}", f"concept{ci} of {dcc} [{LANG[cc]}]", dcc)
        bid = db["benchmarks"].insert({"name": name, "version": 1, "kind": "association", "content_hash": "h-assoc",
                                       "status": "ready", "created_at": ts}).last_pk
        n = 0
        for ci in range(n_concepts):
            for li, cc in enumerate(COUNTRIES):
                for copy in range(per_cell):
                    other = COUNTRIES[(li + 1 + copy) % len(COUNTRIES)]
                    third = COUNTRIES[(li + 2 + copy) % len(COUNTRIES)]
                    oc = (ci + 1 + copy) % n_concepts
                    item = db["benchmark_items"].insert({
                        "benchmark_id": bid, "item_key": f"{ci}-{cc}-{copy}", "concept_id": cids[ci],
                        "query_country": cc, "query_language": LANG[cc]}).last_pk
                    for pos, (role, c2, k2) in enumerate((("cr", ci, other), ("lb", oc, cc), ("ti", oc, third))):
                        db["benchmark_candidates"].insert({"item_id": item, "role": role, "position": pos,
                                                           "sha256": img[(c2, k2, copy)], "concept_id": cids[c2],
                                                           "country": k2})
                    n += 1
        db["benchmarks"].update(bid, {"n_items": n})
        if descriptor:
            did = db["benchmarks"].insert({"name": f"{name}-cd", "version": 1, "kind": "descriptor",
                                           "content_hash": "h-desc", "status": "ready", "created_at": ts}).last_pk
            for ci in range(n_concepts):
                oc = (ci + 1) % n_concepts
                for li, cc in enumerate(COUNTRIES):
                    for dcc in COUNTRIES:
                        if dcc == cc:
                            continue
                        third = next(c for c in COUNTRIES if c not in (cc, dcc))
                        item = db["benchmark_items"].insert({
                            "benchmark_id": did, "item_key": f"{ci}-{cc}-{dcc}", "concept_id": cids[ci],
                            "query_country": cc, "query_language": LANG[cc], "descriptor_country": dcc}).last_pk
                        roles = (("cr", ci, dcc), ("orlb", ci, cc), ("or", ci, third), ("cdr", oc, dcc),
                                 ("lb", oc, cc), ("ti", oc, third))
                        for pos, (role, c2, k2) in enumerate(roles):
                            db["benchmark_candidates"].insert({"item_id": item, "role": role, "position": pos,
                                                               "sha256": img[(c2, k2, 0)], "concept_id": cids[c2],
                                                               "country": k2})
    return {"meta": meta, "concept_ids": cids, "images": img}


class LanguageRecorder(FakeEmbedder):
    """A language-aware fake (as NLLB-CLIP) recording the language each text is embedded in (``seen``)."""

    variant = "language-recorder"
    language_aware = True

    def __init__(self, **kw):
        super().__init__(**kw)
        self.seen = []

    def _embed_text_batch(self, texts, language=None):
        self.seen += [(language, t) for t in texts]
        return super()._embed_text_batch(texts)


class Planted(FakeEmbedder):
    """Image = concept + culture directions; query = concept + alpha·(its language's culture) + gamma·(its
    descriptor's culture) + english_boost for English texts; all with a little hash noise."""

    def __init__(self, meta, *, alpha=0.0, gamma=0.0, concept=1.0, english_boost=0.0, noise=0.3, dim=64, **kw):
        super().__init__(dim=dim, **kw)
        self.meta, self.alpha, self.gamma, self.concept_w = meta, alpha, gamma, concept
        self.english_boost, self.noise = english_boost, noise
        self.variant = f"planted-a{alpha}-g{gamma}-c{concept}-e{english_boost}-n{noise}"
        rng = np.random.default_rng(123)
        self.basis = np.linalg.qr(rng.standard_normal((dim, dim)))[0]

    def _dir(self, i):
        return self.basis[i]

    def image_vector(self, img):
        ci, ki, _ = img.getpixel((0, 0))
        v = self.concept_w * self._dir(ci) + self._dir(40 + ki) + self._dir(63)
        return v + self.noise * super().image_vector(img) / 8

    def text_vector(self, text):
        ci, ki, di = self.meta[text]
        v = self.concept_w * self._dir(ci) + self.alpha * self._dir(40 + ki)
        if di is not None:
            v = v + self.gamma * self._dir(40 + di)
        if text.endswith("[en]"):
            v = v + self.english_boost * self._dir(63)
        return v + self.noise * super().text_vector(text) / 8
