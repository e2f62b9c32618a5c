"""Language codes for language-aware text encoders: ISO 639-1 → FLORES-200 (NLLB's source-language tags).

NLLB-CLIP's tokenizer (the NLLB-200 tokenizer) starts every text with a source-language token such as
``hin_Deva``; the model was trained with the right tag per caption, so a Hindi prompt encoded under the
default ``eng_Latn`` tag is not what the paper measured. :func:`flores_code` maps the ISO codes cultura uses
everywhere to those tags; a code that already looks like a FLORES tag (``xxx_Xxxx``) passes through.

>>> flores_code("hi"), flores_code("fa"), flores_code("zh-TW"), flores_code("pes_Arab")
('hin_Deva', 'pes_Arab', 'zho_Hant', 'pes_Arab')
"""
from __future__ import annotations

import re

from ...errors import CulturaError

#: ISO 639-1 (or a region-qualified code) → FLORES-200 code. Covers seed 003's ten languages, seed 000/001's
#: and the countries cultura ships; extend with a FLORES tag directly for any other.
FLORES = {
    "af": "afr_Latn", "am": "amh_Ethi", "ar": "arb_Arab", "az": "azj_Latn", "be": "bel_Cyrl", "bg": "bul_Cyrl",
    "bn": "ben_Beng", "bs": "bos_Latn", "ca": "cat_Latn", "cs": "ces_Latn", "cy": "cym_Latn", "da": "dan_Latn",
    "de": "deu_Latn", "el": "ell_Grek", "en": "eng_Latn", "es": "spa_Latn", "et": "est_Latn", "eu": "eus_Latn",
    "fa": "pes_Arab", "fi": "fin_Latn", "fil": "tgl_Latn", "fr": "fra_Latn", "ga": "gle_Latn", "gl": "glg_Latn",
    "gu": "guj_Gujr", "ha": "hau_Latn", "he": "heb_Hebr", "hi": "hin_Deva", "hr": "hrv_Latn", "hu": "hun_Latn",
    "hy": "hye_Armn", "id": "ind_Latn", "ig": "ibo_Latn", "is": "isl_Latn", "it": "ita_Latn", "ja": "jpn_Jpan",
    "jv": "jav_Latn", "ka": "kat_Geor", "kk": "kaz_Cyrl", "km": "khm_Khmr", "kn": "kan_Knda", "ko": "kor_Hang",
    "ky": "kir_Cyrl", "lo": "lao_Laoo", "lt": "lit_Latn", "lv": "lvs_Latn", "mi": "mri_Latn", "mk": "mkd_Cyrl",
    "ml": "mal_Mlym", "mn": "khk_Cyrl", "mr": "mar_Deva", "ms": "zsm_Latn", "my": "mya_Mymr", "ne": "npi_Deva",
    "nl": "nld_Latn", "no": "nob_Latn", "nb": "nob_Latn", "pa": "pan_Guru", "pl": "pol_Latn", "ps": "pbt_Arab",
    "pt": "por_Latn", "qu": "quy_Latn", "ro": "ron_Latn", "ru": "rus_Cyrl", "si": "sin_Sinh", "sk": "slk_Latn",
    "sl": "slv_Latn", "so": "som_Latn", "sq": "als_Latn", "sr": "srp_Cyrl", "sv": "swe_Latn", "sw": "swh_Latn",
    "ta": "tam_Taml", "te": "tel_Telu", "tg": "tgk_Cyrl", "th": "tha_Thai", "tl": "tgl_Latn", "tr": "tur_Latn",
    "uk": "ukr_Cyrl", "ur": "urd_Arab", "uz": "uzn_Latn", "vi": "vie_Latn", "xh": "xho_Latn", "yo": "yor_Latn",
    "zh": "zho_Hans", "zh-cn": "zho_Hans", "zh-hans": "zho_Hans", "zh-tw": "zho_Hant", "zh-hant": "zho_Hant",
    "zh-hk": "yue_Hant", "zu": "zul_Latn",
}
_FLORES_TAG = re.compile(r"^[a-z]{3}_[A-Z][a-z]{3}$")


def flores_code(language: str) -> str:
    """The FLORES-200 tag of ``language`` (ISO 639-1, optionally with a region, or a FLORES tag itself)."""
    lang = str(language).strip()
    if _FLORES_TAG.match(lang):
        return lang
    code = FLORES.get(lang.lower().replace("_", "-")) or FLORES.get(lang.lower().split("-")[0])
    if code is None:
        raise CulturaError(f"No FLORES-200 code known for language {language!r}; pass the tag itself "
                           "(e.g. 'quy_Latn') as the language.")
    return code


def source_language_tokenizer(tokenizer):
    """The transformers tokenizer inside ``tokenizer`` (itself, or open_clip's ``HFTokenizer.tokenizer``) when
    it takes a source language (``src_lang``, NLLB), else None."""
    for tok in (tokenizer, getattr(tokenizer, "tokenizer", None)):
        if tok is not None and hasattr(tok, "src_lang") and hasattr(tok, "set_src_lang_special_tokens"):
            return tok
    return None


def set_source_language(tok, language: str | None, default: str | None) -> str | None:
    """Set ``tok.src_lang`` to the FLORES tag of ``language`` (``default`` when None); returns the tag set.

    Assigning ``src_lang`` (not only calling ``set_src_lang_special_tokens``, which transformers 5 undoes at
    the next call) is what changes the language token the tokenizer writes."""
    tag = flores_code(language) if language else default
    if tag is not None and tok.src_lang != tag:
        tok.src_lang = tag
    return tag
