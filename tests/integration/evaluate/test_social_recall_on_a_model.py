"""Recall per language beside fairness in the social audit, on a model."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from PIL import Image

from cultura.evaluate.metrics import accuracy_at_k
from cultura.evaluate.suites.social.suite import social
from cultura.models.embedders import FakeEmbedder


# -- recall@k beside fairness ------------------------------------------------------------------------------
class ColorCaptions(FakeEmbedder):
    """Images and captions meet by colour: an image embeds as its colour's axis, a caption as the axis of the
    colour word it names (English or German), so retrieval is perfect for captions that name a colour and
    chance for the others."""

    variant = "color-captions"
    COLORS = {"red": 0, "rot": 0, "green": 1, "grün": 1, "blue": 2, "blau": 2, "yellow": 3, "gelb": 3}

    def image_vector(self, img):
        rgb = img.convert("RGB").getpixel((0, 0))
        v = np.full(self.fake_dim, 1e-3)
        v[{(255, 0, 0): 0, (0, 255, 0): 1, (0, 0, 255): 2, (255, 255, 0): 3}[rgb]] = 1.0
        return v

    def text_vector(self, text):
        for w, i in self.COLORS.items():
            if w in text.lower().split():
                v = np.full(self.fake_dim, 1e-3)
                v[i] = 1.0
                return v
        return super().text_vector(text)


def _import_captions(project, tmp_path):
    from cultura.curate.importers import import_captions

    folder = tmp_path / "xm"
    folder.mkdir()
    lines = []
    for name, rgb, en, de in (("r", (255, 0, 0), "a red thing", "ein rot Ding"),
                              ("g", (0, 255, 0), "a green thing", "ein grün Ding"),
                              ("b", (0, 0, 255), "a blue thing", "etwas anderes"),
                              ("y", (255, 255, 0), "a yellow thing", "noch etwas")):
        Image.new("RGB", (16, 16), rgb).save(folder / f"{name}.png")
        lines.append({"image/key": name, "file": f"{name}.png",
                      "en": {"caption": [en, f"{en} again"]}, "de": {"caption": [de]}})
    (tmp_path / "captions.jsonl").write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines))
    return import_captions(project, tmp_path / "captions.jsonl", folder)


def test_recall_per_language_beside_fairness(tmp_path):
    from cultura.evaluate.report import build_report
    from cultura.evaluate.runner import run_evaluation
    from cultura.project import init_project

    p = init_project(tmp_path / "proj", countries=["US", "DE"])
    try:
        res = _import_captions(p, tmp_path)
        assert res["imported"] == 4, res
        rows = social(p, ColorCaptions(dim=8), options={"n_resamples": 20, "recall_ks": [1, 2]})
        rec = {(r["metric"], r["group"]["language"], r["group"]["k"]): r for r in rows
               if r["metric"].startswith("recall_")}
        # English: every caption names its image's colour → perfect both ways
        assert rec[("recall_t2i", "en", 1)]["value"] == 1.0 and rec[("recall_t2i", "en", 1)]["n"] == 8
        assert rec[("recall_i2t", "en", 1)]["value"] == 1.0 and rec[("recall_i2t", "en", 1)]["n"] == 4
        # German: two of four captions name a colour the model knows
        de = rec[("recall_t2i", "de", 1)]
        assert de["n"] == 4 and de["details"]["n_images"] == 4
        e = ColorCaptions(dim=8)
        caps = p.db.execute("SELECT image_sha256, text FROM captions WHERE language = 'de' ORDER BY image_sha256, "
                            "idx").fetchall()
        shas = sorted({s for s, _ in caps})
        ims = [Image.open(p.blob_path(p.db.execute("SELECT path FROM images WHERE sha256 = ?", [s]).fetchone()[0]))
               for s in shas]
        sims = e.embed_texts([t for _, t in caps]) @ e.embed_images(ims).T
        rel = np.array([[float(s == x) for x in shas] for s, _ in caps])
        assert math.isclose(de["value"], accuracy_at_k(rel, sims, k=1)) and de["value"] >= 0.5
        assert rows[0]["details"]["provenance"]["benchmark"].endswith("+captions")
        # through the runner into the report's social section
        recs = run_evaluation(p, [ColorCaptions(dim=8)], "social", options={"n_resamples": 20}, progress=False)
        assert recs[0].status == "done", recs[0].reason
        sec = dict(build_report(p)["sections"])["social"]
        assert "Retrieval accuracy beside fairness" in sec.markdown and "R@10" in sec.markdown
        assert sec.csv_tables["recall"] and sec.csv_tables["recall_vs_bias"]
        with pytest.raises(Exception, match="Unknown recall"):
            social(p, ColorCaptions(dim=8), options={"recall": "maybe"})
    finally:
        p.close()
