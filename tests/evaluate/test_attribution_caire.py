"""CAIRe (seed 004) in the paper's conventions: a real encoder is required, threshold ≥ t with P/R/F1,
per-concept Pearson, the judge scores all five digits, culture labels, baselines, KB dump, dataset imports."""
from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from tests.fakes.world import add_image


def _photo(name: str) -> bytes:
    """A real photograph from scikit-image as PNG bytes."""
    import skimage.data

    arr = getattr(skimage.data, name)()
    if arr.ndim == 2:
        arr = np.stack([arr] * 3, axis=-1)
    buf = io.BytesIO()
    Image.fromarray(arr[..., :3]).save(buf, format="PNG")
    return buf.getvalue()


PHOTOS = {"sushi": "coffee", "taco": "chelsea", "ramen": "astronaut", "pad thai": "rocket"}


@pytest.fixture
def photo_world(project, tmp_path):
    """The project holds byte-identical copies of two KB photographs; the KB has four entities."""
    concept = project.db["concepts"].insert({"name": "food", "source": "manual", "status": "active",
                                             "created_at": "2026-01-01"}).last_pk
    kbdir = tmp_path / "kb"
    kbdir.mkdir()
    rows = []
    for lemma, photo in PHOTOS.items():
        data = _photo(photo)
        (kbdir / f"{photo}.png").write_bytes(data)
        rows.append({"id": f"e:{lemma}", "lemma": lemma.title(), "text": f"{lemma.title()} is a dish.",
                     "images": [f"{photo}.png"]})
    (kbdir / "kb.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    shas = {"sushi": add_image(project, concept, "JP", _photo("coffee")),
            "taco": add_image(project, concept, "US", _photo("chelsea"))}
    return project, kbdir / "kb.jsonl", shas


def _cli(project, *args):
    from cultura.cli import cli

    return CliRunner().invoke(cli, ["--project", str(project.root), *args], catch_exceptions=False)


def test_attribution_run_requires_an_encoder(photo_world):
    """There is no fake default: without --encoder (or [evaluate.attribution] encoder) the command stops."""
    project, kbfile, _ = photo_world
    assert _cli(project, "kb", "import", str(kbfile)).exit_code == 0
    r = _cli(project, "attribution", "run", "--judge", "stub")
    assert r.exit_code != 0
    assert "--encoder" in r.output and "evaluate.attribution" in r.output
    assert project.db.execute("SELECT count(*) FROM attribution_scores").fetchone()[0] == 0
    from cultura.errors import CulturaError
    from cultura.evaluate.suites.attribution import run_attribution

    with pytest.raises(CulturaError, match="embedder="):
        run_attribution(project, None, "stub")


def test_identical_image_links_to_its_own_entity(photo_world):
    """A query image byte-identical to the KB's Sushi photo is linked to Sushi (identical bytes → identical
    embedding), through the CLI, with a real open_clip architecture (random init: identity says so)."""
    project, kbfile, shas = photo_world
    assert _cli(project, "kb", "import", str(kbfile)).exit_code == 0
    r = _cli(project, "attribution", "run", "--encoder", "openclip:cultura-tiny", "--judge", "stub",
             "--k", "1", "--country", "JP", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["encoder"] == "openclip:cultura-tiny/random@seed0" and out["scored"] == 2
    links = {s: json.loads(e)[0][0] for s, e in project.db.execute(
        "SELECT sha256, entities FROM attribution_links").fetchall()}
    assert links == {shas["sushi"]: "e:sushi", shas["taco"]: "e:taco"}
    ents = dict(project.db.execute("SELECT sha256, entity_id FROM attribution_scores").fetchall())
    assert ents == {shas["sushi"]: "e:sushi", shas["taco"]: "e:taco"}
