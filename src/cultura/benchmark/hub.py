"""The Hugging Face Hub layout of an export: ready-to-evaluate configs, the card's metadata, Croissant, push.

``export.py`` writes the normalised tables (``benchmarks``, ``items``, ``candidates``, ``queries``,
``images``); this module adds what makes the folder a Hub dataset that ``datasets.load_dataset(DIR)`` loads
as is:

- one **ready-to-evaluate config per benchmark** (and a ``default`` config over all of them, split ``test``):
  one row per trial with the query text (the benchmark's main variant), every query variant of the trial
  with its language, and the candidates (role, position, country, concept, sha256) with their **images as a
  ``datasets.Image`` feature**. Without ``embed_images`` the rows are an image-folder metadata file beside the
  images (``images/trials-<benchmark>.parquet`` with ``images_file_names``): the loader resolves the paths;
  with ``embed_images`` the image bytes are stored in ``data/trials-<benchmark>.parquet`` (and the images
  table gets an ``image`` column) so one file per config is all a user downloads;
- the card's YAML through ``huggingface_hub.DatasetCardData`` (licence, the language of every query, size
  category, task categories, tags, configs) and a check of it (:func:`check_card`); the citation of the seed
  whose design the benchmark follows (3XCM, seed 000);
- ``croissant.json``: :mod:`cultura.benchmark.croissant`;
- :func:`push_to_hub`: ``HfApi.create_repo`` + ``upload_folder`` (token from ``HF_TOKEN``, never printed).

The card's readiness section (role × position counts, coverage per country and per rule) comes from
:func:`cultura.benchmark.readiness.card_data`.
"""
from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CulturaError
from ..redact import scrub

if TYPE_CHECKING:
    from ..project import Project

#: the normalised tables: configs of their own when every config is Parquet (embedded images, or no images)
TABLE_CONFIGS = ("benchmarks", "items", "candidates", "queries", "images")

#: seed 000 (3XCM), the design every cultura benchmark follows; cited in the card
CITATION = """@misc{saengsukhira3xcm,
  title  = {Evaluating Perspectival Biases in Cross-Modal Retrieval},
  author = {Saengsukhira, Teerapol and Chomphooyod, Peerawat and Rodjanant, Narabodee and
            Chaksangchaichot, Chompakorn and Prakrankamanant, Patawee and Sripheanpol, Witthawin and
            Lovichit, Pak and Nutanong, Sarana and Chuangsuwanich, Ekapol},
  note   = {The 3XCM benchmark (Cross-Cultural, Cross-Modal, Cross-lingual Multimodal)}
}"""

#: licence identifiers the Hub accepts in a card's ``license`` field (the common ones); anything else is
#: written as ``license: other`` with ``license_name``
HUB_LICENSES = frozenset({
    "apache-2.0", "mit", "openrail", "bigscience-openrail-m", "creativeml-openrail-m", "bigscience-bloom-rail-1.0",
    "bigcode-openrail-m", "afl-3.0", "artistic-2.0", "bsl-1.0", "bsd", "bsd-2-clause", "bsd-3-clause",
    "bsd-3-clause-clear", "c-uda", "cc", "cc0-1.0", "cc-by-2.0", "cc-by-2.5", "cc-by-3.0", "cc-by-4.0",
    "cc-by-sa-3.0", "cc-by-sa-4.0", "cc-by-nc-2.0", "cc-by-nc-3.0", "cc-by-nc-4.0", "cc-by-nd-4.0",
    "cc-by-nc-nd-3.0", "cc-by-nc-nd-4.0", "cc-by-nc-sa-2.0", "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0",
    "cdla-sharing-1.0", "cdla-permissive-1.0", "cdla-permissive-2.0", "wtfpl", "ecl-2.0", "epl-1.0", "epl-2.0",
    "etalab-2.0", "eupl-1.1", "eupl-1.2", "agpl-3.0", "gfdl", "gpl", "gpl-2.0", "gpl-3.0", "lgpl", "lgpl-2.1",
    "lgpl-3.0", "isc", "lppl-1.3c", "ms-pl", "mpl-2.0", "odc-by", "odbl", "openrail++", "osl-3.0",
    "postgresql", "ofl-1.1", "ncsa", "unlicense", "zlib", "pddl", "lgpl-lr", "deepfloyd-if-license",
    "llama2", "llama3", "other", "unknown"})

#: the Hub's task categories of a retrieval benchmark (``text-to-image`` is image generation on the Hub, so
#: it is not one; retrieval is said by the tags)
TASK_CATEGORIES = ["zero-shot-image-classification", "image-feature-extraction"]
TAGS = ["cultura", "cultural-bias", "cross-lingual", "cross-modal-retrieval", "text-to-image-retrieval",
        "image-retrieval", "multilingual", "benchmark", "3xcm"]


class HubError(CulturaError):
    """The Hub layout, card, Croissant metadata or push cannot be made as asked."""


# ------------------------------------------------------------------ ready-to-evaluate rows

def main_variant(kind: str, descriptor_country: str | None) -> str:
    """The query variant a benchmark's trials are scored with by default (the suites' main variant)."""
    return f"mention_{descriptor_country}" if kind == "descriptor" and descriptor_country else "short"


def trial_rows(tables: dict) -> dict[str, list[dict]]:
    """benchmark name → one row per trial: query text(s) and candidates, ready to evaluate."""
    kinds = {b["name"]: b["kind"] for b in tables["benchmarks"]}
    versions = {b["name"]: b["version"] for b in tables["benchmarks"]}
    queries: dict[tuple, list[dict]] = defaultdict(list)
    for q in tables["queries"]:
        queries[(q["benchmark"], q["concept"], q["country"], q["language"])].append(q)
    cands: dict[tuple, list[dict]] = defaultdict(list)
    for c in tables["candidates"]:
        cands[(c["benchmark"], c["item_key"])].append(c)
    out: dict[str, list[dict]] = {b["name"]: [] for b in tables["benchmarks"]}
    for it in tables["items"]:
        b, dc = it["benchmark"], it["descriptor_country"]
        qs = [q for q in queries[(b, it["concept"], it["query_country"], it["query_language"])]
              if "mention_" not in q["variant"] or q["variant"].endswith(f"_{dc}")]
        main = main_variant(kinds[b], dc)
        text = next((q["text"] for q in qs if q["variant"] == main), None)
        cs = sorted(cands[(b, it["item_key"])], key=lambda c: c["position"])
        out[b].append({
            "benchmark": b, "version": versions[b], "item_key": it["item_key"], "concept": it["concept"],
            "query_country": it["query_country"], "query_language": it["query_language"],
            "descriptor_country": dc, "query_variant": main, "query": text,
            "queries": [{"variant": q["variant"], "language": q["language"], "text": q["text"]}
                        for q in sorted(qs, key=lambda q: q["variant"])],
            "roles": [c["role"] for c in cs], "positions": [c["position"] for c in cs],
            "candidate_countries": [c["country"] for c in cs], "candidate_concepts": [c["concept"] for c in cs],
            "sha256": [c["sha256"] for c in cs], "files": [c["file"] for c in cs]})
    return out


def _trial_fields(pa) -> list:
    query = pa.struct([("variant", pa.string()), ("language", pa.string()), ("text", pa.string())])
    return [("benchmark", pa.string()), ("version", pa.int64()), ("item_key", pa.string()),
            ("concept", pa.string()), ("query_country", pa.string()), ("query_language", pa.string()),
            ("descriptor_country", pa.string()), ("query_variant", pa.string()), ("query", pa.string()),
            ("queries", pa.list_(query)), ("roles", pa.list_(pa.string())),
            ("positions", pa.list_(pa.int64())), ("candidate_countries", pa.list_(pa.string())),
            ("candidate_concepts", pa.list_(pa.string())), ("sha256", pa.list_(pa.string()))]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name)


def table_schema(path: Path):
    """``(arrow schema, row count)`` of one table file of an export (Parquet or JSON Lines), as the card's
    ``dataset_info`` and ``croissant.json`` describe it."""
    import pyarrow.json as pj  # deferred: heavy
    import pyarrow.parquet as pq  # deferred: heavy

    if path.suffix == ".parquet":
        return pq.read_schema(path), pq.read_metadata(path).num_rows
    table = pj.read_json(path)
    return table.schema, table.num_rows


def config_name(bench: str) -> str:
    """The config of a benchmark's trials: its name, unless that is a table's name or ``default``."""
    return f"trials-{bench}" if bench in TABLE_CONFIGS or bench in ("default", "image-index") else bench


def write_trials(tmp: Path, tables: dict, read_blob, *, fmt: str, embed_images: bool) -> tuple[list[str], list]:
    """Write the ready-to-evaluate files (``read_blob(sha256) -> Path`` finds an image's stored file for
    embedding).
    Returns (files written, configs for the card's YAML)."""
    import pyarrow as pa  # deferred: heavy
    import pyarrow.parquet as pq  # deferred: heavy

    fields = _trial_fields(pa)
    rows = trial_rows(tables)
    files: list[str] = []
    configs: list[dict] = []
    ext = "parquet" if fmt == "parquet" else "jsonl"
    written: list[tuple[str, str]] = []  # (config, path)
    if embed_images:
        import datasets  # deferred: heavy

        feats = datasets.Features.from_arrow_schema(pa.schema(fields))
        feats["images"] = datasets.List(datasets.Image())
        (tmp / "data").mkdir(exist_ok=True)
        for bench, rs in rows.items():
            path = f"data/trials-{_safe(bench)}.parquet"
            table = pa.Table.from_pylist(
                [{**{k: r[k] for k, _ in fields},
                  "images": [{"bytes": read_blob(s).read_bytes(), "path": read_blob(s).name} for s in r["sha256"]]}
                 for r in rs], schema=feats.arrow_schema)
            pq.write_table(table, tmp / path, compression="zstd")
            files.append(path)
            written.append((config_name(bench), path))
        configs.append({"config_name": "default", "default": True,
                        "data_files": [{"split": "test", "path": [p for _, p in written]}]})
        configs += [{"config_name": c, "data_files": [{"split": "test", "path": p}]} for c, p in written]
        return files, configs
    schema = pa.schema(fields + [("images_file_names", pa.list_(pa.string()))])

    def write(name, rs):
        data = [{**{k: r[k] for k, _ in fields},
                 "images_file_names": [Path(f).name for f in r["files"]]} for r in rs]
        if ext == "parquet":
            pq.write_table(pa.Table.from_pylist(data, schema=schema), tmp / "images" / name, compression="zstd")
        else:
            with open(tmp / "images" / name, "w", encoding="utf-8", newline="\n") as f:
                for row in data:
                    f.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")
        files.append(f"images/{name}")

    for bench, rs in rows.items():
        write(f"trials-{_safe(bench)}.{ext}", rs)
        written.append((config_name(bench), f"trials-{_safe(bench)}.{ext}"))
    # the default config reads one file of every trial (the loader reads several metadata files of one config
    # in no fixed order; one file keeps the row order stable); only metadata is repeated, never an image
    write(f"trials.{ext}", [r for rs in rows.values() for r in rs])
    # an index of the images (one row per image, its file as an Image feature) for the ``images`` config
    index = "image-index." + ext
    idx_rows = [{"sha256": im["sha256"], "file_name": Path(im["file"]).name, "format": im["format"],
                 "width": im["width"], "height": im["height"]} for im in tables["images"]]
    if ext == "parquet":
        pq.write_table(pa.Table.from_pylist(idx_rows, schema=pa.schema(
            [("sha256", pa.string()), ("file_name", pa.string()), ("format", pa.string()),
             ("width", pa.int64()), ("height", pa.int64())])), tmp / "images" / index, compression="zstd")
    else:
        with open(tmp / "images" / index, "w", encoding="utf-8", newline="\n") as f:
            for row in idx_rows:
                f.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")
    files.append(f"images/{index}")
    # image-folder configs: metadata file(s) and the images they name; the loader resolves the paths. The
    # datasets library picks ONE loader for all configs of a folder, so in this layout the normalised tables
    # are files (loaded with the parquet/json loader), not configs.
    exts = sorted({Path(im["file"]).suffix.lower() for im in tables["images"]}) or [".jpg"]
    pics = [f"images/*{e}" for e in exts]

    def folder(config, names, default=False):
        c = {"config_name": config, "data_files": [{"split": "test", "path": [f"images/{n}" for n in names] + pics}],
             "metadata_filenames": names, "drop_labels": True}
        return {**c, "default": True} if default else c
    configs.append(folder("default", [f"trials.{ext}"], default=True))
    configs += [folder(c, [n]) for c, n in written]
    configs.append(folder("images", [index]))
    return files, configs


def table_configs(ext: str) -> list[dict]:
    return [{"config_name": t, "data_files": [{"split": "test", "path": f"{t}.{ext}"}]} for t in TABLE_CONFIGS]


# ------------------------------------------------------------------ the card's metadata

def size_category(n: int) -> str:
    for bound, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                         (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"),
                         (1_000_000_000, "100M<n<1B")):
        if n < bound:
            return label
    return "1B<n<10B"


def languages(tables: dict) -> list[str]:
    """The language of every query (and trial), as the Hub's ISO 639 codes (``zh-CN`` → ``zh``)."""
    langs = {q["language"] for q in tables["queries"]} | {i["query_language"] for i in tables["items"]}
    return sorted({lang.split("-")[0].split("_")[0].lower() for lang in langs if lang})


def title(project: Project) -> str:
    return project.config.build.title or project.config.project.name


def licence(project: Project) -> tuple[str, dict]:
    """The card's ``license`` (a Hub id, ``unknown`` when unset, or ``other``) and its extra fields
    (``license_name`` for ``other``)."""
    lic = (project.config.build.license or "unknown").strip()
    if lic.lower() in HUB_LICENSES:
        return lic.lower(), {}
    # the Hub's license_name: lowercase letters, digits, '.' and '-'; the full text is in the card body
    return "other", {"license_name": re.sub(r"[^a-z0-9.-]+", "-", lic.lower()).strip("-") or "custom"}


def card_data(project: Project, tables: dict, configs: list[dict], *, dataset_info: list[dict] | None = None):
    """The card's YAML as a ``huggingface_hub.DatasetCardData`` (``dataset_info``: per config, its features
    and split sizes, from :func:`cultura.benchmark.card.dataset_info`)."""
    from huggingface_hub import DatasetCardData  # deferred: heavy

    lic, extra = licence(project)
    if dataset_info:
        extra["dataset_info"] = dataset_info
    return DatasetCardData(
        pretty_name=title(project), license=lic, language=languages(tables),
        multilinguality="multilingual" if len(languages(tables)) > 1 else "monolingual",
        size_categories=[size_category(len(tables["items"]))], task_categories=TASK_CATEGORIES,
        tags=TAGS, configs=configs, **extra)


def check_card(text: str) -> dict:
    """Parse a written card back with ``huggingface_hub`` and check what a Hub dataset needs; returns its
    metadata. (The Hub's own YAML validation runs on :func:`push_to_hub`, which needs the endpoint.)"""
    from huggingface_hub import DatasetCard  # deferred: heavy

    card = DatasetCard(text)
    meta = card.data.to_dict()
    problems = []
    if not meta.get("license"):
        problems.append("no license")
    if meta.get("license") == "other" and not meta.get("license_name"):
        problems.append("license 'other' without license_name")
    if not meta.get("language"):
        problems.append("no language")
    if not meta.get("size_categories"):
        problems.append("no size_categories")
    if not meta.get("task_categories"):
        problems.append("no task_categories")
    configs = meta.get("configs") or []
    if sum(1 for c in configs if c.get("default")) != 1:
        problems.append("not exactly one default config")
    if any(s.get("split") != "test" for c in configs for s in c.get("data_files", [])):
        problems.append("a config with a split other than 'test'")
    if "@misc{" not in card.text and "@inproceedings{" not in card.text:
        problems.append("no citation")
    if problems:
        raise HubError(f"The dataset card is not valid for the Hub: {', '.join(problems)}. This is a bug in "
                       "the export; please report it with the card attached.")
    return meta


# ------------------------------------------------------------------ push

def dataset_url(repo: str) -> str:
    """The page of the Hub dataset ``repo`` on the endpoint a push goes to (``HF_ENDPOINT``)."""
    return f"{os.environ.get('HF_ENDPOINT', 'https://huggingface.co').rstrip('/')}/datasets/{repo}"


def push_to_hub(folder, repo: str, *, private: bool = False, token: str | None = None) -> dict:
    """Create (or reuse) the dataset repo ``repo`` and upload the export ``folder`` to it. The token is
    ``token`` or the ``HF_TOKEN`` environment variable; it is never stored or printed (errors are scrubbed).
    The Hub endpoint is ``HF_ENDPOINT`` (default huggingface.co)."""
    from huggingface_hub import HfApi, constants  # deferred: heavy

    folder = Path(folder)
    if not (folder / "README.md").is_file():
        raise HubError(f"{folder} is not a cultura export (no README.md). Run 'cultura export DIR' first.",
                       param="folder")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*", repo or ""):
        raise HubError(f"{repo!r} is not a Hub repository id. Give it as OWNER/NAME, e.g. my-lab/cultural-bench.",
                       param="repo")
    token = token or os.environ.get("HF_TOKEN")
    if not token:
        raise HubError("No Hub token: set the environment variable HF_TOKEN to a write token "
                       "(https://huggingface.co/settings/tokens) and push again.", param="token")
    if constants.HF_HUB_OFFLINE:
        raise HubError("HF_HUB_OFFLINE is set, so nothing can be pushed: unset it and export "
                       "again with 'cultura export DIR --push-to-hub OWNER/NAME'.", param="repo")
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    api = HfApi(endpoint=endpoint, token=token)
    try:
        # the Hub's own YAML validation (what DatasetCard.validate posts, sent to this endpoint)
        api._validate_yaml((folder / "README.md").read_text(encoding="utf-8"), repo_type="dataset")
        url = api.create_repo(repo, repo_type="dataset", private=private, exist_ok=True)
        info = api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset",
                                 commit_message="Upload benchmark exported by cultura")
    except Exception as e:  # noqa: BLE001 - any client error becomes one clear sentence, token scrubbed
        msg = scrub(str(e)).replace(token, "***")
        first = (msg.splitlines()[0] if msg else type(e).__name__).rstrip(". ")
        raise HubError(f"The push to {endpoint} failed: {first}. "
                       "Check HF_TOKEN (a write token), the repository id and HF_ENDPOINT.", param="repo") from None
    return {"repo": repo, "url": str(url), "commit": getattr(info, "oid", None) or str(info),
            "endpoint": endpoint, "private": private}
