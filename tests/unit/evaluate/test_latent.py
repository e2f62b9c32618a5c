"""Latent-space probes (seed 002) on planted structure: WW vs WN significance, the null's false-positive rate,
Welch against scipy, grouping from data, exclusions, native-term templates. (With figures and the report:
tests/integration/evaluate/test_latent_with_figures.py.)"""
from __future__ import annotations

import io
import math

import numpy as np
import pytest
from PIL import Image
from scipy import stats

from cultura.db import now
from cultura.models.embedders import FakeEmbedder
from cultura.evaluate.stats import welch_ww_wn
from cultura.evaluate.stats_extra import country_permutation_test, effect_band
from cultura.evaluate.suites import SuiteSkipped
from cultura.evaluate.suites.latent.suite import country_pair_matrix, latent, ww_wn_samples
from tests.fakes.benchmark_world import LanguageRecorder
from tests.fakes.world import add_image, decide

WEST, REST = ["US", "DE", "GB"], ["JP", "TH", "IN"]
FAST = {"projection": "none", "n_resamples": 50, "permutations": 99}


def marker_png(rng, western: bool, size: int = 8) -> bytes:
    """A random tiny PNG whose pixel (0, 0) says whether its country is Western (red = 255)."""
    arr = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
    arr[0, 0] = (255 if western else 0, 0, 0)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


class WesternCluster(FakeEmbedder):
    """Western images share a direction (a tighter cluster); captions lean towards it too."""

    variant = "western-cluster"

    def image_vector(self, img):
        v = super().image_vector(img)
        if img.getpixel((0, 0))[0] == 255:
            v[0] += 6.0
        return v

    def text_vector(self, text):
        v = super().text_vector(text)
        v[0] += 6.0
        return v


def build(project, *, concepts=("bus", "food"), per_cell=4, seed=0):
    rng = np.random.default_rng(seed)
    db = project.db
    shas = {}
    with db.conn:
        for name in concepts:
            cid = db["concepts"].insert({"name": name, "source": "manual", "status": "active",
                                         "created_at": now()}).last_pk
            for cc in WEST + REST:
                shas[(name, cc)] = [add_image(project, cid, cc, marker_png(rng, cc in WEST), rank=i + 1)
                                    for i in range(per_cell)]
    return shas


@pytest.fixture
def six(tmp_path):
    from cultura.project import init_project

    p = init_project(tmp_path / "proj", countries=WEST + REST)
    yield p
    p.close()


def _by(rows, metric):
    return [r for r in rows if r["metric"] == metric]


def test_planted_western_cluster_is_significant(six):
    build(six)
    rows = latent(six, WesternCluster(dim=16), options={**FAST, "unit": "image"})
    tests = _by(rows, "ww_vs_wn")
    assert len(tests) == 2
    for t in tests:
        d = t["details"]
        assert d["status"] == "ok" and d["significant_bonf"] and d["significant_holm"]
        assert d["mean_ww"] > d["mean_wn"] and d["p_bonf"] < 1e-6
        assert d["n_ww"] == 3 * 4 * 4 and d["n_wn"] == 12 * 12  # cross-country WW pairs; all WN pairs
        assert d["p_perm"] <= 0.1  # 3 of 6 countries: the smallest possible exact p is 1/20
    assert _by(rows, "ww_vs_wn_significant")[0]["value"] == 1.0
    # the caption leans to the Western direction: C-ASC large and positive, CI above 0
    for r in _by(rows, "c_asc"):
        assert r["value"] > 0.8 and r["ci_low"] > 0 and r["details"]["band"] == "large"
    ranks = {r["group"]["country"]: r["value"] for r in _by(rows, "alignment_rank")}
    assert max(ranks[c] for c in WEST) < min(ranks[c] for c in REST)
    heat = _by(rows, "heatmap")[0]["details"]
    assert heat["countries"][:3] == sorted(WEST) and heat["in_group"] == [True] * 3 + [False] * 3
    assert rows[0]["details"]["provenance"]["benchmark_hash"]


def test_no_planted_structure_not_significant(six):
    build(six, per_cell=3)
    rows = latent(six, FakeEmbedder(dim=16), options=FAST)
    assert not any(t["details"]["significant_bonf"] for t in _by(rows, "ww_vs_wn"))


def test_false_positive_rate_near_alpha_over_seeds():
    """Isotropic null (no group structure): the one-sided Welch p and the country permutation p reject at
    about α = 0.05 over 40 seeds (expected 2; Binomial(40, 0.05) exceeds 6 with probability < 1.4%)."""
    countries = [c for c in WEST + REST for _ in range(3)]
    in_group = np.array([c in WEST for c in countries])
    order = WEST + REST
    welch, perm = 0, 0
    for seed in range(40):
        emb = np.random.default_rng(seed).standard_normal((len(countries), 16))
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
        ww, wn = ww_wn_samples(emb, in_group, countries, unit="image")
        welch += welch_ww_wn(ww, wn).p < 0.05
        sums, counts = country_pair_matrix(emb, countries, order)
        perm += country_permutation_test(sums, counts, [c in WEST for c in order], n_resamples=99,
                                         seed=seed)["p"] < 0.05
    assert welch <= 6 and perm <= 6


def test_country_unit_has_the_seed_shape():
    """7 Western + 9 other countries, 3 images each: country-pair means give n_WW = 21, n_WN = 63 (Table 3)."""
    west = [f"W{i}" for i in range(7)]
    rest = [f"N{i}" for i in range(9)]
    countries = [c for c in west + rest for _ in range(3)]
    emb = np.random.default_rng(0).standard_normal((len(countries), 8))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    g = np.array([c in west for c in countries])
    order = west + rest
    m = country_pair_matrix(emb, countries, order)
    ww, wn = ww_wn_samples(emb, g, countries, unit="country", order=order, matrix=m)
    assert (len(ww), len(wn)) == (21, 63)
    # image pairs: all-pairs WW includes same-country pairs, cross-country leaves them out
    ww_all, _ = ww_wn_samples(emb, g, countries, unit="image", pairs="all")
    ww_cross, wn_img = ww_wn_samples(emb, g, countries, unit="image")
    assert len(ww_all) == 21 * 20 // 2 and len(ww_cross) == 21 * 20 // 2 - 7 * 3 and len(wn_img) == 21 * 27
    # the matrix agrees with a direct computation
    sims = emb @ emb.T
    assert math.isclose(m[0][0, 1] / m[1][0, 1], sims[0:3, 3:6].mean())


def test_welch_matches_scipy_one_sided():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.6, 0.05, 30), rng.normal(0.55, 0.08, 50)
    r = welch_ww_wn(a, b)
    ref = stats.ttest_ind(a, b, equal_var=False, alternative="greater")
    assert math.isclose(r.p, ref.pvalue) and math.isclose(r.statistic, ref.statistic)


def test_grouping_from_a_user_file_and_region_attribute(six, tmp_path):
    build(six, concepts=("bus",), per_cell=2)
    f = tmp_path / "groups.csv"
    f.write_text("country,group\nUS,north\nDE,north\nGB,north\nJP,south\nTH,south\nIN,south\n")
    with pytest.raises(Exception, match="in_group"):
        latent(six, FakeEmbedder(dim=8), options={**FAST, "groups_file": str(f)})
    rows = latent(six, WesternCluster(dim=8), options={**FAST, "groups_file": str(f), "in_group": "north"})
    t = _by(rows, "ww_vs_wn")[0]
    assert t["details"]["in_group"] == "groups=north" and t["details"]["mean_ww"] > t["details"]["mean_wn"]
    rows = latent(six, FakeEmbedder(dim=8), options={**FAST, "grouping": "region", "in_group": "Western Europe"})
    heat = _by(rows, "heatmap")[0]["details"]
    assert heat["countries"][0] == "DE" and heat["in_group"] == [True] + [False] * 5
    # one in-group country has no cross-country WW pairs: the concept is a skipped row with its reason
    t = _by(rows, "ww_vs_wn")[0]
    assert t["details"]["status"] == "skipped" and "at least 2" in t["details"]["reason"]
    assert math.isnan(t["value"])


def test_exclusions_are_counted(six):
    shas = build(six, concepts=("bus",), per_cell=2)
    decide(six, "filter", shas[("bus", "US")][0], label="remove")
    cid = six.db.execute("SELECT id FROM concepts WHERE name = 'bus'").fetchone()[0]
    path = six.db.execute("SELECT path FROM images WHERE sha256 = ?", [shas[("bus", "DE")][0]]).fetchone()[0]
    add_image(six, cid, "JP", six.blob_path(path).read_bytes(), rank=99)  # the same image found for JP too
    rows = latent(six, FakeEmbedder(dim=8), options=FAST)
    meta = rows[0]["details"]
    assert meta["excluded"]["filter_removed"] == 1 and meta["excluded"]["multi_country"] == 1
    assert rows[0]["value"] == 12 - 2


def test_skipped_without_images(project):
    with pytest.raises(SuiteSkipped, match="No images"):
        latent(project, FakeEmbedder(dim=8), options=FAST)


def test_template_in_another_language_uses_native_terms(six):
    build(six, concepts=("bus",), per_cell=2)
    cid = six.db.execute("SELECT id FROM concepts WHERE name = 'bus'").fetchone()[0]
    six.db["terms"].insert({"concept_id": cid, "country": "JP", "language": "ja", "term": "バス",
                            "source": "manual", "updated_at": now()})
    rows = latent(six, FakeEmbedder(dim=8), options={**FAST, "templates": [
        "A photo of a {concept}", {"template": "{term}の写真", "language": "ja"},
        {"template": "Una foto de {term}", "language": "es"}]})
    caps = {r["group"]["language"]: r for r in _by(rows, "c_asc")}
    assert caps["ja"]["details"]["caption"] == "バスの写真" and math.isfinite(caps["ja"]["value"])
    assert math.isnan(caps["es"]["value"]) and "no term" in caps["es"]["details"]["reason"]
    assert effect_band(caps["en"]["value"]) == caps["en"]["details"]["band"]


def test_caption_language_reaches_the_model(six):
    build(six, concepts=("bus",), per_cell=2)
    cid = six.db.execute("SELECT id FROM concepts WHERE name = 'bus'").fetchone()[0]
    six.db["terms"].insert({"concept_id": cid, "country": "JP", "language": "ja", "term": "バス",
                            "source": "manual", "updated_at": now()})
    e = LanguageRecorder(dim=8)
    latent(six, e, options={**FAST, "templates": ["A photo of a {concept}",
                                                  {"template": "{term}の写真", "language": "ja"}]})
    assert sorted(e.seen) == [("en", "A photo of a bus"), ("ja", "バスの写真")]
