"""A real-photo test project: the photographs scikit-image and scikit-learn ship (no download), found for
concept × country cells, taken through the real dedup and build, plus a few annotation rows.

``make_photo_world(project)`` plants:

- a duplicate: a half-size re-encoded copy of one photograph, found for another country (so dedup puts the two
  in one set and flags a culture conflict); a review decision keeps the original and drops the copy;
- web texts with markup (``hostile=True``): a concept name and a search-result title holding ``<script>``, and
  a source-page URL with ``<script>`` and a ``javascript:`` one;
- an annotated filter item with a disagreement (three annotators) and an adjudication, with a comment holding
  markup;
- an association benchmark built by :func:`cultura.benchmark.build.build_benchmark`.

Returns what it made (shas by photo name, the duplicate pair, the benchmark).
"""
from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from cultura.benchmark.build import build_benchmark
from cultura.curate.dedup import dedup_images, resolve_flags
from cultura.db import now, transaction

from tests.fakes.world import add_image, decide

COUNTRIES = ["US", "JP", "TH", "DE"]
CONCEPTS = ["breakfast", "street", "animal"]
#: photograph per (concept, country): 12 distinct photographs
PHOTOS = {("breakfast", "US"): "coffee", ("breakfast", "JP"): "astronaut", ("breakfast", "TH"): "chelsea",
          ("breakfast", "DE"): "rocket", ("street", "US"): "camera", ("street", "JP"): "coins",
          ("street", "TH"): "clock", ("street", "DE"): "moon", ("animal", "US"): "china",
          ("animal", "JP"): "flower", ("animal", "TH"): "immunohistochemistry", ("animal", "DE"): "hubble_deep_field"}
TERMS = {"JP": {"breakfast": "朝食", "street": "通り", "animal": "動物"},
         "TH": {"breakfast": "อาหารเช้า", "street": "ถนน", "animal": "สัตว์"},
         "DE": {"breakfast": "Frühstück", "street": "Straße", "animal": "Tier"}}
SCRIPT = "<script>window.__pwned = 1</script>"


def photographs() -> dict[str, Image.Image]:
    skdata = pytest.importorskip("skimage.data")
    from sklearn.datasets import load_sample_images

    out = {}
    for name in set(PHOTOS.values()) - {"china", "flower"}:
        out[name] = Image.fromarray(getattr(skdata, name)()).convert("RGB")
    for name, a in zip(["china", "flower"], load_sample_images().images):
        out[name] = Image.fromarray(a).convert("RGB")
    return out


def jpeg(im: Image.Image, quality: int = 88) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def make_photo_world(project, *, hostile: bool = False) -> dict:
    db = project.db
    photos = photographs()
    concepts = {c: (f"{c} {SCRIPT}" if hostile and c == "animal" else c) for c in CONCEPTS}
    ids, shas = {}, {}
    with transaction(db):
        for c in CONCEPTS:
            ids[c] = db["concepts"].insert({"name": concepts[c], "source": "manual", "status": "active",
                                            "created_at": now()}).last_pk
            for cc in COUNTRIES:
                lang = project.country(cc).language
                db["terms"].insert({"concept_id": ids[c], "country": cc, "language": lang,
                                    "term": TERMS.get(cc, {}).get(c, c), "source": "manual",
                                    "updated_at": now()}, replace=True)
        for (c, cc), name in PHOTOS.items():
            page = f"https://example.test/page/{name}"
            if hostile and name == "chelsea":
                page = f"https://example.test/p?q={SCRIPT}"
            if hostile and name == "coins":
                page = "javascript:alert(document.domain)"
            shas[name] = add_image(project, ids[c], cc, jpeg(photos[name]), source_page=page)
        if hostile:
            db.execute("UPDATE search_results SET title = ? WHERE candidate_id IN (SELECT id FROM candidates "
                       "WHERE sha256 = ?)", [f"Tabby {SCRIPT}", shas["chelsea"]])
        # the planted duplicate: coffee, half size and re-encoded, found for breakfast × JP
        w, h = photos["coffee"].size
        copy = add_image(project, ids["breakfast"], "JP",
                         jpeg(photos["coffee"].resize((w // 2, h // 2), Image.Resampling.LANCZOS), 60), rank=2)
    dedup_images(project, progress=False)
    cluster = db.execute("SELECT cluster_id FROM dup_members m JOIN dup_clusters c ON c.id = m.cluster_id "
                         "WHERE m.sha256 = ? AND c.status = 'open' ORDER BY c.id LIMIT 1", [copy]).fetchone()[0]
    with transaction(db):
        decide(project, "dedup", shas["coffee"], label="keep", cluster_id=cluster)
        decide(project, "dedup", copy, label="drop", cluster_id=cluster)
        resolve_flags(db, [shas["coffee"], copy], resolution="duplicates: the JP copy dropped", by="dedup review")
        for name, sha in [*shas.items(), ("copy", copy)]:  # the filter review kept the others
            if name != "chelsea":
                decide(project, "filter", sha, label="keep")
        _annotations(project, shas["chelsea"], hostile)
    bench = build_benchmark(project, "association", allow_unreviewed=True, per_pair=1, seed=1)
    return {"ids": ids, "shas": shas, "copy": copy, "cluster": cluster, "benchmark": bench,
            "concepts": concepts}


def _annotations(project, sha: str, hostile: bool) -> None:
    """A filter item three annotators disagreed on, then adjudicated (rows as pull and decide write them)."""
    db = project.db
    ts = now()
    camp = db["campaigns"].insert({"name": "filter", "kind": "filter", "overlap": 3, "created_at": ts}).last_pk
    people = [db["annotators"].insert({"name": n, "email": f"{n}@example.test", "role": role,
                                       "created_at": ts}).last_pk
              for n, role in (("ana", "annotator"), ("bo", "annotator"), ("chai", "annotator"),
                              ("dee", "adjudicator"))]
    item = db["annotation_items"].insert({"campaign_id": camp, "item_key": f"filter:{sha}", "kind": "filter",
                                          "payload": json.dumps({"concept": "breakfast"}), "sha256": sha,
                                          "created_at": ts}).last_pk
    answers = [("keep", None), ("remove", "not breakfast" + (f" {SCRIPT}" if hostile else "")), ("keep", None),
               ("remove", "a cat, not food")]
    for k, (who, (label, reason)) in enumerate(zip(people, answers)):
        db["annotations"].insert({"item_id": item, "annotator_id": who,
                                  "purpose": "adjudicate" if k == 3 else "annotate", "ls_project_id": 1,
                                  "ls_task_id": 1, "ls_annotation_id": k + 1, "version": 1, "result": "[]",
                                  "label": label, "details": json.dumps({"reason": reason} if reason else {}),
                                  "is_current": 1, "pulled_at": ts})
    db["decisions"].insert({"kind": "filter", "item_key": f"filter:{sha}", "sha256": sha, "label": "remove",
                            "rule": "adjudicated", "n_annotations": 4, "agreement": 0.33,
                            "details": json.dumps({"by": "dee", "reason": "a cat, not food"}), "superseded": 0,
                            "decided_at": ts})
