"""A benchmark name the name check lets through is one ``datasets.load_dataset`` loads as a config after
``cultura export`` (real photographs), and any allowed name — every printable ASCII character the check allows,
LaTeX's specials included, and other scripts — compiles in the report's LaTeX tables with pdflatex; a name
the check refuses (a BEL) would not reach them, and an old one that did is written as its code point."""
from __future__ import annotations

import json
import shutil
import string
import subprocess

import pytest
from click.testing import CliRunner

from cultura.cli import cli
from cultura.evaluate import latex
from cultura.names import BadName, benchmark_name
from tests.fakes.world import add_image, make_world
from tests.unit.benchmark.test_export_hub import _photos

ODD = "Café & co. 100% #1 {x} ~y_z $ ^ 'q' \"r\" (s) [t] =u +v !x ,; déjà"


def test_an_allowed_benchmark_name_loads_as_a_config(project, tmp_path):
    import datasets

    w = make_world(project, per_cell=0)
    pics = iter(_photos(3 * 4 * 2))
    for (concept, cc) in w["images"]:
        for rank in (1, 2):
            add_image(project, w["concepts"][concept], cc, next(pics), rank=rank)
    base = ["--project", str(project.root)]
    r = CliRunner().invoke(cli, [*base, "build", "association", "--name", ODD, "--allow-unreviewed",
                                 "--per-pair", "2", "--json"])
    assert r.exit_code == 0, r.output
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, [*base, "export", str(out), "--json"])
    assert r.exit_code == 0, r.output
    assert ODD in json.loads(r.stdout)["configs"]
    ds = datasets.load_dataset(str(out), ODD, split="test", cache_dir=str(tmp_path / "hf"))
    assert ds.num_rows == 24 and set(ds["benchmark"]) == {ODD}


def _allowed_names() -> list[str]:
    names = []
    for ch in string.printable.strip():
        try:
            names.append(benchmark_name(f"b{ch}{ch}x"))
        except BadName:
            continue
    return names + ["日本の米 2", "ข้าว", "خبز", "हिन्दी", "Ελληνικά", "👩‍🔬 lab"]


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_every_allowed_name_compiles_in_the_latex_tables(tmp_path):
    names = _allowed_names()
    assert len(names) > 80
    rows = [{"benchmark": n, "model": n, "SP": 1.25} for n in names]
    old = [{"benchmark": "bell\x07 from an old project", "model": "m", "SP": 0.5}]
    (tmp_path / "names.tex").write_text(latex.from_rows(rows + old, caption="Names"), encoding="utf-8")
    (tmp_path / "all-tables.tex").write_text(latex.document(["names"]), encoding="utf-8")
    res = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "all-tables.tex"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    log = (tmp_path / "all-tables.log").read_text(encoding="utf-8", errors="replace")
    assert res.returncode == 0, log[-3000:]
    assert "\x07" not in (tmp_path / "names.tex").read_text(encoding="utf-8")
