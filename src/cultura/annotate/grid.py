"""Grid tasks: several images of one concept × country (filter) or one culture (relevance) on one Label Studio
page, answered once. A grid answer becomes exactly the per-image results a one-image task would have given, so
parsing, agreement, aggregation, adjudication and the pool see the same labels whatever the task's shape.

The config is a CSS grid of ``size`` cells, each an ``<Image>`` with its own ``<Choices>`` (Label Studio 1.23
keeps one result per control, named by cell): for filter one "Remove" choice with a hotkey per cell (keys
``1``…``9``, ``0``, then ``q``…``m``) and the seed-000 reasons shown once an image is marked; an unmarked image is
kept. For relevance a 1–5 choice per cell with the seed-004 rubric on screen. A grid with fewer images than
cells shows a blank in the rest; their answers are ignored.

Task data: ``img0``… (image URLs), ``key0``… (the items' stable keys, the link back to ``annotation_items``),
the shared header field (``concept`` or ``culture_name``) and ``item_key`` = the grid's own stable key.

>>> res = grid_result("filter", ["keep", "remove", "keep"])
>>> [r["from_name"] for r in res]
['rm1']
>>> {k: v["label"] for k, v in per_image_labels("filter", res, ["filter:a", "filter:b", "filter:c"]).items()}
{'filter:a': 'keep', 'filter:b': 'remove', 'filter:c': 'keep'}
"""
from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

from ..bounds import Bound
from ..errors import unknown
from ..templates import render_template
from .items import image_url
from .kinds import FILTER_GUIDELINE, FILTER_REASONS, _context, get_kind, validate_config

#: one key per cell, in reading order (Ctrl+Enter submits; these never collide with Label Studio's own keys)
KEYS = "1234567890qwertyuiopasdfghjklzxcvbnm"
#: images per grid task
SIZE = Bound(2, 24)
#: a transparent 1×1 GIF for the cells a short grid leaves empty
BLANK = "data:image/gif;base64,R0lGODlhAQABAIAAAAAAACH5BAEKAAEALAAAAAABAAEAAAICTAEAOw=="


@dataclass(frozen=True)
class GridSpec:
    """How a kind is laid out as a grid: its template, the task field shared by the grid (``header``, taken
    from the payload), what groups items into one grid, and the two directions between one cell's
    controls and a one-image result."""

    kind: str
    template: str
    header: str
    group: Callable[[dict], tuple]
    cell_to_item: Callable[[int, list], list]     # (cell, grid result) -> the one-image result of that cell
    item_to_cell: Callable[[int, str | None], list]   # (cell, label) -> that cell's part of a grid result


def _ch(from_name: str, to_name: str, choices: list[str]) -> dict:
    return {"from_name": from_name, "to_name": to_name, "type": "choices", "value": {"choices": choices}}


def _picked(result: list, name: str) -> list[str]:
    for r in result or []:
        if r.get("from_name") == name and "choices" in (r.get("value") or {}):
            return list(r["value"]["choices"])
    return []


def _filter_cell(i: int, result: list) -> list:
    # an unmarked image is kept: the one-image task's "Keep"
    if not any(c.lower() == "remove" for c in _picked(result, f"rm{i}")):
        return [_ch("decision", "image", ["Keep"])]
    reasons = _picked(result, f"reason{i}")
    return [_ch("decision", "image", ["Remove"])] + ([_ch("reason", "image", reasons)] if reasons else [])


def _filter_answer(i: int, label: str | None) -> list:
    if label is None or label == "keep":
        return []
    why = label.partition(":")[2]
    return [_ch(f"rm{i}", f"img{i}", ["Remove"])] + ([_ch(f"reason{i}", f"img{i}", why.split(","))] if why else [])


def _relevance_cell(i: int, result: list) -> list:
    picked = _picked(result, f"rel{i}")
    return [_ch("relevance", "image", picked)] if picked else []


def _relevance_answer(i: int, label: str | None) -> list:
    return [] if label is None else [_ch(f"rel{i}", f"img{i}", [str(int(float(label)))])]


_GRIDS: dict[str, GridSpec] = {}


def register_grid(spec: GridSpec) -> GridSpec:
    get_kind(spec.kind)   # a grid lays out a registered kind
    _GRIDS[spec.kind] = spec
    return spec


def grid_kinds() -> list[str]:
    """The kinds a campaign can push as grid tasks."""
    return list(_GRIDS)


def get_grid(kind: str) -> GridSpec:
    if kind not in _GRIDS:
        raise unknown("grid kind (a kind that can be pushed as grid tasks)", kind, _GRIDS)
    return _GRIDS[kind]


register_grid(GridSpec("filter", "filter-grid.xml.j2", "concept",
                       lambda p: (p.get("concept") or "", p.get("country") or ""), _filter_cell, _filter_answer))
register_grid(GridSpec("relevance", "relevance-grid.xml.j2", "culture_name",
                       lambda p: (p.get("culture_name") or "",), _relevance_cell, _relevance_answer))


# ------------------------------------------------------------------------------------------ the config

def columns(size: int) -> int:
    """Columns of a grid of ``size`` cells: about square, at most 6 wide."""
    return min(6, math.ceil(math.sqrt(size)))


def render_grid_config(kind: str, size: int, *, adjudication: bool = False, validate: bool = True) -> str:
    """The Label Studio config of a ``size``-cell grid of ``kind``, validated offline like every config."""
    spec, size = get_grid(kind), SIZE.check(size, "grid")
    cells = [{"i": i, "key": KEYS[i]} for i in range(size)]
    ctx = {**_context(kind), **({"reasons": FILTER_REASONS, "guideline": FILTER_GUIDELINE} if kind == "filter" else {})}
    xml = render_template(f"labelstudio/{spec.template}", adjudication=adjudication, cells=cells,
                          columns=columns(size), **ctx)
    if validate:
        validate_config(xml, example=example_task(kind, size, adjudication=adjudication))
    return xml


def example_task(kind: str, size: int, *, adjudication: bool = False) -> dict:
    spec = get_grid(kind)
    data = {"item_key": f"grid:{kind}:x", spec.header: "x",
            **{f"img{i}": "http://127.0.0.1:1/blobs/00/x.jpg" for i in range(size)},
            **{f"key{i}": f"{kind}:x{i}" for i in range(size)}}
    return {**data, **({"earlier": "a: x"} if adjudication else {})}


# ------------------------------------------------------------------------------------------ the tasks

def _payload(item: dict) -> dict:
    p = item.get("payload") or {}
    return json.loads(p) if isinstance(p, str) else p


def group_grids(kind: str, items: list[dict], size: int) -> list[list[dict]]:
    """Items in grids of at most ``size``: same group (concept × country, or culture) only, in item-key order,
    each group cut into near-equal grids (25 images with size 24 are two grids of 13 and 12, not 24 and 1)."""
    spec, size = get_grid(kind), SIZE.check(size, "grid")
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for it in items:
        groups[spec.group({**_payload(it), "country": it.get("country")})].append(it)
    out = []
    for g in sorted(groups):
        members = sorted(groups[g], key=lambda it: it["item_key"])
        n = math.ceil(len(members) / size)
        bounds = [round(k * len(members) / n) for k in range(n + 1)]
        out += [members[a:b] for a, b in zip(bounds, bounds[1:])]
    return out


def grid_key(kind: str, members: list[dict]) -> str:
    """The grid's stable key: the same members give the same key."""
    digest = hashlib.sha256("\n".join(sorted(m["item_key"] for m in members)).encode()).hexdigest()[:16]
    return f"grid:{kind}:{digest}"


def grid_task_data(kind: str, members: list[dict], size: int, *, image_base: str | None = None,
                   earlier: dict | None = None) -> dict:
    """The Label Studio data of one grid task. Only what one-image tasks of the same items show (images, the
    shared header) and the items' keys: nothing of other annotators (blindness holds as for one-image tasks);
    ``earlier`` (item key → earlier labels) only for adjudication grids."""
    spec = get_grid(kind)
    if not 1 <= len(members) <= size:
        raise ValueError(f"A grid of {size} cells takes 1 to {size} items, got {len(members)}; "
                         "group them with group_grids.")
    data = {"item_key": grid_key(kind, members), spec.header: _payload(members[0]).get(spec.header, "")}
    for i in range(size):
        m = members[i] if i < len(members) else None
        data[f"img{i}"] = image_url(_payload(m), image_base) if m else BLANK
        data[f"key{i}"] = m["item_key"] if m else ""
    if earlier is not None:
        data["earlier"] = " | ".join(f"{KEYS[i]}: {earlier.get(m['item_key'], '')}" for i, m in enumerate(members))
    return data


# ------------------------------------------------------------------------------------------ the answers

def cell_keys(data: dict) -> list[str]:
    """The item keys of a grid task's cells, in cell order ("" for a blank cell)."""
    return [data[f"key{i}"] for i in range(len(KEYS)) if f"key{i}" in data]


def per_image_results(kind: str, result: list, keys: list[str]) -> dict[str, list]:
    """Item key → the one-image result that item's answer is (blank cells left out)."""
    spec = get_grid(kind)
    return {k: spec.cell_to_item(i, result) for i, k in enumerate(keys) if k}


def per_image_labels(kind: str, result: list, keys: list[str]) -> dict[str, dict]:
    """Item key → the parsed answer (``label``, ``value``, ``details``), through the kind's own parser."""
    parse = get_kind(kind).parse
    return {k: parse(r) for k, r in per_image_results(kind, result, keys).items()}


def grid_result(kind: str, labels: list[str | None]) -> list:
    """The result an annotator submits for a grid whose cells they answer with ``labels`` (in cell order; for
    filter ``"remove:wrong_concept,other"`` adds reasons). Simulation and tests use it."""
    spec = get_grid(kind)
    return [r for i, lab in enumerate(labels) for r in spec.item_to_cell(i, lab)]


def actions(kind: str, result: list) -> int:
    """Key presses a person needs for this grid answer: one per choice picked, plus the submit."""
    return sum(len(r["value"]["choices"]) for r in result if "choices" in (r.get("value") or {})) + 1
