"""Tagging: the vision LLM path (image sent as a data URL, App. I prompt) against the local stub, and the
CLIP zero-shot fallback with a tiny random-init open_clip."""

from PIL import Image

from cultura.curate import concepts as C
from cultura.db.blobs import store_blob
from cultura.curate.tagging import tag_images
from cultura.db import now


def _add_images(project, n=3):
    shas = []
    for i in range(n):
        img = Image.new("RGB", (80, 60), (40 * i, 100, 200 - 30 * i))
        import io

        buf = io.BytesIO()
        img.save(buf, "PNG")
        sha, rel = store_blob(project, buf.getvalue(), "png")
        project.db["images"].insert({"sha256": sha, "path": rel, "format": "png", "width": 80, "height": 60,
                                     "bytes": len(buf.getvalue()), "status": "ok", "created_at": now()}, ignore=True)
        shas.append(sha)
    return shas


def test_clip_fallback_top_k_with_scores(project):
    C.add_concepts(project, ["bus", "wedding", "kite", "house"])
    _add_images(project, 2)
    res = tag_images(project, method="clip", clip_model="openclip:cultura-tiny", top_k=2, progress=False)
    assert res == {"method": "clip", "model": res["model"], "images": 2, "done": 2, "failed": 0, "tags": 4}
    assert res["model"].startswith("openclip:cultura-tiny")
    rows = list(project.db["image_tags"].rows)
    assert all(0 < r["score"] <= 1 and r["source"].startswith("clip:") for r in rows)
    # rerun re-tags from cached embeddings: no new rows, no duplicate
    tag_images(project, method="clip", clip_model="openclip:cultura-tiny", top_k=2, progress=False)
    assert project.db["image_tags"].count == 4


def test_auto_uses_clip_without_llm(project, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    C.add_concepts(project, ["bus"])
    _add_images(project, 1)
    project.config.tag.clip_model = "openclip:cultura-tiny"
    assert tag_images(project, progress=False)["method"] == "clip"
