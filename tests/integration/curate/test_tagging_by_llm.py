"""Tagging by a vision LLM (the local OpenAI-compatible stub): the image sent as a data URL, known tags kept,
failures recorded."""
import json


from cultura.curate import concepts as C
from cultura.curate.tagging import tag_images
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
