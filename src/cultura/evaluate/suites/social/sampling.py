"""A balanced FairFace-style sample of a portrait set: equal cells per gender × race, seeded.

Seed 003 App. A.3 evaluates on a balanced FairFace validation subset, N_{r,g} ≈ 782 portraits per race–gender
cell (7 races × 2 genders × 782 = 10 954). :func:`sample_balanced` draws such a subset from any imported set
and stores it as a new portrait set (same images, labels and attributes; ``attributes.sampled_from`` names the
source), so ``evaluate run --suite social --option social.datasets=NAME`` audits exactly that sample.

The draw is reproducible: within each cell the portraits are ordered by their source key and
``numpy.random.default_rng(seed).choice`` picks ``per_cell`` of them without replacement. A rerun with the same
parameters changes nothing; other parameters for an existing name are refused unless ``overwrite=True``.
"""
from __future__ import annotations

import json
from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np

from ....db import now, transaction
from ....bounds import COUNT, SEED
from ....errors import CulturaError, unknown
from .data import load_portraits, portrait_sets

if TYPE_CHECKING:
    from ....project import Project


def sample_balanced(project: Project, dataset: str, into: str, *, per_cell: int | None = None, seed: int = 0,
                    races=None, genders=None, overwrite: bool = False) -> dict:
    """Store a balanced sample of ``dataset`` as the portrait set ``into``; returns
    ``{"dataset", "from", "per_cell", "cells", "n", "seed", "status"}`` (status: created | unchanged)."""
    per_cell, seed = COUNT.check_optional(per_cell, "per_cell"), SEED.check(seed, "seed")
    sets = {s["dataset"]: s for s in portrait_sets(project)}
    if dataset not in sets:
        raise unknown("portrait set", dataset, sets, hint="Import one with 'cultura social import-portraits'.")
    if not into or into == dataset:
        raise CulturaError("Give the sample a new name (into=…), different from the set it is drawn from.")
    rows = [r for r in load_portraits(project, dataset) if r["gender"] and r["race"]]
    if races:
        rows = [r for r in rows if r["race"] in set(races)]
    if genders:
        rows = [r for r in rows if r["gender"] in set(genders)]
    cells: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        cells[(r["race"], r["gender"])].append(r)
    if not cells:
        raise CulturaError(f"Portrait set {dataset!r} has no portrait with both a gender and a race label"
                           + (" among the races/genders asked for." if races or genders else "."))
    sizes = {f"{r}/{g}": len(v) for (r, g), v in sorted(cells.items())}
    smallest = min(len(v) for v in cells.values())
    n = smallest if per_cell is None else int(per_cell)
    if n < 1:
        raise CulturaError(f"per_cell must be at least 1, got {per_cell!r}.")
    short = {k: v for k, v in sizes.items() if v < n}
    if short:
        raise CulturaError(f"Cannot draw {n} portraits per cell from {dataset!r}: "
                           + ", ".join(f"{k} has {v}" for k, v in short.items())
                           + f". Use per_cell ≤ {smallest} or leave it out (the smallest cell).")
    params = {"from": dataset, "per_cell": n, "seed": int(seed), "races": sorted(races) if races else None,
              "genders": sorted(genders) if genders else None}
    db = project.db
    prev = db.execute("SELECT source FROM portrait_sets WHERE dataset = ?", [into]).fetchone()
    if prev is not None:
        try:
            old = json.loads(prev[0] or "{}")
        except ValueError:
            old = {}
        if old.get("sample") == params:
            return {"dataset": into, **params, "cells": len(cells), "n": n * len(cells), "status": "unchanged"}
        if not overwrite:
            raise CulturaError(f"Portrait set {into!r} already exists (with other contents); choose another name "
                               "or pass overwrite=True.")
    rng = np.random.default_rng(seed)
    chosen = []
    for key in sorted(cells):
        members = sorted(cells[key], key=lambda r: r["source_key"])
        idx = np.sort(rng.choice(len(members), size=n, replace=False))
        chosen += [members[i] for i in idx]
    ts = now()
    src = sets[dataset]
    with transaction(db):
        db.execute("DELETE FROM portraits WHERE dataset = ?", [into])
        db["portraits"].insert_all([{
            "dataset": into, "source_key": r["source_key"], "sha256": r["sha256"], "gender": r["gender"],
            "race": r["race"], "attributes": json.dumps({**r["attributes"], "sampled_from": dataset},
                                                        ensure_ascii=False, default=str),
            "status": "ok", "reason": None, "created_at": ts} for r in chosen])
        db["portrait_sets"].upsert({"dataset": into, "layout": src["layout"],
                                    "source": json.dumps({"sample": params}), "images_dir": src["images_dir"],
                                    "synthetic": src["synthetic"], "n_ok": len(chosen), "n_failed": 0,
                                    "created_at": ts, "updated_at": ts}, pk="dataset")
    return {"dataset": into, **params, "cells": len(cells), "n": len(chosen), "cell_sizes": sizes,
            "status": "created"}
