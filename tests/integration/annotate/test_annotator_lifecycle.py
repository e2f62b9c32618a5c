"""An annotator's lifecycle on real Label Studio servers: deactivation ends their access at once (account locked,
their server stopped) after a last pull of what they answered; their unanswered items go to the others on the
next push; a project once marked missing is asked for again on every pull."""
from __future__ import annotations

import json
import sqlite3
import uuid

import httpx
import pytest
from click.testing import CliRunner

from cultura.annotate import annotators as ann_mod, pull as pull_mod, push as push_mod
from cultura.annotate.kinds import get_kind
from cultura.annotate.people import server_row
from cultura.annotate.server import use_server
from cultura.annotate.team import annotator_report
from cultura.cli import cli
from tests.fakes.labelstudio import add_images, labelstudio, stop_annotator_servers  # noqa: F401
from tests.fakes.ls_annotator import AnnotatorSession

pytestmark = pytest.mark.labelstudio


def test_deactivation_revokes_access_and_hands_unanswered_items_to_the_others(project, labelstudio):
    p, db = project, project.db
    use_server(p, labelstudio.url, labelstudio.api_key, data_dir=labelstudio.data_dir)
    tag = uuid.uuid4().hex[:6]
    try:
        add_images(p, "rice", "JP", 3)
        for n in ("ann", "bob", "cat"):
            ann_mod.add_annotator(p, n, email=f"{n}.{tag}@example.org", country="JP")
        ann_mod.set_password(p, "ann", "pw-ann-123456")
        push_mod.push(p, "filter", overlap=2)
        ann = next(db["annotators"].rows_where("name = 'ann'"))
        srv = server_row(p, ann["id"])
        s = AnnotatorSession.login(srv["url"], ann["email"], "pw-ann-123456")
        token = s.token()
        tasks = s.my_tasks()
        assert len(tasks) == 2
        s.answer(tasks[0]["id"], get_kind("filter").result_for("keep"), 3.0)
        s.close()

        res = CliRunner().invoke(cli, ["--project", str(p.root), "annotate", "annotators", "deactivate", "ann",
                                       "--json"])
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["access"] == "revoked"
        # at once: her server no longer answers, and her account there is locked with no token left
        with pytest.raises(httpx.ConnectError):
            httpx.get(srv["url"] + "/api/projects", headers={"Authorization": f"Token {token}"})
        con = sqlite3.connect(f"file:{p.root / srv['data_dir']}/label_studio.sqlite3?mode=ro", uri=True)
        (active,) = con.execute("SELECT is_active FROM htx_user WHERE email = ?", [ann["email"]]).fetchone()
        assert active == 0 and con.execute("SELECT COUNT(*) FROM authtoken_token t JOIN htx_user u ON u.id = "
                                           "t.user_id WHERE u.email = ?", [ann["email"]]).fetchone()[0] == 0
        con.close()
        # what she answered before is pulled once, when access ends; her one answer stays hers
        assert db.execute("SELECT COUNT(*) FROM annotations WHERE annotator_id = ?", [ann["id"]]).fetchone()[0] == 1
        assert pull_mod.pull(p)["revoked_projects"] == 1

        # the next push hands her unanswered item to someone who did not have it
        out = push_mod.push(p, "filter", overlap=2)
        assert out["reassigned"] == 1 and out["withdrawn_waiting"] == 0 and out["tasks_created"] == 1
        live = db.execute("SELECT item_id, COUNT(*) FROM assignments WHERE status != 'reassigned' AND annotator_id "
                          "!= ? GROUP BY 1", [ann["id"]]).fetchall()
        answered_by_ann = db.execute("SELECT item_id FROM annotations WHERE annotator_id = ?", [ann["id"]]).fetchall()
        counts = {i: n + (1 if (i,) in answered_by_ann else 0) for i, n in live}
        assert sorted(counts.values()) == [2, 2, 2]
        assert db.execute("SELECT COUNT(*) FROM assignments WHERE status = 'reassigned'").fetchone()[0] == 1
        assert push_mod.push(p, "filter", overlap=2)["reassigned"] == 0          # idempotent
        (camp,) = annotator_report(p)
        assert not any("deactivated" in b["blocker"] for b in camp["blockers"])

        # a project marked missing (one 404 earlier) is asked for again on the next pull, and is active again
        bob_project = next(db["campaign_projects"].rows_where(
            "annotator_id = (SELECT id FROM annotators WHERE name = 'bob')"))
        db["campaign_projects"].update(bob_project["id"], {"status": "missing", "reason": "a 404 once"})
        got = pull_mod.pull(p)
        assert got["missing_projects"] == []
        assert db["campaign_projects"].get(bob_project["id"])["status"] == "active"
    finally:
        stop_annotator_servers(p)
