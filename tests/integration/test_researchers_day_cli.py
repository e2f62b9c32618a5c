"""A researcher's day through the CLI only, on real photographs.

The photographs are the sample photos that ship with scikit-image and scikit-learn (coffee, cat, astronaut,
rocket, a Chinese temple, a flower), cropped differently per country, laid out as ``DIR/<COUNTRY>/<concept>/``,
with planted copies (a re-encoded copy, a byte-identical copy, a half-size copy found for another country);
the demo (:func:`cultura.cli.demo.real_photos`) uses the same ones.
Every stage goes through ``cultura …`` (click's CliRunner on the real CLI; ``annotate serve-images`` as a real
subprocess) against a real Label Studio; annotators are simulated with ``cultura annotate simulate``. Each
stage's output is asserted, so a regression anywhere on the path fails here.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from cultura.annotate.server import free_port
from cultura.cli import cli
from cultura.cli.demo import COUNTRIES, PLAN, real_photos
from tests.fakes.cli_runner import ProjectCli, demo_terms_tsv

pytestmark = pytest.mark.labelstudio

TERMS = demo_terms_tsv()


def _ls_tasks(labelstudio, walk_db, campaign: str) -> list[dict]:
    import sqlite3

    con = sqlite3.connect(walk_db)
    pids = [r[0] for r in con.execute(
        "SELECT p.ls_project_id FROM campaign_projects p JOIN campaigns c ON c.id = p.campaign_id WHERE c.name = ? "
        "AND p.purpose = 'annotate'", [campaign])]
    con.close()
    conn = labelstudio.connection()
    tasks = []
    for pid in pids:
        r = conn.get(f"/api/projects/{pid}/export", exportType="JSON", download_all_tasks="true")
        tasks += r.json()
    return tasks


def test_a_researchers_day(tmp_path, labelstudio):
    photos = tmp_path / "photos"
    planted = real_photos(photos)
    proj = tmp_path / "proj"
    env = {"LABEL_STUDIO_URL": labelstudio.url, "LABEL_STUDIO_API_KEY": labelstudio.api_key,
           "HF_HUB_OFFLINE": "1", "OPENAI_API_KEY": None, "OPENAI_API_KEY_FILE": None}
    run = ProjectCli(proj, env)
    out = run.runner.invoke(cli, ["init", str(proj), "--countries", ",".join(COUNTRIES)], env=env)
    assert out.exit_code == 0, out.output

    # ---------------------------------------------------------------- empty state says what to do first
    empty = run.json("images", "search")
    assert "cultura concepts load" in empty["nothing_to_do"]
    assert "cultura images search" in run.json("images", "download")["nothing_to_do"]
    assert "cultura images download" in run.json("images", "dedup")["nothing_to_do"]

    # ---------------------------------------------------------------- concepts, terms (bulk), queries
    run("concepts", "add", *PLAN)
    (tmp_path / "terms.tsv").write_text(TERMS, encoding="utf-8")
    terms = run.json("concepts", "set-term", "--from", str(tmp_path / "terms.tsv"))
    assert terms["terms"] == 12

    # ---------------------------------------------------------------- search (folder:) → download → dedup
    s = run.json("images", "search", "--provider", f"folder:{photos}")
    assert s["results"] == planted["files"] and s["rejected"] == 0
    d = run.json("images", "download")
    assert d["by_status"] == {"downloaded": planted["files"]} and d["new_images"] == planted["distinct"]
    dd = run.json("images", "dedup")
    assert dd["images"] == planted["distinct"] and dd["clusters"] == {"phash": 1, "dhash": 1}
    assert dd["images_in_clusters"]["phash"] == 3 and dd["conflicts_flagged"] == 3
    flags = run.json("images", "flags")
    assert len(flags) == 3 and {f["pairs"] for f in flags} == {"breakfast/JP, breakfast/US"}
    clusters = run.json("images", "clusters")
    assert len(clusters) == 2 and all(len(c["members"]) == 3 and all(len(m["sha256"]) == 64 for m in c["members"])
                                      for c in clusters)                # full sha256s in --json

    # ---------------------------------------------------------------- tag (offline: the tiny random CLIP)
    t = run.json("images", "tag", "--method", "clip", "--model", "openclip:cultura-tiny", "--top-k", "1")
    assert t["done"] == planted["distinct"] and "random_init" in t["model"]

    # ---------------------------------------------------------------- annotate: image URLs first
    run("annotate", "annotators", "add", "sim-ann", "--email", "ann@walk.invalid", "--country", "US",
        "--languages", "en")
    run("annotate", "annotators", "add", "sim-bob", "--email", "bob@walk.invalid", "--country", "JP",
        "--languages", "en")
    run("annotate", "annotators", "add", "sim-cho", "--email", "cho@walk.invalid", "--country", "TH",
        "--languages", "en")
    run("annotate", "annotators", "add", "sim-dan", "--email", "dan@walk.invalid", "--country", "DE",
        "--languages", "en")
    run("annotate", "annotators", "add", "sim-adj", "--email", "adj@walk.invalid", "--role", "adjudicator")
    refused = run("annotate", "push", "filter", ok=False)
    assert "file://" in refused and "serve-images" in refused and "image_base_url" in refused

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "cultura", "--project", str(proj), "annotate", "serve-images",
                               "--port", str(port), "--save"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        first = ""
        while "Image base URL" not in first:
            line = server.stdout.readline()
            assert line, f"serve-images ended: {first}"
            first += line
        base = f"http://127.0.0.1:{port}"
        assert f"Image base URL: {base}" in first and "/blobs/blobs" not in first
        deadline = time.monotonic() + 600  # a hang guard only: the loop waits for the state
        while f'image_base_url = "{base}"' not in (proj / "cultura.toml").read_text() and time.monotonic() < deadline:
            assert server.poll() is None, "serve-images --save ended before saving image_base_url"
            time.sleep(0.2)
        assert f'image_base_url = "{base}"' in (proj / "cultura.toml").read_text(), \
            "serve-images --save did not write image_base_url to cultura.toml within 600 s (hung?)"
        p = run.json("annotate", "push", "filter", "--overlap", "2")
        assert p["items"] == planted["distinct"] and p["tasks_created"] == 2 * planted["distinct"]
        tasks = _ls_tasks(labelstudio, proj / "cultura.db", "filter")
        assert len(tasks) == 2 * planted["distinct"]
        url = tasks[0]["data"]["image"]
        assert url.startswith(base + "/blobs/") and "/blobs/blobs/" not in url
        assert httpx.get(url).status_code == 200
        # a re-push with another base updates the tasks already in Label Studio (and back again)
        p2 = run.json("annotate", "push", "filter", "--image-base", f"http://localhost:{port}/blobs/")
        assert p2["tasks_created"] == 0 and p2["tasks_updated"] == 2 * planted["distinct"]
        assert all(t["data"]["image"].startswith(f"http://localhost:{port}/blobs/") and "blobs/blobs" not in
                   t["data"]["image"] for t in _ls_tasks(labelstudio, proj / "cultura.db", "filter"))
        assert run.json("annotate", "push", "filter")["tasks_updated"] == 2 * planted["distinct"]

        dr = run.json("annotate", "push", "dedup-review", "--overlap", "2")
        assert dr["items"] == 1  # one item per duplicate set, not one per pHash and one per dHash cluster

        # ------------------------------------------------------------ simulated annotators → adjudication
        assert "SIMULATED" in run("annotate", "simulate", "filter", "--disagreement", "0.1")
        run("annotate", "simulate", "dedup-review", "--disagreement", "0")
        pulled = run.json("annotate", "pull")
        assert pulled["new"] == 2 * planted["distinct"] + 2
        adj = {a["campaign"]: a for a in run.json("annotate", "adjudicate")}
        assert adj["dedup-review"]["decided"] == 1
        f = adj["filter"]
        assert f["decided"] + f["disagreements"] == planted["distinct"]
        if f["disagreements"]:
            assert f["sent_to_adjudication"] == f["disagreements"]
            run("annotate", "simulate", "filter", "--purpose", "adjudicate")
            run("annotate", "pull")
            f = {a["campaign"]: a for a in run.json("annotate", "adjudicate", "--campaign", "filter")}["filter"]
            assert f["pending"] == 0 and f["decided"] + f["adjudicated"] == planted["distinct"]
        # the dedup review decided which copy stays, not which culture: the culture questions stay open
        assert run.json("images", "flags") != []

        rel = run.json("annotate", "push", "relevance", "--overlap", "1")
        # the two copies reviewers dropped are out of the pool: never sent to annotators
        assert rel["out_of_pool"] > 0 and rel["tasks_created"] == rel["items"] > 0
        assert rel["unassigned_countries"] == {}
        run("annotate", "simulate", "relevance", "--disagreement", "0")
        run("annotate", "pull")
        rd = run.json("annotate", "adjudicate", "--campaign", "relevance")[0]
        assert rd["pending"] == 0 and rd["decided"] == rel["items"]
        # the ratings cover every flagged country (a dropped copy's countries asked of the kept copy): decided
        assert run.json("images", "flags") == []
        assert {f["status"] for f in run.json("images", "flags", "--status", "all")} == {"resolved"}
        campaigns = {c["campaign"]: c for c in run.json("annotate", "campaigns", "list")}
        assert set(campaigns) == {"filter", "dedup-review", "relevance"}
        run("annotate", "campaigns", "close", "relevance")
        assert "closed" in run("annotate", "push", "relevance", ok=False)
    finally:
        server.terminate()
        server.wait(timeout=600)

    # ---------------------------------------------------------------- build: random tags refused, then allowed
    refused = run("build", "association", ok=False)
    assert "random-init" in refused and "--allow-random-tags" in refused
    b = run.json("build", "association", "--allow-random-tags")
    img = b["report"]["images"]
    assert b["n_items"] > 0 and b["status"] == "ready"
    assert img["excluded"]["duplicate_dropped"] == 2          # the two copies reviewers dropped, nothing else
    assert img["excluded"]["culture_conflict"] == 0           # flags decided by the ratings survive into build
    assert img["random_tag_sources"] and img["eligible"] + sum(img["excluded"].values()) == img["total"]
    mq = run.json("build", "mention-queries", "--method", "pattern")
    assert mq, "mention_<CC> descriptor queries"
    bd = run.json("build", "descriptor", "--allow-random-tags")   # every language has a pattern
    assert bd["n_items"] > 0

    # ---------------------------------------------------------------- inspect and correct by hand
    listed = run.json("images", "list", "--pool", "out")
    assert sorted((r["pool"], r["reason"]) for r in listed) == [("out", "duplicate_dropped")] * 2
    keep = run.json("images", "list", "--pool", "in", "--concept", "pet")[0]["sha256"]
    run("images", "exclude", keep[:12], "--reason", "watermark")
    out = run.json("images", "list", "--pool", "out", "--concept", "pet")[0]
    assert (out["pool"], out["reason"], out["detail"]) == ("out", "image_excluded", "watermark")
    run("images", "include", keep[:12])

    # ---------------------------------------------------------------- export: an honest dataset card
    exp = run.json("export", str(tmp_path / "export"))
    assert exp["benchmarks"] == ["association@1", "descriptor@1"] and exp["images"] > 0
    card = (tmp_path / "export" / "README.md").read_text(encoding="utf-8")
    assert "a local folder" in card and "publicly reachable web images" not in card

    # ---------------------------------------------------------------- evaluate → report
    ev = run.json("evaluate", "run", "--model", "openclip:cultura-tiny")
    status = {r["suite"]: r for r in ev}
    assert {s for s, r in status.items() if r["status"] == "done"} >= {"prevalence", "association", "descriptor",
                                                                        "latent"}
    assert status["social"]["status"] == "skipped" and "cultura social import-portraits" in status["social"]["reason"]
    rows = run.json("evaluate", "results")
    latent_n = [r for r in rows if r["suite"] == "latent" and r["metric"] == "n_images"]
    assert latent_n and latent_n[0]["details"]["excluded"]["duplicate_dropped"] == 2
    rep = run.json("evaluate", "report")
    html = Path(rep["html"]).read_text(encoding="utf-8")
    assert "Random-init model" in html and "mean nothing" in html
    assert "Image pool: what was excluded and why" in html and "duplicate_dropped" in html
    md = Path(rep["markdown"]).read_text(encoding="utf-8")
    assert "> **Warning:**" in md
    # for a paper: each figure as PNG and SVG, each table as LaTeX, beside the HTML
    figs = sorted(p.name for p in Path(rep["figures_dir"]).iterdir())
    assert any(f.endswith(".png") for f in figs) and any(f.endswith(".svg") for f in figs)
    tex = [t for t in Path(rep["latex_dir"]).glob("*.tex") if t.name != "all-tables.tex"]
    assert tex and all("\\begin{tabular}" in t.read_text(encoding="utf-8") for t in tex)
    everything = (Path(rep["latex_dir"]) / "all-tables.tex").read_text(encoding="utf-8")  # the document to compile
    assert all(t.stem in everything for t in tex)
    # look at it: the view of the whole project, every trial reachable by the address the report links to
    view = run.json("view")
    assert view["images"] > 0 and view["thumbnails_failed"] == 0 and view["trials"] > 0 and view["clusters"] > 0
    ids = (Path(view["index"]).parent / "ids.js").read_text(encoding="utf-8")
    links = re.findall(r'href="view/go\.html#([^"]+)"', html)
    assert links and all(f'"{a}"' in ids for a in links)
