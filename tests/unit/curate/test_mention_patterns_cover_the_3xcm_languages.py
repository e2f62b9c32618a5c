"""The short descriptor query ("Train of Japan" written in the query language, seed 000 RQ3) has a pattern for
every query language of the 3XCM preset, and each text it makes for each of the other fifteen countries passes
the check an LLM's text passes (the native term, the descriptor named in the query language, no other culture
cue)."""
import pytest

from cultura.countries import registry
from cultura.curate.benchmark_queries import mention_patterns, pattern_mention
from cultura.curate.cues import cue_patterns, validate_text

#: "train" in each language of the preset (any word works: the check is about the descriptor around it)
TRAIN = {"en": "train", "de": "Zug", "zh": "火车", "ja": "電車", "es": "tren", "fr": "train", "pt": "trem",
         "ar": "قطار", "th": "รถไฟ", "hi": "ट्रेन", "sw": "treni", "yo": "ọkọ̀ ojú irin"}



def _preset() -> list[str]:
    return registry().presets["3xcm"]["countries"]


LANGUAGES = sorted({registry().countries[c].language for c in _preset()})


def test_every_language_of_the_preset_has_a_pattern():
    assert len(_preset()) == 16
    assert set(LANGUAGES) <= set(mention_patterns()), set(LANGUAGES) - set(mention_patterns())
    assert set(LANGUAGES) <= set(TRAIN)


@pytest.mark.parametrize("language", LANGUAGES)
def test_each_descriptor_text_of_a_language_passes_the_query_check(language):
    codes = _preset()
    for query_country in [c for c in codes if registry().countries[c].language == language]:
        for d in codes:
            if d == query_country:
                continue
            text = pattern_mention(TRAIN[language], language, d)
            assert text, f"{language}: no text for {d}"
            reason = validate_text(text, TRAIN[language], cue_patterns(allow=[d], language=language))
            assert reason is None, f"{language} {query_country}→{d}: {text!r}: {reason}"


def test_a_text_naming_another_country_is_refused():
    # the check is not a rubber stamp: "Zug aus Frankreich" is no descriptor of Japan
    text = pattern_mention("Zug", "de", "FR")
    assert validate_text(text, "Zug", cue_patterns(allow=["JP"], language="de")).startswith("culture cue")
