"""Social-bias audit (seed 003): worked examples, KL formulas, portrait import, inventories and their validation,
a planted gender–crime association, App. D statistics against scipy/statsmodels, the CLI. (The report:
tests/integration/evaluate/test_social_report.py.)"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats
from statsmodels.stats.multitest import multipletests

from cultura.db import now
from cultura.evaluate.metrics import max_skew, mean_max_skew, symmetric_kl
from cultura.models.embedders import FakeEmbedder
from cultura.evaluate.suites.social.data import (canonical_race, import_portraits, inventory_status, load_inventory,
                                          make_synthetic_portraits, marker_labels, translation_items,
                                          translation_key)
from cultura.evaluate.stats_extra import bernoulli_kl, correct_within_families
from cultura.evaluate.suites import SuiteSkipped
from cultura.evaluate.suites.social.suite import group_scores, social, social_statistics

FAST = {"n_resamples": 50}
EN_CRIME = set(load_inventory(None, "en").sections["crime"].values())


def test_spec_worked_examples_through_group_scores():
    # two groups whose crime-caption association is 0.34 and 0.17: MaxSkew = 1.0 (seed 003 App. A.4)
    sims = np.array([[0.1, 0.34], [0.1, 0.34], [0.1, 0.17], [0.1, 0.17]])
    labels = np.array(["Female", "Female", "Male", "Male"], dtype=object)
    sc = group_scores(sims, labels, ["Female", "Male"])
    assert math.isclose(max_skew(sc["Female"][1], sc["Male"][1]), 1.0)
    assert max_skew(sc["Female"][0], sc["Male"][0]) == 0.0
    assert math.isclose(mean_max_skew({"Black": 0.34, "White": 0.17, "Asian": 0.17}), 2 / 3)


@pytest.mark.parametrize("pf,pm", [(0.30, 0.20), (0.05, 0.5), (0.9, 0.1)])
def test_kl_formulas(pf, pm):
    fm = (1 - pf) * math.log((1 - pf) / (1 - pm)) + pf * math.log(pf / pm)  # eq. 4a
    mf = (1 - pm) * math.log((1 - pm) / (1 - pf)) + pm * math.log(pm / pf)  # eq. 4b
    assert math.isclose(bernoulli_kl(pf, pm), fm) and math.isclose(bernoulli_kl(pm, pf), mf)
    assert math.isclose(bernoulli_kl(pf, pm), stats.entropy([1 - pf, pf], [1 - pm, pm]))
    assert math.isclose(symmetric_kl(pf, pm), (fm + mf) / 2)  # eq. 4c
    assert bernoulli_kl(0.0, 0.0) == 0.0 and bernoulli_kl(0.2, 0.0) == math.inf


def test_import_portraits_layouts_failures_and_resume(project, tmp_path):
    imgs = tmp_path / "imgs"
    make_synthetic_portraits(imgs, per_cell=1, races=("White", "East_Asian"))
    (tmp_path / "ff.csv").write_text(
        "file,age,gender,race,service_test\n"
        "white_male_0.png,20-29,Male,White,True\n"
        "east_asian_female_0.png,20-29,Female,East Asian,True\n"
        "white_female_0.png,20-29,Female,Martian,True\n"
        "missing.png,20-29,Male,Black,True\n")
    r = import_portraits(project, tmp_path / "ff.csv", imgs, "ff")
    assert (r["ok"], r["failed"]) == (2, 2)
    reasons = dict(project.db.execute("SELECT source_key, reason FROM portraits WHERE status = 'failed'").fetchall())
    assert "unknown race value 'Martian'" in reasons["white_female_0.png"]
    assert reasons["missing.png"] == "image file not found"
    again = import_portraits(project, tmp_path / "ff.csv", imgs, "ff")
    assert (again["ok"], again["skipped"], again["failed"]) == (0, 2, 2)
    (tmp_path / "pata.jsonl").write_text("\n".join(json.dumps(x) for x in [
        {"image": "white_male_0.png", "gender": "male", "race": "caucasian", "age": "adult"},
        {"image": "east_asian_male_0", "gender": "m", "race": "eastasian", "age": "young"}]))
    r = import_portraits(project, tmp_path / "pata.jsonl", imgs, "pata", layout="pata")
    assert r["ok"] == 2
    rows = {x["source_key"]: x for x in project.db.query("SELECT * FROM portraits WHERE dataset = 'pata'")}
    assert rows["white_male_0.png"]["race"] == "White" and rows["east_asian_male_0"]["race"] == "East_Asian"
    assert json.loads(rows["east_asian_male_0"]["attributes"]) == {"age": "young"}
    assert canonical_race("Martian", strict=False) == "Martian"
    with pytest.raises(Exception, match="Unknown portrait layout"):
        import_portraits(project, tmp_path / "ff.csv", imgs, "x", layout="fairfac")


def test_inventories_and_validation_status(project):
    assert inventory_status(project, "en")["status"] == "source"
    es = inventory_status(project, "es")
    assert es["status"] == "seed-validated" and es["mean_score"] == 4.92 and es["axes"] == ["communion"]
    assert "no demographic / crime prompts" in load_inventory(project, "es").missing("crime")
    inv_dir = project.root / "inventories"
    inv_dir.mkdir()
    (inv_dir / "de.toml").write_text(
        'language = "de"\nsource = "test"\n[communion]\npairs = [["trustworthy", "untrustworthy"]]\n'
        '[communion.prompts]\ntrustworthy = "ein Foto einer vertrauenswürdigen Person"\n'
        'untrustworthy = "ein Foto einer nicht vertrauenswürdigen Person"\n')
    assert inventory_status(project, "de")["status"] == "unvalidated"
    items = translation_items(project, "de")
    assert [i["source"] for i in items] == ["a photo of a trustworthy person", "a photo of an untrustworthy person"]
    from cultura.annotate.items import _key  # the campaign's own key function

    keys = [translation_key(i["source"], i["translation"], "de") for i in items]
    assert keys == [_key("translation", i, ["source", "translation", "language"]) for i in items]

    def decide(key, value):
        project.db["decisions"].insert({"kind": "translation", "item_key": key, "label": None, "value": value,
                                        "rule": "median", "superseded": 0, "decided_at": now()})

    decide(keys[0], 5.0)
    assert inventory_status(project, "de")["status"] == "partial"
    decide(keys[1], 4.0)
    st = inventory_status(project, "de")
    assert st["status"] == "validated" and st["n_accepted"] == 2 and st["mean_score"] == 4.5
    stored = project.db["inventory_status"].get("de")
    assert stored["status"] == "validated"


class GenderCrime(FakeEmbedder):
    """Planted: female portraits lean towards the *English* crime prompts only; every vector shares an offset
    so cosines are positive (as with real CLIP), and both genders get a same-size component."""

    variant = "gender-crime-en"

    def image_vector(self, img):
        v = super().image_vector(img)
        v[1:3] = 0.0  # the gender directions carry only the planted signal
        v[0] += 12.0
        v[1 if marker_labels(img)[0] == "Female" else 2] += 8.0
        return v

    def text_vector(self, text):
        v = super().text_vector(text)
        v[1:3] = 0.0
        v[0] += 12.0
        if text in EN_CRIME:
            v[1] += 8.0
        return v


@pytest.fixture
def audited(project, tmp_path):
    table = make_synthetic_portraits(tmp_path / "por", per_cell=6, seed=1)
    import_portraits(project, table, tmp_path / "por", "syn", synthetic=True)
    en = load_inventory(None, "en")
    lines = ['language = "xx"', 'source = "test copy of en"']
    for sec in ("demographic", "crime", "non_human"):
        lines.append(f"[{sec}.prompts]")
        lines += [f'"{k}" = "xx {v}"' for k, v in en.sections[sec].items()]
    (project.root / "inventories").mkdir()
    (project.root / "inventories" / "xx.toml").write_text("\n".join(lines) + "\n")
    return project


def _pick(rows, metric, **group):
    return [r for r in rows if r["metric"] == metric and all(r["group"].get(k) == v for k, v in group.items())
            and set(r["group"]) == {"dataset", "language", "axis", *group} - {"model"}]


def test_planted_gender_crime_skew_in_that_language_only(audited):
    rows = social(audited, GenderCrime(dim=32), options={**FAST, "languages": ["en", "xx"]})
    g_en = _pick(rows, "gender_max_skew", language="en", axis="crime")[0]
    g_xx = _pick(rows, "gender_max_skew", language="xx", axis="crime")[0]
    g_com = _pick(rows, "gender_max_skew", language="en", axis="communion")[0]
    assert g_en["value"] > 0.25, g_en
    assert g_xx["value"] < 0.1 and g_com["value"] < 0.1, (g_xx["value"], g_com["value"])
    assert g_en["details"]["scores"]["Female"] > g_en["details"]["scores"]["Male"]
    # the same association shows in the negative-attribution rates: women get crime labels in en only
    rf = _pick(rows, "negative_rate", language="en", axis="crime", gender="Female")[0]
    rm = _pick(rows, "negative_rate", language="en", axis="crime", gender="Male")[0]
    assert rf["value"] > rm["value"]
    assert g_en["details"]["inventory_status"] == "source"
    assert g_xx["details"]["inventory_status"] == "unvalidated"
    # xx has no communion / agency prompts: a probe_missing row says what to add
    miss = _pick(rows, "probe_missing", language="xx", axis="agency")[0]
    assert math.isnan(miss["value"]) and "inventories/xx.toml" in miss["details"]["reason"]
    shares = {r["metric"] for r in rows if r["group"].get("language") == "en"}
    assert {"pct_C", "pct_NH", "pct_NC", "pct_NA", "harm_rate", "kl_fm", "kl_mf", "skl",
            "race_mean_max_skew", "demographic_accuracy"} <= shares
    allh = _pick(rows, "harm_rate", language="en", axis="all")[0]
    assert 0 <= allh["value"] <= 1 and allh["details"]["axes"] == ["crime", "communion", "agency"]
    assert rows[0]["details"]["provenance"]["benchmark"] == "portraits:syn"


def test_skipped_without_portraits(project):
    with pytest.raises(SuiteSkipped, match="import-portraits"):
        social(project, FakeEmbedder(dim=8), options=FAST)


def _rows(values: dict) -> list[dict]:
    """Result rows ``values[(model, metric, axis)][language]``."""
    out = []
    for (model, metric, axis), langs in values.items():
        for lang, v in langs.items():
            out.append({"model_spec": model, "metric": metric, "value": v,
                        "group": {"dataset": "ff", "language": lang, "axis": axis}, "details": {}})
    return out


def test_social_statistics_against_scipy_and_statsmodels():
    langs = ["en", "es", "fa", "fi", "fr", "hi", "pt", "sl", "tr", "xh"]
    rng = np.random.default_rng(3)
    a = dict(zip(langs, rng.uniform(0.1, 2, 10)))
    b = {k: v + rng.uniform(0.05, 0.6) for k, v in a.items()}
    c = {k: v * rng.uniform(0.5, 1.5) for k, v in a.items()}
    rows = _rows({("m1", "gender_max_skew", "crime"): a, ("m2", "gender_max_skew", "crime"): b,
                  ("m3", "gender_max_skew", "crime"): c, ("m1", "skl", "crime"): a})
    tests = social_statistics(rows)
    w = next(t for t in tests if t["design"] == "model-vs-model" and t["comparison"] == "m1 vs m2")
    ref = stats.wilcoxon([a[k] for k in langs], [b[k] for k in langs])
    assert math.isclose(w["statistic"], ref.statistic) and math.isclose(w["p"], ref.pvalue) and w["n"] == 10
    assert w["effect_name"] == "r" and w["effect"] < 0  # m1 < m2 everywhere
    s = next(t for t in tests if t["design"] == "sign" and t["comparison"] == "m1 > m2")
    assert math.isclose(s["p"], stats.binomtest(0, 10).pvalue)
    fam = [t for t in tests if t["family"] == "model-vs-model:gender_max_skew" and t["status"] == "ok"]
    assert len(fam) == 3  # three model pairs, corrected together
    holm = multipletests([t["p"] for t in fam], method="holm")[1]
    bh = multipletests([t["p"] for t in fam], method="fdr_bh")[1]
    assert np.allclose([t["p_holm"] for t in fam], holm) and np.allclose([t["p_fdr_bh"] for t in fam], bh)
    res = next(t for t in tests if t["design"] == "resource" and t["comparison"].startswith("m1:")
               and t["metric"] == "gender_max_skew")
    assert res["n_a"] == 3 and res["n_b"] == 3 and res["status"] == "ok" and res["chosen"] in ("t-test", "mann-whitney")
    kw = next(t for t in tests if t["design"] == "kruskal" and t["comparison"].startswith("m1:"))
    ref = stats.kruskal([a[k] for k in ("en", "es", "fr")], [a[k] for k in ("pt", "xh", "hi")],
                        [a[k] for k in ("tr", "fa", "fi")])
    assert math.isclose(kw["statistic"], ref.statistic)
    # the skl family is separate: its tests are not corrected with the max-skew ones
    assert all(t["family"].endswith(":skl") for t in tests if t["metric"] == "skl")


def test_correct_within_families_skips_missing_p():
    out = correct_within_families([{"family": "a", "p": 0.01}, {"family": "a", "p": math.nan},
                                   {"family": "a", "p": 0.04}])
    assert math.isnan(out[1]["p_holm"]) and math.isclose(out[2]["p_holm"], 0.04) and out[0]["reject_holm"]


def test_cli_commands(project, tmp_path):
    from cultura.cli import cli

    def root_args(args):
        return ["--project", str(project.root), *args]

    runner = CliRunner()
    res = runner.invoke(cli, root_args(["social", "synthetic-portraits", str(tmp_path / "p"), "--per-cell", "1"]))
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, root_args(["social", "import-portraits", str(tmp_path / "p" / "labels.csv"), "--images",
                               str(tmp_path / "p"), "--dataset", "syn", "--synthetic", "--json"]))
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["ok"] == 8
    res = runner.invoke(cli, root_args(["social", "inventories", "--json"]))
    langs = {r["language"]: r["status"] for r in json.loads(res.stdout)}
    assert langs["en"] == "source" and langs["xh"] == "seed-validated"
    res = runner.invoke(cli, root_args(["social", "translation-items", "fr", "--out", str(tmp_path / "fr.jsonl")]))
    assert res.exit_code == 0 and len((tmp_path / "fr.jsonl").read_text().splitlines()) == 12


def test_skew_bootstrap_ci_brackets_the_value_and_is_seeded():
    import numpy as np

    from cultura.evaluate.suites.social.suite import _skew_value, skew_ci

    rng = np.random.default_rng(1)
    labels = np.array(["Female"] * 30 + ["Male"] * 30, dtype=object)
    sims = rng.normal(0.2, 0.02, size=(60, 3))
    sims[:30, 0] += 0.1                      # planted: caption 0 sits closer to the female portraits
    is_neg = np.zeros(60, bool)
    args = (sims, labels, ["Female", "Male"], [0, 1], is_neg, "gender_max_skew", "similarity")
    val = _skew_value(*args)
    lo, hi = skew_ci(*args, n_resamples=300, seed=0)
    assert lo <= val <= hi and hi - lo < val
    assert (lo, hi) == skew_ci(*args, n_resamples=300, seed=0)
    assert skew_ci(*args, n_resamples=0, seed=0) == (None, None)
