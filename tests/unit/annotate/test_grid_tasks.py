"""A grid answer is the per-image answers of one-image tasks, for every kind that can be a grid: the same
labels through the kind's own parser, hence the same agreement and aggregation; its config passes Label Studio's
offline validation; its task data shows nothing a one-image task would not; marking a tenth of a grid costs far
fewer key presses than one task per image."""
from __future__ import annotations

import doctest
import random

import pytest

from cultura.annotate import grid as G
from cultura.annotate.items import image_url, task_data
from cultura.annotate.kinds import FILTER_REASONS, get_kind


def _labels(kind: str, rng: random.Random, n: int) -> list[str]:
    if kind == "filter":
        reasons = [a for _, a in FILTER_REASONS]
        return [rng.choice(["keep"] * 8 + ["remove", "remove:" + ",".join(rng.sample(reasons, 2))])
                for _ in range(n)]
    return [rng.choice(get_kind(kind).labels) for _ in range(n)]


def _payload(kind: str, i: int) -> dict:
    return {"path": f"blobs/{i:02d}/{i}.jpg", "url": f"https://example.org/{i}.jpg", "concept": "rice",
            "culture_name": "Japan", "sha256": f"{i:064x}"}


def test_docstring_examples_run():
    res = doctest.testmod(G)
    assert res.attempted > 0 and res.failed == 0


@pytest.mark.parametrize("kind", G.grid_kinds())
@pytest.mark.parametrize("size", [2, 12, 24])
def test_every_grid_config_passes_label_studios_offline_validation(kind, size):
    xml = G.render_grid_config(kind, size)
    assert xml.count("<Image ") == size
    assert G.render_grid_config(kind, size, adjudication=True).count("$earlier") == 1


@pytest.mark.parametrize("kind", G.grid_kinds())
@pytest.mark.parametrize("seed", range(5))
def test_a_grid_answer_parses_to_the_labels_of_one_image_tasks(kind, seed):
    rng = random.Random(seed)
    size = rng.randint(2, 24)
    n = rng.randint(1, size)                      # short grids leave blank cells
    keys = [f"{kind}:{i}" for i in range(n)] + [""] * (size - n)
    labels = _labels(kind, rng, n)
    spec = get_kind(kind)
    got = G.per_image_labels(kind, G.grid_result(kind, labels), keys)
    assert list(got) == keys[:n]
    for key, lab in zip(keys, labels):
        one = spec.parse(spec.result_for(lab.split(":")[0]))
        assert got[key]["label"] == one["label"] and got[key]["value"] == one["value"]
        if ":" in lab:                            # the optional reasons survive as the one-image parser reads them
            assert got[key]["details"] == {"reasons": lab.split(":")[1].split(",")}


def test_grid_answers_with_label_studio_value_or_alias_parse_the_same():
    keys = ["filter:a", "filter:b"]
    by_value = [{"from_name": "rm1", "to_name": "img1", "type": "choices", "value": {"choices": ["Remove"]}},
                {"from_name": "reason1", "to_name": "img1", "type": "choices", "value": {"choices": ["Not a photo"]}}]
    by_alias = [{"from_name": "rm1", "to_name": "img1", "type": "choices", "value": {"choices": ["remove"]}},
                {"from_name": "reason1", "to_name": "img1", "type": "choices", "value": {"choices": ["not_photo"]}}]
    assert G.per_image_labels("filter", by_value, keys) == G.per_image_labels("filter", by_alias, keys)
    assert G.per_image_labels("filter", by_value, keys)["filter:b"]["details"] == {"reasons": ["not_photo"]}


@pytest.mark.parametrize("kind", G.grid_kinds())
def test_grid_task_data_shows_only_what_one_image_tasks_show(kind):
    items = [{"item_key": f"{kind}:{i}", "country": "JP", "payload": _payload(kind, i)} for i in range(5)]
    data = G.grid_task_data(kind, items, 6, image_base="http://127.0.0.1:8081")
    singles = [task_data(kind, it["item_key"], it["payload"], image_base="http://127.0.0.1:8081") for it in items]
    header = G.get_grid(kind).header
    assert set(data) == {"item_key", header} | {f"img{i}" for i in range(6)} | {f"key{i}" for i in range(6)}
    assert [data[f"img{i}"] for i in range(5)] == [s["image"] for s in singles]
    assert data["img5"] == G.BLANK and G.cell_keys(data) == [it["item_key"] for it in items] + [""]
    assert all(data[header] == s[header] for s in singles)
    assert data["img0"] == image_url(items[0]["payload"], "http://127.0.0.1:8081")


def test_grids_hold_one_concept_and_country_and_are_cut_evenly():
    items = [{"item_key": f"filter:{c}{k}{i:02d}", "country": k, "payload": {"concept": c}}
             for c in ("rice", "tea") for k in ("JP", "IN") for i in range(25)]
    grids = G.group_grids("filter", items, 24)
    assert sorted(len(g) for g in grids) == [12, 12, 12, 12, 13, 13, 13, 13]
    assert all(len({(m["payload"]["concept"], m["country"]) for m in g}) == 1 for g in grids)
    assert sorted(m["item_key"] for g in grids for m in g) == sorted(it["item_key"] for it in items)
    assert G.grid_key("filter", grids[0]) == G.grid_key("filter", list(reversed(grids[0])))


def test_marking_a_tenth_of_a_filter_grid_costs_under_a_third_of_an_action_per_image():
    labels = ["remove" if i % 10 == 3 else "keep" for i in range(24)]
    per_image = G.actions("filter", G.grid_result("filter", labels)) / len(labels)
    print(f"grid: {per_image:.2f} key presses per image; one-image tasks: 2 (a choice and a submit)")
    assert per_image <= 0.3


def test_bad_grid_sizes_and_kinds_name_the_fix():
    with pytest.raises(Exception, match="grid"):
        G.render_grid_config("filter", 40)
    with pytest.raises(Exception, match="filter"):
        G.get_grid("translation")
