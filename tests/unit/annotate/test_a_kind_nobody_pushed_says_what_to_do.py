"""A campaign kind nobody pushed a campaign for is not an unknown name: ``annotate adjudicate --campaign
relevance`` after ``import ratings`` has nothing to adjudicate and says so (exit 0), with what the imported ratings
decided and which culture questions are still open; a report on it answers one sentence naming what to do; a
kind whose campaigns have other names names them. Through the CLI and the Python front door, on the real
photographs with planted copies found for several cultures."""
from __future__ import annotations

from pathlib import Path

import pytest

import cultura
from cultura.errors import CulturaError
from tests.fakes.cli_runner import ProjectCli, downloaded_demo, ratings_csv
from tests.fakes.crowd_world import plant_campaign


@pytest.fixture(scope="module")
def flagged(tmp_path_factory) -> tuple[ProjectCli, list[dict], Path]:
    tmp = tmp_path_factory.mktemp("unpushed")
    run = downloaded_demo(tmp)
    flags = run.json("images", "flags")
    assert flags, "the planted copies found for several cultures are flagged"
    return run, flags, tmp


def test_imported_ratings_leave_nothing_to_adjudicate_and_say_what_is_open(flagged):
    run, flags, tmp = flagged
    run("import", "ratings", ratings_csv(tmp / "partial.csv", [(f["sha256"], f["countries"][0], 5) for f in flags]))
    out = run("annotate", "adjudicate", "--campaign", "relevance")
    text = " ".join(out.split())
    assert "Unknown campaign" not in text
    assert text.startswith("Nothing to adjudicate: no relevance campaign was pushed;"), out
    assert f"{len(flags)} relevance rating" in text and "partial.csv" in text
    assert f"{len(flags)} culture question" in text and "still open" in text
    [res] = run.json("annotate", "adjudicate", "--campaign", "relevance")
    assert res["campaign"] == "relevance" and res["nothing_to_do"].startswith("Nothing to adjudicate")

    # every country of every question rated: nothing is open any more, and the sentence says so
    run("import", "ratings", ratings_csv(tmp / "full.csv", [(f["sha256"], cc, 5) for f in flags
                                                           for cc in f["countries"]]))
    p = cultura.open(run.project)
    [res] = p.annotate.adjudicate("relevance")
    assert "no culture question is open" in res["nothing_to_do"] and "full.csv" in res["nothing_to_do"]
    assert p.db["decisions"].count_where("rule != 'import'") == 0  # nothing was decided by adjudicate


def test_a_report_on_an_unpushed_kind_names_what_to_do(flagged):
    run, _, _ = flagged
    for cmd in (("annotate", "agreement"), ("annotate", "annotators", "report")):
        out = run(*cmd, "--campaign", "relevance", ok=False)
        text = " ".join(out.split())
        assert "Unknown campaign" not in text and "Traceback" not in text, out
        assert "--campaign: No relevance campaign was pushed, so it has no annotations" in text, out
        assert "imported from" in text and "'cultura annotate push relevance'" in text
    p = cultura.open(run.project)
    with pytest.raises(CulturaError, match="No relevance campaign was pushed"):
        p.annotate.agreement("relevance")
    # a kind with neither a campaign nor imported ratings: nothing to adjudicate, and how to start one
    [res] = p.annotate.adjudicate("filter")
    assert res["nothing_to_do"] == ("Nothing to adjudicate: no filter campaign was pushed; 'cultura annotate push "
                                    "filter' starts one.")
    # a name that is no kind is still unknown
    assert "Unknown campaign 'relevanse'" in run("annotate", "adjudicate", "--campaign", "relevanse", ok=False)


def test_a_kind_whose_campaigns_have_other_names_names_them(project):
    plant_campaign(project, "relevance", workers={"ana": 0, "ben": 1}, n_items=3, name="rel-jp")
    p = cultura.open(project.root)
    for call in (lambda: p.annotate.adjudicate("relevance"), lambda: p.annotate.agreement("relevance")):
        with pytest.raises(CulturaError, match="the relevance campaigns are rel-jp; name one of them"):
            call()
    assert p.annotate.adjudicate("rel-jp")[0]["decided"] == 3
