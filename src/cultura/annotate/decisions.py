"""The decisions read back, and the ratings imported as decisions: what curation, build, export, evaluation and
the view need of the ``decisions`` table (and of the current annotations behind the relevance ratings).

Annotation owns ``decisions``: adjudication (:mod:`cultura.annotate.decide`) writes them, imported ratings
(CAIRe sets, rating files) are written by :func:`record_rating`; a decision is never deleted, a newer one
supersedes it. Every other area reads them through the functions here.
"""
from __future__ import annotations

from typing import Iterable

from cultura.db import dumps, now

#: The columns of a decision row as :func:`current_rows` returns them.
COLUMNS = ("id", "kind", "item_key", "sha256", "country", "cluster_id", "label", "value", "rule", "n_annotations",
           "agreement", "details", "decided_at")


def current_decisions(db, kind: str) -> dict[str, str]:
    """sha256 → label of the newest current (not superseded) decision of ``kind`` per image."""
    latest: dict[str, str] = {}
    for sha, label in db.execute("SELECT sha256, label FROM decisions WHERE kind = ? AND superseded = 0 "
                                 "AND sha256 IS NOT NULL ORDER BY id", [kind]):
        latest[sha] = label
    return latest


def filter_reviewed(db) -> bool:
    """True when any current filter decision exists (the project has been through the filter review)."""
    return db.execute("SELECT 1 FROM decisions WHERE kind = 'filter' AND superseded = 0 LIMIT 1").fetchone() \
        is not None


def removed_images(db) -> set[str]:
    """Images with a current 'filter' decision 'remove'."""
    return {r[0] for r in db.execute("SELECT sha256 FROM decisions WHERE kind = 'filter' AND superseded = 0 "
                                     "AND label = 'remove' AND sha256 IS NOT NULL").fetchall()}


def dropped_copies(db) -> set[str]:
    """Images the current dedup-review decision drops (a reviewer kept another copy)."""
    return {s for s, label in current_decisions(db, "dedup").items() if label == "drop"}


def current_per_image(db, kind: str) -> list[dict]:
    """Current decisions of one kind, the newest per image (per image × country for ``relevance``):
    ``{"sha256", "country", "label", "value"}``."""
    rows = db.execute(
        "SELECT id, sha256, country, label, value FROM decisions WHERE kind = ? AND superseded = 0 "
        "AND sha256 IS NOT NULL ORDER BY id", [kind]).fetchall()
    latest: dict[tuple, dict] = {}
    for _, sha, country, label, value in rows:
        latest[(sha, country if kind == "relevance" else None)] = {
            "sha256": sha, "country": country, "label": label, "value": value}
    return list(latest.values())


def rated_countries(db) -> dict[str, set[str]]:
    """sha256 → the countries with a current relevance decision for it."""
    rated: dict[str, set[str]] = {}
    for sha, cc in db.execute("SELECT sha256, country FROM decisions WHERE kind = 'relevance' AND superseded = 0 "
                              "AND sha256 IS NOT NULL"):
        rated.setdefault(sha, set()).add(cc)
    return rated


def rated_links(db) -> set[tuple[str, str]]:
    """``(sha256, country)`` pairs with a current relevance decision that has a value."""
    return {(s, k) for s, k in db.execute(
        "SELECT sha256, country FROM decisions WHERE kind = 'relevance' AND superseded = 0 AND value IS NOT NULL "
        "AND sha256 IS NOT NULL")}


def relevance_ratings(db) -> dict[tuple[str, str], tuple[float, int]]:
    """``(sha256, country)`` → ``(mean rating, number of ratings)``: the current relevance annotations (every
    rater's latest answer), else the current relevance decision (an imported rating, a decided median)."""
    out: dict[tuple[str, str], tuple[float, int]] = {}
    if "annotations" in db.table_names():
        for sha, cc, mean, n in db.execute(
                "SELECT i.sha256, i.country, avg(a.value), count(*) FROM annotations a "
                "JOIN annotation_items i ON i.id = a.item_id WHERE i.kind = 'relevance' AND a.is_current = 1 "
                "AND a.was_cancelled = 0 AND a.purpose = 'annotate' AND a.value IS NOT NULL "
                "GROUP BY i.sha256, i.country").fetchall():
            out[(sha, cc)] = (float(mean), int(n))
    for sha, cc, val, n in db.execute(
            "SELECT sha256, country, value, n_annotations FROM decisions WHERE kind = 'relevance' "
            "AND superseded = 0 AND value IS NOT NULL").fetchall():
        if (sha, cc) not in out and sha and cc:
            out[(sha, cc)] = (float(val), int(n or 1))
    return out


def current_rows(db, *, kind: str | None = None, with_cluster: bool = False, with_image: bool = False,
                 shas: Iterable[str] | None = None) -> list[dict]:
    """The current (not superseded) decisions as dicts of :data:`COLUMNS`, oldest first: of one ``kind``,
    only those naming a duplicate cluster (``with_cluster``) or an image (``with_image``), or only those
    about the images ``shas``."""
    where, args = ["superseded = 0"], []
    if kind is not None:
        where.append("kind = ?")
        args.append(kind)
    if with_cluster:
        where.append("cluster_id IS NOT NULL")
    if with_image or shas is not None:
        where.append("sha256 IS NOT NULL")
    rows = db.execute(f"SELECT {', '.join(COLUMNS)} FROM decisions WHERE {' AND '.join(where)} ORDER BY id", args)
    wanted = None if shas is None else set(shas)
    return [dict(zip(COLUMNS, r)) for r in rows if wanted is None or r[3] in wanted]


def decided_values(db, kind: str, item_keys: list[str]) -> dict[str, float]:
    """item key → value of the current decisions of ``kind`` on those items (the newest wins; no value: left
    out)."""
    out: dict[str, float] = {}
    if not item_keys:
        return out
    marks = ",".join("?" * len(item_keys))
    for key, value in db.execute(
            f"SELECT item_key, value FROM decisions WHERE kind = ? AND superseded = 0 "
            f"AND item_key IN ({marks}) ORDER BY id", [kind, *item_keys]).fetchall():
        if value is not None:
            out[key] = float(value)
    return out


def ratings_by_language(db, kind: str, unit: str) -> list[tuple[str | None, float]]:
    """``(language, value)`` of the 1-5 ratings of ``kind`` items: ``unit`` ``item``, each item's decided value
    (its newest current decision with a value); ``rating``, every rater's current answer."""
    if not db["annotation_items"].exists():
        return []
    if unit == "item":
        sql = ("SELECT ai.language, d.value FROM decisions d JOIN (SELECT DISTINCT item_key, language FROM "
               "annotation_items WHERE kind = ?) ai ON ai.item_key = d.item_key WHERE d.id IN "
               "(SELECT max(id) FROM decisions WHERE kind = ? AND superseded = 0 AND value IS NOT "
               "NULL GROUP BY item_key)")
        args = [kind, kind]
    elif unit == "rating":
        sql = ("SELECT ai.language, a.value FROM annotations a JOIN annotation_items ai ON ai.id = a.item_id "
               "WHERE ai.kind = ? AND a.is_current = 1 AND a.was_cancelled = 0 "
               "AND a.purpose = 'annotate' AND a.value IS NOT NULL")
        args = [kind]
    else:
        raise ValueError(f"unit must be 'item' or 'rating', not {unit!r}")
    return [(lang, float(value)) for lang, value in db.execute(sql, args).fetchall()]


def decision_counts(db) -> dict[str, int]:
    """Current decisions per kind."""
    return {r[0] if r[0] is not None else "(none)": r[1] for r in db.execute(
        "SELECT kind, count(*) FROM decisions WHERE superseded = 0 GROUP BY kind").fetchall()}


def imported_ratings(db) -> tuple[int, list[str]]:
    """How many current relevance decisions are imported ratings (rule ``import``), and the files they came
    from."""
    rows = db.execute("SELECT campaign, count(*) FROM decisions WHERE kind = 'relevance' AND rule = 'import' AND "
                      "superseded = 0 GROUP BY campaign ORDER BY campaign").fetchall()
    return sum(n for _, n in rows), [str(c).removeprefix("import:") for c, _ in rows]


def record_rating(db, sha: str, country: str, value: float, n: int, *, campaign: str,
                  details: dict | None = None) -> bool:
    """Store one imported relevance rating (rule ``import``, item ``relevance-import:<sha256>:<country>``): the
    mean ``value`` of ``n`` ratings. An identical current one is kept (False); a different one is superseded.
    Part of the caller's transaction; True when written."""
    key = f"relevance-import:{sha}:{country}"
    cur = db.execute("SELECT id, value, n_annotations FROM decisions WHERE kind = 'relevance' AND item_key = ? "
                     "AND superseded = 0", [key]).fetchall()
    if any(v is not None and abs(v - value) < 1e-12 and k == n for _, v, k in cur):
        return False
    for did, _, _ in cur:
        db["decisions"].update(did, {"superseded": 1})
    db["decisions"].insert({"kind": "relevance", "item_key": key, "campaign": campaign, "sha256": sha,
                            "country": country, "value": float(value), "rule": "import", "n_annotations": n,
                            "details": dumps(details or {}), "superseded": 0, "decided_at": now()})
    return True


def native_annotators(db) -> dict[str, int]:
    """Active annotators per country they rate (what build and readiness name when ratings are missing)."""
    if "annotators" not in db.table_names():
        return {}
    return {k: n for k, n in db.execute(
        "SELECT country, COUNT(*) FROM annotators WHERE active = 1 AND country IS NOT NULL "
        "AND role = 'annotator' GROUP BY country")}
