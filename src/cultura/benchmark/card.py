"""The dataset card (``README.md``) of an export, built by one function from the export as written.

:func:`write_card` reads the folder it describes: the configs the loader will use, the files, each config's
features and row count (the YAML's ``dataset_info``, what ``datasets`` reads before it downloads anything),
and whether the images are files or embedded bytes, so the card's text (how to load, what each config holds,
where the pixels are) is one text per export mode and names only what is there. Its YAML goes through
``huggingface_hub.DatasetCardData`` (:func:`cultura.benchmark.hub.card_data`) and is checked when written
(:func:`cultura.benchmark.hub.check_card`).
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from ..annotate.decisions import current_rows
from ..templates import render_template
from ..view.links import inspect_note
from . import hub
from .build import KINDS
from .readiness import card_data

if TYPE_CHECKING:
    from ..project import Project


def card_context(project: Project, tables: dict) -> dict:
    """Variables of ``dataset_card.md.j2``: statistics, annotation figures, dates, provenance."""
    reg = project.registry
    db = project.db
    per_country: dict[str, set] = defaultdict(set)
    per_concept: dict[str, set] = defaultdict(set)
    for c in tables["candidates"]:
        per_country[c["country"]].add(c["sha256"])
        per_concept[c["concept"]].add(c["sha256"])
    countries = [{"name": reg.countries[k].name if k in reg.countries else k, "code": k, "samples": len(v)}
                 for k, v in sorted(per_country.items(), key=lambda kv: reg.countries[kv[0]].name
                                    if kv[0] in reg.countries else kv[0])]
    half = (len(countries) + 1) // 2
    country_rows = [(countries[i], countries[i + half] if i + half < len(countries) else None)
                    for i in range(half)]
    concepts = [{"name": k, "images": len(v)} for k, v in sorted(per_concept.items())]
    found = [ln["found_at"] for im in tables["images"] for ln in im["links"] if ln["found_at"]]
    providers = sorted({ln["provider"] for im in tables["images"] for ln in im["links"]})
    sources = provenance_of(providers, {im["sha256"]: {ln["provider"] for ln in im["links"]}
                                        for im in tables["images"]})
    shas = {im["sha256"] for im in tables["images"]}
    annot = []
    for d in current_rows(db):
        annot.append((d["kind"], d["rule"], d["sha256"], d["agreement"], d["n_annotations"]))
    by_kind: dict[tuple, list] = defaultdict(list)
    for kind, rule, sha, ag, na in annot:
        if sha is None or sha in shas:
            by_kind[(kind, rule)].append((ag, na))
    annotation = [{"kind": k, "rule": r, "decisions": len(v),
                   "mean_agreement": (round(sum(a for a, _ in v if a is not None) /
                                            max(1, sum(1 for a, _ in v if a is not None)), 3)
                                      if any(a is not None for a, _ in v) else None),
                   "mean_annotations": (round(sum(n for _, n in v if n is not None) /
                                              max(1, sum(1 for _, n in v if n is not None)), 2)
                                        if any(n is not None for _, n in v) else None)}
                  for (k, r), v in sorted(by_kind.items())]
    bcfg = project.config.build
    benchmarks = []
    rows = {(r["name"], r["version"]): r for r in tables.get("_bench_rows", [])}
    for b in tables["benchmarks"]:
        rep = json.loads(b["report"] or "{}")
        roles = defaultdict(int)
        for c in tables["candidates"]:
            if c["benchmark"] == b["name"]:
                roles[c["role"]] += 1
        row = rows.get((b["name"], b["version"]))
        benchmarks.append({**b, "params": json.loads(b["params"] or "{}"), "report": rep,
                           "roles": dict(sorted(roles.items())), "config": hub.config_name(b["name"]),
                           "readiness": card_data(project, row, [r.name for r in KINDS.get(b["kind"], ())])
                           if row else None})
    return {
        "title": bcfg.title or project.config.project.name, "benchmarks": benchmarks,
        "countries": countries, "country_rows": country_rows, "concepts": concepts,
        "average": round(sum(c["samples"] for c in countries) / len(countries), 2) if countries else 0,
        "n_images": len(tables["images"]), "n_items": len(tables["items"]), "n_queries": len(tables["queries"]),
        "variants": sorted({q["variant"] for q in tables["queries"]}),
        "first_found": min(found) if found else None, "last_found": max(found) if found else None,
        "providers": providers, "sources": sources, "annotation": annotation,
        "license": bcfg.license, "contact": bcfg.contact,
        "files": tables.get("_files", []), "table_ext": tables.get("_ext", "parquet"),
        "languages": sorted({q["language"] for q in tables["queries"]} | {i["query_language"]
                                                                           for i in tables["items"]}),
        "citation": hub.CITATION, "inspect": inspect_note(),
    }


#: what each kind of provider means for provenance and rights (the dataset card reads this, never a fixed text)
PROVENANCE = {
    "web": ("web image search", "copies of publicly reachable web images found by image search; copyright remains "
            "with their owners, and each image's source page is listed in `images` (`links.source_page`)"),
    "urls": ("a list of image URLs", "copies of the images at the listed URLs; copyright remains with their "
             "owners, and each image's URL is listed in `images`"),
    "folder": ("a local folder", "files from a local folder supplied by the benchmark's authors (they hold or "
               "cleared the rights to share them); no web source is recorded"),
    "import": ("an existing dataset", "images of an existing dataset, re-distributed under that dataset's own "
               "licence and terms (see its documentation)"),
}


def provenance_of(providers: list[str], per_image: dict[str, set[str]]) -> list[dict]:
    """One entry per kind of source (web search, URL list, local folder, imported dataset) with the number of
    images from it, what it was (``how``) and what that means for rights (``rights``)."""
    def kind(p: str) -> tuple[str, str]:
        if p.startswith("import:"):
            return "import", p.split(":", 1)[1]
        if p in PROVENANCE:
            return p, p
        return "web", p
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for provs in per_image.values():
        for k in {kind(p) for p in provs}:
            counts[k] += 1
    return [{"kind": k, "provider": name, "images": n, "how": PROVENANCE[k][0], "rights": PROVENANCE[k][1]}
            for (k, name), n in sorted(counts.items())]


def render_card(context: dict) -> str:
    return render_template("dataset_card.md.j2", **context)


def _paths(config: dict) -> list[str]:
    return [p for s in config["data_files"] for p in ([s["path"]] if isinstance(s["path"], str) else s["path"])
            if "*" not in p]


def dataset_info(folder: Path, configs: list[dict]) -> list[dict]:
    """The YAML ``dataset_info`` of each config: its features (as ``datasets`` will type them: an image-folder
    metadata file's ``*_file_names`` column becomes a list of ``Image``, ``file_name`` an ``Image``) and the
    rows of its ``test`` split, read from the files written in ``folder``."""
    import datasets  # deferred: heavy

    out = []
    for c in configs:
        paths = _paths(c)
        schemas = [hub.table_schema(folder / p) for p in paths]
        feats = datasets.Features.from_arrow_schema(schemas[0][0])
        if c.get("metadata_filenames"):  # image folder: the loader turns the file-name columns into images
            feats = datasets.Features({("image" if k == "file_name" else k[:-len("_file_names")]
                                        if k.endswith("_file_names") else k):
                                       (datasets.Image() if k == "file_name" else datasets.List(datasets.Image())
                                        if k.endswith("_file_names") else v) for k, v in feats.items()})
        out.append({"config_name": c["config_name"], "features": feats._to_yaml_list(),
                    "splits": [{"name": "test", "num_examples": sum(n for _, n in schemas)}]})
    return out


def write_card(project: Project, folder: Path, tables: dict, configs: list[dict], files: list[str], *,
               embedded: bool, after: str = "") -> str:
    """Write ``folder/README.md`` for the export written in ``folder`` (its ``configs`` and ``files``, images
    ``embedded`` or not; ``after``: a closing section, e.g. what changed since a version exported as built was
    built); returns the card's text. A card whose YAML the Hub would refuse raises."""
    info = dataset_info(folder, configs)
    data = hub.card_data(project, tables, configs, dataset_info=info)
    ctx = card_context(project, {**tables, "_files": files})
    rows = {i["config_name"]: i["splits"][0]["num_examples"] for i in info}
    feats = {i["config_name"]: [f["name"] for f in i["features"]] for i in info}
    ctx.update(embedded=embedded, has_images=any(f.startswith("images") for f in files),
               configs=[{"name": c["config_name"], "default": bool(c.get("default")), "files": _paths(c),
                         "rows": rows[c["config_name"]], "features": feats[c["config_name"]]} for c in configs],
               config_names=[c["config_name"] for c in configs], licence_set=bool(project.config.build.license))
    text = f"---\n{data.to_yaml()}\n---\n{render_card(ctx)}{after}"
    hub.check_card(text)
    (folder / "README.md").write_text(text, encoding="utf-8")
    return text
