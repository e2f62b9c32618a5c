"""Multilingual inputs without a model: FLORES language codes, and the social suite passing each inventory's
language to the embedder. (The families themselves: tests/integration/models/test_multilingual_presets.py,
test_nllb_clip.py.)"""
from __future__ import annotations


import pytest

from cultura.errors import CulturaError
from cultura.models.embedders import FakeEmbedder
from cultura.models.embedders.languages import flores_code


def test_flores_codes():
    assert [flores_code(x) for x in ("en", "hi", "fa", "xh", "pt", "zh-TW", "fra_Latn")] == [
        "eng_Latn", "hin_Deva", "pes_Arab", "xho_Latn", "por_Latn", "zho_Hant", "fra_Latn"]
    with pytest.raises(CulturaError, match="FLORES"):
        flores_code("tlh")


class LanguageRecorder(FakeEmbedder):
    """A language-aware fake that records the language of every text it embeds."""

    variant = "language-recorder"
    language_aware = True

    def __init__(self, **kw):
        super().__init__(**kw)
        self.seen: list[tuple[str | None, str]] = []

    def _embed_text_batch(self, texts, language=None):
        self.seen += [(language, t) for t in texts]
        return super()._embed_text_batch(texts)


def test_social_suite_passes_each_inventory_language(project):
    from cultura.evaluate.suites.social.data import import_portraits, make_synthetic_portraits
    from cultura.evaluate.suites.social.suite import social

    folder = project.root / "portraits"
    table = make_synthetic_portraits(folder, per_cell=1, seed=0)
    import_portraits(project, table, folder, "synthetic", layout="fairface", synthetic=True)
    e = LanguageRecorder(dim=8)
    social(project, e, options={"languages": ["en", "fr"], "axes": ["communion"], "n_resamples": 10})
    langs = {lang for lang, _ in e.seen}
    assert langs == {"en", "fr"}
    assert all(lang == "fr" for lang, t in e.seen if t.startswith("une photo"))
