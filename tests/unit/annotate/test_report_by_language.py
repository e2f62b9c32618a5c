"""Agreement broken down by item language (translation campaign: one target language per item), equal to
sklearn's quadratic-weighted Cohen's κ on each language's items."""
from __future__ import annotations

import json

import pytest
from sklearn.metrics import cohen_kappa_score

from cultura.annotate.report import agreement_report
from cultura.db import now


def _annotate(db, item_id, annotator_id, value, n):
    db["annotations"].insert({"item_id": item_id, "annotator_id": annotator_id, "purpose": "annotate",
                              "ls_project_id": 1, "ls_task_id": item_id, "ls_annotation_id": n, "version": 1,
                              "result": json.dumps([]), "value": float(value), "label": str(value),
                              "is_current": 1, "pulled_at": now()})


def test_kappa_by_language(project):
    db = project.db
    cid = db["campaigns"].insert({"name": "tr", "kind": "translation", "overlap": 2, "created_at": now()}).last_pk
    a = db["annotators"].insert({"name": "ana", "email": "ana@example.org", "created_at": now()}).last_pk
    b = db["annotators"].insert({"name": "bo", "email": "bo@example.org", "created_at": now()}).last_pk
    ratings = {"hi": ([5, 4, 3, 5, 2, 4, 5], [5, 4, 4, 5, 3, 4, 4]),
               "fa": ([5, 5, 4, 1, 3, 2, 5], [4, 5, 2, 2, 3, 1, 5])}
    n = 0
    for lang, (xa, xb) in ratings.items():
        for i, (va, vb) in enumerate(zip(xa, xb)):
            item = db["annotation_items"].insert({"campaign_id": cid, "item_key": f"translation:{lang}{i}",
                                                  "kind": "translation", "payload": "{}", "language": lang,
                                                  "created_at": now()}).last_pk
            n += 2
            _annotate(db, item, a, va, n - 1)
            _annotate(db, item, b, vb, n)
    rep = agreement_report(project, "tr")[0]
    assert set(rep["by_language"]) == {"hi", "fa"}
    for lang, (xa, xb) in ratings.items():
        got = rep["by_language"][lang]["pairwise_kappa_quadratic"][0]["kappa"]
        assert got == pytest.approx(cohen_kappa_score(xa, xb, weights="quadratic"))
        assert rep["by_language"][lang]["mean_value"] == pytest.approx((sum(xa) + sum(xb)) / 14)
