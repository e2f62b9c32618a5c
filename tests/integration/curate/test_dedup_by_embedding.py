"""The embedding dedup method with a tiny random-init open_clip model."""
from __future__ import annotations

import json

import pytest

from cultura.curate.dedup import dedup_images
from tests.unit.curate.test_clusters_a_person_can_review import assert_members_confirmed_against_their_representative
from tests.unit.curate.test_dedup import Builder, SIZE, clusters, crop, encode, names, pictures, world  # noqa: F401 - shared with the unit tests


def test_embedding_method_with_tiny_open_clip(world):
    pytest.importorskip("open_clip")
    p, s, _ = world
    res = dedup_images(p, methods=["embedding"], embedder="openclip:cultura-tiny", embedding_threshold=0.9999,
                       progress=False)
    assert res["clusters"]["embedding"] >= 1
    assert any(names(s, "G_png1", "G_png9") <= members for members in clusters(p, "embedding"))
    params = json.loads(p.db.execute("SELECT params FROM dedup_runs WHERE method = 'embedding'").fetchone()[0])
    assert params["embedder"].startswith("openclip:cultura-tiny")
    assert_members_confirmed_against_their_representative(p)  # the embedding door: no chaining either
