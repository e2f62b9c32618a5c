"""``croissant.json``: Croissant 1.0 metadata of an export, written with ``mlcroissant`` and validated by
loading it back with zero errors and zero warnings.

It describes what the folder holds, pixels included: one record set per normalised table (``table-<name>``)
and one per config of the card (``config-<name>``, the same files ``datasets`` loads). Image content is an
``sc:ImageObject`` field in both export modes: with an image folder, the file set ``image-files`` and the
record set ``image-files`` (``file_name``, ``image``: the file's content); with embedded images, the
``image`` column of the images table (the bytes of its struct). Nested columns other than images (links,
tags, decisions, query variants) stay in the files and out of the record sets.

``url`` is the Hub page of the dataset when the caller knows it (a push), else absent; ``datePublished`` is
the date of the newest benchmark exported (a stored date, so two exports of the same benchmarks stay
byte-identical).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import logging
import re
from pathlib import Path

from .hub import CITATION, HubError, _safe, table_schema

#: arrow type → mlcroissant.DataType
_CR_TYPES = {"string": "TEXT", "int64": "INTEGER", "double": "FLOAT"}


def _mime(ext: str) -> str:
    return f"image/{'jpeg' if ext in ('.jpg', '.jpeg') else ext.lstrip('.')}"


@contextlib.contextmanager
def _quiet_absl():
    """mlcroissant logs through absl, which prints on the terminal of whoever exports; what it would say is
    checked here (errors and warnings raise), so its handler is silenced while it runs."""
    log = logging.getLogger("absl")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def _fields(mlc, rs_id: str, schema, source_kw: dict) -> list:
    """Croissant fields of the scalar and list-of-scalar columns of ``schema``; an image struct
    (``bytes``, ``path``) or a list of them becomes an ``sc:ImageObject`` field read from its bytes."""
    out = []
    for f in schema:
        t, repeated = f.type, False
        if hasattr(t, "value_type"):  # a list
            t, repeated = t.value_type, True
        if getattr(t, "num_fields", 0) and {t.field(i).name for i in range(t.num_fields)} == {"bytes", "path"}:
            if repeated:  # a list of images: the per-image record set carries the pixels once
                continue
            out.append(mlc.Field(id=f"{rs_id}/{f.name}", name=f.name, data_types=[mlc.DataType.IMAGE_OBJECT],
                                 source=mlc.Source(**source_kw, extract=mlc.Extract(column=f.name),
                                                   transforms=[mlc.Transform(json_path="bytes")])))
            continue
        if str(t) not in _CR_TYPES:
            continue
        out.append(mlc.Field(id=f"{rs_id}/{f.name}", name=f.name,
                             data_types=[getattr(mlc.DataType, _CR_TYPES[str(t)])], repeated=repeated or None,
                             source=mlc.Source(**source_kw, extract=mlc.Extract(column=f.name))))
    return out


def write_croissant(tmp: Path, tables: dict, configs: list[dict], *, ext: str, title: str, license: str,
                    langs: list[str], url: str | None = None) -> str:
    """Write ``tmp/croissant.json`` for the export written in ``tmp`` (its tables, its ``configs`` as in the
    card) and validate it; returns the file name."""
    import mlcroissant as mlc  # deferred: heavy

    fmt = "application/x-parquet" if ext == "parquet" else "application/jsonlines"
    dist, record_sets, seen = [], [], {}

    def file_object(path: str) -> str:
        if path not in seen:
            fid = f"file-{_safe(path).replace('/', '-')}"
            dist.append(mlc.FileObject(id=fid, name=fid, content_url=path, encoding_formats=[fmt],
                                       sha256=_sha256(tmp / path)))
            seen[path] = fid
        return seen[path]

    for name in ("benchmarks", "items", "candidates", "queries", "images"):
        path, rs = f"{name}.{ext}", f"table-{name}"
        record_sets.append(mlc.RecordSet(id=rs, name=rs, description=f"The {name} table ({path}).",
                                         fields=_fields(mlc, rs, table_schema(tmp / path)[0],
                                                        {"file_object": file_object(path)})))
    images = tmp / "images"
    if images.is_dir():
        exts = sorted({Path(im["file"]).suffix.lower() for im in tables["images"]})
        dist.append(mlc.FileSet(id="image-files", name="image-files", encoding_formats=sorted({_mime(e) for e in exts}),
                                includes=[f"images/*{e}" for e in exts]))
        record_sets.append(mlc.RecordSet(
            id="image-content", name="image-content", key="image-content/file_name",
            description="Every image file of the export; file_name is <sha256>.<ext> (images.file, "
                        "candidates.file).",
            fields=[mlc.Field(id="image-content/file_name", name="file_name", data_types=[mlc.DataType.TEXT],
                              source=mlc.Source(file_set="image-files",
                                                extract=mlc.Extract(file_property="filename"))),
                    mlc.Field(id="image-content/image", name="image", data_types=[mlc.DataType.IMAGE_OBJECT],
                              source=mlc.Source(file_set="image-files",
                                                extract=mlc.Extract(file_property="content")))]))
    for c in configs:
        paths = [p for s in c["data_files"] for p in ([s["path"]] if isinstance(s["path"], str) else s["path"])
                 if not p.startswith("images/*")]
        if len(paths) != 1:  # the default config over several files: each is its own config too
            continue
        # an @id holds no whitespace (mlcroissant refuses it, even escaped); a config name may
        rs = "config-" + re.sub(r"\s+", "_", c["config_name"])
        record_sets.append(mlc.RecordSet(
            id=rs, name=rs, description=f"The rows of the card's config {c['config_name']!r} ({paths[0]}).",
            fields=_fields(mlc, rs, table_schema(tmp / paths[0])[0], {"file_object": file_object(paths[0])})))
    try:
        with _quiet_absl():
            meta = mlc.Metadata(
                name=_safe(title), description=f"{title}: a cultural-bias benchmark exported by cultura (design "
                "of 3XCM, seed 000).", url=url, license=[license], in_language=langs, cite_as=CITATION,
                version="1.0.0", date_published=published(tables), distribution=dist, record_sets=record_sets)
    except mlc.ValidationError as e:
        raise HubError(f"The Croissant metadata is not valid: {e}") from None
    if meta.ctx.issues.errors or meta.ctx.issues.warnings:
        raise HubError(f"The Croissant metadata is not valid: {meta.ctx.issues.report()}")
    path = tmp / "croissant.json"
    path.write_text(json.dumps(meta.to_json(), indent=1, ensure_ascii=False, default=str, sort_keys=True) + "\n",
                    encoding="utf-8")
    validate_croissant(path)
    return "croissant.json"


def published(tables: dict) -> dt.datetime:
    """The date the export's content was fixed: the newest build among its benchmarks (stored, not now)."""
    stamps = [b["created_at"] for b in tables.get("_bench_rows", []) if b.get("created_at")]
    if not stamps:
        return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    return max(dt.datetime.fromisoformat(s) for s in stamps)


def validate_croissant(path: Path) -> None:
    """Load ``croissant.json`` with ``mlcroissant`` (which validates it); raise on any error or warning."""
    import mlcroissant as mlc  # deferred: heavy

    try:
        with _quiet_absl():
            ds = mlc.Dataset(jsonld=str(path))
    except mlc.ValidationError as e:
        raise HubError(f"The Croissant metadata {path.name} is not valid: {e}") from None
    issues = ds.metadata.ctx.issues
    if issues.errors or issues.warnings:
        raise HubError(f"The Croissant metadata {path.name} is not valid: {issues.report()}")


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
