"""Tagging: the vision LLM path (image sent as a data URL, App. I prompt) against the local stub, and the
CLIP zero-shot fallback with a tiny random-init open_clip."""
import json

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


def test_llm_tagging_keeps_known_tags_and_records_failures(project, openai_stub):
    C.add_concepts(project, ["bus", "wedding", "kite"])
    shas = _add_images(project, 3)
    # images are tagged in sha256 order: the first gets three tags (one unknown), the second never gives
    # valid JSON (3 attempts -> a failed row), the third gets none
    replies = iter([json.dumps({"tags": ["Bus", "kite", "spaceship"]}), "nope", "nope", "nope",
                    json.dumps({"tags": []}), json.dumps({"tags": ["wedding"]})])

    def responder(req):
        content = req["messages"][0]["content"]
        assert content[1]["image_url"]["url"].startswith("data:image/png;base64,")
        assert "cultural\ncategories:\n    bus, kite, wedding." in content[0]["text"]
        return next(replies)

    openai_stub.responder = responder
    project.config.llm.max_attempts = 3
    res = tag_images(project, method="llm", model="vision-stub", progress=False)
    assert res["images"] == 3 and res["done"] == 2 and res["failed"] == 1
    tags = {(r["sha256"], r["tag"]): r["score"] for r in project.db["image_tags"].rows}
    first = sorted(shas)[0]
    assert tags[(first, "bus")] == 1.0 and tags[(first, "kite")] == 0.5
    assert not any(t == "spaceship" for (_, t) in tags)
    status = {r["sha256"]: r for r in project.db["image_tag_status"].rows}
    assert json.loads(status[first]["raw"])["dropped"] == ["spaceship"]
    failed = [r for r in status.values() if r["status"] == "failed"]
    assert len(failed) == 1 and "not JSON" in failed[0]["error"]
    # logged requests keep no inline image
    assert "base64" not in "".join(r["request"] for r in project.db["llm_calls"].rows)
    # rerun: nothing to do; --retry-failed retries the failed one only
    n = len(openai_stub.chat_requests())
    assert tag_images(project, method="llm", model="vision-stub", progress=False)["images"] == 0
    assert tag_images(project, method="llm", model="vision-stub", retry_failed=True, progress=False)["images"] == 1
    assert len(openai_stub.chat_requests()) > n


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
