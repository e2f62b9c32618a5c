"""Seed 001 (Camellia) conventions that need no model: parsing, the Wikidata classes and queries (Table 4), the
prompts (Tables 8 and 9), patterns per language. Each test reproduces the paper or fails on a reading the
paper's own numbers rule out."""
from __future__ import annotations

import json

import pytest

from cultura.evaluate.suites.llm_bias import import_contexts, import_entities
from tests.fakes.tiny_lm import tiny_lm  # noqa: F401


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


# -- 1. sentiment replies: the answer, not the key (seed 001 §4.2, Table 8) --------------------------------

@pytest.mark.parametrize("reply, label", [
    ("Given the above key, the sentiment of this sentence is (0-2): 2", "negative"),
    ("the sentiment of this sentence is (0-2): 1", "positive"),
    ("The sentiment of this sentence is (0–2): 0 (neutral)", "neutral"),
    ("2", "negative"),
    ("2 = negative", "negative"),
    ("Answer: 1 (positive).", "positive"),
    ("Negative", "negative"),
    ("Key: 0 = neutral, 1 = positive, 2 = negative. Answer: 2", "negative"),
])
def test_parse_sentiment_reads_the_answer(reply, label):
    from cultura.evaluate.suites.llm_bias.sentiment import parse_sentiment

    assert parse_sentiment(reply) == label


@pytest.mark.parametrize("reply, reason", [
    ("", "empty"), ("I cannot tell.", "no 0/1/2"), ("1 or 2", "ambiguous"),
    ("the sentiment of this sentence is (0-2):", "no 0/1/2"), ("2 (positive)", "ambiguous"),
])
def test_parse_sentiment_unparseable_has_a_reason(reply, reason):
    from cultura.evaluate.suites.llm_bias.sentiment import parse_sentiment_reply

    label, why = parse_sentiment_reply(reply)
    assert label is None and reason in why


PAR_ENTS = ([{"language": "ja", "type": "food", "side": "local", "native": "おでん"}]            # no English form
            + [{"language": "ja", "type": "food", "side": "local", "native": n, "english": e}
               for n, e in (("寿司", "sushi"), ("ラーメン", "ramen"), ("天ぷら", "tempura"), ("うどん", "udon"))]
            + [{"language": "ja", "type": "food", "side": "western", "native": n, "english": e}
               for n, e in (("ピザ", "pizza"), ("ステーキ", "steak"), ("パスタ", "pasta"), ("タコス", "tacos"))])
DATA = __import__("pathlib").Path(__file__).resolve().parents[2] / "fakes" / "data"
TABLE_4 = {   # seed 001 App. A Table 4, verbatim: entity type → (class label, QID)
    "authors": [("writer", "Q36180"), ("novelist", "Q6625963")],
    "beverage": [("drink", "Q40050")],
    "food": [("food", "Q2095"), ("dish", "Q746549")],
    "location": [("city", "Q515")],
    "names_female": [("female given name", "Q11879590")],
    "names_male": [("male given name", "Q12308941")],
    "sports_clubs": [("association football club", "Q476028"), ("cricket team", "Q17376093")],
}


def _run_sparql(query):
    rdflib = pytest.importorskip("rdflib")
    g = rdflib.Graph()
    g.parse(DATA / "wikidata_sample.ttl")
    ns = {"wd": rdflib.Namespace("http://www.wikidata.org/entity/"),
          "wdt": rdflib.Namespace("http://www.wikidata.org/prop/direct/"), "rdfs": rdflib.RDFS}
    return [{str(k): str(v) for k, v in row.asdict().items()} for row in g.query(query, initNs=ns)]


def test_wikidata_classes_are_table_4():
    from cultura.evaluate.suites.llm_bias.wikidata import build_query, wikidata_classes

    types = wikidata_classes()
    assert {t: list(zip(v["labels"], v["qids"])) for t, v in types.items()} == TABLE_4
    for t, classes in TABLE_4.items():
        q = build_query(t, "IN", "hi")
        assert all(f"wd:{qid}" in q for _, qid in classes)


def test_wikidata_authors_are_humans_with_a_writer_occupation():
    from cultura.evaluate.suites.llm_bias.wikidata import build_query

    q = build_query("authors", "JP", "ja")
    assert "wdt:P31 wd:Q5" in q and "wdt:P106 ?class" in q and "wdt:P31/wdt:P279* ?class" not in q
    got = {r["item"].rsplit("/", 1)[1]: (r["native"], r.get("english")) for r in _run_sparql(q)}
    assert got == {"Q188712": ("夏目漱石", "Natsume Sōseki"), "Q134798": ("村上春樹", "Haruki Murakami")}
    # a query matching instances of the writer class: no writer at all, one stray item
    old = q.replace("?item wdt:P31 wd:Q5 ; wdt:P106 ?class .", "?item wdt:P31/wdt:P279* ?class .").replace(
        "?item wdt:P27 ?country", "?item (wdt:P17|wdt:P27|wdt:P495) ?country")
    assert {r["item"].rsplit("/", 1)[1] for r in _run_sparql(old)} == {"Q900001"}
    # other types stay instance-of-a-subclass
    (food,) = _run_sparql(build_query("food", "JP", "ja"))
    assert food["native"] == "寿司" and food["english"] == "sushi"


def test_sentiment_prompt_renders_table_8():
    from cultura.models.llm import render_prompt

    assert render_prompt("camellia_sentiment.j2", language="Hindi", sentence="मुझे [X] पसंद है") == (
        "Classify the sentiment in this Hindi sentence based on the following key:\n0 = neutral\n1 = positive\n"
        "2 = negative\n\nSentence: \"मुझे [X] पसंद है\"\nGiven the above key, the sentiment of this sentence is (0-2):")


@pytest.mark.parametrize("type_, words", [("names_female", "female first name"), ("names_male", "male first name"),
                                          ("sports_clubs", "sports club"), ("authors", "author"),
                                          ("food", "food"), ("street_food", "street food")])
def test_qa_prompt_renders_table_9_with_the_type_in_words(type_, words):
    from cultura.evaluate.suites.llm_bias.qa import entity_type_words
    from cultura.models.llm import render_prompt

    text = render_prompt("camellia_qa.j2", entity_type=entity_type_words(type_), language="Korean",
                         qa_context="어제 [X]를 만났다.")
    assert text == (f"Extract the {words} entity mentioned in the following Korean text.\n"
                    "Text: \"어제 [X]를 만났다.\"\n"
                    f"Reply only with the mentioned {words}. If nothing is found, reply \"None\".")
    assert "‘" not in text and "’" not in text and "_" not in text


CAMELLIA_LANGUAGES = ["zh", "ja", "ko", "vi", "ur", "hi", "ml", "mr", "gu"]   # seed 001 §1, Table 6


@pytest.mark.parametrize("language", CAMELLIA_LANGUAGES)
def test_pattern_file_per_camellia_language(language):
    from cultura.evaluate.suites.llm_bias.patterns import _candidates, load_patterns, pattern_windows

    pats = load_patterns(language)
    # the types the paper extracted from mC4 (Wikidata covered authors, locations, sports clubs)
    assert {p["type"] for p in pats} >= {"food", "beverage", "names_female", "names_male"}
    for p in pats:
        if p.get("window"):
            got = [w["text"] for w in pattern_windows([p["example"]], [p])]
        else:
            got = [c for m in p["re"].finditer(p["example"]) for c in _candidates(m.group("entity"), p)]
        assert got == p["expect"], p["name"]


def test_western_languages_list_is_camellia():
    from cultura.evaluate.suites.llm_bias.wikidata import western_settings

    assert western_settings()["languages"] == CAMELLIA_LANGUAGES


def test_unigrams_and_bigrams_after_a_pattern(project, tmp_path):
    from cultura.curate.entities import list_entities
    from cultura.evaluate.suites.llm_bias.patterns import extract_entities

    corpus = _write_jsonl(tmp_path / "hi.jsonl", [{"text": "आज मैंने आलू पराठा की रेसिपी देखी"},
                                                  {"text": "मेरी बहन का नाम प्रिया है"}])
    out = extract_entities(project, corpus, "hi")
    assert out["inserted"] == 4
    got = {(e["native"], e["type"]) for e in list_entities(project, status="candidate")}
    assert got == {("पराठा", "food"), ("आलू पराठा", "food"), ("प्रिया", "names_female"),
                   ("प्रिया है", "names_female")}


def test_entity_and_context_counts(project, tmp_path):
    from cultura.curate.contexts import context_counts
    from cultura.curate.entities import entity_counts

    import_entities(project, _write_jsonl(tmp_path / "e.jsonl", [
        *PAR_ENTS, {"language": "ja", "type": "food", "side": "western", "native": "ピザ2", "country": "IT"}]))
    import_contexts(project, _write_jsonl(tmp_path / "c.jsonl", [
        {"language": "ja", "kind": "grounded", "type": "food", "text": "京都で[MASK]を食べた。"},          # 9 chars
        {"language": "ja", "kind": "neutral", "type": "food", "text": "昼は[MASK]。"},                      # 4
        {"language": "hi", "kind": "qa", "type": "food", "text": "कल हमने [MASK] खाया और बहुत मज़ा आया"}]))  # 8 words
    assert {(r["language"], r["type"], r["side"]): r["n"] for r in entity_counts(project)} == {
        ("ja", "food", "local"): 5, ("ja", "food", "western"): 5}
    assert entity_counts(project, by=["country"], status=None) == [{"country": None, "n": 9},
                                                                   {"country": "IT", "n": 1}]
    ja, hi = sorted(context_counts(project), key=lambda r: r["language"] != "ja")
    assert (ja["grounded"], ja["neutral"], ja["qa"], ja["unit"]) == (1, 1, 0, "characters")
    assert ja["length_adaptation"] == 6.5 and ja["sd_adaptation"] == pytest.approx(3.54, abs=0.01)
    assert (hi["qa"], hi["unit"], hi["length_qa"], hi["sd_qa"]) == (1, "words", 8.0, None)


def test_english_leaderboards_tables_18_to_21(project):
    from cultura.evaluate.suites import row
    from cultura.evaluate.suites.llm_bias.suite import render_llm

    det = {"llm_spec": "hf:m"}
    rows = [row("llm", "cbs_mean", 0.3, group={"language": "ja", "kind": "grounded"}, details=det),
            row("llm", "cbs_en_mean", 0.5, group={"language": "ja", "kind": "grounded"}, details=det),
            row("llm", "cbs_en_mean", 0.4, group={"language": "ko", "kind": "grounded"}, details=det),
            row("llm", "delta_fn", 3.0, group={"language": "ja", "test_language": "ja"}, details=det),
            row("llm", "delta_fn", -7.0, group={"language": "ja", "test_language": "en"}, details=det)]
    sec = render_llm(rows, project)
    assert "Table 18" in sec.html and "Table 19" in sec.html
    (t18,) = sec.csv_tables["llm_cbs_en_mean_grounded"]
    assert t18["ja"] == 0.5 and t18["ko"] == 0.4 and t18["Avg"] == pytest.approx(0.45)
    (t15,) = sec.csv_tables["llm_delta_fn"]
    (t19,) = sec.csv_tables["llm_delta_fn_english"]
    assert t15["ja"] == 3.0 and t19["ja"] == -7.0 and t19["Avg"] == 7.0     # Avg of |Δ| as in the paper


def test_context_writes_are_atomic(project):
    import sqlite3

    from cultura.curate.contexts import add_contexts, list_contexts

    good = {"language": "ja", "kind": "grounded", "type": "food", "text": "A [MASK].", "country": None,
            "sentiment": None, "english": None, "parallel_id": None, "source": None, "status": "active"}
    with pytest.raises(sqlite3.IntegrityError):
        add_contexts(project, [good, {**good, "text": "B [MASK].", "language": None}], source="t")
    assert list_contexts(project, status=None) == []        # the first row was not kept on its own


def _length_scorer():
    """A scorer whose log-likelihood is minus the scored text's length (no model)."""
    from cultura.models.scorers import LogProbScorer

    class LengthScorer(LogProbScorer):
        family, identity = "length", "length:test"

        def _score_batch(self, pairs):
            return [(-float(len(p + c)), len(p + c), None) for p, c in pairs]

    return LengthScorer()


def test_each_logged_context_sample_carries_its_own_contexts_text(project, tmp_path):
    from cultura.evaluate.suites.llm_bias import import_contexts, import_entities
    from cultura.evaluate.suites.llm_bias.cbs import cbs_by_context
    from cultura.evaluate.suites.registry import suite_run

    import_entities(project, _write_jsonl(tmp_path / "e.jsonl", PAR_ENTS))
    contexts = [{"language": "ja", "kind": "grounded", "type": "food", "text": "京都で[MASK]を食べた。",
                 "english": "In Kyoto I ate [MASK]."},
                {"language": "ja", "kind": "grounded", "type": "food", "text": "大阪で[MASK]を買った。",
                 "english": "In Osaka I bought [MASK]."},
                {"language": "ja", "kind": "neutral", "type": "food", "text": "昼は[MASK]。",
                 "english": "For lunch, [MASK]."}]
    import_contexts(project, _write_jsonl(tmp_path / "c.jsonl", contexts))
    from cultura.curate.contexts import list_contexts

    for english, field in ((False, "text"), (True, "english")):
        own = {c["id"]: c[field] for c in list_contexts(project)}
        with suite_run(samples=True) as log:
            rows = cbs_by_context(project, _length_scorer(), english=english, parallel=True)
        assert len(log) == len(rows) == 3
        # every sample's text is the text of the context it names, and each context is logged once
        assert sorted(s["context_id"] for s in log) == sorted(own)
        for s in log:
            assert s["kind"] == "masked_context" and s["context"] == own[s["context_id"]]
