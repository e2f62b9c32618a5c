"""Dedup quality on real photographs against the peers, each peer in its own virtualenv, in one run
(docs/dedup_calibration.md).

Four sets, every tool on each, in the same run (the load average is printed beside the results):

- ``transforms``: the 20 photographs of ``tests/fakes/real_photos.py`` with 9 planted copies each (JPEG
  q30, resize 50 %, crop 5 % and 10 % per side, rotate 3 degrees, mirror, greyscale, watermark text, 10 %
  white border): 200 images, 900 true pairs;
- ``harder``: the same 20 photographs with 7 harder copies each (``tests/fakes/lookalikes.py``: upside
  down, turned 180 degrees, 25 % crop, rotate 10 degrees, perspective, inside a screenshot frame shared by
  all, a quarter of a 2x2 collage);
- ``lookalikes``: the ``transforms`` set beside 148 different images that resemble each other (100 LFW
  faces, 4x4 tiles of three texture photographs that share no pixel): precision here counts what the
  look-alikes cost;
- ``realistic``: ``--realistic`` (16,000) crops of the photographs at random places and sizes, no copy
  among them: every pair of crops that share no pixel and are grouped is false (pairs that overlap are
  not counted either way).

Printed per set and tool: pair recall, precision, false pairs, the largest cluster that holds a false
pair, and per transform the share of photographs whose copy is grouped with its original; then each
"done when" check. Tools:

- cultura: ``cultura images dedup --scope global`` (the CLI) with the default methods (sha256, pHash
  views, dHash), every candidate pair confirmed (curate/confirm.py); its pairs are those inside its
  clusters, its clusters as stored;
- imagededup: ``PHash`` and ``DHash`` ``find_duplicates`` (``max_distance_threshold=10``, its default) run
  by ``--imagededup-python``; its pairs as reported, its clusters the connected components of those;
- fastdup: ``fastdup.create(...).run()`` and its ``connected_components``, run by ``--fastdup-python``.

``--peers-python`` names one python for both peers. A peer whose python is not given is skipped (printed).

    make peers   # .venv-imagededup, .venv-fastdup
    python perf/bench_dedup_quality.py --imagededup-python .venv-imagededup/bin/python \\
        --fastdup-python .venv-fastdup/bin/python [--realistic 16000] [--sets transforms,harder] [--json]
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SETS = ("transforms", "harder", "lookalikes", "realistic")

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

IMAGEDEDUP_SCRIPT = r"""
import json, logging, sys
from imagededup import methods
logging.getLogger("imagededup").setLevel(logging.ERROR)
dups = getattr(methods, sys.argv[2])(verbose=False).find_duplicates(image_dir=sys.argv[1])
print(json.dumps(sorted({tuple(sorted((a, b))) for a, bs in dups.items() for b in bs})))
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


def pairs_of(groups) -> set[tuple[str, str]]:
    return {p for g in groups for p in itertools.combinations(sorted(g), 2)}


# ---------------------------------------------------------------------------------------------- sets
def build_sets(names, realistic: int, photos_n: int = 20, faces_n: int = 100) -> dict[str, dict]:
    """``{set: {"images": {key: bytes}, "owner": {key: photo}, "kind": {key: kind}, "ambiguous": fn}}``;
    two keys are a true pair when their owners are equal; ``ambiguous(a, b)``: a pair counted neither way."""
    from tests.fakes import lookalikes, real_photos

    photos = dict(sorted(real_photos.photos().items())[:photos_n])
    out = {}

    def planted_set(copies_of):
        images, owner, kind = {}, {}, {}
        for k, (name, im) in enumerate(sorted(photos.items())):
            for t, data in copies_of(im, k).items():
                key = f"{name}__{t}.jpg"
                images[key], owner[key], kind[key] = data, name, t
        return images, owner, kind

    if "transforms" in names or "lookalikes" in names:
        base = planted_set(lambda im, k: real_photos.copies(im))
        out["transforms"] = {"images": base[0], "owner": base[1], "kind": base[2],
                             "transforms": real_photos.TRANSFORMS}
    if "harder" in names:
        images, owner, kind = planted_set(
            lambda im, k: {"original": real_photos.encode(im), **lookalikes.harder_copies(im, k)})
        out["harder"] = {"images": images, "owner": owner, "kind": kind, "transforms": lookalikes.HARDER}
    if "lookalikes" in names:
        images, owner, kind = dict(out["transforms"]["images"]), dict(out["transforms"]["owner"]), \
            dict(out["transforms"]["kind"])
        for key, data in {**lookalikes.faces(faces_n), **lookalikes.tiles()}.items():
            images[f"{key}.jpg"], owner[f"{key}.jpg"], kind[f"{key}.jpg"] = data, key, "lookalike"
        out["lookalikes"] = {"images": images, "owner": owner, "kind": kind, "transforms": real_photos.TRANSFORMS}
    if "transforms" not in names:
        out.pop("transforms", None)
    if "realistic" in names:
        crops, window = lookalikes.crops(photos, realistic)
        images = {f"{k}.jpg": v for k, v in crops.items()}
        win = {f"{k}.jpg": v for k, v in window.items()}
        out["realistic"] = {"images": images, "owner": {k: k for k in images}, "kind": {k: "crop" for k in images},
                            "transforms": [],
                            "ambiguous": lambda a, b: lookalikes.share_pixels(win[a], win[b])}
    return out


def score(s: dict, pairs: set, groups) -> dict:
    """Recall, precision, false pairs, largest cluster holding a false pair, per-transform share."""
    owner, kind = s["owner"], s["kind"]
    ambiguous = s.get("ambiguous", lambda a, b: False)
    false = {(a, b) for a, b in pairs if owner[a] != owner[b] and not ambiguous(a, b)}
    hit = {(a, b) for a, b in pairs if owner[a] == owner[b]}
    by_owner: dict[str, int] = {}
    for k in owner:
        by_owner[owner[k]] = by_owner.get(owner[k], 0) + 1
    true_pairs = sum(c * (c - 1) // 2 for c in by_owner.values())
    counted = len(hit) + len(false)
    worst = 0
    for g in groups:
        g = sorted(g)
        if len(g) > worst and any((a, b) in false for a, b in itertools.combinations(g, 2)):
            worst = len(g)
    original = {owner[k]: k for k in owner if kind[k] == "original"}
    per = {}
    for t in s["transforms"]:
        keys = [k for k in owner if kind[k] == t]
        per[t] = sum(tuple(sorted((original[owner[k]], k))) in pairs for k in keys) / max(len(keys), 1)
    return {"recall": len(hit) / true_pairs if true_pairs else None,
            "precision": (len(hit) / counted if counted else 1.0) if true_pairs else None, "false_pairs": len(false),
            "largest_false_cluster": worst, "pairs": len(pairs), "per_transform": per}


# ---------------------------------------------------------------------------------------------- tools
def run_cultura(images: dict[str, bytes], tmp: Path):
    from click.testing import CliRunner

    from cultura.cli import cli
    from cultura.curate.importers import store_image
    from cultura.project import init_project

    p = init_project(tmp, countries=["US", "JP"])
    key_of = {store_image(p, data): key for key, data in images.items()}
    r = CliRunner().invoke(cli, ["--project", str(p.root), "images", "dedup", "--scope", "global", "--json"])
    if r.exit_code:
        raise SystemExit(r.output)
    members: dict[int, set] = {}
    for cid, sha in p.db.execute("SELECT m.cluster_id, m.sha256 FROM dup_members m JOIN dup_clusters c "
                                 "ON c.id = m.cluster_id WHERE c.status = 'open'"):
        members.setdefault(cid, set()).add(key_of[sha])
    groups = list(members.values())
    return pairs_of(groups), groups


def run_imagededup(folder: Path, method: str, python: str):
    out = subprocess.run([python, "-c", IMAGEDEDUP_SCRIPT, str(folder), method], capture_output=True, text=True,
                         timeout=3600)
    if out.returncode:
        return None, (out.stderr.strip().splitlines() or ["failed"])[-1]
    pairs = {tuple(p) for p in json.loads(out.stdout.strip().splitlines()[-1])}
    return (pairs, components(pairs, sorted({k for p in pairs for k in p}))), None


def run_fastdup(folder: Path, python: str, tmp: Path):
    out = subprocess.run([python, "-c", FASTDUP_SCRIPT, str(folder), str(tmp)], capture_output=True, text=True,
                         timeout=3600)
    if out.returncode:
        return None, (out.stderr.strip().splitlines() or ["failed"])[-1]
    groups = [set(g) for g in json.loads(out.stdout.strip().splitlines()[-1])]
    return (pairs_of(groups), groups), None


def run_set(s: dict, tmp: Path, args) -> dict:
    folder = tmp / "images"
    folder.mkdir(parents=True)
    for key, data in s["images"].items():
        (folder / key).write_bytes(data)
    results = {}
    t = time.perf_counter()
    pairs, groups = run_cultura(s["images"], tmp / "project")
    results["cultura"] = dict(score(s, pairs, groups), seconds=round(time.perf_counter() - t, 1))
    for m in ("PHash", "DHash"):
        if args.imagededup_python:
            t = time.perf_counter()
            got, err = run_imagededup(folder, m, args.imagededup_python)
            results[f"imagededup {m}"] = dict(score(s, *got), seconds=round(time.perf_counter() - t, 1)) \
                if got else {"error": err}
    if args.fastdup_python:
        t = time.perf_counter()
        got, err = run_fastdup(folder, args.fastdup_python, tmp / "fastdup")
        results["fastdup"] = dict(score(s, *got), seconds=round(time.perf_counter() - t, 1)) if got else {"error": err}
    results["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return results


# ---------------------------------------------------------------------------------------------- report
def checks(results: dict, realistic: int) -> list[tuple[str, bool | None, str]]:
    """The "done when" checks: ``(what, met or None when not measured, the numbers)``."""
    out = []

    def peers(name):
        return {k: v for k, v in results.get(name, {}).items() if k not in ("cultura", "load_average")
                and "error" not in v}

    if "lookalikes" in results:
        c, p = results["lookalikes"]["cultura"], peers("lookalikes")
        best = min((v["false_pairs"] for v in p.values()), default=None)
        out.append(("look-alikes: false pairs <= best peer's", None if best is None else c["false_pairs"] <= best,
                    f"cultura {c['false_pairs']}, best peer {best}"))
        out.append(("look-alikes: precision >= 0.99", c["precision"] >= 0.99, f"{c['precision']:.3f}"))
    if "transforms" in results:
        c = results["transforms"]["cultura"]
        out.append(("transforms: recall >= 0.95", c["recall"] >= 0.95, f"{c['recall']:.3f}"))
    if "harder" in results:
        c, p = results["harder"]["cultura"], peers("harder")
        best = max((v["recall"] for v in p.values()), default=None)
        out.append(("harder: recall beats every peer", None if best is None else c["recall"] > best,
                    f"cultura {c['recall']:.3f}, best peer {best if best is None else round(best, 3)}"))
    if "realistic" in results:
        c = results["realistic"]["cultura"]
        ok = c["largest_false_cluster"] <= 5 if realistic >= 16_000 else None
        out.append((f"realistic ({realistic} images): largest false cluster <= 5 (at 16k)", ok,
                    str(c["largest_false_cluster"])))
    return out


def print_report(results: dict, realistic: int) -> None:
    for name, res in results.items():
        tools = {k: v for k, v in res.items() if k != "load_average"}
        cols = next((list(v["per_transform"]) for v in tools.values() if "per_transform" in v), [])
        print(f"\n== {name}   (load average {res['load_average']})")
        print(f"{'tool':18s} {'recall':>7s} {'prec.':>7s} {'false':>7s} {'largest':>7s} {'secs':>6s}  "
              + " ".join(f"{c[:11]:>11s}" for c in cols))
        for tool, r in tools.items():
            if "error" in r:
                print(f"{tool:18s} error: {r['error']}")
                continue
            rec, prec = ("-" if r[k] is None else f"{r[k]:.3f}" for k in ("recall", "precision"))
            print(f"{tool:18s} {rec:>7s} {prec:>7s} {r['false_pairs']:7d} {r['largest_false_cluster']:7d} "
                  f"{r['seconds']:6.1f}  " + " ".join(f"{r['per_transform'][c]:11.2f}" for c in cols))
    print("\ndone when:")
    for what, ok, numbers in checks(results, realistic):
        print(f"  [{'met' if ok else 'NOT met' if ok is False else 'not measured'}] {what}: {numbers}")
    print(f"load average at the end: {tuple(round(x, 2) for x in os.getloadavg())}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers-python", help="python of a venv with both peers (imagededup and fastdup)")
    ap.add_argument("--imagededup-python", help="python of a venv with imagededup (skipped if not given)")
    ap.add_argument("--fastdup-python", help="python of a venv with fastdup (skipped if not given)")
    ap.add_argument("--realistic", type=int, default=16_000, help="images of the realistic set (default 16000)")
    ap.add_argument("--photos", type=int, default=20, help="photographs of the planted sets (default all 20)")
    ap.add_argument("--faces", type=int, default=100, help="faces among the look-alikes (default all 100)")
    ap.add_argument("--sets", default=",".join(SETS), help=f"comma-separated subset of {','.join(SETS)}")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    args.imagededup_python = args.imagededup_python or args.peers_python
    args.fastdup_python = args.fastdup_python or args.peers_python
    names = [n.strip() for n in args.sets.split(",") if n.strip()]
    if unknown := set(names) - set(SETS):
        ap.error(f"unknown sets {sorted(unknown)}; choose from {', '.join(SETS)}")
    sys.path.insert(0, str(REPO))  # tests.fakes, from a checkout
    sets = build_sets(names, args.realistic, args.photos, args.faces)
    results = {}
    with tempfile.TemporaryDirectory() as d:
        for name in names:
            results[name] = run_set(sets[name], Path(d) / name, args)
    if args.json:
        print(json.dumps({"results": results, "checks": checks(results, args.realistic)}, indent=1))
    else:
        print_report(results, args.realistic)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
