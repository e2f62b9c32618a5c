"""``annotate adjudicate --rule R`` without ``--campaign`` decides every campaign; when R fits only some of
them (a rule for labels on a project that also holds 1–5 ratings), nothing is decided and the sentence names
``--campaign`` and the campaigns R fits."""
from __future__ import annotations

from click.testing import CliRunner

from cultura.cli import cli
from tests.fakes.crowd_world import plant_campaign


def test_a_labels_rule_on_a_project_with_ratings_names_campaign(project):
    plant_campaign(project, "filter", workers={"ana": 0.9, "ben": 0.8}, n_items=4, name="filter-jp")
    plant_campaign(project, "relevance", workers={"ana": 0, "ben": 1}, n_items=4, seed=1)
    base = ["--project", str(project.root), "annotate", "adjudicate"]
    r = CliRunner().invoke(cli, [*base, "--rule", "wawa"])
    assert r.exit_code == 1 and "--campaign" in r.output and "filter-jp" in r.output, r.output
    assert "'relevance'" in r.output and "Traceback" not in r.output
    assert project.db["decisions"].count == 0  # refused before any campaign was decided
    # a rule that fits no campaign at all says so, with the rules that fit
    r = CliRunner().invoke(cli, [*base, "--campaign", "filter-jp", "--rule", "median"])
    assert r.exit_code == 1 and "does not fit" in r.output and "majority" in r.output, r.output
