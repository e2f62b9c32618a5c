"""Import seed 004's (CAIRe) test sets from local files: the **specific** set (rare, culturally specific
concepts with multi-label gold culture labels; §4.1, App. C.6) and the **universal** set (20 universal concepts
× 10 countries, generated and natural images rated 1–5 by annotators from 10 countries; §4.2).

The releases (``cmu-lti/caire-specific``, ``cmu-lti/caire-universal`` on the Hugging Face hub) are read from a
local Parquet / JSONL / CSV file; cultura downloads nothing. Column names are matched case-insensitively from
the lists below (the seed does not print the release schema; these cover the shapes we expect, and every
column can be named explicitly):

specific set, one row per image
  image        the image: Parquet image struct ``{"bytes", "path"}``, raw bytes, or a file path (relative to
               ``images``) — also ``image_path``, ``file``, ``path``
  concept      the entity shown ("Namahage") — also ``entity``, ``name``, ``title``
  labels       the gold relevant culture labels: a list or ``;``-separated — also ``gold``, ``gold_labels``,
               ``cultures``
  candidates   optional: the candidate label set of the image's proxy ("Japan;China;Korea…") — also
               ``candidate_labels``, ``label_set_labels``; without it, the union of all gold labels of the
               same ``proxy`` is used (or of the whole file when there is no proxy column)
  proxy        optional: the culture proxy ("World religions") — also ``category``, ``label_set``
  entity_id    optional: the gold KB entity (else ``concept`` is matched to the lemmas/aliases of ``kb``)

universal set, one row per image × rater country (long) or per image with a ``ratings`` mapping (wide)
  image, concept     as above ("Breakfast")
  country            the country in the generation/retrieval prompt ("A realistic photo of CONCEPT in COUNTRY")
                     — also ``prompt_country``, ``target_country``
  split              optional: ``generated`` / ``natural`` (``--split`` keeps one)
  rater_country + rating   long form — also ``annotator_country`` / ``score``, ``likert``, ``value``
  ratings            wide form: ``{country: mean or [ratings]}``

What is stored:
- images, checked and stored like downloaded ones; universal images are linked to concept × prompt country
  (so per-concept aggregation, seed 004 Table 2, finds the concept of each image);
- every culture label (gold and candidates) as a culture label (:mod:`cultura.cultures`) unless it is a country;
- human judgments as ``relevance`` decisions (rule ``import``, :func:`cultura.annotate.decisions.record_rating`):
  universal = mean Likert per image × rater country; specific = 5 for a gold label, 1 for a candidate that is
  not (binary gold; relevant at any t in 2..5);
- specific: gold KB entities in ``attribution_gold`` (linking accuracy and the gold-page upper bound).

Both importers are idempotent (a rerun supersedes nothing that did not change) and report failed rows with
their reason; a bad row never stops the others.
"""
from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from .... import db as dbmod
from ....annotate.decisions import record_rating
from ....cultures import add_culture_label, registered_labels, resolve_culture
from ....curate.importers import link_image, read_table, resolve_country, store_image
from ....db import transaction
from ....errors import CulturaError
from ....names import BadName, clean_name

if TYPE_CHECKING:
    from ....project import Project

IMAGE_COLS = ("image", "image_path", "file", "path", "img")
CONCEPT_COLS = ("concept", "entity", "name", "title")
LABEL_COLS = ("labels", "gold", "gold_labels", "cultures", "relevant_labels")
CAND_COLS = ("candidates", "candidate_labels", "label_set_labels")
PROXY_COLS = ("proxy", "category", "label_set")
PROMPT_COUNTRY_COLS = ("country", "prompt_country", "target_country")
RATER_COLS = ("rater_country", "annotator_country", "rater", "annotator_nationality")
RATING_COLS = ("rating", "score", "likert", "value")


def _col(row_keys, candidates, explicit=None):
    lower = {str(k).lower(): k for k in row_keys}
    if explicit:
        if explicit not in row_keys:
            raise CulturaError(f"No column {explicit!r} (columns: {', '.join(map(str, row_keys))}).")
        return explicit
    return next((lower[c] for c in candidates if c in lower), None)


def _list(v) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        s = v.strip()
        if s.startswith("["):
            return [str(x).strip() for x in json.loads(s) if str(x).strip()]
        return [x.strip() for x in s.split(";") if x.strip()]
    return [str(x).strip() for x in v if str(x).strip()]


def image_bytes(value, images: Path | None) -> bytes:
    """The bytes of a release's image cell: a Parquet image struct, raw bytes, or a path under ``images``."""
    if isinstance(value, dict):
        if value.get("bytes"):
            return bytes(value["bytes"])
        value = value.get("path")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    name = str(value or "").strip()
    if not name:
        raise ValueError("no image (empty cell)")
    if images is None:
        raise ValueError(f"image {name!r} is a path; pass the images folder")
    root = images.resolve()
    p = (root / name).resolve()
    if root not in p.parents or not p.is_file():
        raise ValueError(f"image file {name!r} not found under {images}")
    return p.read_bytes()


def _record(db, kind, source, key, reason=None, sha=None):
    db["import_rows"].upsert({"kind": kind, "source": source, "key": key, "status": "failed" if reason else "ok",
                              "reason": reason, "sha256": sha, "created_at": dbmod.now()},
                             pk=("kind", "source", "key"))


def _label_key(project: Project, label: str, known: set[str]) -> str:
    """A culture label's key: a registry country stays a code; anything else is registered as a label."""
    code = resolve_country(project.registry, label)
    if code:
        return code
    lab = resolve_culture(project, label)
    if lab.kind != "country" and lab.key not in known:
        add_culture_label(project, lab.key, name=lab.name, source="import:caire")
        known.add(lab.key)
    return lab.key


def _decide(db, sha, label, value, n, source, details=None) -> bool:
    """Store one imported relevance decision (supersede a different earlier one); True if written."""
    return record_rating(db, sha, label, value, n, campaign=f"import:{source}", details=details)


def import_caire_specific(project: Project, table, *, images=None, kb: str = "default") -> dict:
    """Import the specific set (module doc). Returns ``{"imported", "failed", "labels", "decisions",
    "gold", "unmatched_concepts", "failures"}``."""
    rows = read_table(table)
    if not rows:
        raise CulturaError(f"{table} has no rows.")
    keys = list(rows[0].keys())
    ic, cc_, lc = _col(keys, IMAGE_COLS), _col(keys, CONCEPT_COLS), _col(keys, LABEL_COLS)
    if not (ic and cc_ and lc):
        raise CulturaError(f"{table}: the specific set needs image, concept and labels columns (found "
                           f"{', '.join(map(str, keys))}).")
    cand_c, proxy_c, eid_c = _col(keys, CAND_COLS), _col(keys, PROXY_COLS), _col(keys, ("entity_id", "babelnet_id"))
    imgdir = Path(images) if images else Path(table).parent
    source = Path(table).name
    db = project.db
    pool: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        pool[str(r.get(proxy_c) or "") if proxy_c else ""].update(_list(r.get(lc)))
    lemmas: dict[str, set[str]] = defaultdict(set)
    for eid, lemma, aliases in db.execute("SELECT entity_id, lemma, aliases FROM kb_entities WHERE kb = ?", [kb]):
        for name in [lemma, *json.loads(aliases or "[]")]:
            lemmas[str(name).casefold()].add(eid)
    known = {lab.key for lab in registered_labels(project)}
    counts, failures, unmatched = defaultdict(int), [], set()
    for i, r in enumerate(rows, 1):
        try:  # the one name validator (cultura.names); the case is kept (it is matched to KB lemmas)
            concept = clean_name(r.get(cc_))
        except BadName as e:
            concept, bad = "", e.reason
        else:
            bad = None
        key = f"{i}|{concept}"
        try:
            if bad:
                raise ValueError(bad)
            data = image_bytes(r.get(ic), imgdir)
            sha = store_image(project, data)
        except ValueError as e:
            counts["failed"] += 1
            failures.append({"row": i, "key": concept, "reason": str(e)})
            with transaction(db):
                _record(db, "caire-specific", source, key, str(e))
            continue
        gold = [_label_key(project, x, known) for x in _list(r.get(lc))]
        cands = _list(r.get(cand_c)) if cand_c else []
        cands = [_label_key(project, x, known) for x in
                 (cands or sorted(pool[str(r.get(proxy_c) or "") if proxy_c else ""]))]
        with transaction(db):
            for lab in dict.fromkeys(cands + gold):
                counts["decisions"] += _decide(db, sha, lab, 5.0 if lab in gold else 1.0, 1, source,
                                               {"gold": lab in gold, "concept": concept,
                                                "proxy": r.get(proxy_c) if proxy_c else None})
            eids = {str(r.get(eid_c)).strip()} if eid_c and r.get(eid_c) else lemmas.get(concept.casefold(), set())
            if eids:
                db.execute("DELETE FROM attribution_gold WHERE sha256 = ?", [sha])
                db["attribution_gold"].insert_all([{"sha256": sha, "entity_id": e, "source": f"import:{source}",
                                                    "created_at": dbmod.now()} for e in sorted(eids)],
                                                  pk=("sha256", "entity_id"), replace=True)
                counts["gold"] += 1
            else:
                unmatched.add(concept)
            _record(db, "caire-specific", source, key, None, sha)
        counts["imported"] += 1
    return {**dict(counts), "labels": len({lab.key for lab in registered_labels(project)}),
            "unmatched_concepts": sorted(unmatched), "failures": failures[:20]}


def import_caire_universal(project: Project, table, *, images=None, split: str | None = None) -> dict:
    """Import the universal set (module doc). Returns ``{"imported", "failed", "decisions", "ratings",
    "failures"}``."""
    rows = read_table(table)
    if not rows:
        raise CulturaError(f"{table} has no rows.")
    keys = list(rows[0].keys())
    ic, cc_, pc = _col(keys, IMAGE_COLS), _col(keys, CONCEPT_COLS), _col(keys, PROMPT_COUNTRY_COLS)
    rc, sc, wide = _col(keys, RATER_COLS), _col(keys, RATING_COLS), _col(keys, ("ratings",))
    split_c = _col(keys, ("split", "source", "kind"))
    if not (ic and cc_ and pc) or not ((rc and sc) or wide):
        raise CulturaError(f"{table}: the universal set needs image, concept, country and either rater_country + "
                           f"rating or a ratings column (found {', '.join(map(str, keys))}).")
    imgdir = Path(images) if images else Path(table).parent
    source = Path(table).name
    db = project.db
    counts, failures = defaultdict(int), []
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    stored: dict[str, str] = {}
    for i, r in enumerate(rows, 1):
        if split and split_c and str(r.get(split_c) or "").strip().lower() != split.lower():
            continue
        try:  # the one name validator (cultura.names); the case is kept as the set writes it
            concept, bad = clean_name(r.get(cc_)), None
        except BadName as e:
            concept, bad = "", e.reason
        prompt_cc = resolve_country(project.registry, r.get(pc))
        cell = r.get(ic)
        ident = (hashlib.sha256(cell["bytes"]).hexdigest() if isinstance(cell, dict) and cell.get("bytes")
                 else str(cell.get("path") if isinstance(cell, dict) else cell)[:200])
        try:
            if bad:
                raise ValueError(bad)
            if not concept or prompt_cc is None:
                raise ValueError(f"unknown prompt country {r.get(pc)!r}" if concept else "no concept")
            if ident not in stored:
                sha = store_image(project, image_bytes(cell, imgdir))
                with transaction(db):
                    link_image(project, sha, concept, prompt_cc, "caire-universal", f"{concept}|{prompt_cc}|{ident}",
                               source)
                stored[ident] = sha
            sha = stored[ident]
            ratings = (r.get(wide) if wide else {r.get(rc): r.get(sc)}) or {}
            if isinstance(ratings, str):
                ratings = json.loads(ratings)
            if isinstance(ratings, list):  # a Parquet map column reads as [(key, value), ...]
                ratings = dict(ratings)
            for rater, val in ratings.items():
                code = resolve_country(project.registry, rater)
                if code is None:
                    raise ValueError(f"unknown rater country {rater!r}")
                vals = val if isinstance(val, (list, tuple)) else [val]
                for v in vals:
                    v = float(v)
                    if not 1 <= v <= 5:
                        raise ValueError(f"rating {v!r} is not on the 1-5 scale")
                    groups[(sha, code)].append(v)
                    counts["ratings"] += 1
        except (ValueError, TypeError, json.JSONDecodeError) as e:
            counts["failed"] += 1
            failures.append({"row": i, "key": concept, "reason": str(e)})
            with transaction(db):
                _record(db, "caire-universal", source, f"{i}|{concept}", str(e))
            continue
        counts["rows"] += 1
    with transaction(db):
        for (sha, code), vals in sorted(groups.items()):
            counts["decisions"] += _decide(db, sha, code, sum(vals) / len(vals), len(vals), source,
                                           {"ratings": vals})
        for ident, sha in stored.items():
            _record(db, "caire-universal", source, ident, None, sha)
    return {"imported": len(stored), **dict(counts), "failures": failures[:20]}
