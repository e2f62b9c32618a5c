"""Tagging by a vision LLM (the local OpenAI-compatible stub): the image sent as a data URL, known tags kept,
failures recorded; the picture sent is the one a browser shows."""
import base64
import io
import json

import numpy as np
from PIL import Image

from cultura.curate import concepts as C
from cultura.curate.importers import store_image
from cultura.curate.tagging import tag_images
from tests.fakes.real_photos import grey16, photos, turned
from tests.integration.curate.test_tagging_by_clip import _add_images


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


def test_a_vision_model_is_sent_the_picture_a_browser_shows(project, openai_stub):
    """A TIFF, an EXIF-turned JPEG and a 16-bit grey PNG go out as JPEG of the upright 8-bit picture (a model
    server's plain Pillow decode sees what annotators see); a plain JPEG goes out as stored; a blob that cannot
    be decoded is that image's failed row, and the others are tagged."""
    photo = photos()["chelsea"]                                         # 451 x 300
    sent = {"tiff": _encoded(photo, "TIFF"), "turned": turned(photo, 6, quality=90), "grey16": grey16(photo),
            "plain": _encoded(photo, "JPEG", quality=80)}
    C.add_concepts(project, ["cat"])
    kind = {store_image(project, data): k for k, data in sent.items()}
    damaged = store_image(project, _encoded(photos()["coffee"], "PNG"))
    blob = project.blob_path(project.db["images"].get(damaged)["path"])
    blob.write_bytes(blob.read_bytes()[:200])                           # cut short after it was stored
    seen = []

    def responder(req):
        head, b64 = req["messages"][0]["content"][1]["image_url"]["url"].split(",", 1)
        data = base64.b64decode(b64)
        with Image.open(io.BytesIO(data)) as im:                       # a plain decode, as a model server does
            seen.append((data, head, im.size, float(np.asarray(im.convert("L")).mean())))
        return json.dumps({"tags": ["cat"]})

    openai_stub.responder = responder
    res = tag_images(project, method="llm", model="vision-stub", progress=False)
    assert res["images"] == 5 and res["done"] == 4 and res["failed"] == 1, res
    as_stored = [s for s in seen if s[0] == sent["plain"]]
    converted = [s[1:] for s in seen if s[0] != sent["plain"]]
    assert len(as_stored) == 1 and as_stored[0][1] == "data:image/jpeg;base64"
    want = float(np.asarray(photo.convert("L")).mean())
    assert len(converted) == 3 and all(head == "data:image/jpeg;base64" and size == photo.size and abs(mean - want) < 3
                                       for head, size, mean in converted), converted
    failed = project.db["image_tag_status"].get((damaged, "llm:vision-stub"))
    assert failed["status"] == "failed" and "unreadable image" in failed["error"]
    assert set(kind) <= {r["sha256"] for r in project.db["image_tag_status"].rows if r["status"] == "done"}


def _encoded(im, fmt, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()
