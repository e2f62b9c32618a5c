"""Synthetic labelled portrait sets (cartoon faces drawn with Pillow — not real people): for tests and the
demo, so the social-bias audit can be tried without a real portrait dataset."""
from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from ....bounds import SEED, Bound
from ....files import refuse_existing, write_atomic

#: Drawn portraits per race × gender cell of a synthetic set (a demo: thousands at most).
SYNTHETIC_PER_CELL = Bound(1, 10_000)


def make_synthetic_portraits(directory, *, per_cell: int = 2, races=("White", "Black", "East_Asian", "Indian"),
                             genders=("Male", "Female"), seed: int = 0, size: int = 32,
                             overwrite: bool = False) -> Path:
    """Write a tiny **synthetic** labelled portrait set (cartoon faces drawn with Pillow — not real people,
    for tests and the demo only) and its FairFace-layout table ``labels.csv``; returns the table's path.

    Each image carries a marker pixel at (0, 0): red = 255 for Female, 0 for Male; green = 20 × the race's
    index in ``races`` — so planted-bias test embedders can read the label back. Colours are random, never
    tied to the race label. A file of the set that exists in ``directory`` already is refused (before anything
    is drawn) unless ``overwrite``.
    """
    per_cell, seed = SYNTHETIC_PER_CELL.check(per_cell, "per_cell"), SEED.check(seed, "seed")
    out = Path(directory)
    names = [_name(race, gender, i) for race in races for gender in genders for i in range(per_cell)]
    for name in ("labels.csv", *names):
        refuse_existing(out / name, overwrite=overwrite)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    rows = []
    for ri, race in enumerate(races):
        for gender in genders:
            for i in range(per_cell):
                bg = tuple(int(x) for x in rng.integers(0, 256, 3))
                im = Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).convert("RGB")
                d = ImageDraw.Draw(im)
                d.rectangle([0, 0, size, size // 4], fill=bg)
                face = tuple(int(x) for x in rng.integers(60, 256, 3))
                d.ellipse([size // 5, size // 5, size - size // 5, size - size // 8], fill=face)
                d.point([(size // 3, size // 2), (2 * size // 3, size // 2)], fill=(0, 0, 0))
                im.putpixel((0, 0), (255 if gender == "Female" else 0, 20 * ri, 0))
                name = _name(race, gender, i)
                buf = io.BytesIO()
                im.save(buf, format="PNG")
                (out / name).write_bytes(buf.getvalue())
                rows.append({"file": name, "age": "20-29", "gender": gender, "race": race.replace("_", " "),
                             "service_test": "True", "synthetic": "True"})
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    return write_atomic(out / "labels.csv", buf.getvalue())


def _name(race: str, gender: str, i: int) -> str:
    return f"{race.lower()}_{gender.lower()}_{i}.png"


def marker_labels(img) -> tuple[str, int]:
    """(gender, race index) read back from a synthetic portrait's marker pixel."""
    r, g, _ = img.convert("RGB").getpixel((0, 0))
    return ("Female" if r >= 128 else "Male"), int(round(g / 20))
