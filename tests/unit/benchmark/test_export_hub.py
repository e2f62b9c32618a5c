"""The Hub export's dataset card: the licence and the languages it states. (Loading it with datasets and pushing
it: tests/integration/benchmark/test_export_hub_loads_in_datasets.py, test_push_to_hub.py.)"""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from cultura.benchmark.build import build_benchmark
from cultura.benchmark import hub
from tests.fakes.world import add_image, make_world, mention_queries


def _photos(n: int) -> list[bytes]:
    """``n`` distinct JPEG photographs: crops of scikit-image's sample photos."""
    from skimage import data

    srcs = [data.astronaut(), data.coffee(), data.chelsea(), data.rocket()]
    out = []
    for i in range(n):
        src = srcs[i % len(srcs)]
        y, x = (i // len(srcs)) * 17 % 120, (i // len(srcs)) * 29 % 120
        crop = np.ascontiguousarray(src[y:y + 96, x:x + 128, :3])
        buf = io.BytesIO()
        Image.fromarray(crop).save(buf, format="JPEG", quality=90)
        out.append(buf.getvalue())
    return out


@pytest.fixture
def photos(project):
    w = make_world(project, per_cell=0)
    pics = iter(_photos(3 * 4 * 2))
    for (concept, cc) in w["images"]:
        for rank in (1, 2):
            add_image(project, w["concepts"][concept], cc, next(pics), rank=rank)
    build_benchmark(project, "association", allow_unreviewed=True, per_pair=2)
    mention_queries(project)  # a descriptor benchmark is complete only with its mention_<CC> queries
    build_benchmark(project, "descriptor", allow_unreviewed=True)
    return project


def test_card_licence_other_and_languages(photos, tmp_path):
    photos.config.build.license = "Research use only, see LICENSE"
    tables = __import__("cultura.benchmark.export", fromlist=["collect"]).collect(photos)
    data = hub.card_data(photos, tables, hub.table_configs("parquet"))
    assert data.license == "other" and data.license_name == "research-use-only-see-license"
    photos.config.build.license = "CC-BY-4.0"
    assert hub.card_data(photos, tables, hub.table_configs("parquet")).license == "cc-by-4.0"
    assert hub.size_category(999) == "n<1K" and hub.size_category(1000) == "1K<n<10K"
    with pytest.raises(hub.HubError, match="not exactly one default config"):
        hub.check_card(f"---\n{data.to_yaml()}\n---\n@misc{{x}}\n")
