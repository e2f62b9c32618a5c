"""Report figures render CJK, Thai and Devanagari labels (the fonts come with 'make setup'): matplotlib warns
"Glyph … missing from font(s)" for every character it draws as a box, so no such warning may be raised."""
from __future__ import annotations

import io
import warnings

import matplotlib

from cultura.evaluate.reportkit import font_rc

matplotlib.use("Agg", force=False)


def test_cjk_thai_and_devanagari_labels_have_glyphs():
    import matplotlib.pyplot as plt

    labels = ["日本の電車", "中国菜", "한국", "รถไฟ", "हिन्दी", "Türkçe"]
    with matplotlib.rc_context(font_rc()), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig, ax = plt.subplots(figsize=(4, 3))
        ax.bar(range(len(labels)), range(1, len(labels) + 1))
        ax.set_xticks(range(len(labels)), labels)
        ax.set_title(" / ".join(labels))
        fig.savefig(io.BytesIO(), format="png")
        plt.close(fig)
    missing = [str(w.message) for w in caught if "missing from" in str(w.message)]
    assert not missing, f"glyphs drawn as boxes (install the fonts with 'make fonts'): {missing[:3]}"
