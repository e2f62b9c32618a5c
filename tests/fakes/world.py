"""Small synthetic worlds for build/export tests: rows inserted directly into the core tables.

``make_world(project, concepts=[...], countries=[...], per_cell=N, seed=0)`` creates, for every concept ×
country cell, ``per_cell`` tiny distinct PNG images found by that country's native query, with native terms
(``<concept>-<cc>``, or the concept name for English), and returns what it made.
"""
from __future__ import annotations

import io

import numpy as np
from PIL import Image

from cultura.db.blobs import store_blob
from cultura.db import now


def tiny_png(rng: np.random.Generator, size: int = 8) -> bytes:
    arr = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def add_image(project, concept_id: int, country: str, data: bytes, *, rank: int = 1, query_kind="native",
              source_page: str | None = None) -> str:
    """Store ``data`` as an image found by the (concept, country) query; returns its sha256."""
    db = project.db
    lang = project.country(country).language
    q = db.execute("SELECT id FROM queries WHERE concept_id = ? AND country = ? AND kind = ?",
                   [concept_id, country, query_kind]).fetchone()
    if q is None:
        qid = db["queries"].insert({"concept_id": concept_id, "country": country, "language": lang,
                                    "kind": query_kind, "text": f"q-{concept_id}-{country}",
                                    "status": "active", "created_at": now()}).last_pk
    else:
        qid = q[0]
    img = Image.open(io.BytesIO(data))
    sha, rel = store_blob(project, data, img.format)
    db["images"].insert({"sha256": sha, "path": rel, "format": img.format.lower(), "width": img.width,
                         "height": img.height, "bytes": len(data), "status": "ok",
                         "created_at": "2025-01-01T00:00:00+00:00"}, ignore=True)
    url = f"http://example.test/{sha}/{concept_id}/{country}"
    db["candidates"].insert({"url": url, "status": "downloaded", "sha256": sha, "updated_at": now()},
                            ignore=True)
    cand = db.execute("SELECT id FROM candidates WHERE url = ?", [url]).fetchone()[0]
    n = db.execute("SELECT count(*) FROM search_results WHERE query_id = ?", [qid]).fetchone()[0]
    db["search_results"].insert({"query_id": qid, "provider": "test", "rank": rank if rank else n + 1,
                                 "candidate_id": cand, "url": url,
                                 "source_page": source_page or f"http://example.test/page/{sha[:8]}",
                                 "found_at": "2025-01-02T00:00:00+00:00"}, ignore=True)
    return sha


def make_world(project, concepts=("bus", "temple", "food"), countries=None, per_cell: int = 3, seed: int = 0,
               *, terms: bool = True) -> dict:
    """Create concepts, terms, queries, candidates, search results and images for every cell."""
    db = project.db
    countries = list(countries or [c.code for c in project.countries])
    rng = np.random.default_rng(seed)
    ids, images = {}, {}
    with db.conn:
        for name in concepts:
            db["concepts"].insert({"name": name, "source": "manual", "status": "active", "created_at": now()},
                                  ignore=True)
            ids[name] = db.execute("SELECT id FROM concepts WHERE name = ?", [name]).fetchone()[0]
            for cc in countries:
                lang = project.country(cc).language
                if terms:
                    db["terms"].insert({"concept_id": ids[name], "country": cc, "language": lang,
                                        "term": name if lang == "en" else f"{name}-{cc.lower()}",
                                        "source": "manual", "updated_at": now()}, replace=True)
                images[(name, cc)] = [add_image(project, ids[name], cc, tiny_png(rng), rank=i + 1)
                                      for i in range(per_cell)]
    return {"concepts": ids, "images": images, "countries": countries}


def mention_queries(project, countries=None) -> int:
    """A hand-set short descriptor query ``mention_<D>`` ("<term> (D)") for every active concept × query country
    L × descriptor country D ≠ L (as a person would set them with 'cultura build set-query'). Returns rows."""
    db = project.db
    codes = list(countries or [c.code for c in project.countries])
    terms = {(cid, cc): (lang, term) for cid, cc, lang, term in db.execute(
        "SELECT concept_id, country, language, term FROM terms")}
    rows = []
    for (cid,) in db.execute("SELECT id FROM concepts WHERE status = 'active'").fetchall():
        for L in codes:
            if (cid, L) not in terms:
                continue
            lang, term = terms[(cid, L)]
            for D in codes:
                if D != L:
                    rows.append({"concept_id": cid, "country": L, "language": lang, "variant": f"mention_{D}",
                                 "descriptor_country": D, "text": f"{term} ({D})", "source": "manual",
                                 "status": "ok", "reason": None, "updated_at": now()})
    db["benchmark_queries"].insert_all(rows, replace=True)
    return len(rows)


def decide(project, kind: str, sha: str, *, label=None, value=None, country=None, cluster_id=None):
    """Insert a current decision row (as the annotation area would)."""
    project.db["decisions"].insert({"kind": kind, "item_key": f"{kind}:{sha}:{country or ''}", "sha256": sha,
                                    "country": country, "cluster_id": cluster_id, "label": label,
                                    "value": value, "rule": "manual", "n_annotations": 3, "agreement": 0.8,
                                    "superseded": 0, "decided_at": "2025-02-01T00:00:00+00:00"})


def dup_cluster(project, shas: list[str]) -> int:
    """An open duplicate cluster over ``shas``."""
    db = project.db
    run = db["dedup_runs"].insert({"method": "phash", "scope": "global", "created_at": now()}).last_pk
    cid = db["dup_clusters"].insert({"run_id": run, "method": "phash", "scope": "global",
                                     "representative": shas[0], "size": len(shas), "status": "open",
                                     "created_at": now()}).last_pk
    for s in shas:
        db["dup_members"].insert({"cluster_id": cid, "sha256": s, "distance": 0.0})
    return cid
