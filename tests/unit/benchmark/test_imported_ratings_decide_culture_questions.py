"""Relevance ratings decide culture questions however they arrive: ratings brought in with ``cultura import
ratings`` settle the questions of the images they rate for every country, as a relevance campaign's do, so the
build that refused for them goes on; a rating that misses a country of the question leaves it open. Through the
CLI on the real photographs with planted copies found for several cultures."""
from __future__ import annotations

import sqlite3

from tests.fakes.cli_runner import downloaded_demo, ratings_csv


def test_imported_ratings_settle_the_culture_questions_they_cover(tmp_path):
    run = downloaded_demo(tmp_path)
    flags = run.json("images", "flags")
    assert flags, "the planted copies found for several cultures are flagged"
    assert "no culture decision yet" in run("build", "association", "--allow-unreviewed", "--allow-unrated", ok=False)
    # one country short of each question: nothing is decided
    partial = ratings_csv(tmp_path / "partial.csv", [(f["sha256"], f["countries"][0], 5) for f in flags])
    assert run.json("import", "ratings", partial)["flags_resolved"] == 0
    assert len(run.json("images", "flags")) == len(flags)
    # every country of every question rated: settled, and the build goes on
    full = ratings_csv(tmp_path / "full.csv", [(f["sha256"], cc, 5) for f in flags for cc in f["countries"]])
    assert run.json("import", "ratings", full)["flags_resolved"] == len(flags)
    assert run.json("images", "flags") == []
    assert run.json("build", "association", "--allow-unreviewed", "--allow-unrated")["status"] == "ready"


def test_ratings_imported_before_the_question_settle_it_at_build(tmp_path):
    run = downloaded_demo(tmp_path)
    flags = run.json("images", "flags")
    full = ratings_csv(tmp_path / "full.csv", [(f["sha256"], cc, 4) for f in flags for cc in f["countries"]])
    run.json("import", "ratings", full)
    # the questions are asked again after the ratings came in (as a dedup rerun with new evidence reopens them)
    con = sqlite3.connect(run.project / "cultura.db")
    with con:
        con.execute("UPDATE image_flags SET status = 'open' WHERE flag = 'culture_conflict'")
    con.close()
    assert len(run.json("images", "flags")) == len(flags)
    assert run.json("build", "association", "--allow-unreviewed", "--allow-unrated")["status"] == "ready"
    assert run.json("images", "flags") == []
