"""``cultura view``: a self-contained static site of the project's data in ``reports/view/``.

Pages (flat in one folder, so every link is relative and the site works from ``file://``, from a paper's
supplementary material or through :mod:`cultura.view.server`):

- ``index.html``: counts and links;
- ``pool.html``: the pool by country × concept (in / out counts), each cell a paged gallery
  (``cell-<concept id>-<CC>-<n>.html``) with each image's status (in, or out with its reason);
- ``dups-<n>.html``: duplicate sets side by side (method, distances, representative, review decision);
- ``flags-<n>.html``: culture-conflict flags (cultures involved, who decided what);
- ``bench-<id>-<n>.html``: each benchmark's trials (query texts in their languages, candidates in exported
  order, roles shown on demand, filters by query country, concept and role);
- ``annotations-<n>.html``: annotator disagreements and adjudications with the images;
- ``go.html#<anchor>``: a stable address for a cluster, flag or trial (the report links there), resolved
  through ``ids.js`` to the page that holds it.

Nothing is fetched from elsewhere: CSS and JS are local files, thumbnails are local JPEGs (see
:mod:`cultura.view.thumbs`). Every text is escaped by the templates' autoescape. A rerun makes only the
missing thumbnails and rewrites only the pages whose bytes changed; pages no longer produced are removed.
"""
from __future__ import annotations

import json
import time
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from ..bounds import Bound
from ..files import sweep_temp, write_atomic
from ..progress import Progress, task
from ..templates import render_template
from . import data
from .links import anchor
from .thumbs import PLACEHOLDER, ensure_thumbnails, thumb_rel

if TYPE_CHECKING:
    from ..project import Project

PAGE_SIZE = 120
#: Items per page: a page of more than 100,000 images is no page a browser opens.
PAGE_SIZES = Bound(1, 100_000)
ASSETS = ("view.css", "view.js", PLACEHOLDER)
MANIFEST = "manifest.json"


def view_dir(project: Project) -> Path:
    return project.reports / "view"


def _write(path: Path, text: str, stats: dict) -> None:
    """Write ``text`` to ``path`` only when it differs (a rerun leaves unchanged pages untouched)."""
    raw = text.encode("utf-8")
    if path.exists() and path.stat().st_size == len(raw) and path.read_bytes() == raw:
        stats["pages_unchanged"] += 1
        return
    write_atomic(path, raw, sweep=False)  # build_view swept the folder once
    stats["pages_written"] += 1


def _pages(rows: list, size: int) -> list[list]:
    return [rows[i:i + size] for i in range(0, len(rows), size)] or [[]]


def _pager(prefix: str, n: int, total: int) -> dict:
    return {"n": n, "total": total, "prefix": prefix,
            "prev": f"{prefix}-{n - 1}.html" if n > 1 else None,
            "next": f"{prefix}-{n + 1}.html" if n < total else None,
            "all": [(i, f"{prefix}-{i}.html") for i in range(1, total + 1)]}


class _Site:
    def __init__(self, project: Project, out: Path, page_size: int):
        self.project, self.out, self.size = project, out, page_size
        self.stats = {"pages_written": 0, "pages_unchanged": 0, "pages_removed": 0}
        self.written: set[str] = set()
        self.ids: dict[str, str] = {}
        db = project.db
        self.images = data.images(db)
        self.sources = data.sources(db)
        self.names = data.concept_names(db)
        self.countries = {c.code: c.name for c in project.countries}
        self.failed: dict[str, str] = {}
        self.clusters = data.duplicate_sets(db)
        self.flags = data.flags(db)
        self.see: dict[str, list[tuple[str, str]]] = {}  # sha256 → (text, go.html#anchor): where else it shows
        for c in self.clusters:
            for m in c["members"]:
                self.see.setdefault(m["sha256"], []).append((f"duplicate set {c['id']}",
                                                             f"go.html#{anchor('cluster', c['id'])}"))
        for f in self.flags:
            self.see.setdefault(f["sha256"], []).append((f"{f['flag']} flag", f"go.html#{anchor('flag', f['sha256'])}"))

    def img(self, sha: str) -> dict:
        """What a template needs to show one image."""
        im = self.images.get(sha) or {"sha256": sha, "pool": "out", "reason": "missing",
                                      "reason_text": "not in the images table", "width": None, "height": None}
        src = self.sources.get(sha, {})
        ok = sha in self.images and sha not in self.failed
        return {**im, "short": sha[:12], "thumb": thumb_rel(sha) if ok else PLACEHOLDER,
                "title": src.get("title"), "url": src.get("url"), "href": src.get("href"),
                "page": src.get("page"), "page_href": src.get("page_href"), "see": self.see.get(sha, [])}

    def page(self, name: str, template: str, title: str, **ctx) -> None:
        html = render_template(f"view/{template}", title=title, page_name=name, **ctx)
        _write(self.out / name, html, self.stats)
        self.written.add(name)

    def paged(self, prefix: str, template: str, title: str, rows: list, ids=None, **ctx) -> int:
        chunks = _pages(rows, self.size)
        for n, chunk in enumerate(chunks, 1):
            name = f"{prefix}-{n}.html"
            for r in chunk:
                if ids:
                    keys = ids(r)
                    for key in [keys] if isinstance(keys, str) else keys:
                        self.ids[key] = name
            self.page(name, template, title, rows=chunk, pager=_pager(prefix, n, len(chunks)), **ctx)
        return len(chunks)


def _copy_assets(out: Path, stats: dict) -> None:
    node = resources.files("cultura.templates").joinpath("view")
    for name in ASSETS:
        _write(out / name, node.joinpath(name).read_text("utf-8"), stats)


def build_view(project: Project, *, overwrite: bool = False, page_size: int = PAGE_SIZE,
               workers: int | None = None, progress: Progress = None) -> dict:
    """Write (or update) the static view in ``reports/view/``. Returns counts: images, thumbnails made /
    cached / failed, pages written / unchanged / removed, clusters, flags, benchmarks, trials, annotation
    items, the seconds taken and the path of ``index.html``.

    ``overwrite`` remakes every thumbnail (pages are always compared byte for byte)."""
    page_size = PAGE_SIZES.check(page_size, "page_size")
    t0 = time.perf_counter()
    out = view_dir(project)
    out.mkdir(parents=True, exist_ok=True)
    sweep_temp(out, recursive=True)  # a run killed mid-write (or an older cultura's failed write) left these
    with task("view: reading the project", progress=progress) as bar:
        site = _Site(project, out, page_size)
        bar.advance()
    db = project.db
    st = site.stats
    _copy_assets(out, st)
    site.written.update(ASSETS)

    thumbs = ensure_thumbnails(out, [(sha, project.blob_path(im["path"])) for sha, im in site.images.items()],
                               overwrite=overwrite, workers=workers, progress=progress)
    site.failed = thumbs["failed"]
    bar = task("view: pages", 6, progress=progress)  # one step per section: the pool, sets, flags …

    # the pool: country × concept
    cells = data.pool_cells(db)
    countries = sorted({cc for _, cc in cells} | set(site.countries))
    concept_ids = sorted({cid for cid, _ in cells}, key=lambda c: (site.names.get(c) or "", c))
    grid = []
    for cid in concept_ids:
        row = {"concept": site.names.get(cid), "id": cid, "cells": []}
        for cc in countries:
            shas = cells.get((cid, cc), [])
            n_in = sum(1 for s in shas if site.images.get(s, {}).get("pool") == "in")
            prefix = f"cell-{cid}-{cc}"
            reasons: dict[str, int] = {}
            for s in shas:
                r = site.images.get(s, {}).get("reason")
                if r:
                    reasons[r] = reasons.get(r, 0) + 1
            first = next((s for s in shas if site.images.get(s, {}).get("pool") == "in"), shas[0] if shas else None)
            row["cells"].append({"country": cc, "n": len(shas), "in": n_in, "out": len(shas) - n_in,
                                 "href": f"{prefix}-1.html" if shas else None,
                                 "thumb": site.img(first)["thumb"] if first else None,
                                 "why": ", ".join(f"{r}: {n}" for r, n in sorted(reasons.items()))})
            if shas:
                site.paged(prefix, "cell.html.j2", f"{site.names.get(cid)} × {cc}",
                           [site.img(s) for s in shas], concept=site.names.get(cid), country=cc,
                           country_name=site.countries.get(cc, cc), reasons=sorted(reasons.items()))
        grid.append(row)
    site.page("pool.html", "pool.html.j2", "Image pool by country × concept", grid=grid, countries=countries,
              country_names=site.countries)
    bar.advance()

    # the sets as the dedup review merges them: clusters sharing a copy (pHash and dHash of the same copies)
    # shown once; every merged cluster's address leads to its set
    clusters = site.clusters
    for c in clusters:
        c["anchor"] = anchor("cluster", c["id"])
        c["anchors"] = [anchor("cluster", x) for x in c["cluster_ids"]]
        for m in c["members"]:
            m["image"] = site.img(m["sha256"])
    n_dup_pages = site.paged("dups", "dups.html.j2", "Duplicate sets", clusters,
                             ids=lambda c: c["anchors"])
    bar.advance()

    flags = site.flags
    for f in flags:
        f["image"], f["anchor"] = site.img(f["sha256"]), anchor("flag", f["sha256"])
    n_flag_pages = site.paged("flags", "flags.html.j2", "Culture-conflict flags", flags,
                              ids=lambda f: f["anchor"])
    bar.advance()

    benches, n_trials = [], 0
    for b in data.benchmarks(db):
        trials = data.trials(db, b)
        n_trials += len(trials)
        for t in trials:
            t["anchor"] = anchor("trial", b["name"], b["version"], t["item_key"])
            for c in t["candidates"]:
                c["image"] = site.img(c["sha256"])
        roles = sorted({c["role"] for t in trials for c in t["candidates"]})
        filters = {"countries": sorted({t["query_country"] for t in trials}),
                   "concepts": sorted({t["concept"] or "" for t in trials}), "roles": roles}
        prefix = f"bench-{b['id']}"
        site.paged(prefix, "trials.html.j2", f"Benchmark {b['name']} v{b['version']}", trials,
                   ids=lambda t: t["anchor"], bench=b, filters=filters, index_js=f"{prefix}-index.js")
        # which page holds which query country and concept: the filters name every page with a match
        index = [[site.ids[t["anchor"]], t["query_country"], t["concept"] or ""] for t in trials]
        _write(out / f"{prefix}-index.js", "window.CULTURA_TRIALS = " + json.dumps(index, ensure_ascii=False)
               + ";\n", st)
        site.written.add(f"{prefix}-index.js")
        benches.append({**b, "href": f"{prefix}-1.html", "trials": len(trials)})
    site.page("benchmarks.html", "benchmarks.html.j2", "Benchmarks", benches=benches)
    bar.advance()

    items = data.annotation_items(db)
    for it in items:
        it["imgs"], it["anchor"] = [site.img(s) for s in it["images"]], anchor("item", it["item_key"])
    fields = ("kind", "campaign", "country", "state")
    filters = {f: sorted({str(it[f]) for it in items if it[f]}) for f in fields}
    n_ann_pages = site.paged("annotations", "annotations.html.j2", "Annotator disagreements and adjudications",
                             items, ids=lambda it: it["anchor"], filters=filters)
    # which page holds which item: the filters name every page with a match
    _write(out / "annotations-index.js", "window.CULTURA_ITEMS = " + json.dumps(
        [{"page": site.ids[it["anchor"]], **{f: str(it[f] or "") for f in fields}} for it in items],
        ensure_ascii=False) + ";\n", st)
    site.written.add("annotations-index.js")
    bar.advance()

    n_in = sum(1 for im in site.images.values() if im["pool"] == "in")
    counts = {"images": len(site.images), "in_pool": n_in, "out_of_pool": len(site.images) - n_in,
              "concepts": len(concept_ids), "countries": len(countries), "clusters": len(clusters),
              "flags": len(flags), "benchmarks": len(benches), "trials": n_trials,
              "annotation_items": len(items)}
    site.page("index.html", "index.html.j2", "cultura view", counts=counts, benches=benches,
              first={"dups": "dups-1.html", "flags": "flags-1.html", "annotations": "annotations-1.html"},
              pages={"dups": n_dup_pages, "flags": n_flag_pages, "annotations": n_ann_pages},
              thumb_failures=len(site.failed))
    _write(out / "ids.js", "window.CULTURA_IDS = " + json.dumps(site.ids, sort_keys=True) + ";\n", st)
    site.page("go.html", "go.html.j2", "Finding…")
    site.written.update(("ids.js",))
    bar.advance()
    bar.close()

    manifest_path = out / MANIFEST
    old = set(json.loads(manifest_path.read_text("utf-8")).get("files", [])) if manifest_path.exists() else set()
    for name in sorted(old - site.written):
        p = out / name
        if p.parent == out and p.is_file():  # only files this builder wrote, in this folder
            p.unlink()
            st["pages_removed"] += 1
    _write(manifest_path, json.dumps({"files": sorted(site.written)}, indent=1) + "\n", st)

    return {**counts, "thumbnails_made": thumbs["made"], "thumbnails_cached": thumbs["cached"],
            "thumbnails_failed": len(site.failed), **st,
            "seconds": round(time.perf_counter() - t0, 2), "index": str(out / "index.html")}
