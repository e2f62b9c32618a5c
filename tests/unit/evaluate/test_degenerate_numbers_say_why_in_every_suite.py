"""Every embedding suite, run on inputs too small to measure anything (one image per culture, one trial per
country, a concept with no out-group image, one portrait per cell), flags every number that is not a measurement:
a ``nan``/``inf`` value or interval bound says why in words (``details.reason``), a trivially finite one
(a one-image culture's silhouette of 0) is marked ``degenerate`` with its reason, and no reason is a library's
own text ("b has 0 value(s)"). The suites are enumerated from the registry, not listed by hand: a new embedding
suite must join the fixtures below before this passes."""
from __future__ import annotations

import math
import re
from types import SimpleNamespace

import numpy as np
import pytest

from cultura.db import now
from cultura.evaluate.suites import get_suite, load_suites
from cultura.evaluate.suites.registry import UNEXPLAINED, explain_numbers, unexplained
from cultura.evaluate.suites.retrieval.association import silhouette_rows
from cultura.evaluate.suites.social.data import import_portraits, make_synthetic_portraits
from cultura.models.embedders import FakeEmbedder
from tests.fakes.benchmark_world import Planted, make_benchmarks
from tests.fakes.world import add_image
from tests.unit.evaluate.test_latent import REST, WEST, marker_png

#: a library's wording that must never reach a reason: a test's argument names, "value(s)"
RAW = re.compile(r"^[abxy] (has|must|contains) |value\(s\)")
#: suites that score with a language model or a judge, not an embedder (their degenerate inputs: their own tests)
NOT_EMBEDDING = {"llm", "attribution"}
OPTS = {"n_resamples": 20}


def _retrieval(project):
    w = make_benchmarks(project, n_concepts=1, per_cell=1)
    return Planted(w["meta"], alpha=0.5), {}


def _latent(project):
    """Two concepts, one image per country; 'kite' has no image outside the in-group."""
    rng = np.random.default_rng(0)
    for name, ccs in (("bus", WEST + REST), ("kite", WEST)):
        cid = project.db["concepts"].insert({"name": name, "source": "manual", "status": "active",
                                             "created_at": now()}).last_pk
        for cc in ccs:
            add_image(project, cid, cc, marker_png(rng, cc in WEST), rank=1)
    return FakeEmbedder(dim=16), {"projection": "none", "permutations": 0}


def _social(project, tmp_path):
    table = make_synthetic_portraits(tmp_path / "por", per_cell=1, seed=1, races=("White", "East_Asian"))
    import_portraits(project, table, tmp_path / "por", "syn", synthetic=True)
    return FakeEmbedder(), {}


def _suite_rows(name, tmp_path):
    from cultura.project import init_project

    project = init_project(tmp_path / name, countries=WEST + REST if name == "latent" else ["US", "JP", "TH", "DE"])
    embedder, extra = (_latent(project) if name == "latent" else _social(project, tmp_path) if name == "social"
                       else _retrieval(project))
    return get_suite(name).func(project, embedder, options={**OPTS, **extra})


def test_every_embedding_suite_is_checked():
    embedding = {n for n, s in load_suites().items() if s.model_kind == "embedder"} - NOT_EMBEDDING
    assert embedding == {"prevalence", "association", "descriptor", "latent", "social"}, embedding


@pytest.mark.parametrize("name", ["prevalence", "association", "descriptor", "latent", "social"])
def test_every_number_that_is_no_measurement_says_why(name, tmp_path):
    rows = _suite_rows(name, tmp_path)
    assert rows
    assert unexplained(rows) == [], [(r["metric"], r["group"], r["value"]) for r in unexplained(rows)][:5]
    odd = [r for r in rows if not all(x is None or math.isfinite(x) for x in (r["value"], r["ci_low"], r["ci_high"]))]
    for r in rows:
        for key, text in r["details"].items():
            if key.endswith("reason") or key == "degenerate":
                assert isinstance(text, str) and not RAW.search(text) and UNEXPLAINED not in text, (r["metric"], text)
    if name == "association":
        sp = next(r for r in rows if r["metric"] == "random_SP")
        assert math.isinf(sp["value"]) and "never won by chance" in sp["details"]["degenerate"]
        assert odd
    if name == "latent":
        kite = next(r for r in rows if r["metric"] == "ww_vs_wn" and r["group"] == {"concept": "kite"})
        assert kite["details"]["reason"].startswith("0 cross pairs (WN"), kite["details"]["reason"]


def test_a_one_image_culture_has_a_flagged_silhouette(project):
    make_benchmarks(project, n_concepts=2, per_cell=1)
    # five stored images, labelled by the trials that show them: two US, two JP, one TH
    s = [r[0] for r in project.db.execute("SELECT sha256 FROM images ORDER BY sha256 LIMIT 5")]
    trials = SimpleNamespace(texts=["a", "b", "c"], query_language=["en", "ja", "th"],
                             query_country=["US", "JP", "TH"], sha256=[s[:2], s[2:4], s[4:]],
                             countries=[["US", "US"], ["JP", "JP"], ["TH"]])
    rows = silhouette_rows(project, FakeEmbedder(), trials, {}, details={})
    th = next(r for r in rows if r["metric"] == "image_silhouette" and r["group"] == {"country": "TH"})
    assert th["value"] == 0.0 and "TH has one image" in th["details"]["degenerate"]
    us = next(r for r in rows if r["metric"] == "image_silhouette" and r["group"] == {"country": "US"})
    assert "degenerate" not in us["details"]


def test_the_runner_gives_an_unexplained_number_a_visible_reason():
    rows = explain_numbers([{"suite": "x", "metric": "m", "value": math.nan, "ci_low": None, "ci_high": None,
                             "n": 0, "group": {}, "details": {}}], "x")
    assert UNEXPLAINED in rows[0]["details"]["reason"] and unexplained(rows) == []
