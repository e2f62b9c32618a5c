"""Tokenizer script coverage (seed 001 App. C.1, Figure 13; spec §5).

Coverage of a script = share of the vocabulary's tokens that contain at least one character of the script.
Scripts are data (``data/scripts.toml``): Unicode ranges per script, or a character list (Vietnamese, a Latin
script, is counted by its specific letters); ``[languages.X].script`` maps a language to its script. Tokens are
decoded one id at a time, so byte-level BPE pieces are counted by the characters they spell (a partial UTF-8
byte sequence decodes to U+FFFD and counts for no script).

>>> script_coverage(["寿司", "abc", "ラーメン"], "Han")
0.3333333333333333
"""
from __future__ import annotations

import tomllib
from functools import lru_cache
from importlib import resources

from ....countries import registry
from ....errors import CulturaError, unknown


@lru_cache(maxsize=1)
def scripts_data() -> dict:
    """The parsed ``data/scripts.toml``."""
    return tomllib.loads(resources.files("cultura.data").joinpath("scripts.toml").read_text("utf-8"))


@lru_cache(maxsize=None)
def _matcher(script: str):
    spec = scripts_data()["scripts"].get(script)
    if spec is None:
        raise unknown("script", script, scripts_data()["scripts"])
    ranges = [(int(a, 16), int(b, 16)) for a, b in spec.get("ranges", [])]
    chars = frozenset(spec.get("chars", ""))

    def has(token: str) -> bool:
        return any(ch in chars or any(a <= ord(ch) <= b for a, b in ranges) for ch in token)

    return has


def script_of(language: str) -> str:
    """The script of a language from ``[languages.X].script`` (for languages outside the table, the
    registry's script name)."""
    langs = scripts_data().get("languages", {})
    if language in langs:
        return langs[language]["script"]

    lang = registry().languages.get(language)
    if lang is not None and lang.script in scripts_data()["scripts"]:
        return lang.script
    raise CulturaError(f"No script known for language {language!r}; add [languages.{language}] to "
                       "data/scripts.toml.")


def script_coverage(tokens, script: str) -> float:
    """Share of ``tokens`` (decoded strings) with at least one character of ``script``."""
    tokens = list(tokens)
    if not tokens:
        raise ValueError("tokens is empty; pass the decoded vocabulary of a tokenizer.")
    has = _matcher(script)
    return sum(1 for t in tokens if has(t)) / len(tokens)


def decoded_vocabulary(tokenizer) -> list[str]:
    """Every vocabulary id of a transformers tokenizer decoded on its own (special tokens left out)."""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    n = len(tokenizer)
    return [tokenizer.decode([i]) for i in range(n) if i not in special]


def tokenizer_coverage(tokenizer, languages) -> dict[str, float]:
    """language → coverage of its script by ``tokenizer`` (a transformers tokenizer, or a list of decoded
    tokens)."""
    vocab = tokenizer if isinstance(tokenizer, (list, tuple)) else decoded_vocabulary(tokenizer)
    return {lang: script_coverage(vocab, script_of(lang)) for lang in languages}
