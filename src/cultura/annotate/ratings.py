"""Per-image culture ratings imported as relevance decisions (CAIRe-style files: image, country, a Likert 1–5
score, optional annotator), ``decisions`` kind ``relevance``, rule ``import``: the mean over raters. Like a
relevance campaign's decisions, they settle the culture questions of the images they rate for every country of
the question (:func:`cultura.curate.cultures_decide.resolve_rated_conflicts`).

The image is a sha256 or the key of an earlier import (:mod:`cultura.curate.importers`); every input row gets an
``import_rows`` entry (ok | failed + reason), and a bad row never stops the others.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from ..curate.cultures_decide import resolve_rated_conflicts
from ..curate.images import image_paths
from ..curate.importers import (COUNTRY_COLS, IMAGE_COLS, SCORE_COLS, SHA_RE, DatasetImportError, _bad_rows, _column,
                                _record, _summary, read_table, resolve_country)
from ..db import transaction
from .decisions import rated_countries, record_rating

if TYPE_CHECKING:
    from ..project import Project


def import_ratings(project: Project, path, *, image_column=None, country_column=None, score_column=None) -> dict:
    """Import per-image culture ratings (Likert 1–5) as ``relevance`` decisions (rule ``import``, value = mean
    over raters, ``n_annotations`` = raters). The image is a sha256 or the key of an earlier import. A
    re-import supersedes the earlier imported decision for the same image × country."""
    rows = read_table(path)
    if not rows:
        raise DatasetImportError(f"{path} has no rows.")
    counts, failures = defaultdict(int), []
    rows = _bad_rows(rows, "ratings", Path(path).name, project.db, counts, failures)
    if not rows:
        return _summary(dict(counts), failures)
    ic = _column(rows, image_column, ("sha256",) + IMAGE_COLS, "image", path)
    cc = _column(rows, country_column, COUNTRY_COLS, "country", path)
    sc = _column(rows, score_column, SCORE_COLS, "score", path)
    reg = project.registry
    db = project.db
    src = Path(path).name
    known = set(image_paths(db))
    by_key = {}
    for k, sha in db.execute("SELECT key, sha256 FROM import_rows WHERE status = 'ok' AND sha256 IS NOT NULL "
                             "ORDER BY created_at"):
        k = k.split("#", 1)[0]  # without the content hash
        by_key[k] = by_key[k.split("|", 1)[0]] = sha  # the full key, and the image name alone
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for i, row in enumerate(rows):
        img = str(row.get(ic) or "").strip()
        sha = img if SHA_RE.match(img) and img in known else by_key.get(img)
        country = resolve_country(reg, row.get(cc))
        try:
            score = float(row.get(sc))
        except (TypeError, ValueError):
            score = None
        reason = None
        if sha is None:
            reason = f"unknown image {img!r} (import the images first)"
        elif country is None:
            reason = f"unknown country {row.get(cc)!r}"
        elif score is None or not 1 <= score <= 5:
            reason = f"score {row.get(sc)!r} is not a number from 1 to 5 (rescale to the Likert scale)"
        if reason:
            counts["failed"] += 1
            failures.append({"row": i + 1, "key": img, "reason": reason})
            with transaction(db):
                _record(db, "ratings", src, f"{img}|{row.get(cc)}|{i + 1}", "failed", reason, sha)
            continue
        groups[(sha, country)].append(score)
    with transaction(db):
        for (sha, country), scores in sorted(groups.items()):
            if not record_rating(db, sha, country, sum(scores) / len(scores), len(scores), campaign=f"import:{src}",
                                 details={"scores": scores}):
                counts["unchanged"] += 1
                continue
            _record(db, "ratings", src, f"{sha}|{country}", "ok", None, sha)
            counts["decisions"] += 1
    counts["ratings"] = sum(len(v) for v in groups.values())
    # ratings decide culture questions however they arrive: the same door as a relevance campaign's decisions
    counts["flags_resolved"] = resolve_rated_conflicts(db, f"import:{src}", rated_countries(db))
    return _summary(dict(counts), failures)
