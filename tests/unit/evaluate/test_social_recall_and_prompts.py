"""Social audit additions (seed 003): recall@k, the fa/hi prompt inventories, the balanced FairFace-style sampler,
translation-validation summaries (App. E Tables 12–13) and the English-baseline panel tests (App. D design iv)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from cultura.db import now
from cultura.evaluate.metrics import accuracy_at_k
from cultura.evaluate.suites.social.data import (SECTIONS, import_portraits, inventory_status, load_inventory,
                                                 load_portraits, make_synthetic_portraits, portrait_sets)
from cultura.evaluate.suites.social.sampling import sample_balanced
from cultura.evaluate.suites.social.stats import english_baseline_tests, social_statistics
from cultura.evaluate.suites.social.suite import recall_hits, social
from cultura.evaluate.suites.social.validation import summarize_ratings, translation_validation
from cultura.models.embedders import FakeEmbedder


def test_recall_hits_is_accuracy_at_k():
    rng = np.random.default_rng(0)
    rel = (rng.random((12, 7)) < 0.25).astype(float)
    s = rng.standard_normal((12, 7))
    for k in (1, 3, 5):
        assert math.isclose(recall_hits(rel, s, k).mean(), accuracy_at_k(rel, s, k=k))


def test_recall_off_and_required(project):
    with pytest.raises(Exception, match="needs an imported caption set"):
        social(project, FakeEmbedder(dim=8), options={"recall": True})


# -- fa / hi inventories -------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", ["fa", "hi"])
def test_fa_hi_inventories_are_complete_and_unvalidated(project, lang):
    inv, en = load_inventory(project, lang), load_inventory(project, "en")
    for s in SECTIONS:
        assert set(inv.sections[s]) == set(en.sections[s]), s
    assert inv.pairs == en.pairs and not inv.missing("crime") and not inv.missing("agency")
    texts = [t for _, _, t in inv.prompt_items()]
    assert len(set(texts)) == len(texts)  # no two labels share a caption
    script = {"fa": (0x0600, 0x06FF), "hi": (0x0900, 0x097F)}[lang]
    assert all(any(script[0] <= ord(c) <= script[1] for c in t) for t in texts)
    assert inventory_status(project, lang)["status"] == "unvalidated"


# -- balanced sampler ----------------------------------------------------------------------------------------
def test_balanced_sampler_equal_cells_seeded_and_idempotent(project, tmp_path):
    imgs = tmp_path / "imgs"
    table = make_synthetic_portraits(imgs, per_cell=4, races=("White", "Black", "Indian"))
    import_portraits(project, table, imgs, "ff", synthetic=True)
    # unbalance the source: drop one White/Female portrait
    gone = project.db.execute("SELECT source_key FROM portraits WHERE dataset = 'ff' AND race = 'White' AND "
                              "gender = 'Female' ORDER BY source_key LIMIT 1").fetchone()[0]
    project.db.execute("DELETE FROM portraits WHERE dataset = 'ff' AND source_key = ?", [gone])
    project.db.conn.commit()
    res = sample_balanced(project, "ff", "ff-bal", seed=1)
    assert res["status"] == "created" and res["per_cell"] == 3 and res["cells"] == 6 and res["n"] == 18
    got = load_portraits(project, "ff-bal")
    cells = {}
    for r in got:
        cells[(r["race"], r["gender"])] = cells.get((r["race"], r["gender"]), 0) + 1
        assert r["attributes"]["sampled_from"] == "ff"
    assert set(cells.values()) == {3} and len(cells) == 6
    assert sample_balanced(project, "ff", "ff-bal", seed=1)["status"] == "unchanged"
    with pytest.raises(Exception, match="already exists"):
        sample_balanced(project, "ff", "ff-bal", seed=2)
    again = sample_balanced(project, "ff", "ff-bal2", seed=1)
    assert [r["source_key"] for r in load_portraits(project, "ff-bal2")] == [r["source_key"] for r in got]
    other = sample_balanced(project, "ff", "ff-bal3", seed=7, per_cell=2)
    assert other["n"] == 12
    with pytest.raises(Exception, match="White/Female has 3"):
        sample_balanced(project, "ff", "too-many", per_cell=4)
    assert "too-many" not in {s["dataset"] for s in portrait_sets(project)}
    assert {s["dataset"]: s["synthetic"] for s in portrait_sets(project)}["ff-bal"] == 1
    assert again["cell_sizes"]["White/Female"] == 3


def test_sample_portraits_cli(project, tmp_path):
    from cultura.cli import cli

    imgs = tmp_path / "imgs"
    table = make_synthetic_portraits(imgs, per_cell=2, races=("White", "Black"))
    import_portraits(project, table, imgs, "ff", synthetic=True)
    res = CliRunner().invoke(cli, ["--project", str(project.root), "social", "sample-portraits", "ff", "--into",
                                   "bal", "--per-cell", "1", "--seed", "3", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["n"] == 4


# -- translation validation (App. E Tables 12–13) -------------------------------------------------------------
def _ratings_for(counts: dict[int, int]) -> list[float]:
    return [float(v) for v, n in counts.items() for _ in range(n)]


# seed 003 Tables 12–13 rows rebuilt from 45 ratings each (counts solved from the published shares and mean)
HI = {3: 7, 4: 9, 5: 29}             # 15.6 % 3, 84.4 % 4–5, mean 4.49, σ 0.75
XH = {1: 6, 2: 8, 3: 2, 4: 2, 5: 27}  # 17.8 % 2, 4.4 % 3, 64.4 % 4–5, mean 3.80, σ 1.59


def test_summaries_reproduce_seed_tables_12_13():
    hi = summarize_ratings(_ratings_for(HI))
    assert (hi["n"], round(hi["pct_2"], 1), round(hi["pct_3"], 1), round(hi["pct_4–5"], 1)) == (45, 0.0, 15.6, 84.4)
    assert (round(hi["mean"], 2), round(hi["sd"], 2), round(hi["pct_ge4"], 1)) == (4.49, 0.75, 84.4)
    assert round(np.std(_ratings_for(HI), ddof=1), 2) == 0.76  # the sample SD would not match the seed
    xh = summarize_ratings(_ratings_for(XH))
    assert (round(xh["pct_2"], 1), round(xh["pct_3"], 1), round(xh["pct_4–5"], 1)) == (17.8, 4.4, 64.4)
    assert (round(xh["mean"], 2), round(xh["sd"], 2)) == (3.80, 1.59)
    assert round(xh["pct_1"], 1) == 13.3  # the band the seed's Table 12 leaves out
    with pytest.raises(Exception, match="1–5"):
        summarize_ratings([0, 3])


def _campaign(project, lang_counts: dict[str, dict[int, int]]):
    db = project.db
    cid = db["campaigns"].insert({"name": "tr", "kind": "translation", "overlap": 1, "created_at": now()}).last_pk
    for lang, counts in lang_counts.items():
        for i, v in enumerate(_ratings_for(counts)):
            key = f"translation:{lang}{i}"
            db["annotation_items"].insert({"campaign_id": cid, "item_key": key, "kind": "translation",
                                           "payload": "{}", "language": lang, "created_at": now()})
            if i == 0:  # a superseded earlier decision must not count
                db["decisions"].insert({"kind": "translation", "item_key": key, "value": 1.0, "rule": "median",
                                        "superseded": 1, "decided_at": now()})
            db["decisions"].insert({"kind": "translation", "item_key": key, "value": v, "rule": "median",
                                    "superseded": 0, "decided_at": now()})


def test_translation_validation_from_the_campaign(project):
    from cultura.cli import cli

    _campaign(project, {"hi": HI, "xh": XH})
    rows = {r["language"]: r for r in translation_validation(project)}
    assert round(rows["hi"]["mean"], 2) == 4.49 and round(rows["hi"]["sd"], 2) == 0.75 and rows["hi"]["n"] == 45
    assert rows["hi"]["seed_mean"] == 4.49 and rows["xh"]["seed_pct_ge4"] == 64.4
    assert round(rows["xh"]["pct_ge4"], 1) == 64.4
    assert rows["all"]["n"] == 90 and math.isclose(rows["all"]["pct_ge4"], 100 * (38 + 29) / 90)
    res = CliRunner().invoke(cli, ["--project", str(project.root), "social", "translation-validation", "--json"])
    assert res.exit_code == 0, res.output
    assert {r["language"] for r in json.loads(res.stdout)} == {"hi", "xh", "all"}


# -- English-baseline panels (App. D design iv) --------------------------------------------------------------
def _row(model, metric, ds, axis, value, lang="en"):
    return {"model_spec": model, "metric": metric, "group": {"dataset": ds, "language": lang, "axis": axis},
            "value": value}


def test_english_baseline_panel_wilcoxon():
    rows = []
    for ds, (g_m, r_m, g_b, r_b) in {"fairface": (0.87, 2.24, 0.23, 0.25), "pata": (1.21, 4.49, 0.30, 0.20)}.items():
        rows += [_row("preset:m-clip", "gender_max_skew", ds, "crime", g_m),
                 _row("preset:m-clip", "race_mean_max_skew", ds, "crime", r_m),
                 _row("preset:clip-vit-l14", "gender_max_skew", ds, "crime", g_b),
                 _row("preset:clip-vit-l14", "race_mean_max_skew", ds, "crime", r_b),
                 _row("preset:m-clip", "gender_max_skew", ds, "crime", 9.0, lang="fr")]  # not English: ignored
    tests = english_baseline_tests(rows)
    assert len(tests) == 1
    t = tests[0]
    assert t["comparison"] == "preset:m-clip vs preset:clip-vit-l14" and t["n"] == 4
    ref = stats.wilcoxon([0.87 - 0.23, 2.24 - 0.25, 1.21 - 0.30, 4.49 - 0.20])
    assert math.isclose(t["p"], ref.pvalue) and math.isclose(t["p"], 0.125)  # seed: "all p ≥ .125"
    assert t["panel"] == ["fairface:gender_max_skew", "fairface:race_mean_max_skew", "pata:gender_max_skew",
                          "pata:race_mean_max_skew"]
    # an explicit pairing, and the design inside social_statistics with its own family
    custom = english_baseline_tests([{**r, "model_spec": r["model_spec"].replace("preset:", "")} for r in rows],
                                    {"m-clip": "clip-vit-l14"})
    assert len(custom) == 1 and math.isclose(custom[0]["p"], 0.125)
    allt = [t for t in social_statistics(rows) if t["design"] == "english-baseline"]
    assert len(allt) == 1 and allt[0]["family"] == "english-baseline:crime" and "p_holm" in allt[0]
