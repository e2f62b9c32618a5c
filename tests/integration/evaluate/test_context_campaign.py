"""The ``context`` annotation kind end to end in a real Label Studio: a team writes new masked contexts as seed 001
(§3.3) did."""
from __future__ import annotations

import uuid

import pytest

from cultura.annotate import decide, kinds, pull as pull_mod, push as push_mod
from cultura.annotate import annotators as ann_mod
from cultura.evaluate.suites.llm_bias import import_contexts, list_contexts
from tests.fakes.labelstudio import labelstudio  # noqa: F401
from tests.unit.evaluate.test_llm_bias_annotation import CANDIDATES, _jsonl  # noqa: F401 - shared with the unit tests


@pytest.mark.labelstudio
def test_context_campaign_end_to_end(project, labelstudio, tmp_path):  # noqa: F811
    from cultura.annotate.server import use_server

    use_server(project, labelstudio.url, labelstudio.api_key)
    tag = uuid.uuid4().hex[:6]
    for name in ("aiko", "ken"):
        ann_mod.add_annotator(project, name, email=f"{name}.{tag}@example.org", country="JP", languages=["ja"])
    import_contexts(project, _jsonl(tmp_path / "c.jsonl", CANDIDATES), status="candidate")
    push_mod.push(project, "context", overlap=2)
    db = project.db
    client = labelstudio.connection().client
    asg = db.execute("""SELECT a.ls_task_id, an.ls_user_id, i.item_key FROM assignments a
                        JOIN annotators an ON an.id = a.annotator_id JOIN annotation_items i ON i.id = a.item_id
                        WHERE a.purpose = 'annotate' ORDER BY a.id""").fetchall()
    ids = [c["id"] for c in list_contexts(project, status="candidate")]
    truth = dict(zip([f"context:ctx-{i}" for i in ids], ["grounded/positive", "grounded/neutral", "neutral/neutral",
                                                          "reject"]))
    spec = kinds.get_kind("context")
    for task, uid, key in asg:
        client.annotations.create(task, result=spec.result_for(truth[key]), completed_by=uid, lead_time=3.0)
    pull_mod.pull(project)
    (summ,) = decide.adjudicate(project, campaign="context")
    assert summ["decided"] == 4 and summ["written_back"] == {"active": 3, "excluded": 1, "unknown": 0}
    active = {c["text"]: (c["kind"], c["sentiment"]) for c in list_contexts(project)}
    assert active == {CANDIDATES[0]["text"]: ("grounded", "positive"), CANDIDATES[1]["text"]: ("grounded", "neutral"),
                      CANDIDATES[2]["text"]: ("neutral", "neutral")}
