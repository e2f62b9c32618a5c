"""Importers for released datasets from local files, in the shapes the Hugging Face hub publishes them.

A hub dataset with an ``Image`` feature is stored in Parquet as a struct column ``{"bytes": binary, "path":
string}``: the image is embedded as bytes, or (``bytes`` null) named by a path relative to the table. Every
image cell here may be that struct, raw bytes, or a path string; paths are resolved inside ``images_dir``
(default: the table's folder) and never outside it.

- :func:`import_3xcm_images` — the 3XCM release's image metadata (seed 000 App. L, Figure 15): one row per
  image with its concept and country. Images are linked to concept × country exactly like searched ones
  (kind ``3xcm``), so ``cultura build association|descriptor`` can sample its own trials from them.
- :func:`import_3xcm_benchmark` — the 3XCM release's trials (Figures 13–14): one row per trial with the query
  text, its country (or language), the descriptor country for RQ3, and one image column per role (``cr lb ti``
  for RQ2; ``cr orlb or cdr lb ti`` for RQ3), each with ``<role>_country`` and ``<role>_concept`` when the
  release gives them (else taken from an earlier image import). The trials become a ready benchmark of kind
  ``association`` or ``descriptor`` (the released trials themselves, not a resample), with its queries
  (variant ``short``, or ``mention_<CC>`` for RQ3) frozen in ``benchmark_query_snapshot``.
- :func:`import_globalrg_release` — GlobalRG-Retrieval's Parquet with embedded image bytes (kind ``globalrg``,
  the same row keys as :func:`cultura.curate.importers.import_globalrg`, so either import resumes the other).

Column names are guessed from common spellings; every guess can be overridden (``columns={"query": "text"}``).
Each input row gets an ``import_rows`` entry (ok | failed + reason); rerunning an import skips done rows.
"""
from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from .. import db as dbmod
from ..curate.benchmark_queries import store_released_query
from ..curate.concepts import get_concept, imported_concept
from ..curate.images import links
from ..curate.importers import (DatasetImportError, _column, _done, _finish_row, _safe_file, _summary, link_image,
                                read_table, resolve_country, store_image)
from ..bounds import VERSION
from ..db import transaction
from ..names import benchmark_name, check_concept
from .build import content_hash

if TYPE_CHECKING:
    from ..project import Project

IMAGE_COLS = ("image", "img", "image_bytes", "image_path", "file_name", "filename", "path", "file")
CONCEPT_COLS = ("concept", "concept_name", "universal", "category", "object", "label")
COUNTRY_COLS = ("country", "country_code", "region", "culture", "nation")
QUERY_COLS = ("query", "text", "query_text", "caption", "prompt")
QUERY_COUNTRY_COLS = ("query_country", "language_country", "lang_country", "country")
QUERY_LANGUAGE_COLS = ("query_language", "language", "lang")
DESCRIPTOR_COLS = ("descriptor_country", "descriptor", "cd_country", "mention_country", "mention")
ROLES = {"association": ("cr", "lb", "ti"), "descriptor": ("cr", "orlb", "or", "cdr", "lb", "ti")}


def image_bytes(value, images_dir: Path) -> bytes:
    """The bytes of one image cell: a hub ``Image`` struct ``{"bytes", "path"}``, raw bytes, or a path inside
    ``images_dir``. Raises ValueError with the reason."""
    if isinstance(value, dict):
        if value.get("bytes"):
            return bytes(value["bytes"])
        value = value.get("path")
    if isinstance(value, (bytes, bytearray, memoryview)):
        if not value:
            raise ValueError("empty image bytes")
        return bytes(value)
    name = str(value or "").strip()
    if not name:
        raise ValueError("no image (neither bytes nor a path)")
    f = _safe_file(images_dir, name)
    if f is None:
        raise ValueError(f"image file {name!r} not found in {images_dir}")
    return f.read_bytes()


def _image_key(value, row_index: int) -> str:
    """A stable key for an image cell: its path when it has one, else the sha256 of its bytes."""
    if isinstance(value, dict) and value.get("path"):
        return str(value["path"])
    if isinstance(value, (bytes, bytearray, memoryview)) or (isinstance(value, dict) and value.get("bytes")):
        data = value["bytes"] if isinstance(value, dict) else value
        return "sha256:" + hashlib.sha256(bytes(data)).hexdigest()
    return str(value or f"row{row_index}")


def _rows(table, images_dir):
    rows = read_table(table)
    if not rows:
        raise DatasetImportError(f"{table} has no rows.")
    base = Path(images_dir) if images_dir else Path(table).resolve().parent
    if not base.is_dir():
        raise DatasetImportError(f"{base} is not a folder. Pass images_dir, the folder holding the images the "
                                 "table names by path.")
    return rows, base


def _import_images(project: Project, table, kind: str, *, images_dir=None, columns=None) -> dict:
    columns = dict(columns or {})
    rows, base = _rows(table, images_dir)
    ic = _column(rows, columns.get("image"), IMAGE_COLS, "image", table)
    cc = _column(rows, columns.get("country"), COUNTRY_COLS, "country", table)
    kc = _column(rows, columns.get("concept"), CONCEPT_COLS, "concept", table)
    page = next((c for c in rows[0] if c.lower() in ("url", "source_page", "source", "page", "image_url")), None)
    reg, src, db = project.registry, Path(table).name, project.db
    counts, failures = defaultdict(int), []
    for i, row in enumerate(rows):
        key = _image_key(row.get(ic), i)
        concept, bad_name = check_concept(row.get(kc))  # the one name validator (cultura.names)
        rkey = f"{key}|{row.get(cc)}|{concept}"  # an image may be listed for several countries/concepts
        if _done(db, kind, src, rkey):
            counts["already"] += 1
            continue
        country = resolve_country(reg, row.get(cc))
        reason, sha = None, None
        if country is None:
            reason = f"unknown country {row.get(cc)!r}"
        elif country not in {c.code for c in project.countries}:
            reason = f"country {country} is not one of the project's countries (add it in cultura.toml)"
        elif bad_name:
            reason = bad_name
        elif not concept:
            reason = "empty concept"
        else:
            try:
                data = image_bytes(row.get(ic), base)
                with transaction(db):
                    sha = store_image(project, data)
                    link_image(project, sha, concept, country, kind, key, src,
                               source_page=str(row.get(page)) if page and row.get(page) else None)
            except ValueError as e:
                reason = str(e)
        _finish_row(db, kind, src, rkey, key, reason, sha, counts, failures)
    return _summary(dict(counts), failures)


def import_3xcm_images(project: Project, table, *, images_dir=None, columns: dict | None = None) -> dict:
    """Import the 3XCM release's image table (image, concept, country); see the module docstring."""
    return _import_images(project, table, "3xcm", images_dir=images_dir, columns=columns)


def import_globalrg_release(project: Project, table, *, images_dir=None, columns: dict | None = None) -> dict:
    """Import GlobalRG-Retrieval's Parquet (image struct with embedded bytes, country/region, concept)."""
    return _import_images(project, table, "globalrg", images_dir=images_dir, columns=columns)


# ------------------------------------------------------------------ 3XCM trials → a benchmark

def _role_column(rows, columns, role, table) -> str:
    return _column(rows, columns.get(role), (role, f"{role}_image", f"image_{role}", f"{role}_img"),
                   role, table)


def _linked(db, sha: str) -> tuple[int, str] | None:
    """(concept_id, country) of an image from an earlier import or search, when it has exactly one."""
    rows = {(cid, cc) for _, cid, cc in links(db, sha)}
    return next(iter(rows)) if len(rows) == 1 else None


def import_3xcm_benchmark(project: Project, table, *, name: str = "3xcm", version: int | None = None,
                          kind: str | None = None,
                          images_dir=None, columns: dict | None = None) -> dict:
    """Import the 3XCM release's trials as a ready benchmark (``kind`` association | descriptor, guessed from
    the role columns). One transaction: the benchmark appears whole or not at all; rows that cannot be used
    (unknown country, unreadable image, candidate without a concept/country) are skipped and listed in the
    benchmark's report with their reason."""
    name = benchmark_name(name)  # checked before the table is read
    columns = dict(columns or {})
    rows, base = _rows(table, images_dir)
    cols = {c.lower() for c in rows[0]}
    if kind is None:
        kind = "descriptor" if ("orlb" in cols or "orlb_image" in cols or columns.get("orlb")) else "association"
    if kind not in ROLES:
        raise DatasetImportError(f"kind {kind!r} is not association or descriptor.")
    roles = ROLES[kind]
    rcol = {r: _role_column(rows, columns, r, table) for r in roles}
    qc = _column(rows, columns.get("query"), QUERY_COLS, "query", table)
    kc = _column(rows, columns.get("concept"), CONCEPT_COLS, "concept", table)
    lower = {c.lower(): c for c in rows[0]}
    qcc = columns.get("query_country") or next((lower[c] for c in QUERY_COUNTRY_COLS if c in lower), None)
    qlc = columns.get("query_language") or next((lower[c] for c in QUERY_LANGUAGE_COLS if c in lower), None)
    if qcc is None and qlc is None:
        raise DatasetImportError(f"{table} has neither a query country nor a query language column (looked for "
                                 f"{', '.join(QUERY_COUNTRY_COLS + QUERY_LANGUAGE_COLS)}). Name one with "
                                 "columns={'query_country': …}.")
    dc = (_column(rows, columns.get("descriptor_country"), DESCRIPTOR_COLS, "descriptor_country", table)
          if kind == "descriptor" else None)
    db, reg = project.db, project.registry
    project_codes = [c.code for c in project.countries]
    by_language = defaultdict(list)
    for c in project.countries:
        by_language[c.language].append(c.code)
    src = Path(table).name
    if version is not None:
        version = VERSION.check(version, "version")
    if version is None:
        version = (db.execute("SELECT max(version) FROM benchmarks WHERE name = ?", [name]).fetchone()[0] or 0) + 1
    elif db.execute("SELECT 1 FROM benchmarks WHERE name = ? AND version = ?", [name, version]).fetchone():
        raise DatasetImportError(f"Benchmark {name}@{version} exists already. Pick another version or name.")
    items, queries, skipped = [], {}, []
    with transaction(db):
        concept_ids: dict[str, int] = {}

        def concept_id(cname: str) -> int:
            if cname not in concept_ids:
                concept_ids[cname] = imported_concept(db, cname, "import:3xcm")
            return concept_ids[cname]

        for i, row in enumerate(rows):
            cname, bad_name = check_concept(row.get(kc))
            qtext = str(row.get(qc) or "").strip()
            if qcc is not None:
                qcountry = resolve_country(reg, row.get(qcc))
            else:
                cands = by_language.get(str(row.get(qlc) or "").strip().lower(), [])
                qcountry = cands[0] if len(cands) == 1 else None
            dcountry = resolve_country(reg, row.get(dc)) if dc else None
            reason = None
            if bad_name:
                reason = bad_name
            elif not cname or not qtext:
                reason = "empty concept or query"
            elif qcountry is None or qcountry not in project_codes:
                reason = (f"query country/language {row.get(qcc) if qcc else row.get(qlc)!r} is not one project "
                          "country")
            elif dc and (dcountry is None or dcountry not in project_codes):
                reason = f"descriptor country {row.get(dc)!r} is not a project country"
            cands_out = []
            if reason is None:
                for pos, r in enumerate(roles):
                    try:
                        data = image_bytes(row.get(rcol[r]), base)
                        sha = store_image(project, data)
                    except ValueError as e:
                        reason = f"{r}: {e}"
                        break
                    ck = columns.get(f"{r}_country") or lower.get(f"{r}_country")
                    kk = columns.get(f"{r}_concept") or lower.get(f"{r}_concept")
                    ccountry = resolve_country(reg, row.get(ck)) if ck else None
                    cconcept, bad_name = check_concept(row.get(kk)) if kk else ("", None)
                    if bad_name:
                        reason = f"{r}: {bad_name}"
                        break
                    link = _linked(db, sha) if not (ccountry and cconcept) else None
                    if not ccountry and link:
                        ccountry = link[1]
                    if not cconcept and link:
                        cconcept = get_concept(db, link[0])["name"]
                    if not (ccountry and cconcept):
                        reason = (f"{r}: the image's country and concept are unknown (give {r}_country and "
                                  f"{r}_concept columns, or import the image table first)")
                        break
                    cands_out.append({"role": r, "position": pos, "sha256": sha, "concept": cconcept,
                                      "country": ccountry})
            if reason:
                skipped.append({"row": i, "reason": reason})
                continue
            lang = project.country(qcountry).language
            variant = f"mention_{dcountry}" if kind == "descriptor" else "short"
            key = (cname, qcountry, lang, variant)
            if key in queries and queries[key]["text"] != qtext:
                skipped.append({"row": i, "reason": f"a second, different {variant} query for {cname} × {qcountry}"})
                continue
            queries[key] = {"concept": cname, "country": qcountry, "language": lang, "variant": variant,
                            "descriptor_country": dcountry, "text": qtext, "source": f"import:3xcm:{src}"}
            items.append({"item_key": f"{qcountry}/{dcountry or '-'}/{cname}/{i}", "concept": cname,
                          "query_country": qcountry, "query_language": lang, "descriptor_country": dcountry,
                          "candidates": cands_out})
        if not items:
            raise DatasetImportError(f"No usable trial in {table}; first reasons: "
                                     + "; ".join(s["reason"] for s in skipped[:3]))
        qlist = sorted(queries.values(), key=lambda q: (q["concept"], q["country"], q["variant"]))
        report = {"source": src, "rows": len(rows), "skipped": len(skipped), "skipped_rows": skipped[:200]}
        bid = db.execute(
            "INSERT INTO benchmarks (name, version, kind, seed, params, content_hash, n_items, report, status, "
            "created_at) VALUES (?, ?, ?, NULL, ?, ?, ?, ?, 'ready', ?)",
            [name, version, kind, json.dumps({"import": src}), content_hash(kind, items, qlist), len(items),
             json.dumps(report), dbmod.now()]).lastrowid
        for it in items:
            iid = db.execute("INSERT INTO benchmark_items (benchmark_id, item_key, concept_id, query_country, "
                             "query_language, descriptor_country) VALUES (?, ?, ?, ?, ?, ?)",
                             [bid, it["item_key"], concept_id(it["concept"]), it["query_country"],
                              it["query_language"], it["descriptor_country"]]).lastrowid
            for c in it["candidates"]:
                db.execute("INSERT INTO benchmark_candidates (item_id, role, position, sha256, concept_id, country) "
                           "VALUES (?, ?, ?, ?, ?, ?)", [iid, c["role"], c["position"], c["sha256"],
                                                         concept_id(c["concept"]), c["country"]])
        for q in qlist:
            cid = concept_id(q["concept"])
            db.execute("INSERT INTO benchmark_query_snapshot (benchmark_id, concept_id, country, language, variant, "
                       "descriptor_country, text, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       [bid, cid, q["country"], q["language"], q["variant"], q["descriptor_country"], q["text"],
                        q["source"]])
            store_released_query(db, cid, q)  # the live query table too, so the query is listed and editable
    return {"benchmark": f"{name}@{version}", "kind": kind, "items": len(items), "queries": len(qlist),
            "skipped": len(skipped), "failures": [{"key": f"row {s['row']}", "reason": s["reason"]}
                                                  for s in skipped[:20]]}
