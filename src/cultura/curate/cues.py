"""Culture cues: the words that give a query's culture away (a country's names, its demonyms, its language's
name, in English, natively and — through CLDR — in the query's language), and the check every generated
benchmark query passes (:func:`validate_text`: the native term exactly, no cue but the descriptor's).

>>> validate_text("I need a picture of a bus for school", "bus", cue_patterns(["JP"]))
>>> validate_text("A Japanese bus please", "bus", cue_patterns(["JP"]))
"culture cue 'Japanese'"
"""
from __future__ import annotations

import re
import tomllib
from functools import lru_cache
from importlib import resources
from typing import Iterable

from babel import Locale, UnknownLocaleError

from ..countries import registry

#: English nationality adjectives where the language name does not already give one.
DEMONYMS = {
    "US": ["American"], "GB": ["British", "English", "Scottish", "Welsh"], "AU": ["Australian", "Aussie"],
    "NZ": ["New Zealander", "Kiwi"], "CA": ["Canadian"], "IE": ["Irish"], "IN": ["Indian"],
    "NG": ["Nigerian"], "KE": ["Kenyan"], "ZA": ["South African"], "BR": ["Brazilian"],
    "AR": ["Argentinian", "Argentine"], "MX": ["Mexican"], "SA": ["Saudi"], "AE": ["Emirati"],
    "EG": ["Egyptian"], "CN": ["Chinese"], "JP": ["Japanese"], "TH": ["Thai"], "DE": ["German"],
    "FR": ["French"], "ES": ["Spanish"], "PT": ["Portuguese"], "IT": ["Italian"], "KR": ["Korean"],
    "VN": ["Vietnamese"], "ID": ["Indonesian"], "PH": ["Filipino"], "RU": ["Russian"], "TR": ["Turkish"],
    "PK": ["Pakistani"], "BD": ["Bangladeshi"], "ET": ["Ethiopian"], "GH": ["Ghanaian"], "PE": ["Peruvian"],
    "CO": ["Colombian"], "CL": ["Chilean"], "IR": ["Iranian", "Persian"], "IL": ["Israeli"],
    "GR": ["Greek"], "PL": ["Polish"], "NL": ["Dutch"], "SE": ["Swedish"], "NO": ["Norwegian"],
    "FJ": ["Fijian"], "MY": ["Malaysian"], "SG": ["Singaporean"], "UA": ["Ukrainian"],
}
#: Native short forms not contained in the registry's native country names.
NATIVE_FORMS = {"TH": ["ไทย"], "JP": ["日本"], "CN": ["中国", "中國"], "KR": ["한국"], "DE": ["deutsch"],
                "FR": ["français", "française"], "ES": ["español", "española"], "BR": ["brasileir"],
                "AR": ["argentin"], "PT": ["portugu"], "RU": ["росси", "русск"], "SA": ["سعود"],
                "IN": ["भारत"], "KE": ["kenya"], "NG": ["nàìjíríà", "naijiria"]}


@lru_cache(maxsize=None)
def _cues(code: str) -> tuple[str, ...]:
    reg = registry()
    c = reg.countries[code]
    words = {c.name, c.native_name, *DEMONYMS.get(code, []), *NATIVE_FORMS.get(code, [])}
    for lang in c.languages[:1]:
        ln = reg.languages.get(lang)
        if ln and lang != "en":
            words |= {ln.name, ln.native_name}
    return tuple(sorted(w for w in words if w and len(w) >= 2))


@lru_cache(maxsize=None)
def cldr_locale(language: str):
    """The CLDR locale of ``language`` (babel), or None when CLDR does not know it."""
    try:
        return Locale.parse(language.replace("-", "_"))
    except (UnknownLocaleError, ValueError):
        return None


@lru_cache(maxsize=None)
def mention_table() -> dict:
    """``data/mention_patterns.toml``: ``mention`` (language → short descriptor query pattern) and ``of``
    (language → country code → the language's "of <country>" phrase)."""
    return tomllib.loads(resources.files("cultura.data").joinpath("mention_patterns.toml").read_text("utf-8"))


def of_phrase(code: str, language: str) -> str | None:
    """How ``language`` says "of <country>" for ``code`` where its country names take articles or contracted
    prepositions (``du Japon``, ``aus den Vereinigten Staaten``), else None."""
    return mention_table().get("of", {}).get(language.split("-")[0].split("_")[0].lower(), {}).get(code)


@lru_cache(maxsize=None)
def language_forms(code: str, language: str) -> tuple[str, ...]:
    """How a text in ``language`` names country ``code``: the CLDR country name in that language, the CLDR
    name of the country's language when no other registry country has it as its primary language
    (``japonés``, ``ญี่ปุ่น``), the language's "of <country>" phrase (:func:`of_phrase`: an inflected name such as
    ``dem Vereinigten Königreich``), and — in English or in the country's own language — the registry's names,
    demonyms and native forms. These are the forms a descriptor must take in a query of that language."""
    reg = registry()
    c = reg.countries[code]
    words: set[str] = {of_phrase(code, language) or ""}
    loc = cldr_locale(language)
    if loc is not None:
        words.add(loc.territories.get(code, ""))
        if sum(1 for x in reg.countries.values() if x.language == c.language) == 1:
            words.add(loc.languages.get(c.language, ""))
    base = language.split("-")[0].split("_")[0].lower()
    if base == "en":
        words |= {c.name, *DEMONYMS.get(code, [])}
    if base == c.language:
        words |= {c.native_name, *NATIVE_FORMS.get(code, [])}
        ln = reg.languages.get(c.language)
        if ln:
            words.add(ln.native_name)
    return tuple(sorted(w for w in words if w and len(w) >= 2))


def _compile(w: str) -> re.Pattern:
    """Latin-script cues match at a word start, each word of a several-word name with any ending (German
    'den Vereinigten Staaten' names 'Vereinigte Staaten'); other scripts match anywhere."""
    if re.match(r"^[A-Za-zÀ-ÿ' .-]+$", w):
        return re.compile(r"(?<![\w])" + r"\w*\s+".join(re.escape(x) for x in w.split()), re.I)
    return re.compile(re.escape(w), re.I)


class CuePatterns(list):
    """The culture-cue patterns a query must not contain (a list of ``(word, pattern)``), and in ``required``
    the descriptor countries whose cue must appear: ``[(code, [(word, pattern), …]), …]``."""

    required: list[tuple[str, list[tuple[str, re.Pattern]]]]
    language: str | None


def cue_patterns(countries: Iterable[str] | None = None, *, allow: Iterable[str] = (),
                 language: str | None = None) -> CuePatterns:
    """Compiled culture-cue patterns for ``countries`` (default: every registry country), minus the cues of
    the ``allow`` countries — the descriptor countries, whose cue a query **must** carry (``required``).

    With ``language`` (the query's language code), each country's name in that language (CLDR) is a cue too,
    and a descriptor must be written in that language (:func:`language_forms`); without it, any registry cue
    of the descriptor country counts. Latin-script cues match at a word start (so 'Japan' catches
    'Japanese'); other scripts match anywhere."""
    return _cue_patterns(tuple(sorted(countries)) if countries is not None else None,
                         tuple(sorted(a.upper() for a in allow)), language)


@lru_cache(maxsize=256)
def _cue_patterns(countries, allow, language) -> CuePatterns:
    codes = countries if countries is not None else tuple(sorted(registry().countries))
    allowed_codes = set(allow)

    def forms(code):
        return set(_cues(code)) | (set(language_forms(code, language)) if language else set())

    allowed = {w.lower() for a in allowed_codes for w in forms(a)}
    out = CuePatterns()
    for code in codes:
        for w in sorted(forms(code)):
            if w.lower() in allowed:
                continue
            out.append((w, _compile(w)))
    out.sort(key=lambda wp: (-len(wp[0]), wp[0]))  # report the longest cue ('Japanese' over 'Japan')
    out.required = []
    for a in sorted(allowed_codes):
        words = language_forms(a, language) if language else _cues(a)
        out.required.append((a, sorted(((w, _compile(w)) for w in words), key=lambda wp: (-len(wp[0]), wp[0]))))
    out.language = language
    return out


def validate_text(text: str, term: str, patterns) -> str | None:
    """The reason a generated query is invalid, or None: the native term must appear exactly, no culture
    cue may appear outside it, and each descriptor country of ``patterns`` (``cue_patterns(allow=…)``) must
    be named — in the query language when ``patterns`` were built with one."""
    if not text or not text.strip():
        return "empty text"
    if term not in text:
        return f"native term {term!r} missing"
    rest = text.replace(term, " ")
    for word, pat in patterns:
        if pat.search(rest):
            return f"culture cue {word!r}"
    for code, pats in getattr(patterns, "required", ()):
        if not any(pat.search(rest) for _, pat in pats):
            lang = getattr(patterns, "language", None)
            shown = ", ".join(repr(w) for w, _ in pats[:4]) or "none known"
            where = f" in language {lang!r}" if lang else ""
            return f"descriptor {code} missing{where} (looked for {shown})"
    return None
