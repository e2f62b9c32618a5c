"""Every export format loads with the ``datasets`` library: Parquet, JSON Lines and WebDataset."""
from __future__ import annotations

import json
import tarfile


from cultura.benchmark.export import export_benchmark
from tests.unit.benchmark.test_export import _digest, built  # noqa: F401 - shared with the unit tests


def test_parquet_loads_with_datasets(built, tmp_path):
    import datasets

    r = export_benchmark(built, tmp_path / "out")
    out = tmp_path / "out"
    assert r["benchmarks"] == ["association@1", "descriptor@1"]
    # one table per load (the tables have different columns, like the card's configs)
    ds = {n: datasets.load_dataset("parquet", data_files={"test": str(out / f"{n}.parquet")},
                                   cache_dir=str(tmp_path / "hf"))["test"]
          for n in ("items", "candidates", "queries", "images")}
    assert ds["items"].num_rows == r["items"] == 24 + 36
    assert ds["candidates"].num_rows == 24 * 3 + 36 * 6
    img = ds["images"].to_list()
    assert len(img) == r["images"] and all((out / i["file"]).is_file() for i in img)
    one = next(i for i in img if i["relevance"])
    assert one["relevance"][0]["value"] == 4.5 and one["tags"][0]["tag"] == "bus"
    assert one["links"][0]["source_page"].startswith("http://example.test/page/")
    assert one["links"][0]["found_at"] == "2025-01-02T00:00:00+00:00"
    qs = ds["queries"].to_list()
    assert {q["variant"] for q in qs if q["benchmark"] == "association"} == {"short"}   # only what trials use
    assert {q["variant"] for q in qs if q["benchmark"] == "descriptor"} == {
        "short", "mention_US", "mention_JP", "mention_TH", "mention_DE"}
    card = (out / "README.md").read_text()
    for needle in ("Table 9", "Table 10", "country as a proxy for culture".title().split()[0], "Takedown contact",
                   "Intended use", "2025-01-02", "relevance", "unreviewed"):
        assert needle.lower() in card.lower()
    assert not list(tmp_path.glob(".out.tmp-*"))


def test_jsonl_and_webdataset(built, tmp_path):
    import datasets

    export_benchmark(built, tmp_path / "j", fmt="jsonl")
    ds = datasets.load_dataset("json", data_files=str(tmp_path / "j" / "items.jsonl"),
                               cache_dir=str(tmp_path / "hf"))["train"]
    assert ds.num_rows == 60
    r = export_benchmark(built, tmp_path / "w", fmt="webdataset")
    with tarfile.open(tmp_path / "w" / "images.tar") as tar:
        names = tar.getnames()
        assert len(names) == 2 * r["images"]
        meta = json.loads(tar.extractfile(next(n for n in names if n.endswith(".json"))).read())
        assert {"sha256", "links", "tags"} <= set(meta)
    export_benchmark(built, tmp_path / "w2", fmt="webdataset")
    assert _digest(tmp_path / "w") == _digest(tmp_path / "w2")
