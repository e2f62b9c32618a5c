"""Bring existing datasets into a cultura project so they can be evaluated and extended.

- :func:`import_globalrg`: a GlobalRG-style table (image, region/country, universal concept) + image folder;
- :func:`import_captions`: a Crossmodal-3600-style ``captions.jsonl`` (keyed by image id, captions per
  language) + image folder; captions go to the ``captions`` table;
- CAIRe-style per-image culture ratings become decisions, which annotation owns:
  :func:`cultura.annotate.ratings.import_ratings` reads them with the helpers here.

Images are verified with Pillow and stored content-addressed like downloaded ones (``blobs/ab/<sha>.<ext>``).
Linking to concept × country goes through the core tables — a ``queries`` row (status ``imported``), a
``searches`` row and a ``search_results`` row with provider ``import:<kind>``, a ``candidates`` row with url
``import:<kind>:<file>:<key>`` — so ``image_links``, builds and evaluations see imported images exactly like
searched ones. Every input row gets an ``import_rows`` entry (ok | failed + reason): rerunning an import skips
rows already imported, and a bad row never stops the others.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING


from .. import db as dbmod
from ..db.readers import TableReadError, read_rows
from ..errors import CulturaError
from ..names import check_concept
from ..db import transaction
from ..db.blobs import blob_writer, store_blob
from .concepts import imported_concept
from .download import validate_image

if TYPE_CHECKING:
    from ..project import Project

IMAGE_COLS = ("image", "image_path", "path", "file", "filename", "img", "image_id", "image/key", "key", "id")
COUNTRY_COLS = ("country", "country_code", "region", "culture")
CONCEPT_COLS = ("concept", "universal_concept", "category", "label", "class")
SCORE_COLS = ("score", "rating", "value", "relevance", "likert")
SHA_RE = re.compile(r"^[0-9a-f]{64}$")


class DatasetImportError(CulturaError):
    """An input file cannot be imported (the message names the fix)."""


# ------------------------------------------------------------------ reading inputs

def read_table(path) -> list[dict]:
    """Rows of a table to import (:func:`cultura.db.readers.read_rows`): a bad JSON Lines line is an error
    row, which the importers record as a failed row; an unreadable file is one sentence."""
    try:
        # not strict: a bad line is an error row, recorded as a failed row of the import (never the file)
        return read_rows(path)
    except TableReadError as e:
        raise DatasetImportError(str(e)) from None


def _bad_rows(rows: list[dict], kind: str, src: str, db, counts, failures) -> list[dict]:
    """Record the unreadable lines of a table as failed rows (once, also on reruns); return the others."""
    good = []
    for r in rows:
        if "__error__" not in r:
            good.append(r)
            continue
        counts["failed"] += 1
        failures.append({"key": f"line {r['__line__']}", "reason": r["__error__"]})
        with transaction(db):
            _record(db, kind, src, f"line {r['__line__']}", "failed", r["__error__"])
    return good


def _content_key(base: str, row: dict) -> str:
    """The key under which an input row counts as imported: its id plus a hash of the whole row, so a
    second, different file with the same name (or an edited row) is imported, and the same row is not."""
    digest = hashlib.sha256(json.dumps(row, sort_keys=True, default=str, ensure_ascii=False).encode()).hexdigest()
    return f"{base}#{digest[:16]}"


def _column(rows: list[dict], wanted: str | None, candidates, what: str, path) -> str:
    cols = list(dict.fromkeys(k for r in rows for k in r)) if rows else []
    if wanted:
        if wanted not in cols:
            raise DatasetImportError(f"{path} has no column {wanted!r} (columns: {', '.join(cols)}).")
        return wanted
    lower = {c.lower(): c for c in cols}
    for c in candidates:
        if c in lower:
            return lower[c]
    raise DatasetImportError(f"{path} has no {what} column (looked for {', '.join(candidates)}; found "
                       f"{', '.join(cols)}). Name it with --{what}-column.")


def resolve_country(reg, value) -> str | None:
    """An ISO code or a country name (English or native, case-insensitive) → code, else None."""
    v = str(value or "").strip()
    if not v:
        return None
    if v.upper() in reg.countries:
        return v.upper()
    low = v.lower()
    for c in reg.countries.values():
        if low in (c.name.lower(), c.native_name.lower()):
            return c.code
    aliases = {"usa": "US", "united states of america": "US", "uk": "GB", "england": "GB", "korea": "KR",
               "south korea": "KR", "russia": "RU", "vietnam": "VN", "uae": "AE"}
    return aliases.get(low)


def _safe_file(images_dir: Path, name: str) -> Path | None:
    """``images_dir/name`` if it stays inside images_dir and exists; also tries ``name.*``."""
    root = images_dir.resolve()
    p = (root / name).resolve()
    if root != p and root not in p.parents:
        return None
    if p.is_file():
        return p
    hits = sorted(root.glob(f"{glob_escape(name)}.*")) if "/" not in name else []
    return hits[0] if hits else None


def glob_escape(s: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", s)


# ------------------------------------------------------------------ storing

def store_image(project: Project, data: bytes) -> str:
    """Check ``data`` as the downloader does (allowed formats, pixel cap, truncation; no minimum size for
    existing datasets), store the blob and the ``images`` row (idempotent); return sha256. The perceptual
    hashes come from that check's decode (one definition: :mod:`cultura.curate.hashing`), so dedup decodes
    nothing again."""
    info = validate_image(data, max_pixels=project.config.download.max_pixels)
    sha, rel = store_blob(project, data, info.format, sha256=info.sha256)
    project.db["images"].insert({"sha256": sha, "path": rel, "format": info.format, "width": info.width,
                                 "height": info.height, "bytes": len(data), "phash": info.phash,
                                 "dhash": info.dhash, "phash_centre": info.phash_centre,
                                 "phash_variants": info.phash_variants, "phash_fine": info.phash_fine, "status": "ok",
                                 "created_at": dbmod.now()}, ignore=True)
    project.db.execute("UPDATE images SET status = 'ok', reason = NULL, path = ? WHERE sha256 = ? "
                       "AND status = 'missing'", [rel, sha])  # its file had gone missing: restored
    return sha


def link_image(project: Project, sha: str, concept: str, country: str, kind: str, key: str, source: str,
               source_page: str | None = None) -> None:
    """Link an imported image to concept × country through queries/searches/candidates/search_results."""
    db = project.db
    cid = imported_concept(db, concept, f"import:{kind}")
    lang = project.country(country).language
    text = f"import:{kind}:{concept}"
    db["queries"].insert({"concept_id": cid, "country": country, "language": lang, "kind": "english",
                          "text": text, "status": "imported", "created_at": dbmod.now()}, ignore=True)
    qid = db.execute("SELECT id FROM queries WHERE concept_id = ? AND country = ? AND language = ? AND "
                     "kind = 'english' AND text = ?", [cid, country, lang, text]).fetchone()[0]
    provider = f"import:{kind}"
    db["searches"].insert({"query_id": qid, "provider": provider, "status": "done", "n_results": 0,
                           "attempts": 1, "searched_at": dbmod.now()}, ignore=True)
    url = f"import:{kind}:{source}:{key}"
    taken = db.execute("SELECT sha256 FROM candidates WHERE url = ?", [url]).fetchone()
    if taken and taken[0] != sha:  # another file of the same name listed another image under this key
        url = f"{url}#{sha[:16]}"
    db["candidates"].insert({"url": url, "status": "downloaded", "sha256": sha, "updated_at": dbmod.now()},
                            ignore=True)
    cand = db.execute("SELECT id FROM candidates WHERE url = ?", [url]).fetchone()[0]
    if db.execute("SELECT 1 FROM search_results WHERE candidate_id = ? AND query_id = ?", [cand, qid]).fetchone():
        return
    rank = db.execute("SELECT coalesce(max(rank), 0) + 1 FROM search_results WHERE query_id = ? AND provider = ?",
                      [qid, provider]).fetchone()[0]
    db["search_results"].insert({"query_id": qid, "provider": provider, "rank": rank, "candidate_id": cand,
                                 "url": url, "source_page": source_page, "found_at": dbmod.now()})
    db.execute("UPDATE searches SET n_results = n_results + 1 WHERE query_id = ? AND provider = ?",
               [qid, provider])


def _done(db, kind, source, key) -> bool:
    return db.execute("SELECT 1 FROM import_rows WHERE kind = ? AND source = ? AND key = ? AND status = 'ok'",
                      [kind, source, key]).fetchone() is not None


def _record(db, kind, source, key, status, reason=None, sha=None) -> None:
    db["import_rows"].upsert({"kind": kind, "source": source, "key": key, "status": status, "reason": reason,
                              "sha256": sha, "created_at": dbmod.now()}, pk=("kind", "source", "key"))


def _finish_row(db, kind, source, row_key, key, reason, sha, counts, failures) -> None:
    """Record one input row's outcome in ``import_rows`` and in the run's counts and failure list."""
    with transaction(db):
        _record(db, kind, source, row_key, "failed" if reason else "ok", reason, sha)
    counts["failed" if reason else "imported"] += 1
    if reason:
        failures.append({"key": key, "reason": reason})


def _summary(counts, failures) -> dict:
    return {**counts, "failures": failures[:20]}


# ------------------------------------------------------------------ GlobalRG

def import_globalrg(project: Project, table, images, *, image_column=None, country_column=None,
                    concept_column=None) -> dict:
    """Import a GlobalRG-style table: one row per image with its region/country and universal concept."""
    rows = read_table(table)
    images = Path(images)
    if not images.is_dir():
        raise DatasetImportError(f"{images} is not a folder; give the folder holding the images.", param="images")
    if not rows:
        raise DatasetImportError(f"{table} has no rows.")
    counts, failures = defaultdict(int), []
    rows = _bad_rows(rows, "globalrg", Path(table).name, project.db, counts, failures)
    if not rows:
        return _summary(dict(counts), failures)
    ic = _column(rows, image_column, IMAGE_COLS, "image", table)
    cc = _column(rows, country_column, COUNTRY_COLS, "country", table)
    kc = _column(rows, concept_column, CONCEPT_COLS, "concept", table)
    page = next((c for c in rows[0] if c.lower() in ("url", "source_page", "source", "page")), None)
    reg = project.registry
    src = Path(table).name
    db = project.db
    for row in rows:
        key = str(row.get(ic) or "").strip()
        if not key:  # a failed row like any other (kept, once, also on reruns)
            _finish_row(db, "globalrg", src, _content_key("", row), "", "empty image field", None, counts, failures)
            continue
        country = resolve_country(reg, row.get(cc))
        concept, bad_name = check_concept(row.get(kc))  # the one name validator (cultura.names)
        # one image may be listed for several regions/concepts; the row's content decides "already imported"
        rkey = _content_key(f"{key}|{row.get(cc)}|{concept}", row)
        if _done(db, "globalrg", src, rkey):
            counts["already"] += 1
            continue
        reason, sha = None, None
        f = _safe_file(images, key)
        if country is None:
            reason = f"unknown country {row.get(cc)!r}"
        elif bad_name:
            reason = bad_name
        elif not concept:
            reason = "empty concept"
        elif f is None:
            reason = f"image file {key!r} not found in {images}"
        else:
            try:
                with blob_writer(project), transaction(db):  # the row and its import record land together
                    sha = store_image(project, f.read_bytes())
                    link_image(project, sha, concept, country, "globalrg", key, src,
                               source_page=row.get(page) if page else None)
                    _finish_row(db, "globalrg", src, rkey, key, None, sha, counts, failures)
                continue
            except ValueError as e:
                reason = str(e)
        _finish_row(db, "globalrg", src, rkey, key, reason, sha, counts, failures)
    return _summary(dict(counts), failures)


# ------------------------------------------------------------------ Crossmodal-3600 captions

def _captions_of(line: dict, languages) -> dict[str, list[str]]:
    caps = line.get("captions")
    out: dict[str, list[str]] = {}
    if isinstance(caps, dict):
        src = caps
    else:  # XM3600 layout: top-level language keys {"en": {"caption": [...]}}
        src = {k: v for k, v in line.items() if k in languages}
    for lang, v in src.items():
        if isinstance(v, dict):
            v = v.get("caption") or v.get("captions") or []
        if isinstance(v, str):
            v = [v]
        texts = [str(t).strip() for t in v if str(t).strip()]
        if texts:
            out[str(lang)] = texts
    return out


def import_captions(project: Project, captions, images) -> dict:
    """Import a Crossmodal-3600-style ``captions.jsonl``: per line an image id (``image/key``, ``image_id``,
    ``key`` or ``id``) and captions per language (``{"captions": {"de": [...]}}`` or XM3600's top-level
    ``{"de": {"caption": [...]}}``). Lines with ``concept`` and ``country`` are also linked."""
    rows = read_table(captions)
    images = Path(images)
    if not images.is_dir():
        raise DatasetImportError(f"{images} is not a folder; give the folder holding the images.", param="images")
    reg = project.registry
    languages = set(reg.languages)
    src = Path(captions).name
    db = project.db
    counts, failures = defaultdict(int), []
    rows = _bad_rows(rows, "captions", src, db, counts, failures)
    for line in rows:
        key = next((str(line[k]) for k in ("image/key", "image_id", "key", "id", "image") if line.get(k)), "")
        if not key:
            _finish_row(db, "captions", src, _content_key("", line), "", "no image id", None, counts, failures)
            continue
        row_key = _content_key(key, line)  # a second, different captions file is imported, not "already"
        if _done(db, "captions", src, row_key):
            counts["already"] += 1
            continue
        caps = _captions_of(line, languages)
        f = _safe_file(images, str(line.get("file") or line.get("image") or key))
        reason, sha = None, None
        concept, bad_name = check_concept(line.get("concept"))
        if not caps:
            reason = "no captions"
        elif bad_name:
            reason = bad_name
        elif f is None:
            reason = f"image file {key!r} not found in {images}"
        else:
            try:
                with blob_writer(project), transaction(db):  # the row and its import record land together
                    sha = store_image(project, f.read_bytes())
                    for lang, texts in sorted(caps.items()):
                        for i, t in enumerate(texts):
                            db["captions"].upsert({"image_sha256": sha, "language": lang, "idx": i, "text": t,
                                                   "source": "import:captions", "created_at": dbmod.now()},
                                                  pk=("image_sha256", "language", "idx", "source"))
                    country = resolve_country(reg, line.get("country"))
                    if country and concept:
                        link_image(project, sha, concept, country, "captions",
                                   key, src)
                    _finish_row(db, "captions", src, row_key, key, None, sha, counts, failures)
                counts["captions"] += sum(len(v) for v in caps.values())
                continue
            except ValueError as e:
                reason = str(e)
        _finish_row(db, "captions", src, row_key, key, reason, sha, counts, failures)
    return _summary(dict(counts), failures)
