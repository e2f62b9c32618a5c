"""The latent-space probe (seed 002) with its figures: the paper's country pairs as the default unit, the report
section, the alignment tile map."""
from __future__ import annotations


import numpy as np
import pytest

from cultura.db import now
from cultura.models.embedders import FakeEmbedder
from cultura.evaluate.suites.latent.suite import latent
from tests.fakes.world import add_image
from tests.unit.evaluate.test_latent import FAST, REST, WEST, WesternCluster, _by, build, marker_png, six  # noqa: F401 - shared with the unit tests


SEED002_COUNTRIES = "US CA GB DE ES AU NZ JP CN IN ZA NG EG AR BR FJ".split()  # seed 002 Table 2: 7 + 9


def test_default_unit_is_the_papers_country_pairs(tmp_path):
    """Seed 002 Table 3: 7 Western + 9 non-Western countries × 3 images give n_WW = 21, n_WN = 63 by default
    (country pairs); image pairs (189 / 567) are an option, labelled as such."""
    from cultura.evaluate.report import build_report
    from cultura.evaluate.runner import run_evaluation
    from cultura.project import init_project

    p = init_project(tmp_path / "proj", countries=SEED002_COUNTRIES)
    try:
        rng = np.random.default_rng(0)
        cid = p.db["concepts"].insert({"name": "breakfast", "source": "manual", "status": "active",
                                       "created_at": now()}).last_pk
        for cc in SEED002_COUNTRIES:
            for i in range(3):
                add_image(p, cid, cc, marker_png(rng, p.registry.country(cc).western), rank=i + 1)
        d = _by(latent(p, WesternCluster(dim=16), options=FAST), "ww_vs_wn")[0]["details"]
        assert (d["n_ww"], d["n_wn"], d["unit"]) == (21, 63, "country")
        assert d["mean_ww"] > d["mean_wn"] and d["significant_bonf"]
        d = _by(latent(p, WesternCluster(dim=16), options={**FAST, "unit": "image"}), "ww_vs_wn")[0]["details"]
        assert (d["n_ww"], d["n_wn"]) == (21 * 9, 63 * 9)
        assert "not independent" in d["unit_label"]
        with pytest.raises(Exception, match="Unknown unit"):
            latent(p, FakeEmbedder(dim=8), options={**FAST, "unit": "pair"})
        recs = run_evaluation(p, [WesternCluster(dim=8)], "latent", options=FAST, progress=False)
        assert recs[0].status == "done", recs[0].reason
        md = dict(build_report(p)["sections"])["latent"].markdown
        assert "| 21 | 63 |" in md.replace("  ", " ") and "country pairs (the paper's unit" in md
    finally:
        p.close()


def test_runner_report_section(six):
    from cultura.evaluate.report import build_report, render_html
    from cultura.evaluate.runner import run_evaluation

    build(six, concepts=("bus",), per_cell=3)
    recs = run_evaluation(six, [WesternCluster(dim=8)], "latent", options={**FAST, "projection": "pca"},
                          progress=False)
    assert recs[0].status == "done", recs[0].reason
    report = build_report(six)
    sec = dict(report["sections"])["latent"]
    assert "seed 002 Table 3" in sec.markdown and "Table 4" in sec.markdown
    assert sec.html.count("<img") >= 3 and sec.csv_tables["table3"]
    assert "Latent-space probes" in render_html(report)


def test_alignment_tile_map_places_every_seed_country():
    """Seed 002 Figure 4: the 16 countries of Table 2 each get one tile (no two share a cell), near their
    centroid; a code without a centroid is reported, not dropped silently."""
    from cultura.evaluate.suites.latent.report import (TILE_DEG, alignment_map, country_centroids,
                                                       tile_positions)

    pos, missing = tile_positions(SEED002_COUNTRIES + ["XX"])
    assert missing == ["XX"] and set(pos) == set(SEED002_COUNTRIES)
    assert len(set(pos.values())) == len(pos)
    cents = country_centroids()
    for c, (x, y) in pos.items():
        lat, lon = cents[c]
        assert abs(x * TILE_DEG - lon) <= 3 * TILE_DEG and abs(y * TILE_DEG - lat) <= 3 * TILE_DEG
    assert pos["JP"][0] > pos["CN"][0] > pos["DE"][0] > pos["US"][0] and pos["ZA"][1] < pos["NG"][1] < pos["EG"][1]
    rows = [{"model_spec": "m", "metric": "alignment_rank", "value": float(i), "group": {"country": c,
             "template": "A photo of a {concept}", "language": "en"}, "details": {}}
            for i, c in enumerate(SEED002_COUNTRIES + ["XX"])]
    uri, unplaced = alignment_map(rows, "m")
    assert uri.startswith("data:image/png;base64,") and unplaced == ["XX"]
