"""A built benchmark stays true until it is published, through the CLI on real photographs.

Twelve photographs (and two look-alike crops of one picture, which are not copies) found for two concepts in
three countries; association@1 is built. Then each later change that makes it untrue: an image excluded by hand,
ratings imported with one image rated 1 for its country, a half-size copy found for another country (a new
duplicate set and a culture question). Each time export and --push-to-hub refuse association@1 in one sentence
naming what changed and the rebuild; 'build check' says the same; --as-built exports it and the card says what
changed. Every command that reads or publishes a benchmark version is found by walking the command tree and
must either refuse the version or be classified as reading it only, with a warning."""
from __future__ import annotations

import csv
import hashlib
import json

import pytest
from click.testing import CliRunner

from cultura.cli import cli
from tests.fakes.cli_runner import ProjectCli
from tests.fakes.real_photos import encode, photos
from tests.fakes.cli_tree import leaves

#: photograph per (country, concept): twelve distinct photographs; hubble_left and hubble_right are two halves
#: of one picture, alike but not copies
PLACES = {("JP", "pet"): ["chelsea", "astronaut"], ("US", "pet"): ["rocket", "camera"],
          ("BR", "pet"): ["coins", "moon"], ("JP", "breakfast"): ["coffee", "clock"],
          ("US", "breakfast"): ["china", "flower"], ("BR", "breakfast"): ["hubble_left", "hubble_right"]}
#: every command that takes or names a benchmark version, and what it does with a version the current state no
#: longer supports: refuse it (publishes), warn while reading it as built, show the check itself, or only list
#: versions or write a new one (reads no trial of an existing version)
DOORS = {"export": "refuses", "evaluate run": "warns", "evaluate report": "warns", "build stats": "warns",
         "view": "warns", "build check": "checks", "build list": "lists", "evaluate results": "lists",
         "import 3xcm": "writes a new version"}


def _doors() -> set[str]:
    """Commands with a parameter named after benchmarks (--benchmark, BENCHMARK) or whose help speaks of them."""
    return {" ".join(path) for path, cmd in leaves()
            if any("benchmark" in (p.name or "") for p in cmd.params) or "benchmark" in (cmd.help or "").lower()}


def _one_sentence(text: str) -> str:
    text = " ".join(text.replace("Error:", "").split())
    body = text.split(": ", 1)[1] if text.startswith("--") else text
    assert body.count(". ") == 0, text                # one sentence, whatever it names
    return text


@pytest.fixture
def project(tmp_path):
    pics = photos()
    root = tmp_path / "photos"
    shas = {}
    for (cc, concept), names in PLACES.items():
        (root / cc / concept).mkdir(parents=True)
        for n in names:
            data = encode(pics[n])
            (root / cc / concept / f"{n}.jpg").write_bytes(data)
            shas[hashlib.sha256(data).hexdigest()] = n
    proj = tmp_path / "proj"
    env = {"HF_HUB_OFFLINE": "1", "OPENAI_API_KEY": None, "OPENAI_API_KEY_FILE": None, "HF_TOKEN": "hf_x",
           "HF_ENDPOINT": "http://127.0.0.1:9"}
    assert CliRunner().invoke(cli, ["init", str(proj), "--countries", "JP,US,BR"], env=env).exit_code == 0
    run = ProjectCli(proj, env)
    run("concepts", "add", "pet", "breakfast")
    for concept, terms in {"pet": {"JP": "ペット", "US": "pet", "BR": "animal de estimação"},
                           "breakfast": {"JP": "朝食", "US": "breakfast", "BR": "café da manhã"}}.items():
        for cc, term in terms.items():
            run("concepts", "set-term", concept, cc, term)
    run("images", "search", "--provider", f"folder:{root}")
    assert run.json("images", "download")["new_images"] == 12
    run.json("images", "dedup")
    assert run.json("images", "clusters") == []       # the look-alike halves are not copies
    run("build", "association", "--allow-unreviewed", "--per-pair", "2")
    return run, root, pics, shas


def _refused(run, tmp_path, name, *more):
    out = _one_sentence(run("export", str(tmp_path / name), "--benchmark", "association@1", *more, ok=False))
    assert "no longer matches the current state" in out
    assert "cultura build association --per-pair 2 --allow-unreviewed" in out and "--as-built" in out
    assert not (tmp_path / name).exists()
    return out


def test_export_refuses_what_a_later_change_made_untrue(project, tmp_path):
    run, root, pics, shas = project
    assert "still holds" in run("build", "check", "association@1")
    run("export", str(tmp_path / "ok"), "--benchmark", "association@1")
    import pyarrow.parquet as pq  # deferred: only this test reads the exported tables

    rows = pq.read_table(tmp_path / "ok" / "candidates.parquet").to_pylist()
    in_bench = sorted({r["sha256"] for r in rows})
    assert set(in_bench) <= set(shas)
    first = in_bench[0]

    # ---- an image excluded by hand
    run("images", "exclude", first[:16], "--reason", "a watermark")
    out = _refused(run, tmp_path, "a")
    assert "1 image excluded by hand" in out
    assert "excluded by hand" in _refused(run, tmp_path, "a-hub", "--push-to-hub", "me/bench")
    check = run("build", "check", "association@1", ok=False)
    assert "excluded by hand" in check and first[:12] in check
    r = run.json("export", str(tmp_path / "as-built"), "--benchmark", "association@1", "--as-built")
    assert "excluded by hand" in r["changed_since_build"]["association@1"][0]
    card = (tmp_path / "as-built" / "README.md").read_text()
    assert "## Changed since the build" in card and "cultura build association" in card
    run("images", "include", first[:16])
    run("export", str(tmp_path / "back"), "--benchmark", "association@1")   # true again: exported as is

    # ---- ratings imported: every link rated 5 but one image rated 1 for its own country
    links = [(c["sha256"], f.split("/")[1]) for c in run.json("images", "list") for f in c["found_for"].split(", ")]
    low = next((s, k) for s, k in links if s in in_bench)
    with open(tmp_path / "ratings.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["image", "country", "score"])
        for s, k in links:
            w.writerow([s, k, 1 if (s, k) == low else 5])
    run("import", "ratings", str(tmp_path / "ratings.csv"))
    out = _refused(run, tmp_path, "b")
    assert "rated below" in out and "excluded by hand" not in out

    # ---- a half-size copy of a photograph in the benchmark, found for another country
    kept = next(s for s in in_bench if s != low[0] and shas[s] in PLACES[("JP", "pet")])
    name = shas[kept]
    small = pics[name].resize((pics[name].width // 2, pics[name].height // 2))
    (root / "US" / "pet" / "small-copy.jpg").write_bytes(encode(small))
    run("images", "search", "--provider", f"folder:{root}")
    run.json("images", "download")
    run.json("images", "dedup")
    assert run.json("images", "flags")                 # a culture question is open
    refused = run("build", "association", "--allow-unreviewed", "--per-pair", "2", ok=False)
    assert "no culture decision" in refused
    assert kept in {f["sha256"] for f in run.json("images", "flags")}
    check = json.loads(run("build", "check", "association@1", "--json", ok=False))   # exit 1: no longer holds
    assert kept in next(c["images"] for c in check["changes"] if c["what"] == "culture_conflict")
    assert "open culture question" in _refused(run, tmp_path, "c")

    # ---- every door: the commands that read or publish a version, found by walking the command tree
    doors = _doors()
    assert doors == set(DOORS), f"classify each new command that takes a benchmark version: {doors ^ set(DOORS)}"
    for door, does in sorted(DOORS.items(), key=lambda d: d[0] != "evaluate run"):   # results before the report
        if door == "export":
            _refused(run, tmp_path, "door")
            continue
        if does in ("lists", "writes a new version"):
            continue   # no trial of an existing version is read
        args = {"evaluate run": ["evaluate", "run", "--model", "fake", "--suite", "association", "--benchmark",
                                 "association@1"],
                "evaluate report": ["evaluate", "report", str(tmp_path / "report.html"), "--benchmark",
                                    "association@1"],
                "build stats": ["build", "stats", "--benchmark", "association@1"],
                "view": ["view"],
                "build check": ["build", "check", "association@1"]}[door]
        res = run.runner.invoke(cli, ["--project", str(run.project), *args], env=run.env, catch_exceptions=False)
        text = " ".join(res.output.split())
        if does == "warns":
            assert res.exit_code == 0 and "Warning: Benchmark association@1 no longer matches the current state" \
                in text and "version as built" in text, (door, res.output)
        else:
            assert res.exit_code == 1 and "no longer matches the current state" in text, (door, res.output)
