"""Evaluation suites, runner and results storage on small benchmarks inserted directly into the tables.

The planted-bias fake knows each image's concept and culture from its pixels and each query's concept,
language culture and descriptor from a lookup table, and builds vectors from orthogonal concept / culture
directions, so the strength of a planted bias is a single number the tests turn.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from cultura.cli import cli
from cultura.db import now
from cultura.errors import CulturaError
from cultura.evaluate.runner import load_results, run_evaluation, run_suite
from cultura.evaluate.suites import SUITES, get_suite, register_suite, resolve_suites, row
from cultura.models.embedders import FakeEmbedder
from tests.fakes.benchmark_world import COUNTRIES, FAST, LANG, Planted, make_benchmarks  # noqa: F401
from tests.fakes.world import make_world


def metric(rows, name, **group):
    hits = [r for r in rows if r["metric"] == name and r["group"] == group]
    assert len(hits) == 1, (name, group, len(hits))
    return hits[0]


@pytest.fixture
def world(project):
    return make_benchmarks(project)


# -- registry ----------------------------------------------------------------------------------------

def test_registry_has_builtins_and_rejects_unknown():
    assert {"prevalence", "association", "descriptor"} <= set(resolve_suites("all") and SUITES)
    with pytest.raises(CulturaError, match="Unknown suite 'asociation'. Did you mean 'association'"):
        get_suite("asociation")
    names = [s.name for s in resolve_suites("association,descriptor")]
    assert names == ["association", "descriptor"]


def test_a_plugin_suite_runs_through_the_runner(project):
    def tiny(project, embedder, *, benchmark=None, options):
        return [row("tiny", "answer", 42, n=1, group={"country": "JP"}, details={"why": options.get("why")})]

    register_suite("tiny", tiny, description="test suite", in_all=False)
    try:
        rec = run_suite(project, FakeEmbedder(dim=8), "tiny", options={"why": "test"})
        assert rec.status == "done"
        [r] = load_results(project, suite="tiny")
        assert r["value"] == 42 and r["group"] == {"country": "JP"} and r["details"]["why"] == "test"
    finally:
        SUITES.pop("tiny")


# -- association -------------------------------------------------------------------------------------

def test_sp_rises_monotonically_with_planted_language_bias(project, world):
    sps, mcr = [], []
    for alpha in (0.0, 0.3, 0.6, 0.9, 1.2, 1.5):
        emb = Planted(world["meta"], alpha=alpha, noise=1.0)
        rows = get_suite("association").func(project, emb, benchmark=None, options=FAST)
        sps.append(metric(rows, "SP")["value"])
        mcr.append(metric(rows, "M_cr")["value"])
    assert sps[0] < 0.1 and mcr[0] > 0.9
    assert all(a < b for a, b in zip(sps, sps[1:])), sps
    assert all(a > b for a, b in zip(mcr, mcr[1:])), mcr
    assert sps[-1] > 1.0


def test_sp_is_near_the_random_baseline_at_chance(project):
    """A model that knows nothing (hash vectors) behaves like the random baseline: over 10 seeds, as the
    baseline's 10 rounds, mean SP ≈ 1 and the win rates ≈ 1/3 each."""
    w = make_benchmarks(project, n_concepts=40, per_cell=1, descriptor=False)
    sps, mcr = [], []
    for seed in range(1, 11):
        rows = get_suite("association").func(project, FakeEmbedder(dim=32, seed=seed),
                                             options={**FAST, "projection": "none", "variants": ["short"]})
        sps.append(metric(rows, "SP")["value"])
        mcr.append(metric(rows, "M_cr")["value"])
    rsp = metric(rows, "random_SP")
    assert rsp["n"] == 160 and 0.9 <= rsp["value"] <= 1.1
    assert abs(np.mean(sps) - rsp["value"]) < 0.2, sps
    assert abs(np.mean(mcr) - 1 / 3) < 0.05
    assert abs(sum(metric(rows, f"M_{r}")["value"] for r in ("cr", "lb", "ti")) - 1) < 1e-9
    assert abs(sum(metric(rows, f"random_M_{r}")["value"] for r in ("cr", "lb", "ti")) - 1) < 1e-9


def test_sp_is_inf_with_reason_when_nothing_is_retrieved(project, world):
    # concept weight 0 and a strong culture pull: lb always wins, M_cr = 0
    rows = get_suite("association").func(project, Planted(world["meta"], concept=0.0, alpha=3.0, noise=0.0),
                                         options=FAST)
    sp = metric(rows, "SP")
    assert metric(rows, "M_cr")["value"] == 0 and math.isinf(sp["value"])
    assert "M_cr = 0" in sp["details"]["reason"]


def test_association_rows_cover_countries_variants_silhouette_projection(project, world):
    rows = get_suite("association").func(project, Planted(world["meta"], alpha=0.9), options=FAST)
    for cc in COUNTRIES:
        r = metric(rows, "SP", country=cc)
        assert r["n"] == 8 * 2 and r["details"]["language"] == LANG[cc]
        metric(rows, "text_silhouette", country=cc)
        metric(rows, "image_silhouette", country=cc)
    assert metric(rows, "M_cr", variant="task")["n"] == 64
    pear = metric(rows, "pearson_text_silhouette_SP")
    assert pear["n"] == 4 and -1 <= pear["value"] <= 1 and "p" in pear["details"]
    proj = metric(rows, "projection_text")
    assert proj["details"]["method"] == "pca" and len(proj["details"]["points"]) == 4 * 8 * 1 * 1 * 1 * 1 * 1
    for r in rows:
        assert set(r) == {"suite", "metric", "value", "ci_low", "ci_high", "n", "group", "details"}
        if r["ci_low"] is not None and math.isfinite(r["value"]) and math.isfinite(r["ci_low"]):
            assert r["ci_low"] - 1e-9 <= r["value"] <= r["ci_high"] + 1e-9, r


# -- descriptor --------------------------------------------------------------------------------------

def test_text_silhouette_is_by_language_and_shared_by_countries_of_one_language(project):
    """Seed 000 Table 12: US/GB/AU (one language) show one TS value; none drops out of the SP correlation."""
    ccs, langs = ["US", "GB", "JP", "TH"], {"US": "en", "GB": "en", "JP": "ja", "TH": "th"}
    w = make_benchmarks(project, countries=ccs, lang=langs, descriptor=False)
    rows = get_suite("association").func(project, Planted(w["meta"], alpha=0.9), options=FAST)
    us, gb = metric(rows, "text_silhouette", country="US"), metric(rows, "text_silhouette", country="GB")
    assert us["value"] == gb["value"] and us["details"]["language"] == gb["details"]["language"] == "en"
    assert us["n"] == 8  # the distinct English texts (US and GB share them), not per country
    assert metric(rows, "text_silhouette", country="JP")["details"]["language"] == "ja"
    pear = metric(rows, "pearson_text_silhouette_SP")
    assert pear["n"] == 4 and pear["details"]["countries"] == sorted(ccs)
    # image silhouettes stay by culture: one per country
    assert {r["group"]["country"] for r in rows if r["metric"] == "image_silhouette"} == set(ccs)


def test_descriptor_win_rates_drift_and_chi2(project, world):
    strong = get_suite("descriptor").func(project, Planted(world["meta"], alpha=0.5, gamma=1.5), options=FAST)
    weak = get_suite("descriptor").func(project, Planted(world["meta"], alpha=0.5, gamma=0.0), options=FAST)
    roles = ("cr", "orlb", "or", "cdr", "lb", "ti")
    assert abs(sum(metric(strong, f"M_{r}")["value"] for r in roles) - 1) < 1e-9
    assert metric(strong, "M_cr")["value"] > 0.9
    # without the descriptor the language's culture wins among the right objects: orlb beats or, significantly;
    # the paper's Diff (Table 15, "Blue − Purple") is M_or − M_orlb, negative here
    chi = metric(weak, "chi2_or_vs_orlb")
    assert chi["value"] < -0.5 and chi["details"]["p"] < 0.05 and chi["details"]["significant"] is True
    assert chi["value"] == pytest.approx(metric(weak, "M_or")["value"] - metric(weak, "M_orlb")["value"])
    # with a strong descriptor the descriptor's culture beats the language's: Diff = M_cdr − M_lb ≥ 0
    cd = metric(strong, "chi2_cdr_vs_lb")
    assert cd["value"] == pytest.approx(metric(strong, "M_cdr")["value"] - metric(strong, "M_lb")["value"])
    metric(weak, "chi2_cdr_vs_lb", country="JP")
    # drift towards the descriptor's culture is positive for cr and ~0 when the descriptor is ignored
    d_strong = metric(strong, "drift_x100", role="cr")
    d_weak = metric(weak, "drift_x100", role="cr")
    assert d_strong["value"] > 10 and abs(d_weak["value"]) < 5 and d_strong["n"] == 8 * 4 * 3
    metric(strong, "drift_x100", role="cr", country="TH")
    metric(strong, "drift_x100", role="lb", concept="concept3")
    assert metric(strong, "M_orlb", country="DE")["n"] == 8 * 3


def test_descriptor_without_short_mention_queries_says_so_by_name_and_never_falls_back(project, world):
    """No silent fallback to the verbose variants, no bare "no trials"."""
    with project.db.conn:
        project.db.execute("UPDATE benchmark_queries SET variant = 'task_' || variant WHERE variant LIKE 'mention_%'")
    rows = get_suite("descriptor").func(project, Planted(world["meta"], alpha=0.5, gamma=1.0), options=FAST)
    main = metric(rows, "M_cr")
    assert math.isnan(main["value"]) and main["n"] == 0
    assert "mention_<CC>" in main["details"]["reason"] and "cultura build mention-queries" in main["details"]["reason"]
    assert "cultura build set-query" in main["details"]["reason"]
    # the verbose variant is reported, under its own name only
    assert metric(rows, "M_cr", variant="task_mention")["n"] == 8 * 4 * 3
    # some missing: the main rows are computed on the rest and carry the warning
    with project.db.conn:
        project.db.execute("UPDATE benchmark_queries SET variant = substr(variant, 6) WHERE variant LIKE "
                           "'task_mention_%' AND country != 'TH'")
    rows = get_suite("descriptor").func(project, Planted(world["meta"], alpha=0.5, gamma=1.0), options=FAST)
    part = metric(rows, "M_cr")
    assert part["n"] == 8 * 3 * 3 and "24 of 96 trials" in part["details"]["warning"]


# -- prevalence --------------------------------------------------------------------------------------

def test_prevalence_metrics_respond_to_a_planted_language_preference(project, world):
    opts = {**FAST, "ks": [2, 4, 10], "freq_k": 4}
    fair = get_suite("prevalence").func(project, Planted(world["meta"], noise=0.5), options=opts)
    biased = get_suite("prevalence").func(project, Planted(world["meta"], noise=0.5, english_boost=1.5),
                                          options=opts)
    en_fair = metric(fair, "retrieval_share", language="en", tier="high")["value"]
    en_biased = metric(biased, "retrieval_share", language="en", tier="high")["value"]
    assert en_biased > en_fair + 0.2
    assert metric(biased, "lbkl@4")["value"] > metric(fair, "lbkl@4")["value"] + 1
    assert metric(biased, "dlbkl@4")["value"] > metric(fair, "dlbkl@4")["value"]
    assert metric(fair, "acc@4")["value"] == 1.0 and metric(fair, "ndcg@4")["value"] > 0.9
    assert metric(fair, "acc@10")["n"] == 8 * 4 * 2
    assert metric(fair, "tier_share", tier="high")["details"]["languages"] == ["de", "en"]


def test_chunked_topk_equals_full_sort_and_compact_metrics_equal_full_ones():
    from cultura.evaluate.metrics import accuracy_at_k, ndcg_at_k
    from cultura.evaluate.suites.retrieval.prevalence import per_query_scores, reduced_relevance, topk_chunked

    rng = np.random.default_rng(0)
    q = rng.standard_normal((37, 16)).astype(np.float32)
    d = rng.standard_normal((1000, 16)).astype(np.float32)
    idx, val = topk_chunked(q, d, 25, query_chunk=8, doc_chunk=97)
    full = q @ d.T
    ref = np.argsort(-full, axis=1, kind="stable")[:, :25]
    assert (idx == ref).all() and np.allclose(val, np.take_along_axis(full, ref, axis=1))
    image_keys, caption_keys = rng.integers(0, 20, 37), rng.integers(0, 20, 1000)
    y_true_full = (caption_keys[None, :] == image_keys[:, None]).astype(float)
    yt, ys = reduced_relevance(idx, val, image_keys, caption_keys, 25)
    for k in (1, 5, 10, 25):
        assert accuracy_at_k(yt, ys, k=k) == pytest.approx(accuracy_at_k(y_true_full, full, k=k))
        assert ndcg_at_k(yt, ys, k=k) == pytest.approx(ndcg_at_k(y_true_full, full, k=k))
        hit, nd = per_query_scores(yt, k)
        assert hit.mean() == pytest.approx(accuracy_at_k(y_true_full, full, k=k))
        assert nd.mean() == pytest.approx(ndcg_at_k(y_true_full, full, k=k))


def test_prevalence_reads_imported_captions(project, world):
    db = project.db
    shas = sorted(world["images"].values())[:6]
    with db.conn:
        for s in shas:
            for lang in ("en", "ja", "th"):
                db["captions"].insert({"image_sha256": s, "language": lang, "idx": 0, "text": f"{s[:6]} {lang}",
                                       "source": "import:xm3600", "created_at": now()})
    rows = get_suite("prevalence").func(project, FakeEmbedder(dim=16), options={**FAST, "ks": [5]})
    acc = metric(rows, "acc@5")
    assert acc["n"] == 6 and acc["details"]["pool"] == "captions" and acc["details"]["n_languages"] == 3


# -- runner and storage ------------------------------------------------------------------------------

def test_runner_stores_self_describing_rows_and_rerun_embeds_nothing(project, world):
    emb = Planted(world["meta"], alpha=0.9)
    recs = run_evaluation(project, [emb], "all", options=FAST)
    by_suite = {r.suite: r for r in recs}
    assert by_suite["association"].status == "done" and by_suite["association"].n_embedded > 0
    assert by_suite["association"].benchmark == "xcm" and by_suite["descriptor"].benchmark == "xcm-cd"
    assert by_suite["prevalence"].status == "done"
    rows = load_results(project, suite="association")
    r = rows[0]
    for key in ("model", "model_info", "benchmark", "benchmark_version", "benchmark_hash", "suite", "params",
                "git_revision", "date", "n", "metric", "value", "ci_low", "ci_high", "group", "details"):
        assert key in r
    assert r["model"] == emb.identity and r["benchmark_hash"] == "h-assoc" and r["benchmark_version"] == 1
    assert r["params"]["options"]["n_resamples"] == 100
    data = json.loads(open(by_suite["association"].json_path, encoding="utf-8").read())
    assert len(data) == len(rows) and data[0]["benchmark"] == "xcm"
    # the same model again: everything comes from the cache
    emb2 = Planted(world["meta"], alpha=0.9)
    recs2 = run_evaluation(project, [emb2], "association,descriptor,prevalence", options=FAST)
    assert all(r.status == "done" and r.n_embedded == 0 for r in recs2)
    assert emb2.stats["images"] == 0 and emb2.stats["texts"] == 0
    # latest only: one set of rows per model × suite × benchmark
    assert len(load_results(project, suite="association")) == len(rows)
    assert len(load_results(project, suite="association", latest=False)) == 2 * len(rows)


def test_infinite_sp_survives_storage_and_json(project, world):
    emb = Planted(world["meta"], concept=0.0, alpha=3.0, noise=0.0)
    [rec] = run_evaluation(project, [emb], "association", options=FAST)
    sp = next(r for r in load_results(project, suite="association") if r["metric"] == "SP" and not r["group"])
    assert math.isinf(sp["value"]) and "M_cr = 0" in sp["details"]["reason"]
    data = json.loads(open(rec.json_path, encoding="utf-8").read())
    # JSON has no inf: a null that says why, and the direction of the metric
    sp_json = next(r for r in data if r["metric"] == "SP" and not r["group"])
    assert sp_json["value"] is None and sp_json["value_reason"].startswith("infinite (+inf)")
    assert "M_cr = 0" in sp_json["value_reason"] and sp_json["higher_is_better"] is False
    raw = open(rec.json_path, encoding="utf-8").read()
    json.loads(raw, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))   # no NaN/Infinity tokens
    assert '"inf"' not in raw and '"nan"' not in raw and '"-inf"' not in raw


def test_missing_data_is_skipped_under_all_and_an_error_by_name(project):
    recs = run_evaluation(project, ["fake"], "all", options=FAST)
    assert {r.suite: r.status for r in recs if r.suite in ("association", "descriptor", "prevalence")} == \
        {"association": "skipped", "descriptor": "skipped", "prevalence": "skipped"}
    [rec] = run_evaluation(project, ["fake"], "association", options=FAST)
    assert rec.status == "failed" and "cultura build association" in rec.reason
    runs = list(project.db.query("SELECT status, error FROM eval_runs WHERE suite = 'association'"))
    assert [r["status"] for r in runs] == ["skipped", "failed"] and runs[1]["error"]


def test_wrong_benchmark_kind_and_unknown_model_are_recorded_failures(project, world):
    [rec] = run_evaluation(project, ["fake"], "descriptor", benchmark="xcm", options=FAST)
    assert rec.status == "failed" and "association benchmark" in rec.reason
    [rec] = run_evaluation(project, ["nosuchfamily:x"], "association", options=FAST)
    assert rec.status == "failed" and "Unknown embedder" in rec.reason


def cli_run(project, *args):
    return CliRunner().invoke(cli, ["--project", str(project.root), *args])


def test_evaluate_refuses_unknown_options_and_models(project):
    make_world(project, per_cell=2)
    bad = cli_run(project, "evaluate", "run", "--model", "fake", "--suite", "latent", "--option", "bogus=1")
    assert bad.exit_code != 0 and "Unknown option bogus" in bad.output and "n_resamples" in bad.output
    assert project.db["eval_runs"].count == 0  # refused before anything ran
    res = cli_run(project, "evaluate", "run", "--model", "clip")
    assert res.exit_code != 0 and "Unknown embedder family 'clip'" in res.output
    assert project.db["eval_runs"].count == 1  # one failure, not one per suite


def test_a_suite_that_measured_nothing_is_not_done(project):
    from cultura.evaluate.runner import run_suite
    from cultura.evaluate.suites.registry import Suite, row
    from cultura.models.embedders import get_embedder

    def empty(project, embedder, *, benchmark=None, options):
        return [row("empty", "M_cr", float("nan"), n=0, details={"reason": "no trials",
                                                                 "excluded": {"missing_query": 12}})]
    rec = run_suite(project, get_embedder("fake"), Suite("empty", empty, "test"), from_all=True)
    assert rec.status == "skipped" and "cultura build queries" in rec.reason and "missing_query 12" in rec.reason
    assert project.db["eval_results"].count == 0
    rec = run_suite(project, get_embedder("fake"), Suite("empty", empty, "test"))
    assert rec.status == "failed"
