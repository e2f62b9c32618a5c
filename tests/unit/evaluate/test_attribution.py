"""Cultural attribution (seed 004, CAIRe) without a served judge: the KB index and visual entity linking, the
agreement checks, the push order by the judge's uncertainty, seed 004's binarisation."""
from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest
from PIL import Image

from cultura.db import now
from cultura.evaluate.suites.attribution import (build_kb_index, import_kb, link_image, relevance_agreement)
from cultura.models.embedders import FakeEmbedder, embed_images_cached

COLORS = {"red": (200, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 200)}


def _store_images(project):
    shas = {}
    for name, rgb in COLORS.items():
        im = Image.new("RGB", (16, 16), rgb)
        path = project.root / "blobs" / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        im.save(path)
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        project.db["images"].insert({"sha256": sha, "path": f"blobs/{name}.png", "format": "png", "width": 16,
                                     "height": 16, "bytes": path.stat().st_size, "status": "ok",
                                     "created_at": now()})
        shas[name] = sha
    return shas


@pytest.fixture
def world(project, tmp_path):
    shas = _store_images(project)
    kbdir = tmp_path / "kb"
    kbdir.mkdir()
    for name, rgb in COLORS.items():
        Image.new("RGB", (16, 16), rgb).save(kbdir / f"{name}.png")
    rows = [
        {"id": "e:sushi", "lemma": "sushi", "gloss": "Japanese dish", "text": "Sushi is a dish from Japan.",
         "images": ["red.png"]},
        {"id": "e:fruit", "lemma": "fruit", "text": "Fruit is eaten everywhere.", "images": "red.png;green.png"},
        {"id": "e:padthai", "lemma": "pad thai", "text": "Pad thai is a dish from Thailand.",
         "images": ["blue.png"], "frequency": 3},
    ]
    (kbdir / "kb.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = import_kb(project, kbdir / "kb.jsonl", kb="tiny")
    assert summary == {"kb": "tiny", "entities": 3, "images": 3, "missing_images": 0}
    return project, shas


def test_index_and_linking(world):
    project, shas = world
    emb = FakeEmbedder(dim=16)
    index = build_kb_index(project, emb, "tiny")
    assert index.size == 3 and index.index.ntotal == 3
    red = embed_images_cached(project, emb, [shas["red"]])[0]
    # k=1: the identical KB image (red) carries two entities; union, then re-rank by image-lemma cosine
    ranked = link_image(index, red, k=1, method="lemma")
    assert {e for e, _ in ranked} == {"e:sushi", "e:fruit"}
    manual = sorted(((e, float(np.dot(red, index.lemma_vecs[e]))) for e in ("e:sushi", "e:fruit")),
                    key=lambda t: -t[1])
    assert [e for e, _ in ranked] == [e for e, _ in manual]
    assert ranked[0][1] == pytest.approx(manual[0][1], abs=1e-5)
    freq = link_image(index, red, k=3, method="frequency")
    assert freq[0] == ("e:fruit", 2.0)  # fruit owns red and green
    assert len(link_image(index, red, k=20)) == 3  # k larger than the index


def test_relevance_agreement_validates():
    with pytest.raises(ValueError, match="same length"):
        relevance_agreement([1, 2], [1], ["JP", "JP"])
    r = relevance_agreement([4.0, 4.0, 4.0], [1, 5, 3], ["JP"] * 3, aggregation="pooled")
    assert math.isnan(r["pearson"]) and "constant" in r["pearson_reason"]


def test_push_prioritise_orders_by_judge_uncertainty(monkeypatch):
    """`annotate push relevance --prioritise attribution` puts the pairs the judge is least sure about first."""
    from cultura.evaluate.suites.attribution import priority as push_mod
    from cultura.errors import CulturaError
    from cultura.evaluate.suites.attribution import priority as ev

    items = [{"sha256": "a", "country": "JP"}, {"sha256": "b", "country": "JP"}, {"sha256": "c", "country": "TH"}]
    monkeypatch.setattr(ev, "judge_uncertainty", lambda project: [("c", "TH", 0.9), ("a", "JP", 0.2)])
    out = push_mod.prioritised(None, "relevance", items, "attribution")
    assert [i["sha256"] for i in out] == ["c", "a", "b"]
    import pytest
    with pytest.raises(CulturaError, match="relevance"):
        push_mod.prioritised(None, "filter", items, "attribution")
    with pytest.raises(KeyError, match="Unknown priority"):
        push_mod.prioritised(None, "relevance", items, "judge")
    monkeypatch.setattr(ev, "judge_uncertainty", lambda project: [])
    with pytest.raises(CulturaError, match="cultura attribution run"):
        push_mod.prioritised(None, "relevance", items, "attribution")


def test_binarisation_is_seed_004_scores_greater_than_3():
    """Seed 004 §5.4: "we convert all metrics' outputs into binary judgments by assigning scores greater than 3
    on the five-point scale (relevant, highly relevant) to positive label 1, and the others 0." A continuous
    expected score of 3.6 is relevant, 3.0 is not; ``rule="ge"`` is the other reading (score >= t, App. C.7)."""
    from cultura.evaluate.suites.attribution.evaluation import binarise, binary_metrics, relevance_agreement

    assert binarise([3.0, 3.6, 4.0, 2.9]).tolist() == [False, True, True, False]
    assert binarise([3.0, 3.6, 4.0], threshold=4, rule="ge").tolist() == [False, False, True]
    m = binary_metrics([3.6, 3.2, 1.0, 4.8], [4, 5, 4, 1])
    assert (m["precision"], m["recall"], m["rule"]) == (2 / 3, 2 / 3, "score > 3")
    ge = binary_metrics([3.6, 3.2, 1.0, 4.8], [4, 5, 4, 1], threshold=4, rule="ge")
    assert (ge["precision"], ge["recall"]) == (0.0, 0.0)
    r = relevance_agreement([3.6, 3.2, 1.0, 4.8], [4, 5, 4, 1], ["JP"] * 4, aggregation="pooled")
    assert r["rule"] == "score > 3" and r["by_threshold"][4.0]["rule"] == "score >= 4"
    with pytest.raises(ValueError, match="rule"):
        binarise([1.0], rule="gte")
