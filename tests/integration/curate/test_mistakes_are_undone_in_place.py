"""No dead ends that force a new project, through the CLI on real photographs.

- a URL skipped because its host was not allowed is fetched once ``download.allow_hosts`` lists it (set with
  ``cultura config set``), and ``--retry-failed`` re-examines policy skips (still refused while not allowed);
- ``cultura config get/set`` validate exactly like the file and keep its comments;
- ``cultura images tag --overwrite`` retags (a plain rerun with a new ``--top-k`` says how), and the build's
  "every cell short of images" names the tags as the cause when every image carries every concept's tag.
"""
from __future__ import annotations

from cultura.cli.demo import real_photos
from tests.fakes.cli_runner import demo_project


def test_retag_with_overwrite_and_the_build_names_the_tags(tmp_path):
    photos = tmp_path / "photos"
    planted = real_photos(photos)
    run = demo_project(tmp_path / "proj", photos, tmp_path / "terms.tsv", env={"HF_HUB_OFFLINE": "1"})
    assert run.json("images", "download")["new_images"] == planted["distinct"]

    # the default top-3 tags with 3 concepts: every image carries every concept's tag
    tiny = ("--method", "clip", "--clip-model", "openclip:cultura-tiny")
    t = run.json("images", "tag", *tiny)
    assert t["done"] == planted["distinct"] and t["tags"] == 3 * planted["distinct"]
    refused = run("build", "association", "--allow-unreviewed", "--allow-random-tags", ok=False)
    assert "short of images" in refused and "The tags are the cause" in refused
    assert "cultura images tag --overwrite --top-k 1" in refused

    # a plain rerun with a new --top-k does nothing, and says how to retag
    again = run.json("images", "tag", *tiny, "--top-k", "1")
    assert again["images"] == 0 and "--overwrite" in again["note"]
    over = run.json("images", "tag", *tiny, "--top-k", "1", "--overwrite")
    assert over["done"] == planted["distinct"] and over["tags"] == planted["distinct"]   # one tag each, replaced
    listed = run.json("images", "list")
    assert all(len([x for x in r["tags"].split(", ") if x]) == 1 for r in listed)
    out = run("build", "association", "--allow-unreviewed", "--allow-random-tags", ok=None)
    assert "The tags are the cause" not in out
