"""Per-sample logs, the results JSON, smoke runs and report choices.

The recomputation tests re-score every suite's stored numbers from its logged samples alone, with the metric
functions (and scipy/numpy where they have the quantity), and get the stored values exactly."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from cultura.cli import cli
from cultura.evaluate.metrics import expected_score
from cultura.evaluate.metrics.association import self_preference, win_rates
from cultura.evaluate.metrics.retrieval import lbkl_per_query
from cultura.evaluate.results import load_samples
from cultura.evaluate.runner import load_results, run_evaluation
from tests.fakes.benchmark_world import FAST, Planted, make_benchmarks
from tests.fakes.tiny_lm import tiny_lm  # noqa: F401


@pytest.fixture
def world(project):
    return make_benchmarks(project)


def _rows(project, run_id):
    return load_results(project, latest=False, run_ids=[run_id])


def _one(rows, metric, **group):
    hits = [r for r in rows if r["metric"] == metric and r["group"] == group]
    assert len(hits) == 1, (metric, group, len(hits))
    return hits[0]["value"]


def test_trials_rescore_win_rates_and_sp_exactly(project, world):
    recs = run_evaluation(project, [Planted(world["meta"], alpha=0.9, noise=0.3)], "association,descriptor",
                          options=FAST, log_samples=True)
    for rec in recs:
        assert rec.status == "done", rec.reason
        samples = load_samples(project, rec.run_id)
        assert samples and all(s["kind"] == "trial" for s in samples)
        rows = _rows(project, rec.run_id)
        main = "short" if rec.suite == "association" else "mention"
        by_variant: dict[str, list] = {}
        for s in samples:
            by_variant.setdefault(s["variant"], []).append(s)
            scores = [c["score"] for c in s["candidates"]]
            assert s["winners"] == [c["role"] for c in s["candidates"] if c["score"] == max(scores)]
        assert main in by_variant
        for variant, trials in by_variant.items():
            roles = [c["role"] for c in trials[0]["candidates"]]
            sims = np.array([[c["score"] for c in t["candidates"]] for t in trials])
            g = {} if variant == main else {"variant": variant}
            m = win_rates(sims)
            assert [_one(rows, f"M_{r}", **g) for r in roles] == list(m)
        if rec.suite == "association":
            trials = by_variant["short"]
            sims = np.array([[c["score"] for c in t["candidates"]] for t in trials])
            assert _one(rows, "SP") == self_preference(sims, correct=0, biased=1)
            for cc in sorted({t["query_country"] for t in trials}):
                sub = np.array([[c["score"] for c in t["candidates"]] for t in trials if t["query_country"] == cc])
                sp = _one(rows, "SP", country=cc)
                want = self_preference(sub, correct=0, biased=1)
                assert sp == want or (math.isinf(sp) and math.isinf(want))


def test_image_queries_rescore_lbkl_and_dlbkl_exactly(project, world):
    rec = run_evaluation(project, [Planted(world["meta"], noise=0.5, english_boost=1.0)], "prevalence",
                         options={**FAST, "ks": [2, 4, 10], "freq_k": 4})[0]   # small: logged by default
    assert rec.status == "done" and rec.extra["n_samples"] > 0
    pool = load_samples(project, rec.run_id, kind="pool")[0]
    queries = load_samples(project, rec.run_id, kind="image_query")
    rows = _rows(project, rec.run_id)
    assert len(queries) == next(r["n"] for r in rows if r["metric"] == "acc@4")
    for k in pool["ks"]:
        if k > len(queries[0]["top"]):
            continue
        ranked = np.array([[c["language"] for c in q["top"][:k]] for q in queries])
        for metric, discounted in (("lbkl", False), ("dlbkl", True)):
            want = float(lbkl_per_query(ranked, pool["languages"], k=k, prior=pool["prior_mix"],
                                        discounted=discounted).mean())
            assert _one(rows, f"{metric}@{k}") == want
        hits = np.mean([any(c["relevant"] for c in q["top"][:k]) for q in queries])
        assert _one(rows, f"acc@{k}") == hits
    for q in queries:  # best first, with the caption's language
        assert [c["score"] for c in q["top"]] == sorted((c["score"] for c in q["top"]), reverse=True)


def test_judge_scores_rescore_caire_expected_scores_exactly(project, tmp_path):
    from tests.unit.evaluate.test_attribution import COLORS, _store_images
    from cultura.evaluate.suites.attribution import import_kb
    from PIL import Image

    _store_images(project)
    kbdir = tmp_path / "kb"
    kbdir.mkdir()
    for name, rgb in COLORS.items():
        Image.new("RGB", (16, 16), rgb).save(kbdir / f"{name}.png")
    (kbdir / "kb.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "e:sushi", "lemma": "sushi", "text": "Sushi is a dish from Japan.", "images": ["red.png"]},
        {"id": "e:padthai", "lemma": "pad thai", "text": "Pad thai is from Thailand.", "images": ["blue.png"]}]))
    import_kb(project, kbdir / "kb.jsonl", kb="tiny")
    rec = run_evaluation(project, ["fake:dim=16"], ["attribution"],
                         options={"attribution": {"judge": "stub", "kb": "tiny", "k": 2}})[0]
    assert rec.status == "done", rec.reason
    judged = load_samples(project, rec.run_id, kind="judge_score")
    caire = [s for s in judged if s["scorer"] == "caire"]
    assert caire and all(s["logprobs"] for s in caire)
    rows = _rows(project, rec.run_id)
    for s in caire:
        assert expected_score(s["logprobs"]) == s["score"]
    # each judged pair carries its human target (the mean rating and how many), null where nobody rated it
    from cultura.evaluate.suites.attribution.evaluation import human_ratings

    human = human_ratings(project)
    for s in judged:
        assert (s["human_mean"], s["human_n"]) == human.get((s["sha256"], s["country"]), (None, 0))
    for scorer in {s["scorer"] for s in judged}:
        for cc in sorted({s["country"] for s in judged if s["scorer"] == scorer}):
            vals = [s["score"] for s in judged if s["scorer"] == scorer and s["country"] == cc]
            assert _one(rows, "mean_score", scorer=scorer, country=cc) == sum(vals) / len(vals)


def test_results_json_smoke_run_and_sample_export(project, world, tmp_path):
    out = tmp_path / "results"
    r = CliRunner().invoke(cli, ["--project", str(project.root), "evaluate", "run", "--model", "fake",
                                 "--suite", "association,prevalence", "--option", "n_resamples=50",
                                 "--option", "association.projection=pca", "--limit", "5", "--log-samples",
                                 "--output-path", str(out), "--json"])
    assert r.exit_code == 0, r.output
    runs = json.loads(r.stdout)
    assert all(x["n_samples"] for x in runs)
    doc = json.loads(next(out.glob("results_*.json")).read_text())
    for key in ("cultura_version", "git_revision", "versions", "device", "seed", "suite_versions", "config",
                "date", "smoke_run", "runs"):
        assert key in doc, key
    assert set(doc["versions"]) == {"python", "torch", "transformers", "open_clip_torch",
                                    "sentence-transformers", "numpy"}
    assert doc["versions"]["numpy"] == np.__version__
    assert doc["smoke_run"] is True and doc["config"]["limit"] == 5
    assert doc["config"]["options"]["association"] == {"n_resamples": 50, "projection": "pca"}
    assert doc["config"]["options"]["prevalence"] == {"n_resamples": 50}
    assoc = next(x for x in doc["runs"] if x["suite"] == "association")
    assert assoc["benchmark"] == "xcm@1" and assoc["benchmark_hash"] == "h-assoc"
    assert assoc["model"]["identity"].startswith("fake") and assoc["model"]["kind"] == "non-model"
    assert assoc["smoke_run"] and assoc["limit"] == 5 and assoc["suite_version"] == "1"
    assert _one(assoc["results"], "M_cr") == _one(_rows(project, assoc["run_id"]), "M_cr")
    # each run says when it ran, how long, and how its intervals were made; each row its metric's direction
    assert assoc["started_at"] <= assoc["finished_at"] and assoc["duration_s"] >= 0
    assert assoc["ci"] == {"method": "percentile bootstrap", "n_resamples": 50, "level": 0.95, "seed": 0,
                           "resampled": "the suite's units (trials, query images, contexts)"}
    directions = {x["metric"]: x["higher_is_better"] for x in assoc["results"]}
    assert directions["M_cr"] is True and directions["SP"] is False and directions["M_lb"] is False
    # numbers are numbers: a column pandas reads as floats (null where undefined, with the reason beside it)
    for run in doc["runs"]:
        for x in run["results"]:
            assert x["value"] is None or isinstance(x["value"], (int, float)), x
            assert (x["value"] is None) == ("value_reason" in x), x
    # --limit 5: five trials of each query variant, five query images
    trials = load_samples(project, assoc["run_id"], kind="trial")
    per_variant = {v: sum(t["variant"] == v for t in trials) for v in {t["variant"] for t in trials}}
    assert per_variant["short"] == 5 and set(per_variant.values()) == {5}
    prev = next(x for x in doc["runs"] if x["suite"] == "prevalence")
    assert len(load_samples(project, prev["run_id"], kind="image_query")) == 5
    lines = (out / assoc["samples_file"]).read_text().splitlines()
    assert len(lines) == assoc["n_samples"] and json.loads(lines[0])["kind"] == "trial"
    # Parquet export through the CLI
    pq_path = tmp_path / "s.parquet"
    r = CliRunner().invoke(cli, ["--project", str(project.root), "evaluate", "samples", str(assoc["run_id"]),
                                 str(pq_path)])
    assert r.exit_code == 0, r.output
    import pyarrow.parquet as pq

    t = pq.read_table(pq_path)
    assert t.num_rows == assoc["n_samples"] and "data" not in t.column_names
    # typed columns: the item's key, the candidates as structs with their positions and scores as floats
    assert str(t.schema.field("item_key").type) == "string"
    cand = t.schema.field("candidates").type.value_type
    assert str(cand.field("score").type) == "double" and str(cand.field("position").type) == "int64"
    first = t.slice(0, 1).to_pylist()[0]
    assert first["item_key"] and first["target"]["role"] == "cr"
    r = CliRunner().invoke(cli, ["--project", str(project.root), "evaluate", "samples", str(assoc["run_id"]),
                                 str(tmp_path / "s.csv")])
    assert r.exit_code == 1 and ".jsonl or .parquet" in r.output


def test_latent_similarities_rescore_welch_and_c_asc_exactly(tmp_path):
    from scipy import stats

    from cultura.project import init_project
    from tests.unit.evaluate.test_latent import FAST as LATENT_FAST
    from tests.unit.evaluate.test_latent import REST, WEST, WesternCluster, build

    p = init_project(tmp_path / "six", countries=WEST + REST)
    build(p)
    rec = run_evaluation(p, [WesternCluster(dim=16)], "latent", options={**LATENT_FAST, "unit": "image"})[0]
    assert rec.status == "done", rec.reason
    rows = _rows(p, rec.run_id)
    pairs = load_samples(p, rec.run_id, kind="ww_wn")
    assert {s["concept"] for s in pairs} == {"bus", "food"}
    for s in pairs:
        ww, wn = np.array(s["ww"]), np.array(s["wn"])
        r = next(x for x in rows if x["metric"] == "ww_vs_wn" and x["group"] == {"concept": s["concept"]})
        t = stats.ttest_ind(ww, wn, equal_var=False, alternative="greater")
        assert r["details"]["n_ww"] == len(ww) and r["details"]["n_wn"] == len(wn)
        assert r["value"] == pytest.approx(ww.mean() - wn.mean(), rel=1e-12)
        assert r["details"]["t"] == pytest.approx(t.statistic, rel=1e-12)
        assert r["details"]["p"] == pytest.approx(t.pvalue, rel=1e-9)
    caps = load_samples(p, rec.run_id, kind="caption_image")
    assert caps
    for s in caps:
        d = np.array([i["cosine"] for i in s["images"]])
        g = np.array([i["in_group"] for i in s["images"]])
        want = (d[g].mean() - d[~g].mean()) / d.std(ddof=1)
        got = _one(rows, "c_asc", concept=s["concept"], template=s["template"], language=s["language"])
        assert got == want
    p.close()


def test_portraits_rescore_harm_rate_exactly(project, tmp_path):
    from tests.unit.evaluate.test_social import FAST as SOCIAL_FAST
    from tests.unit.evaluate.test_social import GenderCrime
    from cultura.evaluate.suites.social.data import import_portraits, make_synthetic_portraits

    table = make_synthetic_portraits(tmp_path / "por", per_cell=6, seed=1)
    import_portraits(project, table, tmp_path / "por", "syn", synthetic=True)
    rec = run_evaluation(project, [GenderCrime(dim=16)], "social", options={**SOCIAL_FAST, "languages": ["en"]},
                         progress=False)[0]
    assert rec.status == "done", rec.reason
    rows = _rows(project, rec.run_id)
    samples = load_samples(project, rec.run_id, kind="portrait")
    assert samples
    for axis in sorted({s["axis"] for s in samples}):
        ss = [s for s in samples if s["axis"] == axis]
        group = {"dataset": "syn", "language": "en", "axis": axis}
        harm_row = _one(rows, "harm_rate", **group)
        harmful = set(next(r for r in rows if r["metric"] == "harm_rate" and r["group"] == group)
                      ["details"]["harmful"])
        assert harm_row == np.mean([s["top1"] in harmful for s in ss])
        for s in ss:  # the top-1 label is the first prompt with the highest score (numpy's argmax)
            scores = [x["score"] for x in s["scores"]]
            assert s["top1"] == s["scores"][scores.index(max(scores))]["label"]


def test_samples_are_kept_by_default_only_when_small(project, world, monkeypatch):
    from cultura.evaluate import runner

    monkeypatch.setattr(runner, "SMALL_SAMPLES", 5)
    emb = Planted(world["meta"], alpha=0.9)
    rec = run_evaluation(project, [emb], "association", options=FAST)[0]
    assert rec.status == "done" and rec.extra["n_samples"] is None
    assert project.db.execute("SELECT count(*) FROM eval_samples").fetchone()[0] == 0
    assert project.db["eval_runs"].get(rec.run_id)["n_samples"] is None
    rec = run_evaluation(project, [emb], "association", options=FAST, log_samples=True)[0]
    assert rec.extra["n_samples"] > 5
    rec = run_evaluation(project, [emb], "association", options=FAST, log_samples=False)[0]
    assert rec.extra["n_samples"] is None
    with pytest.raises(Exception, match="no per-sample log"):
        from cultura.evaluate.results import export_samples
        export_samples(project, rec.run_id, "x.jsonl")


def test_a_smoke_run_is_marked_on_its_row_and_left_out_of_the_average():
    from cultura.evaluate.reportkit import Cell, model_label
    from cultura.evaluate.suites.retrieval.report import _average_rows

    def result(spec, limit):
        return {"model": spec, "model_spec": spec, "params": {} if limit is None else {"limit": limit},
                "benchmark": "xcm", "benchmark_version": 1}

    full_a, full_b, smoke = result("a", None), result("b", None), result("c", 3)
    assert model_label(full_a) == "a" and model_label(smoke) == "c (smoke run, --limit 3)"
    lines = [[model_label(r), Cell(v)] for r, v in ((full_a, 0.2), (full_b, 0.4), (smoke, 0.9))]
    [avg] = _average_rows(lines, [full_a, full_b, smoke])
    assert avg[0] == "Average (2 models)" and avg[1].value == pytest.approx(0.3)
    # a smoke run alone beside one full run: nothing to average
    assert _average_rows(lines[::2], [full_a, smoke]) == []
