"""On the real Label Studio, with annotators answering real photographs through its API with their own accounts:
Label Studio's own JSON export (``"completed_by": <user id>``, no e-mail) imported with ``annotate
import-labels`` adds nothing the pull already holds — the ids are the annotators cultura made, re-importing under
another file name imports nothing, and the labels table, Fleiss' κ, the majority decisions and the annotator
report stay as they were — while an answer outside the label set (``maybe``, posted through the API) is a
rejected row at import and no label at pull, and an id nobody here has is a rejected row, not a new annotator."""
from __future__ import annotations

import json
import uuid

import pandas as pd
import pytest
from click.testing import CliRunner

import cultura
from cultura.annotate import annotators as ann_mod
from cultura.annotate.kinds import get_kind
from cultura.annotate.people import server_row
from cultura.annotate.server import use_server
from cultura.cli import cli
from cultura.db import now
from cultura.db.blobs import store_blob
from tests.fakes.labelstudio import labelstudio  # noqa: F401
from tests.fakes.ls_annotator import AnnotatorSession
from tests.fakes.real_photos import encode, photos

pytestmark = pytest.mark.labelstudio

NAMES = ("ann", "bob", "cat")


def _add_photographs(project, concept: str, country: str, names: list[str]) -> list[str]:
    """Real photographs found by one query for ``concept`` in ``country`` (concept, query, candidate, search
    result and image rows; blobs on disk)."""
    db, t, shas = project.db, now(), []
    cid = db["concepts"].insert({"name": concept, "source": "manual", "created_at": t}).last_pk
    qid = db["queries"].insert({"concept_id": cid, "country": country, "language": "en", "kind": "english",
                                "text": f"{concept} {country}", "created_at": t}).last_pk
    pics = photos()
    for rank, name in enumerate(names, 1):
        data = encode(pics[name])
        sha, rel = store_blob(project, data, "jpg")
        url = f"http://photos.invalid/{name}.jpg"
        cand = db["candidates"].insert({"url": url, "status": "downloaded", "sha256": sha, "updated_at": t}).last_pk
        db["search_results"].insert({"query_id": qid, "provider": "test", "rank": rank, "candidate_id": cand,
                                     "url": url, "found_at": t})
        db["images"].insert({"sha256": sha, "path": rel, "format": "jpeg", "width": pics[name].width,
                             "height": pics[name].height, "bytes": len(data), "created_at": t}, ignore=True)
        shas.append(sha)
    return shas


def _cli(p, *args):
    res = CliRunner().invoke(cli, ["--project", str(p.root), *args])
    assert res.exit_code == 0, res.output
    return res


def _state(p, tmp_path, name):
    _cli(p, "annotate", "export-labels", "--out", str(tmp_path / f"{name}.csv"))
    labels = pd.read_csv(tmp_path / f"{name}.csv", dtype={"label": str, "gold": str})
    agreement = json.loads(_cli(p, "annotate", "agreement", "--json").output)
    report = json.loads(_cli(p, "annotate", "annotators", "report", "--json").output)
    decisions = sorted((d["item_key"], d["label"]) for d in p.db["decisions"].rows_where("superseded = 0"))
    return labels, agreement, report, decisions


def test_label_studio_exports_know_the_team(project, labelstudio, tmp_path):  # noqa: F811
    p, db = project, project.db
    use_server(p, labelstudio.url, labelstudio.api_key, data_dir=labelstudio.data_dir)
    tag = uuid.uuid4().hex[:6]
    _add_photographs(p, "coffee", "JP", ["coffee", "chelsea", "astronaut", "rocket", "china", "flower"])
    for n in NAMES:
        ann_mod.add_annotator(p, n, email=f"{n}.{tag}@example.org", country="JP")
        ann_mod.set_password(p, n, f"pw-{n}-123456")
    _cli(p, "annotate", "push", "filter", "--overlap", "3")
    spec = get_kind("filter")
    # each annotator works on a Label Studio server of their own
    sessions = {n: AnnotatorSession.login(_server_url(p, n), f"{n}.{tag}@example.org", f"pw-{n}-123456")
                for n in NAMES}
    for k, (n, s) in enumerate(sessions.items()):
        for i, t in enumerate(sorted(s.my_tasks(), key=lambda t: t["data"]["item_key"])):
            label = "maybe" if (n, i) == ("cat", 0) else ("keep" if (i + k) % 3 else "remove")
            s.answer(t["id"], spec.result_for(label), 2.0 + i)
    pulled = json.loads(_cli(p, "annotate", "pull", "--json").output)
    assert pulled["new"] == 18 and pulled["rejected"] == 1, pulled
    _cli(p, "annotate", "adjudicate", "--json")
    before = _state(p, tmp_path, "before")
    labels0 = before[0]
    assert len(labels0) == 17 and "maybe" not in set(labels0["label"])  # cat's maybe is no label
    team = [r["name"] for r in db["annotators"].rows]

    # Label Studio's own export of each annotator's project, read with their own session on their own server:
    # every server numbers its users from 1, so each file is imported naming whose server it comes from
    files = {}
    for n, s in sessions.items():
        tasks = []
        for proj in s.projects():
            r = s.get(f"/api/projects/{proj['id']}/export", exportType="JSON")
            assert r.status_code == 200, r.text[:200]
            tasks += r.json()
        files[n] = tasks
    anns = [a for ts in files.values() for t in ts for a in t["annotations"]]
    assert len(anns) == 18 and all(isinstance(a["completed_by"], int) for a in anns)  # ids, no e-mail
    got = {"new": 0, "versions": 0, "unchanged": 0, "rejected": 0}
    for n, tasks in files.items():
        f = tmp_path / f"project-export-{n}.json"
        f.write_text(json.dumps(tasks))
        one = json.loads(_cli(p, "annotate", "import-labels", str(f), "--annotator", n, "--json").output)
        got = {k: got[k] + one[k] for k in got}
    assert (got["new"], got["versions"], got["unchanged"], got["rejected"]) == (0, 0, 17, 1), got
    assert [r["name"] for r in db["annotators"].rows] == team
    maybe = [r["reason"] for r in db["import_rows"].rows_where("status = 'failed'")]
    assert maybe == ["the answer 'maybe' is outside the filter label set (keep, remove)"]
    _cli(p, "annotate", "adjudicate", "--json")
    assert _frames_equal(_state(p, tmp_path, "after"), before)

    # the same content under another file name, through the front door: nothing new
    g = tmp_path / "renamed.json"
    g.write_text((tmp_path / "project-export-cat.json").read_text())
    again = cultura.open(p.root).annotate.import_labels(g, annotator="cat")
    assert (again["new"], again["versions"], again["rejected"]) == (0, 0, 1)
    # a bare id without the server's annotator names nobody, and an id that is not theirs on their server is
    # refused: rejected rows with their reason, never a new annotator
    tasks = files["cat"]
    h = tmp_path / "unnamed.json"
    h.write_text(json.dumps(tasks))
    got = json.loads(_cli(p, "annotate", "import-labels", str(h), "--json").output)
    assert got["new"] == 0 and got["rejected"] == sum(len(t["annotations"]) for t in tasks), got
    assert any("--annotator NAME" in r["reason"]
               for r in db["import_rows"].rows_where("status = 'failed' AND source = 'unnamed.json'"))
    tasks = files["ann"]
    tasks[0]["annotations"][0]["completed_by"] = 999_999
    tasks[0]["annotations"][0]["result"] = spec.result_for("remove")
    k = tmp_path / "other-user.json"
    k.write_text(json.dumps(tasks))
    got = json.loads(_cli(p, "annotate", "import-labels", str(k), "--annotator", "ann", "--json").output)
    assert got["new"] == 0 and got["rejected"] == 1, got
    assert any("Label Studio user 999999 is not the annotator whose server" in r["reason"]
               for r in db["import_rows"].rows_where("status = 'failed' AND source = 'other-user.json'"))
    assert [r["name"] for r in db["annotators"].rows] == team
    _cli(p, "annotate", "adjudicate", "--json")
    assert _frames_equal(_state(p, tmp_path, "last"), before)
    for s in sessions.values():
        s.close()


def _server_url(p, name: str) -> str:
    return server_row(p, next(p.db["annotators"].rows_where("name = ?", [name]))["id"])["url"]


def _frames_equal(a, b) -> bool:
    return a[0].equals(b[0]) and a[1:] == b[1:]
