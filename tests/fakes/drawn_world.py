"""A drawn fixture world (formerly the demo's): five concepts × four countries of Pillow drawings served on
127.0.0.1 through a ``urls:`` list, plus a ``folder:`` tree, planted duplicates and broken URLs. The demo now
runs on real photographs through the CLI (:mod:`cultura.cli.demo`); this world stays as a fixture for the exact
counts of tests/curate/test_pipeline.py.

The world: five GlobalRG concepts × four countries (two Western, two not). Images are drawn with Pillow
from fixed seeds (a colour palette per country, a motif per concept), served by a local HTTP server on
127.0.0.1, and found through a ``urls:`` list — plus a ``folder:`` tree, planted duplicates (exact, resized,
re-encoded, cropped), one image found for two countries, and a few broken URLs so failures show up as rows.
Native terms come from a bundled file through ``set-term`` (the path a person correcting the LLM uses).
"""
from __future__ import annotations

import io
import json
import random
from pathlib import Path

from cultura.cli.demo import serve

CONCEPTS = ["bus", "wedding", "breakfast", "house", "kite"]
COUNTRIES = ["US", "DE", "JP", "TH"]
TERMS = {
    "DE": {"bus": "Bus", "wedding": "Hochzeit", "breakfast": "Frühstück", "house": "Haus", "kite": "Drachen"},
    "JP": {"bus": "バス", "wedding": "結婚式", "breakfast": "朝食", "house": "家", "kite": "凧"},
    "TH": {"bus": "รถเมล์", "wedding": "งานแต่งงาน", "breakfast": "อาหารเช้า", "house": "บ้าน", "kite": "ว่าว"},
}
PER_CELL = 4
PALETTES = {"US": [(178, 34, 52), (60, 59, 110)], "DE": [(20, 20, 20), (221, 0, 0)],
            "JP": [(188, 0, 45), (240, 240, 240)], "TH": [(45, 42, 74), (165, 25, 49)]}


def draw(concept: str, country: str, k: int, size=(256, 192)):
    """A deterministic picture for (concept, country, k): country palette, concept motif."""
    from PIL import Image, ImageDraw

    seed = f"{concept}|{country}|{k}"
    rng = random.Random(seed)
    a, b = PALETTES[country]
    img = Image.new("RGB", size, tuple(int(x * 0.3 + 180 * 0.7) for x in a))
    d = ImageDraw.Draw(img)
    w, h = size
    motif = CONCEPTS.index(concept) if concept in CONCEPTS else 0
    for _ in range(6 + motif):
        x0, y0 = rng.randrange(w), rng.randrange(h)
        x1, y1 = x0 + rng.randrange(20, w // 2), y0 + rng.randrange(20, h // 2)
        col = a if rng.random() < 0.5 else b
        col = tuple(min(255, c + rng.randrange(0, 60)) for c in col)
        [d.rectangle, d.ellipse, d.pieslice, d.polygon, d.chord][motif](
            *(([(x0, y0), (x1, y0 + 5), (x0 + 9, y1)],) if motif == 3 else ([x0, y0, x1, y1],)),
            **({"start": rng.randrange(360), "end": rng.randrange(360)} if motif in (2, 4) else {}), fill=col)
    return img


def _jpeg(img, quality=90) -> bytes:
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def draw_world(root: str | Path) -> dict:
    """Write the fixture world under ``root``: ``www/`` (served), ``urls.jsonl``, ``folder/``.
    Returns what was planted (for tests and the demo's printout)."""
    root = Path(root)
    www = root / "www"
    www.mkdir(parents=True, exist_ok=True)
    rows, planted = [], {"exact": [], "near": [], "cross_country": [], "broken": []}
    for concept in CONCEPTS:
        for country in COUNTRIES:
            for k in range(PER_CELL):
                name = f"{concept}-{country}-{k}.jpg"
                (www / name).write_bytes(_jpeg(draw(concept, country, k)))
                rows.append({"url": name, "concept": concept, "country": country, "rank": k + 1,
                             "title": f"{concept} ({country}) #{k}", "source_page": f"https://example.org/{name}"})
    # planted duplicates of bus-JP-0: exact copy at a second URL, resized, re-encoded, lightly cropped
    base = draw("bus", "JP", 0)
    (www / "copy-bus-JP-0.jpg").write_bytes((www / "bus-JP-0.jpg").read_bytes())
    (www / "resized-bus-JP-0.jpg").write_bytes(_jpeg(base.resize((192, 144))))
    (www / "reencoded-bus-JP-0.jpg").write_bytes(_jpeg(base, quality=55))
    (www / "cropped-bus-JP-0.jpg").write_bytes(_jpeg(base.crop((4, 3, 252, 189))))
    for n, name in enumerate(["copy-bus-JP-0.jpg", "resized-bus-JP-0.jpg", "reencoded-bus-JP-0.jpg",
                              "cropped-bus-JP-0.jpg"]):
        rows.append({"url": name, "concept": "bus", "country": "JP", "rank": PER_CELL + 1 + n})
    planted["exact"].append(["bus-JP-0.jpg", "copy-bus-JP-0.jpg"])
    planted["near"].append(["bus-JP-0.jpg", "resized-bus-JP-0.jpg", "reencoded-bus-JP-0.jpg", "cropped-bus-JP-0.jpg"])
    # one image found for two countries: kite-TH-1 also comes back for Japan
    rows.append({"url": "kite-TH-1.jpg", "concept": "kite", "country": "JP", "rank": PER_CELL + 1})
    planted["cross_country"].append("kite-TH-1.jpg")
    # broken URLs: a 404, an HTML page, and an image too small to use
    (www / "page.html").write_text("<html><body>not an image</body></html>")
    from PIL import Image
    Image.new("RGB", (16, 16), (1, 2, 3)).save(www / "tiny.png")
    for name in ("missing.jpg", "page.html", "tiny.png"):
        rows.append({"url": name, "concept": "house", "country": "US", "rank": 90 + len(planted["broken"])})
        planted["broken"].append(name)
    (root / "urls.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    # a folder tree (DIR/<COUNTRY>/<concept>/*.jpg): two extra breakfast pictures from Thailand
    fdir = root / "folder" / "TH" / "breakfast"
    fdir.mkdir(parents=True, exist_ok=True)
    for k in range(PER_CELL, PER_CELL + 2):
        (fdir / f"breakfast-TH-{k}.jpg").write_bytes(_jpeg(draw("breakfast", "TH", k)))
    return {"urls": len(rows), "files": len(list(www.iterdir())), "folder_files": 2, "planted": planted}


def localise_urls(world_dir: Path, host_port: str) -> Path:
    """Rewrite the world's relative URLs to the local server's address."""
    src = world_dir / "urls.jsonl"
    out = world_dir / "urls.local.jsonl"
    lines = []
    for line in src.read_text("utf-8").splitlines():
        r = json.loads(line)
        r["url"] = f"http://{host_port}/{r['url']}"
        lines.append(json.dumps(r, ensure_ascii=False))
    out.write_text("\n".join(lines) + "\n")
    return out


def run_curation(project_dir: str | Path, *, say=print) -> dict:
    """init → concepts → terms → queries → search (urls:, folder:) → download → dedup → tag."""
    from cultura.curate.concepts import add_concepts, build_queries, set_term, store_english_terms
    from cultura.curate.dedup import dedup_images
    from cultura.curate.download import download_candidates
    from cultura.curate.search import search_images
    from cultura.benchmark.status import project_status
    from cultura.curate.tagging import tag_images
    from cultura.project import init_project

    project_dir = Path(project_dir)
    world = project_dir / "fixture-world"
    planted = draw_world(world)
    project = init_project(project_dir, countries=COUNTRIES, name="cultura-demo", overwrite=True)
    results = {"world": planted}
    say(f"• project {project.root} with countries {', '.join(COUNTRIES)}")
    add_concepts(project, CONCEPTS, source="preset:globalrg")
    for cc, terms in TERMS.items():
        for concept, term in terms.items():
            set_term(project, concept, cc, term)
    store_english_terms(project)
    results["queries"] = build_queries(project)
    say(f"• {len(CONCEPTS)} concepts, native terms for {', '.join(TERMS)}, {results['queries']['total']} queries")
    with serve(world / "www") as host_port:
        project.config.download.allow_hosts = [host_port]
        project.save_config()
        urls = localise_urls(world, host_port)
        results["search_urls"] = search_images(project, provider=f"urls:{urls}", progress=False)
        results["search_folder"] = search_images(project, provider=f"folder:{world / 'folder'}", progress=False)
        say(f"• search: {results['search_urls']['results']} results from urls:, "
            f"{results['search_folder']['results']} from folder:")
        results["download"] = download_candidates(project, workers=8, progress=False)
    d = results["download"]
    say(f"• download: {d.get('by_status', d)}; failures by reason: {d.get('by_reason', {})}")
    results["dedup"] = dedup_images(project, progress=False)
    say(f"• dedup: {results['dedup']}")
    results["tag"] = tag_images(project, method="clip", clip_model="openclip:cultura-tiny", progress=False)
    say(f"• tags (CLIP zero-shot, tiny random-init model): {results['tag']['tags']} tags on "
        f"{results['tag']['images']} images")
    results["status"] = project_status(project)
    project.close()
    return results


def _short(obj, limit=400) -> str:
    s = json.dumps(obj, ensure_ascii=False, default=str)
    return s if len(s) <= limit else s[:limit] + " …"
