"""Export benchmarks as a dataset others can load: tables, images and a dataset card.

``export_benchmark(project, DIR)`` writes, for the chosen benchmarks:

- ``benchmarks``, ``items``, ``candidates``, ``queries`` and ``images`` tables (Parquet by default, or JSON
  Lines, or a WebDataset tar of images + JSON sidecars with the tables as JSON Lines);
- ``images/<sha256>.<ext>``: the image files (in the tar for ``webdataset``);
- ``README.md``: a dataset card (``templates/dataset_card.md.j2``) with the statistics in the shape of seed
  000 Tables 9 and 10, the annotation protocol and agreement figures, collection dates, provenance and licence
  notes, a takedown contact, intended use and limitations.

Everything is written to a temporary folder beside DIR and renamed into place, so DIR is either absent or
complete. Row order is fixed and no timestamp is written except stored ones (search dates, decision dates),
so exporting the same benchmark twice gives byte-identical files.

The folder is a Hugging Face Hub dataset (``hub.py``): ``datasets.load_dataset(DIR)`` loads the ``default``
config (every benchmark's trials, split ``test``, images as a ``datasets.Image`` feature), one config per
benchmark, and one per normalised table; the card's YAML is written through ``huggingface_hub`` and
``croissant.json`` through ``mlcroissant`` (Parquet and JSON Lines exports). ``hub.push_to_hub`` uploads it.
"""
from __future__ import annotations

import glob
import io
import json
import os
import shutil
import tarfile
import uuid
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from .. import db as dbmod
from ..annotate.decisions import current_rows
from ..curate import images as curated
from ..curate.concepts import concept_names
from ..errors import CulturaError, storage_failure, unknown
from . import croissant, hub
from .build import KINDS, get_benchmark
from .card import write_card
from .verify import as_built_section, require_supported

if TYPE_CHECKING:
    from ..project import Project

FORMATS = ("parquet", "jsonl", "webdataset")  # keys of WRITERS (defined below)


class ExportError(CulturaError):
    """An export cannot be written as asked."""


#: The export's tables, in the order they are written (each one's Parquet schema: :func:`parquet_schemas`).
TABLES = ("benchmarks", "items", "candidates", "queries", "images")


def parquet_schemas() -> dict:
    """The Parquet schema of each table of :data:`TABLES`."""
    import pyarrow as pa  # deferred: heavy

    _link = pa.struct([("concept", pa.string()), ("country", pa.string()), ("language", pa.string()),
                       ("query", pa.string()), ("query_kind", pa.string()), ("provider", pa.string()),
                       ("rank", pa.int64()), ("source_page", pa.string()), ("found_at", pa.string())])
    _tag = pa.struct([("tag", pa.string()), ("score", pa.float64()), ("source", pa.string())])
    _decision = pa.struct([("kind", pa.string()), ("label", pa.string()), ("value", pa.float64()),
                           ("country", pa.string()), ("rule", pa.string()), ("n_annotations", pa.int64()),
                           ("agreement", pa.float64()), ("decided_at", pa.string())])
    _caption = pa.struct([("language", pa.string()), ("text", pa.string()), ("source", pa.string())])

    return {
        "benchmarks": pa.schema([("name", pa.string()), ("version", pa.int64()), ("kind", pa.string()),
                                 ("seed", pa.int64()), ("params", pa.string()), ("content_hash", pa.string()),
                                 ("n_items", pa.int64()), ("report", pa.string())]),
        "items": pa.schema([("benchmark", pa.string()), ("item_key", pa.string()), ("concept", pa.string()),
                            ("query_country", pa.string()), ("query_language", pa.string()),
                            ("descriptor_country", pa.string()), ("roles", pa.list_(pa.string())),
                            ("images", pa.list_(pa.string())), ("image_countries", pa.list_(pa.string())),
                            ("image_concepts", pa.list_(pa.string()))]),
        "candidates": pa.schema([("benchmark", pa.string()), ("item_key", pa.string()), ("role", pa.string()),
                                 ("position", pa.int64()), ("sha256", pa.string()), ("concept", pa.string()),
                                 ("country", pa.string()), ("file", pa.string())]),
        "queries": pa.schema([("benchmark", pa.string()), ("concept", pa.string()), ("country", pa.string()),
                              ("language", pa.string()), ("variant", pa.string()),
                              ("descriptor_country", pa.string()), ("text", pa.string()), ("source", pa.string())]),
        "images": pa.schema([("sha256", pa.string()), ("file", pa.string()), ("format", pa.string()),
                             ("width", pa.int64()), ("height", pa.int64()), ("bytes", pa.int64()),
                             ("links", pa.list_(_link)), ("tags", pa.list_(_tag)),
                             ("relevance", pa.list_(_decision)), ("decisions", pa.list_(_decision)),
                             ("captions", pa.list_(_caption))]),
    }


def _resolve(project: Project, benchmarks) -> list[dict]:
    if benchmarks:
        specs = [benchmarks] if isinstance(benchmarks, str) else list(benchmarks)
        rows = [get_benchmark(project, s) for s in specs]
    else:
        names = [r[0] for r in project.db.execute(
            "SELECT DISTINCT name FROM benchmarks WHERE status = 'ready' ORDER BY name")]
        if not names:
            raise ExportError("No benchmark has been built yet. Run 'cultura build association' (or "
                              "'cultura build descriptor') first, then export.")
        rows = [get_benchmark(project, n) for n in names]
    seen = set()
    for b in rows:
        if b["name"] in seen:
            raise ExportError(f"Two versions of benchmark {b['name']!r} were asked for. Export one version "
                              "per name into one folder.")
        seen.add(b["name"])
    return sorted(rows, key=lambda b: b["name"])


def collect(project: Project, benchmarks=None, *, embedded: bool = False) -> dict[str, list[dict]]:
    """The export tables as lists of rows (fixed order), without writing anything. ``embedded``: the images
    travel as bytes inside the Parquet files, so no row names an image file (``file`` is null)."""
    db = project.db
    bms = _resolve(project, benchmarks)
    names = concept_names(db)
    paths = {r["sha256"]: (r["path"], r["format"], r["width"], r["height"], r["bytes"])
             for r in curated.image_rows(db)}
    tables: dict[str, list[dict]] = {k: [] for k in TABLES}
    shas: set[str] = set()

    def file_of(sha):
        return None if embedded else f"images/{sha}{Path(paths[sha][0]).suffix}"

    for b in bms:
        tables["benchmarks"].append({k: b[k] for k in ("name", "version", "kind", "seed", "params",
                                                       "content_hash", "n_items", "report")})
        order = {r.name: i for i, r in enumerate(KINDS.get(b["kind"], ()))}
        items = db.execute("SELECT id, item_key, concept_id, query_country, query_language, descriptor_country "
                           "FROM benchmark_items WHERE benchmark_id = ? ORDER BY item_key", [b["id"]]).fetchall()
        for iid, key, cid, qc, ql, dc in items:
            cands = db.execute("SELECT role, position, sha256, concept_id, country FROM benchmark_candidates "
                               "WHERE item_id = ? ORDER BY position", [iid]).fetchall()
            cands.sort(key=lambda c: (c[1], order.get(c[0], 99)))
            tables["items"].append({
                "benchmark": b["name"], "item_key": key, "concept": names[cid], "query_country": qc,
                "query_language": ql, "descriptor_country": dc, "roles": [c[0] for c in cands],
                "images": [c[2] for c in cands], "image_countries": [c[4] for c in cands],
                "image_concepts": [names[c[3]] for c in cands]})
            for role, pos, sha, ccid, country in cands:
                shas.add(sha)
                tables["candidates"].append({"benchmark": b["name"], "item_key": key, "role": role,
                                             "position": pos, "sha256": sha, "concept": names[ccid],
                                             "country": country, "file": file_of(sha)})
        for r in db.execute("SELECT concept_id, country, language, variant, descriptor_country, text, source "
                            "FROM benchmark_query_snapshot WHERE benchmark_id = ?", [b["id"]]).fetchall():
            tables["queries"].append({"benchmark": b["name"], "concept": names[r[0]], "country": r[1],
                                      "language": r[2], "variant": r[3], "descriptor_country": r[4],
                                      "text": r[5], "source": r[6]})
    tables["queries"].sort(key=lambda q: (q["benchmark"], q["concept"], q["country"], q["variant"]))
    tables["images"] = _image_rows(project, sorted(shas), paths, names, file_of)
    return {**tables, "_benchmarks": bms}


def _image_rows(project: Project, shas, paths, names, file_of) -> list[dict]:
    db = project.db
    wanted = set(shas)
    links, tags, decs, caps = (defaultdict(list) for _ in range(4))
    for r in curated.link_provenance(db):
        if r["sha256"] in wanted:
            links[r["sha256"]].append({"concept": names[r["concept_id"]], "country": r["country"],
                                       "language": r["language"], "query": r["query"],
                                       "query_kind": r["query_kind"], "provider": r["provider"],
                                       "rank": r["rank"], "source_page": r["source_page"],
                                       "found_at": r["found_at"]})
    for sha, tag, score, source in curated.tag_rows(db):
        if sha in wanted:
            tags[sha].append({"tag": tag, "score": score, "source": source})
    for r in current_rows(db, with_image=True):
        if r["sha256"] in wanted:
            decs[r["sha256"]].append({k: r[k] for k in ("kind", "label", "value", "country", "rule",
                                                        "n_annotations", "agreement", "decided_at")})
    for r in curated.caption_rows(db):
        if r["image_sha256"] in wanted:
            caps[r["image_sha256"]].append(r)

    def key(d):
        return json.dumps(d, sort_keys=True, ensure_ascii=False, default=str)

    rows = []
    for sha in shas:
        p, fmt, w, h, n = paths[sha]
        dl = sorted(decs[sha], key=key)
        rows.append({
            "sha256": sha, "file": file_of(sha), "format": fmt, "width": w, "height": h, "bytes": n,
            "links": sorted(links[sha], key=key), "tags": sorted(tags[sha], key=key),
            "relevance": [d for d in dl if d["kind"] == "relevance"],
            "decisions": [d for d in dl if d["kind"] != "relevance"],
            "captions": [{"language": c["language"], "text": c["text"], "source": c["source"]}
                         for c in sorted(caps[sha], key=lambda c: (c["language"], c["idx"], c["source"]))]})
    return rows


# ------------------------------------------------------------------ writers (a registry, one per format)

def _copy_images(tmp: Path, tables: dict, project: Project) -> list[str]:
    (tmp / "images").mkdir()
    for row in tables["images"]:
        shutil.copyfile(_blob(project, row["sha256"]), tmp / row["file"])
    return ["images/"]


def _write_parquet(tmp: Path, tables: dict, project: Project, images: bool = True) -> list[str]:
    import pyarrow as pa  # deferred: heavy
    import pyarrow.parquet as pq  # deferred: heavy

    out = []
    for name, schema in parquet_schemas().items():
        pq.write_table(pa.Table.from_pylist(tables[name], schema=schema), tmp / f"{name}.parquet",
                       compression="zstd")
        out.append(f"{name}.parquet")
    return out + (_copy_images(tmp, tables, project) if images else [])


def _write_jsonl(tmp: Path, tables: dict, project: Project, images: bool = True) -> list[str]:
    out = []
    for name in TABLES:
        with open(tmp / f"{name}.jsonl", "w", encoding="utf-8", newline="\n") as f:
            for row in tables[name]:
                f.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")
        out.append(f"{name}.jsonl")
    return out + (_copy_images(tmp, tables, project) if images else [])


def _tar_add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.uid, info.gid, info.uname, info.gname = len(data), 0, 0o644, 0, 0, "", ""
    tar.addfile(info, io.BytesIO(data))


def _write_webdataset(tmp: Path, tables: dict, project: Project, images: bool = True) -> list[str]:
    """Tables as JSON Lines plus ``images.tar``: per image ``<sha>.<ext>`` and ``<sha>.json`` (metadata)."""
    out = _write_jsonl(tmp, tables, project, images=False)
    with tarfile.open(tmp / "images.tar", "w", format=tarfile.USTAR_FORMAT) as tar:
        for row in tables["images"]:
            src = _blob(project, row["sha256"])
            ext = Path(row["file"]).suffix
            _tar_add(tar, f"{row['sha256']}{ext}", src.read_bytes())
            _tar_add(tar, f"{row['sha256']}.json",
                     json.dumps(row, sort_keys=True, ensure_ascii=False).encode("utf-8"))
    return out + ["images.tar"]


#: format -> writer(tmp_dir, tables, project, images) -> files written
WRITERS = {"parquet": _write_parquet, "jsonl": _write_jsonl, "webdataset": _write_webdataset}


def _blob(project: Project, sha: str) -> Path:
    path = curated.image_paths(project.db, [sha])[sha]
    p = project.root / path
    if not p.exists():
        raise ExportError(f"The image file {path} for {sha[:12]}… is missing from the project. Restore the "
                          "blobs folder (or re-run 'cultura images download') and export again.")
    return p


def _embed_image_column(tmp: Path, tables: dict, project: Project) -> None:
    """Rewrite ``images.parquet`` with an ``image`` column (``datasets.Image``, the bytes embedded)."""
    import datasets  # deferred: heavy
    import pyarrow as pa  # deferred: heavy
    import pyarrow.parquet as pq  # deferred: heavy

    feats = datasets.Features.from_arrow_schema(parquet_schemas()["images"])
    feats["image"] = datasets.Image()
    # the image's own name (<sha256>.<ext>), as datasets stores it beside the bytes; no file of that name is
    # written, and the row's ``file`` stays null
    rows = []
    for r in tables["images"]:
        blob = _blob(project, r["sha256"])
        rows.append({**r, "image": {"bytes": blob.read_bytes(), "path": blob.name}})
    pq.write_table(pa.Table.from_pylist(rows, schema=feats.arrow_schema), tmp / "images.parquet",
                   compression="zstd")


# ------------------------------------------------------------------ the export

def export_benchmark(project: Project, dest, *, benchmarks=None, fmt: str = "parquet", images: bool = True,
                     embed_images: bool = False, as_built: bool = False, url: str | None = None) -> dict:
    """Export ``benchmarks`` (``NAME`` or ``NAME@VERSION`` specs; default: the latest ready version of every
    benchmark) into the new or empty folder ``dest``. Returns ``{"dir", "files", "benchmarks", ...}``.

    ``embed_images``: store the image bytes in the Parquet files (ready-to-evaluate configs and the images
    table) instead of an ``images/`` folder (Parquet only); the ``file`` columns are then empty, since no
    file is written. ``url``: the dataset's page (the Hub repository it is pushed to), named in
    ``croissant.json``; none when not given. ``warnings`` in the result: what a publisher should fix first
    (no licence set). A version the current state no longer supports (:mod:`.verify`) is refused in one
    sentence, unless ``as_built``: then it is exported as built and the card says what changed since."""
    if fmt not in FORMATS:
        raise unknown("export format", fmt, FORMATS)
    if embed_images and fmt != "parquet":
        raise ExportError("Embedded images are written in Parquet only. Drop embed_images or export with "
                          "fmt='parquet'.", param="embed_images")
    if embed_images and not images:
        raise ExportError("embed_images and images=False contradict each other: choose one.", param="embed_images")
    dest = Path(dest).resolve()
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ExportError(f"{dest} is not an empty folder. Choose a new folder (it is created) or empty this "
                          "one; an export never overwrites files.")
    # an incomplete benchmark is never published; one the state no longer supports only as built, said so
    checks = [require_supported(project, b, as_built=as_built) for b in _resolve(project, benchmarks)]
    tables = collect(project, benchmarks, embedded=embed_images)
    bms = tables.pop("_benchmarks")
    tables["_bench_rows"] = bms
    dest.parent.mkdir(parents=True, exist_ok=True)
    _sweep_tmp(project, dest)
    # the temp folder is named after this process's lease: a later export removes it if this process dies
    tmp = dest.parent / f".{dest.name}.tmp-{dbmod.owner_token(project.db)}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        files = WRITERS[fmt](tmp, tables, project, images and not embed_images)
        ext = "parquet" if fmt == "parquet" else "jsonl"
        configs = hub.table_configs(ext)
        if embed_images:
            _embed_image_column(tmp, tables, project)
        if fmt != "webdataset" and (images or embed_images):
            trial_files, trial_configs = hub.write_trials(
                tmp, tables, lambda sha: _blob(project, sha), fmt=fmt, embed_images=embed_images)
            files += trial_files
            # one loader per folder (datasets): with an image folder, only image-folder configs
            configs = trial_configs + (configs if embed_images else [])
        else:  # no image feature possible: the items table is the default config
            configs[1] = {**configs[1], "default": True}
        if fmt != "webdataset":
            files.append(croissant.write_croissant(
                tmp, tables, configs, ext=ext, title=hub.title(project), license=hub.licence(project)[0],
                langs=hub.languages(tables), url=url))
        files.append("README.md")
        write_card(project, tmp, tables, configs, files, embedded=embed_images, after=as_built_section(checks))
        try:
            if dest.exists():
                dest.rmdir()
            os.rename(tmp, dest)
        except OSError:
            if dest.exists() and any(dest.iterdir()):  # another export finished there meanwhile
                raise ExportError(f"{dest} was filled by another export while this one ran; nothing of this "
                                  "one was kept. Choose a new folder.") from None
            raise
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError) and not isinstance(e.filename, str) and storage_failure(e):
            e.filename = str(dest)  # a full disk under pyarrow names no file: the CLI's sentence names the export
        raise
    return {"dir": str(dest), "format": fmt, "files": files, "embedded_images": embed_images,
            "configs": [c["config_name"] for c in configs],
            "benchmarks": [f"{b['name']}@{b['version']}" for b in bms], "items": len(tables["items"]),
            "images": len(tables["images"]), "queries": len(tables["queries"]), "warnings": export_warnings(project),
            "changed_since_build": {c["benchmark"]: [x["text"] for x in c["changes"]] for c in checks if c["changes"]}}


def export_warnings(project: Project) -> list[str]:
    """What to fix before publishing an export: a missing licence leaves users unable to reuse the data."""
    if (project.config.build.license or "").strip().lower() in ("", "unknown"):
        return ["No licence is set: the card says 'license: unknown', so nobody may reuse the data. Set "
                "build.license in cultura.toml (a Hub licence id such as cc-by-4.0) and export again."]
    return []


def _sweep_tmp(project: Project, dest: Path) -> int:
    """Remove half-written export folders for ``dest`` left by an export process that died (kill -9)."""
    n = 0
    for p in dest.parent.glob(f".{glob.escape(dest.name)}.tmp-*"):
        rest = p.name[len(f".{dest.name}.tmp-"):]
        token = rest.rsplit("-", 1)[0] if rest.count("-") >= 2 else None
        if p.is_dir() and not (token and dbmod.owner_alive(project.db, token)):
            shutil.rmtree(p, ignore_errors=True)
            n += 1
    return n

