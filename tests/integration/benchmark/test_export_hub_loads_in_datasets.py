"""The Hub export loads as is with ``datasets.load_dataset(DIR)``: the Image feature, and embedded images that
need no folder beside them."""
from __future__ import annotations

import json
import re

import pytest

from click.testing import CliRunner

from cultura.cli import cli
from cultura.benchmark import hub
from tests.unit.benchmark.test_export_hub import _photos, photos  # noqa: F401 - shared with the unit tests


def _cli(project, *args, env=None):
    return CliRunner().invoke(cli, ["--project", str(project.root), *args], env=env)


def test_load_dataset_as_is_with_image_feature(photos, tmp_path):
    import datasets
    import mlcroissant as mlc
    from huggingface_hub import DatasetCard

    r = _cli(photos, "export", str(tmp_path / "out"), "--json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    out = tmp_path / "out"
    assert res["configs"] == ["default", "association", "descriptor", "images"]
    ds = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf"))
    assert list(ds) == ["test"]                       # a test benchmark, not a train split
    t = ds["test"]
    assert t.features["images"] == datasets.List(datasets.Image())
    assert t.num_rows == res["items"] == 24 + 36
    # a fixed row order: benchmarks by name, trials by item key (as in items.parquet)
    items = datasets.load_dataset("parquet", data_files=str(out / "items.parquet"), cache_dir=str(tmp_path / "hf"))
    assert t["item_key"] == items["train"]["item_key"] and t["benchmark"] == items["train"]["benchmark"]
    # every row is ready to evaluate: the query text and the candidates' images, in position order
    queries = {(q["benchmark"], q["concept"], q["country"], q["variant"]): q["text"]
               for q in datasets.load_dataset("parquet", data_files=str(out / "queries.parquet"),
                                              cache_dir=str(tmp_path / "hf"))["train"]}
    stored = {r[0]: (r[1], r[2]) for r in photos.db.execute("SELECT sha256, width, height FROM images")}
    for row in t.select(range(0, t.num_rows, 7)):
        assert row["query"] == queries.get((row["benchmark"], row["concept"], row["query_country"],
                                            row["query_variant"]))
        assert row["query_variant"] == ("short" if row["benchmark"] == "association"
                                        else f"mention_{row['descriptor_country']}")
        assert row["query"]  # every trial carries the query its suite needs
        assert row["positions"] == sorted(row["positions"])
        assert len(row["images"]) == len(row["roles"]) == len(row["sha256"])
        for img, sha in zip(row["images"], row["sha256"]):
            assert img.format == "JPEG" and img.size == stored[sha]
    assert any(q["language"] == "ja" for row in t for q in row["queries"])
    # one config per benchmark, and the images config
    for name, n in (("association", 24), ("descriptor", 36), ("images", res["images"])):
        assert datasets.load_dataset(str(out), name, split="test", cache_dir=str(tmp_path / "hf")).num_rows == n
    cand = datasets.load_dataset(str(out), "descriptor", split="test", cache_dir=str(tmp_path / "hf"))[0]
    assert cand["roles"] == ["cr", "orlb", "or", "cdr", "lb", "ti"] or sorted(cand["roles"]) == \
        sorted(["cr", "orlb", "or", "cdr", "lb", "ti"])

    # the card, read back by huggingface_hub
    card = DatasetCard.load(out / "README.md")
    meta = card.data.to_dict()
    assert meta["license"] == "unknown"            # build.license is not set in this project
    assert set(meta["language"]) == {"en", "ja", "th", "de"}
    assert meta["size_categories"] == ["n<1K"]
    assert "zero-shot-image-classification" in meta["task_categories"] and "cultural-bias" in meta["tags"]
    assert "text-to-image" not in meta["task_categories"]      # image generation on the Hub, not retrieval
    assert [c["config_name"] for c in meta["configs"]] == res["configs"]
    assert [c["config_name"] for c in meta["configs"] if c.get("default")] == ["default"]
    assert "Evaluating Perspectival Biases in Cross-Modal Retrieval" in card.text
    assert "| role | position 0 | position 1 | position 2 |" in card.text
    hub.check_card(str(card))

    # Croissant, loaded (and so validated) by mlcroissant; its records are the tables' rows
    cr = mlc.Dataset(jsonld=str(out / "croissant.json"))
    assert cr.metadata.ctx.issues.errors == set()
    items = list(cr.records("table-items"))
    assert len(items) == res["items"]
    assert {bytes(i["table-items/benchmark"]).decode() if isinstance(i["table-items/benchmark"], bytes)
            else i["table-items/benchmark"] for i in items} == {"association", "descriptor"}


def test_embedded_images_are_self_contained(photos, tmp_path):
    import datasets

    r = _cli(photos, "export", str(tmp_path / "emb"), "--embed-images", "--json")
    assert r.exit_code == 0, r.output
    out = tmp_path / "emb"
    assert not (out / "images").exists()
    res = json.loads(r.stdout)
    assert res["embedded_images"] and "items" in res["configs"] and res["configs"][0] == "default"
    t = datasets.load_dataset(str(out), split="test", cache_dir=str(tmp_path / "hf"))
    t = t.cast_column("images", datasets.List(datasets.Image(decode=False)))
    row = t[0]
    for im, sha in zip(row["images"], row["sha256"]):
        path = photos.db["images"].get(sha)["path"]
        assert im["bytes"] == (photos.root / path).read_bytes()   # the stored bytes, unchanged
    imgs = datasets.load_dataset(str(out), "images", split="test", cache_dir=str(tmp_path / "hf"))
    assert imgs.features["image"] == datasets.Image() and imgs[0]["image"].format == "JPEG"
    items = datasets.load_dataset(str(out), "items", split="test", cache_dir=str(tmp_path / "hf"))
    assert items.num_rows == 60
    # jsonl cannot embed: one clear sentence naming the fix
    r = _cli(photos, "export", str(tmp_path / "j"), "--embed-images", "--format", "jsonl")
    assert r.exit_code == 1 and "Parquet only" in r.output


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def _pixels(v):
    """An image as mlcroissant or datasets hands it over (PIL image or bytes) → its decoded pixels."""
    import io

    from PIL import Image

    img = v if hasattr(v, "tobytes") else Image.open(io.BytesIO(v))
    return img.convert("RGB").tobytes()


@pytest.mark.parametrize("mode", ["files", "embedded", "jsonl"])
def test_every_export_mode_reads_the_same_in_datasets_the_card_and_croissant(photos, tmp_path, mode, capfd):
    import datasets
    import mlcroissant as mlc
    import pyarrow.parquet as pq
    from huggingface_hub import DatasetCard

    flags = {"files": [], "embedded": ["--embed-images"], "jsonl": ["--format", "jsonl"]}[mode]
    r = _cli(photos, "export", str(tmp_path / "out"), *flags, "--json")
    assert r.exit_code == 0, r.output
    res, out = json.loads(r.stdout), tmp_path / "out"
    assert "WARNING" not in capfd.readouterr().err           # mlcroissant's absl log stays off the terminal
    # no licence is set in this project: the export says so, and the card says nobody may reuse the data yet
    assert any("No licence is set" in w for w in res["warnings"])

    # the card: its configs, its dataset_info and its text are those of the folder written
    card = DatasetCard.load(out / "README.md")
    meta = card.data.to_dict()
    assert [c["config_name"] for c in meta["configs"]] == res["configs"]
    info = {i["config_name"]: i for i in meta["dataset_info"]}
    assert list(info) == res["configs"]
    for name in res["configs"]:
        ds = datasets.load_dataset(str(out), name, split="test", cache_dir=str(tmp_path / "hf"))
        assert ds.num_rows == info[name]["splits"][0]["num_examples"] > 0, name
        assert ds.features == datasets.Features._from_yaml_list(info[name]["features"]), name
    loads = re.findall(r'load_dataset\("OWNER/NAME", "([^"]+)"', card.text)
    assert loads and set(loads) <= set(res["configs"])           # every config the card loads exists
    assert "text-to-image" not in meta["task_categories"]
    # one text per mode: where the pixels are
    assert ("images are **embedded**" in card.text) == (mode == "embedded")
    assert ("images are **files** in `images/`" in card.text) == (mode != "embedded")

    # no field names a file that is not there (embedded: no file at all)
    tables = {t: (pq.read_table(out / f"{t}.parquet").to_pylist() if mode != "jsonl" else
                  [json.loads(x) for x in (out / f"{t}.jsonl").read_text().splitlines()])
              for t in ("candidates", "images")}
    named = [row["file"] for t in tables.values() for row in t]
    assert all(f is None for f in named) if mode == "embedded" else all((out / f).is_file() for f in named)

    # Croissant: loaded by mlcroissant with no error and no warning; a record set per config; the pixels
    cr = mlc.Dataset(jsonld=str(out / "croissant.json"))
    assert cr.metadata.ctx.issues.errors == set() and cr.metadata.ctx.issues.warnings == set()
    doc = json.loads((out / "croissant.json").read_text())
    assert doc["datePublished"] and "url" not in doc                 # not pushed: no placeholder page
    sets = {rs["@id"] for rs in doc["recordSet"]}
    single = [c["config_name"] for c in meta["configs"]
              if len([p for s in c["data_files"] for p in ([s["path"]] if isinstance(s["path"], str)
                                                            else s["path"]) if "*" not in p]) == 1]
    assert {f"config-{c}" for c in single} <= sets and {"table-items", "table-images"} <= sets
    bench = next(c for c in single if c not in ("default", "images") and c in info)
    assert len(list(cr.records(f"config-{bench}"))) == info[bench]["splits"][0]["num_examples"]
    stored = {sha: (photos.root / photos.db["images"].get(sha)["path"]).read_bytes() for sha in
              (row["sha256"] for row in tables["images"])}
    if mode == "embedded":
        images = pq.read_table(out / "images.parquet").to_pylist()
        assert all(row["image"]["bytes"] == stored[row["sha256"]] for row in images)
        recs = list(cr.records("table-images"))
        assert len(recs) == len(images)
        for rec in recs:
            assert _pixels(rec["table-images/image"]) == _pixels(stored[_text(rec["table-images/sha256"])])
    else:
        recs = list(cr.records("image-content"))
        assert len(recs) == len(stored)
        for rec in recs:
            sha = _text(rec["image-content/file_name"]).split(".")[0]
            assert _pixels(rec["image-content/image"]) == _pixels(stored[sha])
