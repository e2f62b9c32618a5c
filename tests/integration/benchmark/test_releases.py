"""Importers for released datasets (3XCM, GlobalRG) from local files in the hub's Parquet shape: an ``Image``
feature stored as a struct of embedded bytes or a relative path. The files are written by the ``datasets``
library itself (as the hub publishes them) from real photographs (scikit-image)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from cultura.cli import cli
from cultura.benchmark.releases import import_3xcm_benchmark, import_3xcm_images, import_globalrg_release

import datasets  # noqa: E402  (the hub's own writer: the test extra has it)


def photos(n: int) -> list[Image.Image]:
    """Distinct real photographs: scikit-image samples, cropped differently."""
    from skimage import data

    base = [data.astronaut(), data.coffee(), data.chelsea(), data.rocket()]
    out = []
    for i in range(n):
        arr = base[i % len(base)]
        o = 8 * (i // len(base))
        out.append(Image.fromarray(np.ascontiguousarray(arr[o:o + 96, o:o + 128])).convert("RGB"))
    return out


def hub_parquet(path, columns: dict, image_cols=("image",)):
    feats = {k: datasets.Image() if k in image_cols else datasets.Value("string") for k in columns}
    datasets.Dataset.from_dict(columns, features=datasets.Features(feats)).to_parquet(str(path))
    return path


def test_3xcm_image_table_with_embedded_bytes_and_paths_is_linked_and_resumable(project, tmp_path):
    imgs = photos(6)
    (tmp_path / "img").mkdir()
    for i, im in enumerate(imgs[3:]):
        im.save(tmp_path / "img" / f"p{i}.jpg")
    # three images embedded as bytes, three named by a path relative to the table (bytes null)
    cells = imgs[:3] + [str(tmp_path / "img" / f"p{i}.jpg") for i in range(3)]
    t = hub_parquet(tmp_path / "images.parquet", {
        "image": cells, "concept": ["train", "train", "temple", "temple", "food", "food"],
        "country": ["Japan", "TH", "US", "DE", "Atlantis", "JP"]})
    import pyarrow.parquet as pq
    col = pq.read_table(t).column("image").to_pylist()
    assert col[0]["bytes"] and col[0]["path"] is None  # the hub's shape, not one we invented
    r = import_3xcm_images(project, t)
    assert r["imported"] == 5 and r["failed"] == 1 and "Atlantis" in r["failures"][0]["reason"]
    links = {(x["concept"], x["country"]) for x in project.db.query(
        "SELECT c.name AS concept, l.country FROM image_links l JOIN concepts c ON c.id = l.concept_id")}
    assert ("train", "JP") in links and ("food", "JP") in links and ("temple", "DE") in links
    assert project.db.execute("SELECT count(*) FROM images").fetchone()[0] == 5
    again = import_3xcm_images(project, t)
    assert again["already"] == 5 and again.get("imported", 0) == 0


def _trials(tmp_path, kind: str, n: int = 6):
    roles = ("cr", "lb", "ti") if kind == "association" else ("cr", "orlb", "or", "cdr", "lb", "ti")
    imgs = photos(len(roles) + 2)
    qcs = ["TH", "JP", "US"]
    cols = {"concept": [], "query": [], "query_country": []}
    if kind == "descriptor":
        cols["descriptor_country"] = []
    for r in roles:
        cols[r], cols[f"{r}_country"], cols[f"{r}_concept"] = [], [], []
    for i in range(n):
        qc = qcs[i % 3]
        cols["concept"].append("train")
        dc = "DE" if qc != "DE" else "US"
        cols["query"].append({"TH": "รถไฟ", "JP": "電車", "US": "train"}[qc] + (" ของเยอรมนี" if kind == "descriptor"
                                                                               and qc == "TH" else ""))
        cols["query_country"].append(qc)
        if kind == "descriptor":
            cols["descriptor_country"].append(dc)
        for j, r in enumerate(roles):
            cols[r].append(imgs[(i + j) % len(imgs)])
            cols[f"{r}_country"].append({"cr": dc if kind == "descriptor" else "DE", "orlb": qc, "lb": qc,
                                         "or": "US", "cdr": dc, "ti": "US"}[r])
            cols[f"{r}_concept"].append("train" if r in ("cr", "orlb", "or") else "temple")
    return hub_parquet(tmp_path / f"{kind}.parquet", cols, image_cols=roles), roles


@pytest.mark.parametrize("kind", ["association", "descriptor"])
def test_3xcm_trials_become_a_benchmark_the_suites_evaluate(project, tmp_path, kind):
    from cultura.evaluate.suites import get_suite
    from cultura.models.embedders import get_embedder

    t, roles = _trials(tmp_path, kind)
    r = import_3xcm_benchmark(project, t, name="rel")
    assert r["kind"] == kind and r["items"] == 6 and r["skipped"] == 0 and r["queries"] == 3
    b = project.db.execute("SELECT kind, status, n_items, content_hash FROM benchmarks WHERE name = 'rel'").fetchone()
    assert tuple(b[:3]) == (kind, "ready", 6) and len(b[3]) == 64
    roles_db = [x[0] for x in project.db.execute(
        "SELECT role FROM benchmark_candidates bc JOIN benchmark_items bi ON bi.id = bc.item_id "
        "ORDER BY bi.id, bc.position LIMIT ?", [len(roles)])]
    assert tuple(roles_db) == roles
    variant = "mention_DE" if kind == "descriptor" else "short"
    snap = project.db.execute("SELECT text FROM benchmark_query_snapshot WHERE country = 'TH' AND variant = ?",
                              [variant]).fetchone()
    assert snap[0].startswith("รถไฟ")
    rows = get_suite(kind).func(project, get_embedder("fake:dim=16"), benchmark="rel",
                                options={"n_resamples": 20, "projection": "none"})
    m_cr = next(x for x in rows if x["metric"] == "M_cr" and not x["group"])
    assert m_cr["n"] == 6
    # a second import is another version; the same version twice is refused
    assert import_3xcm_benchmark(project, t, name="rel")["benchmark"] == "rel@2"
    with pytest.raises(Exception, match="exists already"):
        import_3xcm_benchmark(project, t, name="rel", version=1)


def test_3xcm_trials_without_candidate_metadata_use_the_image_import_and_say_what_is_missing(project, tmp_path):
    imgs = photos(3)
    cols = {"concept": ["train"], "query": ["รถไฟ"], "language": ["th"], "cr": [imgs[0]], "lb": [imgs[1]],
            "ti": [imgs[2]]}
    t = hub_parquet(tmp_path / "t.parquet", cols, image_cols=("cr", "lb", "ti"))
    with pytest.raises(Exception, match="cr: the image's country and concept are unknown"):
        import_3xcm_benchmark(project, t)
    assert project.db.execute("SELECT count(*) FROM benchmarks").fetchone()[0] == 0  # nothing half-written
    meta = hub_parquet(tmp_path / "m.parquet", {"image": imgs, "concept": ["train", "temple", "food"],
                                                 "country": ["DE", "TH", "US"]})
    import_3xcm_images(project, meta)
    r = import_3xcm_benchmark(project, t)
    assert r["items"] == 1
    got = {x[0]: (x[1], x[2]) for x in project.db.execute(
        "SELECT bc.role, c.name, bc.country FROM benchmark_candidates bc JOIN concepts c ON c.id = bc.concept_id")}
    assert got == {"cr": ("train", "DE"), "lb": ("temple", "TH"), "ti": ("food", "US")}


def test_globalrg_release_parquet_and_the_cli(project, tmp_path):
    imgs = photos(3)
    t = hub_parquet(tmp_path / "test-00000-of-00001.parquet",
                    {"image": imgs, "country": ["Japan", "Thailand", "Germany"],
                     "concept": ["wedding", "wedding", "breakfast"]})
    r = import_globalrg_release(project, t)
    assert r["imported"] == 3
    res = CliRunner().invoke(cli, ["--project", str(project.root), "import", "globalrg-parquet", str(t), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["already"] == 3
    tr, _ = _trials(tmp_path, "descriptor")
    res = CliRunner().invoke(cli, ["--project", str(project.root), "import", "3xcm", str(tr), "--trials",
                                   "--name", "rq3", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["benchmark"] == "rq3@1" and out["kind"] == "descriptor"
    res = CliRunner().invoke(cli, ["--project", str(project.root), "import", "3xcm", str(t),
                                   "--column", "country=nope"])
    assert res.exit_code != 0 and "no column 'nope'" in res.output
