"""Dedup quality on real photographs against the peers, in one run (docs/dedup_calibration.md).

The 20 photographs of ``tests/fakes/real_photos.py`` with 9 planted copies each (JPEG q30, resize 50 %,
crop 5 % and 10 % per side, rotate 3 degrees, mirror, greyscale, watermark text, 10 % white border): 200
images, 900 true pairs. Each tool groups them with its default thresholds; a group is a connected component
of the pairs the tool reports (cultura's clusters are exactly that). Printed per tool: pair recall,
precision, false pairs, and per transform the share of photographs whose copy is grouped with its original.

- cultura: ``cultura images dedup`` (the CLI) with the default methods (sha256, pHash views, dHash);
- imagededup 0.3.3: ``PHash`` and ``DHash`` ``find_duplicates`` (``max_distance_threshold=10``, its default);
- fastdup: run by ``--peers-python`` (a separate virtual environment, since fastdup pins its own
  dependencies): ``fastdup.create(...).run()`` and its ``connected_components``.

    python perf/bench_dedup_quality.py [--peers-python /path/to/peers-venv/bin/python] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

FASTDUP_SCRIPT = r"""
import json, sys, fastdup
src, work = sys.argv[1], sys.argv[2]
fd = fastdup.create(work_dir=work, input_dir=src)
fd.run(overwrite=True, verbose=False)
cc = fd.connected_components()
cc = cc[0] if isinstance(cc, tuple) else cc
col = "filename" if "filename" in cc.columns else "img_filename"
groups = {}
for name, comp in zip(cc[col], cc["component_id"]):
    groups.setdefault(int(comp), []).append(str(name).rsplit("/", 1)[-1])
print(json.dumps([g for g in groups.values() if len(g) > 1]))
"""


def components(pairs, keys):
    """Connected components (size >= 2) of ``pairs`` over ``keys``."""
    parent = {k: k for k in keys}

    def find(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for a, b in pairs:
        parent[find(a)] = find(b)
    groups = {}
    for k in keys:
        groups.setdefault(find(k), set()).add(k)
    return [g for g in groups.values() if len(g) > 1]


def run_cultura(planted, tmp: Path):
    from click.testing import CliRunner

    from cultura.cli import cli
    from cultura.project import init_project
    from tests.unit.curate.test_dedup import Builder, clusters

    p = init_project(tmp / "project", countries=["US", "JP"])
    b = Builder(p)
    key_of = {}
    for (name, kind), data in sorted(planted.items()):
        key_of[b.add(data, ("photo", "US"))] = f"{name}__{kind}.jpg"
    r = CliRunner().invoke(cli, ["--project", str(p.root), "images", "dedup", "--json"])
    if r.exit_code:
        raise SystemExit(r.output)
    groups = [{key_of[s] for s in m} for m in clusters(p, "phash")] + \
             [{key_of[s] for s in m} for m in clusters(p, "dhash")]
    return components([(a, b) for g in groups for a in g for b in g if a < b], list(key_of.values()))


def run_imagededup(folder: Path, method: str):
    import logging

    from imagededup import methods

    logging.getLogger("imagededup").setLevel(logging.ERROR)
    hasher = getattr(methods, method)(verbose=False)
    dups = hasher.find_duplicates(image_dir=str(folder))  # default max_distance_threshold=10
    return components([(a, b) for a, bs in dups.items() for b in bs], list(dups))


def run_fastdup(folder: Path, python: str, tmp: Path):
    out = subprocess.run([python, "-c", FASTDUP_SCRIPT, str(folder), str(tmp / "fastdup")], capture_output=True,
                         text=True, timeout=1800)
    if out.returncode:
        return None, out.stderr.strip().splitlines()[-1:] or ["failed"]
    return [set(g) for g in json.loads(out.stdout.strip().splitlines()[-1])], None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers-python", help="python of a venv with fastdup installed (skipped if not given)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))  # tests.fakes, from a checkout
    from tests.fakes import real_photos

    planted = real_photos.planted()
    owner = {f"{n}__{k}.jpg": n for n, k in planted}
    kind = {f"{n}__{k}.jpg": k for n, k in planted}
    results = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        folder = tmp / "images"
        folder.mkdir()
        for (n, k), data in planted.items():
            (folder / f"{n}__{k}.jpg").write_bytes(data)
        results["cultura (pHash views + dHash)"] = real_photos.pair_scores(owner, kind, run_cultura(planted, tmp))
        for m in ("PHash", "DHash"):
            results[f"imagededup {m}"] = real_photos.pair_scores(owner, kind, run_imagededup(folder, m))
        if args.peers_python:
            groups, err = run_fastdup(folder, args.peers_python, tmp)
            results["fastdup"] = real_photos.pair_scores(owner, kind, groups) if groups is not None else \
                {"error": err}
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    cols = real_photos.TRANSFORMS
    print(f"{'tool':32s} {'recall':>7s} {'prec.':>7s} {'false':>6s}  " + " ".join(f"{c[:9]:>9s}" for c in cols))
    for tool, r in results.items():
        if "error" in r:
            print(f"{tool:32s} error: {r['error']}")
            continue
        print(f"{tool:32s} {r['recall']:7.3f} {r['precision']:7.3f} {r['false_pairs']:6d}  "
              + " ".join(f"{r['per_transform'][c]:9.2f}" for c in cols))
    print(f"load average: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
