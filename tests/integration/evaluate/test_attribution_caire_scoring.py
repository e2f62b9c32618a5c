"""CAIRe (seed 004) scoring on models: an identical image links to its own entity, log-likelihood scoring with
affine debiasing, and the suite's every table in the report."""
from __future__ import annotations

import json

import pytest

from tests.fakes.tiny_lm import tiny_lm  # noqa: F401 - fixture
from tests.unit.evaluate.test_attribution_caire import ORIGIN, PHOTOS, _cli, _photo, photo_world  # noqa: F401 - shared with the unit tests


def test_identical_image_links_to_its_own_entity(photo_world):
    """A query image byte-identical to the KB's Sushi photo is linked to Sushi (identical bytes → identical
    embedding), through the CLI, with a real open_clip architecture (random init: identity says so)."""
    project, kbfile, shas = photo_world
    assert _cli(project, "kb", "import", str(kbfile)).exit_code == 0
    r = _cli(project, "attribution", "run", "--model", "openclip:cultura-tiny", "--judge", "stub",
             "--top-k", "1", "--country", "JP", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["encoder"] == "openclip:cultura-tiny/random_init@seed0" and out["scored"] == 2
    links = {s: json.loads(e)[0][0] for s, e in project.db.execute(
        "SELECT sha256, entities FROM attribution_links").fetchall()}
    assert links == {shas["sushi"]: "e:sushi", shas["taco"]: "e:taco"}
    ents = dict(project.db.execute("SELECT sha256, entity_id FROM attribution_scores").fetchall())
    assert ents == {shas["sushi"]: "e:sushi", shas["taco"]: "e:taco"}


def test_loglik_scoring_with_affine_debiasing(photo_world, tiny_lm):
    """App. B.1: log P(" label" | page + "This text is relevant to") minus alpha * max(base rate, tau), mapped
    to 1..5 per image; checked against the scorer called directly."""
    from cultura.evaluate.suites.attribution import import_kb
    from cultura.evaluate.suites.attribution.loglik import PROMPT, run_loglik
    from cultura.models.scorers import get_scorer

    project, kbfile, shas = photo_world
    import_kb(project, kbfile)
    scorer = get_scorer(f"hf:{tiny_lm}")
    out = run_loglik(project, "fake:dim=16", scorer, labels=["JP", "Shinto"], k=1, alpha=0.7, tau=None)
    assert out["scored"] == 4 and out["failed"] == 0
    again = run_loglik(project, "fake:dim=16", scorer, labels=["JP", "Shinto"], k=1, alpha=0.7, tau=None)
    assert again["skipped"] == 2
    rows = project.db.execute("SELECT sha256, country, score, details, entity_id FROM attribution_scores "
                              "WHERE sha256 = ?", [shas["sushi"]]).fetchall()
    deb = {}
    for _s, cc, score, det, eid in rows:
        d = json.loads(det)
        assert eid == "e:sushi"
        name = "Japan" if cc == "JP" else "Shinto"
        (ll, _, _), (base, _, _) = scorer.score_pairs([("Sushi is a dish from Japan.\n\n" + PROMPT, " " + name),
                                                        (PROMPT, " " + name)])
        assert d["ll"] == pytest.approx(ll, abs=1e-4) and d["base"] == pytest.approx(base, abs=1e-4)
        assert d["debiased"] == pytest.approx(ll - 0.7 * base, abs=1e-4)
        deb[cc] = (d["debiased"], score)
    hi = max(deb, key=lambda c: deb[c][0])
    assert deb[hi][1] == 5.0 and min(v[1] for v in deb.values()) == 1.0


def test_suite_reports_every_caire_table(photo_world, tiny_lm, tmp_path):
    """The attribution suite runs CAIRe, the gold-page upper bound, log-likelihood scoring and linking accuracy,
    and the report names the paper's conventions in its headers."""
    from cultura.evaluate.report import build_report
    from cultura.evaluate.runner import load_results, run_evaluation
    from cultura.evaluate.suites.attribution import import_kb
    from cultura.evaluate.suites.attribution.gold import set_gold

    project, kbfile, shas = photo_world
    import_kb(project, kbfile)
    set_gold(project, {shas["sushi"]: "e:sushi", shas["taco"]: "e:taco"})
    ratings = tmp_path / "r.csv"
    ratings.write_text("sha256,culture,rating,concept\n" + "".join(
        f"{shas[n]},{cc},{v},food\n" for n, cc, v in
        (("sushi", "JP", 5), ("sushi", "US", 1), ("taco", "US", 4), ("taco", "JP", 2))))
    rec = run_evaluation(project, ["fake:dim=16"], ["attribution"], options={"attribution": {
        "judge": "stub", "k": 20, "countries": "JP,US", "loglik": f"hf:{tiny_lm}", "ratings": str(ratings),
        "aggregation": "pooled"}})[0]
    assert rec.status == "done", rec.reason
    rows = load_results(project, suite="attribution")
    scorers = {r["group"].get("scorer") for r in rows if r["metric"] == "f1"}
    assert scorers == {"caire", "caire-gold", "baseline", "loglik"}
    assert {r["group"]["threshold"] for r in rows if r["metric"] == "recall"} == {"> 3", "2", "3", "4", "5"}
    acc = [r for r in rows if r["metric"] == "linking_acc"]
    assert {r["group"]["k"] for r in acc} == {"1", "5", "10", "20"} and len(acc) == 24
    (ratio,) = [r for r in rows if r["metric"] == "f1_ratio_to_gold"]
    assert ratio["details"]["f1_gold"] > 0
    section = dict(build_report(project)["sections"])["attribution"]
    for phrase in ("score &gt; 3", "Table 1", "App. C.7", "Table 3 shape", "Table 11", "pooled"):
        assert phrase in section.html, phrase
