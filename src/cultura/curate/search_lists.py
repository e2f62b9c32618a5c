"""The providers that read their own input rather than searching the project's queries: ``urls:PATH`` (a
JSONL/CSV/Parquet list of URLs, the shape img2dataset consumes), ``folder:DIR`` (local images laid out
``DIR/<COUNTRY>/<concept>/*.jpg``) and :func:`ingest_img2dataset` (an img2dataset output folder read back in).

Every input row is either stored or a reject row with its reason (:mod:`cultura.curate.search_rows`); each
summary says ``rows`` = ``stored`` + ``rejected``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .. import pixels
from ..db import transaction
from ..db.readers import ERROR, read_rows
from ..errors import CulturaError
from ..names import BadName, check_concept
from ..progress import Progress, track
from ..redact import display_url, known_secrets
from .concepts import add_concepts, get_concept, normalise
from .exact_urls import record_sources
from .search_rows import Provider, check_url, parse_rank, query_for, reject, store_results

if TYPE_CHECKING:
    from ..project import Project

#: The file suffixes ``folder:`` takes: those of every format the downloader accepts (:mod:`cultura.pixels`).
IMAGE_SUFFIXES = frozenset(pixels.SUFFIXES)


class UrlsProvider(Provider):
    """``urls:PATH``: rows with at least ``url, concept, country`` (optional ``language, query, rank, title,
    source_page``). Unknown concepts are added (source ``import:urls``); bad rows go to ``ingest_rejects``."""

    name = "urls"

    def __init__(self, arg):
        if not arg:
            raise CulturaError("The urls provider needs a file: urls:PATH (JSONL, CSV or Parquet).", param="provider")
        self.path = Path(arg)

    def run(self, project: Project, *, per_query: int, refresh: bool = False, progress: Progress = None) -> dict:
        if not self.path.exists():
            raise CulturaError(f"{self.path} does not exist. Give the path of a JSONL/CSV/Parquet URL list.")
        rows = read_rows(self.path)
        if rows and not any("url" in r or ERROR in r for r in rows):  # a file without the column at all
            raise CulturaError(f"{self.path} has no 'url' column (columns: {', '.join(rows[0])}). It needs at "
                               "least url, concept, country.")
        db = project.db
        source = f"urls:{self.path}"
        codes = {c.code for c in project.countries}
        grouped: dict[int, list[dict]] = {}
        rejected = 0
        # URLs stored without their secret (a token=, key=… value, user:password@): the row they are read again
        # from when downloaded (curate/exact_urls.py); two URLs that differ only there would be one candidate
        secrets, shown, read_again = known_secrets(), {}, []
        concept_ids: dict[str, int] = {}  # added once per concept, not per row: a long list repeats a few
        where = str(self.path.resolve())  # once, not per row: a signed list can hold a million URLs
        with transaction(db):
            for i, row in enumerate(track(rows, "reading the urls: list", progress=progress), start=1):
                reason = row.get(ERROR)
                url = str(row.get("url") or "").strip()
                country_code = str(row.get("country") or "").strip().upper()
                concept, bad_name = check_concept(row.get("concept"))
                rank, bad_rank = parse_rank(row.get("rank"))
                if not reason:
                    if (reason := check_url(url)):
                        pass
                    elif bad_name:
                        reason = bad_name
                    elif not concept:
                        reason = "missing concept"
                    elif bad_rank:
                        reason = bad_rank
                    elif country_code not in codes:
                        reason = (f"country {country_code or '(empty)'} is not a project country "
                                  f"({', '.join(sorted(codes))})")
                    else:
                        display = display_url(url, secrets=secrets)
                        first_url, first_line = shown.setdefault(display, (url, i))
                        if first_url != url:
                            reason = (f"differs from row {first_line} only in a secret (a token, key or password), "
                                      "which the project does not store, so both would be one image; give each "
                                      "image a URL that differs elsewhere")
                        elif display != url:
                            read_again.append((display, where, i))
                if reason:
                    rejected += 1
                    reject(db, source, i, row, reason)
                    continue
                cid = concept_ids.get(concept)
                if cid is None:
                    add_concepts(project, [concept], source="import:urls")
                    cid = concept_ids[concept] = db.execute("SELECT id FROM concepts WHERE name = ?",
                                                            [concept]).fetchone()[0]
                country = project.country(country_code)
                qid = query_for(db, project, cid, country, row.get("language") or None, row.get("query") or None,
                                 "import")
                grouped.setdefault(qid, []).append({
                    **{k: v for k, v in row.items() if k != "url"},
                    "image": url, "title": row.get("title"), "url": row.get("source_page"),
                    "rank": rank, "width": row.get("width"), "height": row.get("height"), "_line": i})
        done = skipped = n = stored = 0
        for qid, results in track(list(grouped.items()), "storing results (urls)", progress=progress):
            # rows without a rank follow the ranked ones, numbered after the largest rank given (never onto one)
            last = max((r["rank"] or 0 for r in results), default=0)
            unranked = [r for r in results if not r["rank"]]
            for pos, r in enumerate(unranked, start=1):
                r["rank"] = last + pos
            results.sort(key=lambda r: (r["rank"], r["_line"]))
            searched = db.execute("SELECT 1 FROM searches WHERE query_id=? AND provider=? AND status='done'",
                                  [qid, self.name]).fetchone()
            # a query searched before keeps its results; rows added to the file since are appended
            out = store_results(db, qid, self.name, results, source=source, append=bool(searched) and not refresh)
            n += out["written"]
            stored += out["written"] + out["already"]
            rejected += out["rejected"]
            if out["written"] or not searched or refresh:
                done += 1
            else:
                skipped += 1
        with transaction(db):  # also for rows searched before: a rerun with the file repairs a lost record
            record_sources(db, read_again)
        return {"rows": len(rows), "stored": stored, "rejected": rejected, "queries": done,
                "skipped_queries": skipped, "results": n}


class FolderProvider(Provider):
    """``folder:DIR``: local images laid out ``DIR/<COUNTRY>/<concept>/*.<suffix>``, each suffix of
    :data:`IMAGE_SUFFIXES` (JPEG, PNG, GIF, WebP, BMP, TIFF, AVIF)."""

    name = "folder"

    def __init__(self, arg):
        if not arg:
            raise CulturaError("The folder provider needs a directory: folder:DIR.", param="provider")
        self.root = Path(arg).resolve()

    def run(self, project: Project, *, per_query: int, refresh: bool = False, progress: Progress = None) -> dict:
        if not self.root.is_dir():
            raise CulturaError(f"{self.root} is not a directory. Lay images out as DIR/<COUNTRY>/<concept>/*.jpg.")
        db = project.db
        source = f"folder:{self.root}"
        codes = {c.code for c in project.countries}
        # every entry the walk meets is a row: stored (an image file of DIR/<COUNTRY>/<concept>/) or a reject
        # row; a rejected folder is one row (what it holds is not read)
        counts = {"rows": 0, "stored": 0, "rejected": 0, "files": 0, "queries": 0, "results": 0}

        def refuse(path: Path, reason: str) -> None:
            with transaction(db):
                reject(db, source, None, {"path": str(path)}, reason)
            counts["rows"] += 1
            counts["rejected"] += 1

        def entries(d: Path) -> list[Path]:
            """``d``'s entries that stay inside the tree: a symlink leading out of it is a reject row and
            is never followed (nor is anything outside the tree opened)."""
            out = []
            for p in sorted(d.iterdir()):
                if p.is_symlink():
                    target = Path(os.path.realpath(p))
                    if target != self.root and self.root not in target.parents:
                        refuse(p, "symlink leads out of the folder (not followed)")
                        continue
                out.append(p)
            return out

        misplaced = "file outside DIR/<COUNTRY>/<concept>/, where images are read (move it into a concept folder)"
        for cdir in track(entries(self.root), "searching (folder)", progress=progress):
            if not cdir.is_dir():
                refuse(cdir, misplaced)
                continue
            code = cdir.name.upper()
            if code not in codes:
                refuse(cdir, f"folder {cdir.name} is not a project country ({', '.join(sorted(codes))})")
                continue
            country = project.country(code)
            for kdir in entries(cdir):
                if not kdir.is_dir():
                    refuse(kdir, misplaced)
                    continue
                try:
                    concept = normalise(kdir.name.replace("_", " "))
                except BadName as e:  # the folder's name is refused: a reject row, the others go on
                    refuse(kdir, f"folder {e.reason}")
                    continue
                inside = entries(kdir)
                files = [p for p in inside if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES]
                for o in inside:
                    if o.is_dir():
                        refuse(o, "folder nested below DIR/<COUNTRY>/<concept>/ (not read); move its images up")
                    elif o not in files:
                        refuse(o, f"not an image file type ({o.suffix or 'none'})")
                with transaction(db):
                    add_concepts(project, [concept], source="import:folder")
                    cid = get_concept(db, concept)["id"]
                    qid = query_for(db, project, cid, country, None, f"folder:{cdir.name}/{kdir.name}", "folder")
                counts["files"] += len(files)
                counts["rows"] += len(files)
                searched = db.execute("SELECT 1 FROM searches WHERE query_id=? AND provider=? AND status='done'",
                                      [qid, self.name]).fetchone()
                results = [{"image": p.as_uri(), "title": p.name, "url": None, "path": str(p)} for p in files]
                # files added since the last search are picked up without refresh (appended)
                out = store_results(db, qid, self.name, results, source=source,
                                    append=bool(searched) and not refresh)
                counts["results"] += out["written"]
                counts["stored"] += out["written"] + out["already"]
                counts["rejected"] += out["rejected"]
                if out["written"] or not searched or refresh:
                    counts["queries"] += 1
        return counts


def ingest_img2dataset(project: Project, directory: str | Path) -> dict:
    """Read an img2dataset output folder (shards of ``<key>.jpg`` + ``<key>.json``) back in.

    Each sidecar JSON must carry ``url`` and ``status``, and the additional columns ``concept`` and
    ``country`` (run img2dataset with ``--save_additional_columns '["concept","country"]'``). Successful
    samples become candidates pointing at the local file (provenance: the original URL in the search
    result); failed samples are recorded in ``ingest_rejects`` with img2dataset's error message."""
    root = Path(directory)
    if not root.is_dir():
        raise CulturaError(f"{root} is not a directory. Give the img2dataset output folder.")
    db = project.db
    source = f"img2dataset:{root.resolve()}"
    codes = {c.code for c in project.countries}
    sidecars = sorted(root.rglob("*.json"))
    sidecars = [p for p in sidecars if not p.name.endswith("_stats.json")]
    if not sidecars:
        raise CulturaError(f"No img2dataset sidecar .json files under {root}. Is this an img2dataset output "
                           "folder written with output_format 'files'?")
    grouped: dict[int, list[dict]] = {}
    rejected = 0
    with transaction(db):
        for i, side in enumerate(sidecars):
            try:
                meta = json.loads(side.read_text("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                meta = {"status": "unreadable", "error_message": f"sidecar is not UTF-8 JSON ({e})"}
            if not isinstance(meta, dict):
                meta = {"status": "unreadable", "error_message": "sidecar is JSON but not an object"}
            img = next((side.with_suffix(s) for s in (".jpg", ".jpeg", ".png", ".webp")
                        if side.with_suffix(s).exists()), None)
            reason = None
            if meta.get("status") == "unreadable":
                reason = meta["error_message"]
            elif meta.get("status") not in (None, "success"):
                reason = f"img2dataset: {meta.get('error_message') or meta.get('status')}"
            elif img is None:
                reason = "image file missing next to its sidecar"
            elif root.resolve() not in Path(os.path.realpath(img)).parents:
                reason = "image file is a symlink out of the folder (not followed)"
            elif not meta.get("concept"):
                reason = "missing additional column 'concept'"
            elif check_concept(meta["concept"])[1]:
                reason = check_concept(meta["concept"])[1]
            elif str(meta.get("country", "")).upper() not in codes:
                reason = f"country {meta.get('country')!r} is not a project country"
            if reason:
                reject(db, source, i, {"sidecar": str(side), "url": meta.get("url")}, reason)
                rejected += 1
                continue
            concept = normalise(meta["concept"])
            add_concepts(project, [concept], source="import:img2dataset")
            cid = get_concept(db, concept)["id"]
            country = project.country(str(meta["country"]).upper())
            qid = query_for(db, project, cid, country, meta.get("language"), meta.get("query"), "import")
            grouped.setdefault(qid, []).append({"image": img.resolve().as_uri(), "url": meta.get("source_page"),
                                                "original_url": meta.get("url"), "title": meta.get("caption"),
                                                "width": meta.get("original_width"),
                                                "height": meta.get("original_height"), "key": meta.get("key")})
    n = 0
    for qid, results in grouped.items():
        results.sort(key=lambda r: str(r.get("key")))
        out = store_results(db, qid, "img2dataset", results, source=source)
        n += out["written"]
        rejected += out["rejected"]
    return {"samples": len(sidecars), "rows": len(sidecars), "stored": n, "rejected": rejected, "results": n}
