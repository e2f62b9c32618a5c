"""CAIRe (seed 004) in the paper's conventions: a real encoder required, threshold ≥ t with P/R/F1, per-concept
Pearson, the KB dump, linking accuracy (Table 3's shape), the gold-page upper bound, the dataset imports."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from tests.fakes.tiny_lm import tiny_lm  # noqa: F401 - fixture
from tests.fakes.world import add_image


def _photo(name: str) -> bytes:
    """A real photograph from scikit-image as PNG bytes."""
    import skimage.data

    arr = getattr(skimage.data, name)()
    if arr.ndim == 2:
        arr = np.stack([arr] * 3, axis=-1)
    buf = io.BytesIO()
    Image.fromarray(arr[..., :3]).save(buf, format="PNG")
    return buf.getvalue()


PHOTOS = {"sushi": "coffee", "taco": "chelsea", "ramen": "astronaut", "pad thai": "rocket"}
ORIGIN = {"sushi": "Japan", "taco": "the United States", "ramen": "Japan", "pad thai": "Thailand"}


@pytest.fixture
def photo_world(project, tmp_path):
    """The project holds byte-identical copies of two KB photographs; the KB has four entities."""
    concept = project.db["concepts"].insert({"name": "food", "source": "manual", "status": "active",
                                             "created_at": "2026-01-01"}).last_pk
    kbdir = tmp_path / "kb"
    kbdir.mkdir()
    rows = []
    for lemma, photo in PHOTOS.items():
        data = _photo(photo)
        (kbdir / f"{photo}.png").write_bytes(data)
        rows.append({"id": f"e:{lemma}", "lemma": lemma.title(), "text": f"{lemma.title()} is a dish from {ORIGIN[lemma]}.",
                     "images": [f"{photo}.png"]})
    (kbdir / "kb.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    shas = {"sushi": add_image(project, concept, "JP", _photo("coffee")),
            "taco": add_image(project, concept, "US", _photo("chelsea"))}
    return project, kbdir / "kb.jsonl", shas


def _cli(project, *args):
    from cultura.cli import cli

    return CliRunner().invoke(cli, ["--project", str(project.root), *args], catch_exceptions=False)


def test_attribution_run_requires_an_encoder(photo_world):
    """There is no fake default: without --model (or [evaluate.attribution] encoder) the command stops."""
    project, kbfile, _ = photo_world
    assert _cli(project, "kb", "import", str(kbfile)).exit_code == 0
    r = _cli(project, "attribution", "run", "--judge", "stub")
    assert r.exit_code != 0
    assert "--model" in r.output and "evaluate.attribution" in r.output
    assert project.db.execute("SELECT count(*) FROM attribution_scores").fetchone()[0] == 0
    from cultura.errors import CulturaError
    from cultura.evaluate.suites.attribution import run_attribution

    with pytest.raises(CulturaError, match="embedder="):
        run_attribution(project, None, "stub")


def test_threshold_is_score_at_least_t_with_recall():
    """App. C.7: threshold t means score >= t (rule "ge"). A pair scored exactly 4.0 is relevant at t = 4, and
    recall is reported beside precision and F1. The main rule stays Table 1's "greater than 3"."""
    from sklearn.metrics import f1_score, precision_score, recall_score

    from cultura.evaluate.suites.attribution.evaluation import binary_metrics, relevance_agreement

    pred = np.array([4.0, 3.99, 5.0, 2.0, 4.0, 1.0])
    human = np.array([4.0, 4.5, 1.0, 4.0, 2.0, 1.0])
    m = binary_metrics(pred, human, threshold=4, rule="ge")
    assert m["n_positive_pred"] == 3 and m["n_positive_human"] == 3
    assert m["precision"] == pytest.approx(precision_score(human >= 4, pred >= 4)) == pytest.approx(1 / 3)
    assert m["recall"] == pytest.approx(recall_score(human >= 4, pred >= 4))
    assert m["f1"] == pytest.approx(f1_score(human >= 4, pred >= 4))
    r = relevance_agreement(pred, human, ["JP"] * 6, aggregation="pooled")
    assert r["threshold"] == 3.0 and r["rule"] == "score > 3" and set(r["by_threshold"]) == {2.0, 3.0, 4.0, 5.0}
    for t, bm in r["by_threshold"].items():  # undefined (no relevant pair) is NaN, never 0
        assert bm["recall"] == pytest.approx(recall_score(human >= t, pred >= t, zero_division=np.nan),
                                             nan_ok=True)


# ------------------------------------------------------------------ item 3: per-concept Pearson (Table 2)

def test_pearson_is_averaged_per_concept_within_country():
    """Table 2: per country, Pearson within each concept, averaged over concepts; 'Avg.' = mean over countries.
    The pooled value (a labelled option) differs on this data."""
    from scipy.stats import pearsonr

    from cultura.evaluate.suites.attribution.evaluation import relevance_agreement

    rng = np.random.default_rng(0)
    pred, human, cc, con = [], [], [], []
    for country, shift in (("JP", 0.0), ("TH", 1.0)):
        for concept, offset in (("breakfast", 0.0), ("funeral", 2.0)):
            h = rng.uniform(1, 3, 10) + offset
            p = h * (0.5 if concept == "breakfast" else -0.3) + rng.normal(0, 0.3, 10) + shift + offset
            pred += list(p); human += list(h); cc += [country] * 10; con += [concept] * 10
    pred, human, cc = np.array(pred), np.array(human), np.array(cc)
    r = relevance_agreement(pred, human, cc, concepts=con)
    assert r["aggregation"] == "per_concept"
    per_country = {}
    for country in ("JP", "TH"):
        rs = [pearsonr(pred[(cc == country) & (np.array(con) == c)], human[(cc == country) & (np.array(con) == c)])
              .statistic for c in ("breakfast", "funeral")]
        per_country[country] = np.mean(rs)
        assert r["per_country"][country]["pearson"] == pytest.approx(per_country[country])
        assert r["per_country"][country]["n_concepts"] == 2
        assert r["per_country"][country]["pooled"] == pytest.approx(
            pearsonr(pred[cc == country], human[cc == country]).statistic)
    assert r["pearson"] == pytest.approx(np.mean(list(per_country.values())))
    pooled = relevance_agreement(pred, human, cc, aggregation="pooled")
    assert pooled["pearson"] == pytest.approx(pearsonr(pred, human).statistic)
    assert abs(pooled["pearson"] - r["pearson"]) > 0.1
    with pytest.raises(ValueError, match="concepts"):
        relevance_agreement(pred, human, cc)


def test_kb_from_parquet_dump_with_aliases_and_faiss_text_index(project, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cultura.evaluate.suites.attribution import build_kb_index, link_image, list_kb
    from cultura.models.embedders import get_embedder

    dump = tmp_path / "dump"
    (dump / "img").mkdir(parents=True)
    for photo in ("coffee", "chelsea"):
        (dump / "img" / f"{photo}.png").write_bytes(_photo(photo))
    table = pa.table({"synset_id": ["bn:1n", "bn:2n", "bn:3n"], "title": ["Coffee", "Cat", "Pysanka"],
                      "gloss": ["a drink", "a small feline", "a decorated egg"],
                      "wikipedia": ["Coffee is a beverage.", "The cat is a domestic species.", None],
                      "aliases": [["kahve", "café"], [], ["Ukrainian Easter egg"]],
                      "image_paths": [["img/coffee.png"], ["img/chelsea.png"], []]})
    pq.write_table(table, dump / "kb.parquet")
    r = _cli(project, "kb", "import", str(dump / "kb.parquet"), "--kb", "bn", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"kb": "bn", "entities": 3, "images": 2, "missing_images": 0}
    ents = {e["entity_id"]: e for e in list_kb(project, "bn")}
    assert json.loads(ents["bn:1n"]["aliases"]) == ["kahve", "café"] and ents["bn:2n"]["aliases"] is None
    assert ents["bn:2n"]["images"] == [str((dump / "img" / "chelsea.png").resolve())]
    emb = get_embedder("fake:dim=16")
    index = build_kb_index(project, emb, "bn", with_text=True)
    assert index.index.ntotal == 2 and set(index.text_vecs) == {"bn:1n", "bn:2n"}
    ids, text_index = index.text_index("text")
    assert text_index.ntotal == 2
    q = index.text_vecs["bn:2n"]  # a query equal to a page embedding finds that page first
    assert link_image(index, q, k=2, method="text-t")[0][0] == "bn:2n"
    assert {e for e, _ in link_image(index, q, k=5, method="lemma-t")} == {"bn:1n", "bn:2n", "bn:3n"}
    # a JSON array works too; a record without an id is a clear error
    (tmp_path / "bad.json").write_text(json.dumps([{"lemma": "x"}]))
    r = _cli(project, "kb", "import", str(tmp_path / "bad.json"))
    assert r.exit_code != 0 and "needs an id" in r.output


# --------------------------------------------------- item 6: linking accuracy, baselines, upper bound, loglik

def test_linking_accuracy_table3_shape_through_cli(photo_world, tmp_path):
    from cultura.evaluate.suites.attribution import build_kb_index, link_image
    from cultura.models.embedders import embed_images_cached, get_embedder

    project, kbfile, shas = photo_world
    assert _cli(project, "kb", "import", str(kbfile)).exit_code == 0
    gold = tmp_path / "gold.csv"
    gold.write_text(f"sha256,lemma\n{shas['sushi']},sushi\n{shas['taco']},TACO\n{shas['taco']},Unknown dish\n")
    r = _cli(project, "attribution", "gold", str(gold), "--json")
    assert json.loads(r.stdout) == {"images": 2, "unmatched": ["Unknown dish"]}
    r = _cli(project, "attribution", "linking", "--model", "fake:dim=16", "--json")
    assert r.exit_code == 0, r.output
    rows = {x["method"]: x for x in json.loads(r.stdout)}
    assert set(rows) == {"lemma", "gloss", "frequency", "lemma-t", "gloss-t", "text-t"}
    assert rows["frequency"]["label"] == "Freq-Based (V-T)" and rows["text-t"]["label"] == "Wikipedia (T)"
    # the identical KB image is retrieved first; with one image per entity, frequency keeps that order
    assert rows["frequency"]["acc"]["1"] == 1.0
    emb = get_embedder("fake:dim=16")
    index = build_kb_index(project, emb, with_text=True)
    for method in rows:
        for kk in (1, 5, 10, 20):
            hits = []
            for name in ("sushi", "taco"):
                v = embed_images_cached(project, emb, [shas[name]])[0]
                hits.append(f"e:{name}" in [e for e, _ in link_image(index, v, k=20, method=method)[:kk]])
            assert rows[method]["acc"][str(kk)] == pytest.approx(np.mean(hits)), (method, kk)
    r = _cli(project, "attribution", "linking", "--model", "fake:dim=16")
    assert "Lemma (V-T)" in r.output and "@20" in r.output


def test_gold_page_upper_bound_ratio(photo_world, tmp_path):
    """App. C.5: the judge reads the gold page instead of the retrieved one; Table 11's ratio F1(retrieved) /
    F1(gold)."""
    from cultura.evaluate.suites.attribution.evaluation import evaluate_attribution, upper_bound_ratios
    from cultura.evaluate.suites.attribution.gold import set_gold
    from cultura.models.judges import StubJudge

    project, kbfile, shas = photo_world
    assert _cli(project, "kb", "import", str(kbfile)).exit_code == 0
    set_gold(project, {shas["sushi"]: "e:sushi", shas["taco"]: "e:taco"})
    judge = StubJudge(aliases={"Japan": ["sushi"], "United States": ["taco"]})
    from cultura.evaluate.suites.attribution import run_attribution

    # k=20 lemma re-ranking with a hash encoder links arbitrarily; the gold page is the right one
    run_attribution(project, "fake:dim=16", judge, countries=["JP", "US"], k=20, context="entity")
    g = run_attribution(project, "fake:dim=16", judge, countries=["JP", "US"], context="gold")
    assert g["scored"] == 4
    ents = dict(project.db.execute("SELECT sha256, entity_id FROM attribution_scores WHERE context = 'gold'"))
    assert ents == {shas["sushi"]: "e:sushi", shas["taco"]: "e:taco"}
    ratings = tmp_path / "gold_labels.csv"
    ratings.write_text("sha256,culture,relevant\n" + "".join(
        f"{shas[n]},{cc},{int(ok)}\n" for n, cc, ok in
        (("sushi", "JP", 1), ("sushi", "US", 0), ("taco", "US", 1), ("taco", "JP", 0))))
    res = evaluate_attribution(project, ratings=ratings, aggregation="pooled")
    by = {r["context"]: r for r in res}
    assert by["gold"]["f1"] == 1.0
    (ratio,) = upper_bound_ratios(res)
    assert ratio["ratio"] == pytest.approx(100 * by["entity"]["f1"] / by["gold"]["f1"], nan_ok=True)
    r = _cli(project, "attribution", "evaluate", "--ratings", str(ratings), "--aggregation", "pooled", "--json")
    assert json.loads(r.stdout)["gold_upper_bound"][0]["f1_gold"] == 1.0


def test_import_caire_specific_set_from_parquet(project, tmp_path):
    """Specific set (§4.1): multi-label binary gold over a proxy's candidate labels, images as Parquet image
    structs, gold entities matched to the KB by lemma or alias; then a rated-only run and Table 1's metrics."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    kb = tmp_path / "kb.jsonl"
    kb.write_text(json.dumps({"id": "bn:namahage", "lemma": "Namahage", "aliases": ["Namahage demon"],
                              "text": "Namahage are demons of Shinto folklore in Japan.",
                              "images": ["coffee.png"]}) + "\n")
    (tmp_path / "coffee.png").write_bytes(_photo("coffee"))
    assert _cli(project, "kb", "import", str(kb)).exit_code == 0
    rows = [
        {"image": {"bytes": _photo("coffee"), "path": "a.png"}, "concept": "Namahage demon",
         "proxy": "World religions", "labels": ["Shinto"], "candidates": ["Shinto", "Buddhism", "Islam"]},
        {"image": {"bytes": _photo("chelsea"), "path": "b.png"}, "concept": "Bronze cat", "proxy": "Countries",
         "labels": ["JP", "Thailand"], "candidates": None},
        {"image": {"bytes": b"not an image", "path": "c.png"}, "concept": "Broken", "proxy": "Countries",
         "labels": ["US"], "candidates": None},
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "specific.parquet")
    r = _cli(project, "caire", "import-specific", str(tmp_path / "specific.parquet"), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["imported"] == 2 and out["failed"] == 1 and "not a readable image" in out["failures"][0]["reason"]
    assert out["gold"] == 1 and out["unmatched_concepts"] == ["Bronze cat"]
    dec = {(s[:6], c): v for s, c, v in project.db.execute(
        "SELECT sha256, country, value FROM decisions WHERE kind = 'relevance' AND superseded = 0")}
    assert sorted(dec.values()).count(5.0) == 3  # Shinto; JP and TH (the Countries proxy pools JP, TH, US)
    labels = {c for _, c in dec}
    assert {"Shinto", "Buddhism", "Islam", "JP", "TH", "US"} == labels
    again = json.loads(_cli(project, "caire", "import-specific", str(tmp_path / "specific.parquet"), "--json").output)
    assert again.get("decisions", 0) == 0  # idempotent
    # a rated-only run scores exactly the 6 rated pairs, and Table 1's metrics come out at >= 4
    r = _cli(project, "attribution", "run", "--model", "fake:dim=16", "--judge", "stub", "--top-k", "1",
             "--rated-only", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["pairs"] == 6
    r = _cli(project, "attribution", "baseline", "--model", "fake:dim=16", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["scored"] == 12  # Baseline 1 over the 6 rated labels x 2 images
    ev = json.loads(_cli(project, "attribution", "evaluate", "--aggregation", "pooled", "--json").output)
    res = {x["judge"]: x for x in ev["results"]}
    assert res["stub-judge:seed=0"]["n"] == 6 and res["baseline"]["n"] == 6
    assert res["stub-judge:seed=0"]["threshold"] == 3.0 and "recall" in res["baseline"]


def test_import_caire_universal_set_long_and_wide(project, tmp_path):
    """Universal set (§4.2): images linked to concept x prompt country, mean rating per rater country, so the
    per-concept Pearson of Table 2 finds each image's concept."""
    from cultura.evaluate.suites.attribution.evaluation import human_ratings, image_concepts

    imgs = tmp_path / "imgs"
    imgs.mkdir()
    for photo in ("coffee", "chelsea", "astronaut"):
        (imgs / f"{photo}.png").write_bytes(_photo(photo))
    long = [{"image": "coffee.png", "concept": "Breakfast", "country": "Japan", "split": "natural",
             "rater_country": "USA", "rating": r} for r in (2, 3)]
    long += [{"image": "coffee.png", "concept": "Breakfast", "country": "Japan", "split": "natural",
              "rater_country": "Japan", "rating": 5},
             {"image": "chelsea.png", "concept": "Funeral", "country": "US", "split": "generated",
              "rater_country": "US", "rating": 4},
             {"image": "astronaut.png", "concept": "Funeral", "country": "Atlantis", "split": "natural",
              "rater_country": "US", "rating": 4}]
    f = tmp_path / "universal.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in long))
    r = _cli(project, "caire", "import-universal", str(f), "--images", str(imgs), "--split", "natural", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["imported"] == 1 and out["failed"] == 1 and "Atlantis" in out["failures"][0]["reason"]
    hr = human_ratings(project)
    sha = next(iter({s for s, _ in hr}))
    assert hr[(sha, "US")] == (2.5, 2) and hr[(sha, "JP")] == (5.0, 1)
    assert image_concepts(project)[sha] == ("Breakfast",)
    wide = tmp_path / "wide.csv"
    wide.write_text('image,concept,country,ratings\nchelsea.png,Funeral,DE,"{""Germany"": [4, 5], ""US"": 1}"\n')
    out = json.loads(_cli(project, "caire", "import-universal", str(wide), "--images", str(imgs), "--json").output)
    assert out["imported"] == 1 and out["decisions"] == 2
    sha2 = next(s for s, c in human_ratings(project) if c == "DE")
    assert human_ratings(project)[(sha2, "DE")] == (4.5, 2)
