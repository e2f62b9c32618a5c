"""Relevance coverage through the CLI on real photographs with planted copies, with two
annotators answering through Label Studio's API (annotations created with ``completed_by`` = each annotator's
user id), not ``annotate simulate``: the push names the countries without a native annotator and never sends
images the dedup review dropped; build refuses unrated culture links until told to keep them, and the dataset
card says so."""
from __future__ import annotations

import sqlite3
import uuid

import pytest

from cultura.annotate.kinds import get_kind
from cultura.annotate.server import use_server
from cultura.project import Project
from tests.fakes.cli_runner import ProjectCli
from tests.unit.benchmark.test_benchmark_integrity import curated
from tests.fakes.labelstudio import labelstudio  # noqa: F401

pytestmark = pytest.mark.labelstudio
BASE = "http://127.0.0.1:9"   # task image URLs (never loaded: annotations are created through the API)


def _assignments(project, campaign: str) -> list[tuple]:
    con = sqlite3.connect(project / "cultura.db")
    try:
        return con.execute(
            "SELECT a.ls_task_id, an.ls_user_id, an.name, i.sha256, i.country FROM assignments a "
            "JOIN annotators an ON an.id = a.annotator_id JOIN annotation_items i ON i.id = a.item_id "
            "JOIN campaigns c ON c.id = i.campaign_id WHERE c.name = ? AND a.purpose = 'annotate' ORDER BY a.id",
            [campaign]).fetchall()
    finally:
        con.close()


def test_relevance_coverage_names_missing_natives_and_refuses_unrated(labelstudio, tmp_path):  # noqa: F811
    proj = curated(tmp_path)                       # US, JP, TH, DE; the planted copies clustered and flagged
    run = ProjectCli(proj)
    p = Project(proj)
    use_server(p, labelstudio.url, labelstudio.api_key)
    p.close()
    tag = uuid.uuid4().hex[:6]
    run("annotate", "annotators", "add", "ann-us", "--email", f"us.{tag}@example.org", "--country", "US",
        "--languages", "en")
    run("annotate", "annotators", "add", "ann-jp", "--email", f"jp.{tag}@example.org", "--country", "JP",
        "--languages", "ja")
    client = labelstudio.connection().client

    # dedup review: both keep the first copy of the planted set, so the other copies are dropped
    run.json("annotate", "push", "dedup-review", "--overlap", "2", "--image-base", BASE)
    asg = _assignments(proj, "dedup-review")
    assert {a[2] for a in asg} == {"ann-us", "ann-jp"}
    for task, uid, *_ in asg:
        client.annotations.create(task, result=get_kind("dedup-review").result_for("keep:1"), completed_by=uid)
    run("annotate", "pull")
    run("annotate", "adjudicate", "--campaign", "dedup-review")
    dropped = {r["sha256"] for r in run.json("images", "list", "--pool", "out")
               if r["pool"] == "out" and r["reason"] == "duplicate_dropped"}
    assert len(dropped) == 2

    # relevance: nobody rates TH or DE; the dropped copies never reach an annotator
    rel = run.json("annotate", "push", "relevance", "--overlap", "1", "--image-base", BASE)
    assert rel["unassigned_countries"].keys() == {"DE", "TH"} and rel["out_of_pool"] > 0
    assert "no active annotator is native to DE, TH" in rel["warning"]
    text = run("annotate", "push", "relevance", "--overlap", "1", "--image-base", BASE)
    assert "no active annotator is native to DE, TH" in " ".join(text.split())
    asg = _assignments(proj, "relevance")
    assert asg and not {a[3] for a in asg} & dropped
    assert {(a[2], a[4]) for a in asg} == {("ann-us", "US"), ("ann-jp", "JP")}
    for task, uid, *_ in asg:
        client.annotations.create(task, result=get_kind("relevance").result_for("5"), completed_by=uid)
    run("annotate", "pull")
    run("annotate", "adjudicate", "--campaign", "relevance")

    refused = " ".join(run("build", "association", "--allow-unreviewed", ok=False).split())
    assert "have no relevance rating" in refused and "no active annotator is native to DE, TH" in refused
    assert "--allow-unrated" in refused and "cultura annotate annotators add" in refused
    b = run.json("build", "association", "--allow-unreviewed", "--allow-unrated")
    rel = b["report"]["relevance"]
    assert rel["used"] and rel["allow_unrated"] and rel["unrated_links"] > 0
    assert set(rel["unrated_by_country"]) == {"DE", "TH"}
    run("export", tmp_path / "export")
    card = (tmp_path / "export" / "README.md").read_text(encoding="utf-8")
    assert f"**{rel['unrated_links']} image × culture links are kept without a relevance rating**" in card
    us = next(line for line in card.splitlines() if line.startswith("| US |") and line.count("|") == 7)
    assert us.split("|")[5].strip() == "0"          # every US link rated
