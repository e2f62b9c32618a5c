"""What the view shows, read from the tables (curation, annotation, build): plain rows, no HTML.

Every reader here is read-only and streams what it can; texts from the web (titles, URLs, concept names,
annotator comments) are returned as they are stored — escaping is the templates' job (autoescape) — except
that URLs lose any ``user:password@`` part (:func:`cultura.redact.strip_userinfo`) and only ``http(s)`` URLs
become links (:func:`safe_href`).
"""
from __future__ import annotations

import json
from collections import defaultdict
from urllib.parse import urlsplit

from ..benchmark.build import KINDS
from ..annotate.decisions import current_decisions
from ..annotate.pool import REASON_TEXT, image_exclusions
from ..redact import strip_userinfo


def safe_href(url: str | None) -> str | None:
    """``url`` without credentials when it is an http(s) URL (a link may point there), else None (shown as
    text only: no ``javascript:`` or ``data:`` link ever reaches a page)."""
    if not url:
        return None
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        return None
    return strip_userinfo(url) if scheme in ("http", "https") else None


def _loads(text: str | None) -> dict:
    try:
        v = json.loads(text) if text else {}
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


def concept_names(db) -> dict[int, str]:
    return {r[0]: r[1] for r in db.execute("SELECT id, name FROM concepts")}


def images(db) -> dict[str, dict]:
    """sha256 → {path, width, height, format, status, reason}: every image, with its pool status
    (``in``, or ``out`` with the first reason of :mod:`cultura.annotate.pool`)."""
    out_of_pool = image_exclusions(db)
    rows = {}
    for sha, path, w, h, fmt, st, why in db.execute(
            "SELECT sha256, path, width, height, format, status, reason FROM images"):
        reason = out_of_pool.get(sha)
        rows[sha] = {"sha256": sha, "path": path, "width": w, "height": h, "format": fmt,
                     "pool": "out" if reason else "in", "reason": reason,
                     "reason_text": (REASON_TEXT.get(reason, reason) + (f": {why}" if why and reason ==
                                                                          "image_excluded" else ""))
                     if reason else None}
    return rows


def sources(db) -> dict[str, dict]:
    """sha256 → the first search result that found it: {title, url, page} (web texts, unescaped)."""
    out: dict[str, dict] = {}
    for sha, title, url, page in db.execute(
            "SELECT c.sha256, sr.title, c.url, sr.source_page FROM candidates c JOIN search_results sr "
            "ON sr.candidate_id = c.id WHERE c.sha256 IS NOT NULL ORDER BY sr.id"):
        if sha not in out:
            out[sha] = {"title": title, "url": strip_userinfo(url) if url else url, "href": safe_href(url),
                        "page": strip_userinfo(page) if page else page, "page_href": safe_href(page)}
    return out


def pool_cells(db) -> dict[tuple[int, str], list[str]]:
    """(concept id, country) → the sha256s found for it (by query rank, then sha256)."""
    cells: dict[tuple[int, str], dict[str, int]] = defaultdict(dict)
    for sha, cid, cc, rank in db.execute("SELECT sha256, concept_id, country, rank FROM image_links"):
        best = cells[(cid, cc)].get(sha)
        cells[(cid, cc)][sha] = rank if best is None else min(best, rank)
    return {k: sorted(v, key=lambda s: (v[s], s)) for k, v in cells.items()}


def _who(who) -> str | None:
    """Who decided, as words: ``{"ann": "keep:1", "bob": "keep:1"}`` reads ``ann (keep:1), bob (keep:1)``."""
    if isinstance(who, dict):
        return ", ".join(f"{k} ({v})" for k, v in who.items())
    if isinstance(who, list):
        return ", ".join(map(str, who))
    return who


def _decision_rows(db, where: str, args) -> list[dict]:
    out = []
    for kind, key, sha, cc, cl, label, value, rule, n, agr, details, at in db.execute(
            "SELECT kind, item_key, sha256, country, cluster_id, label, value, rule, n_annotations, agreement, "
            f"details, decided_at FROM decisions WHERE superseded = 0 AND {where} ORDER BY id", args):
        d = _loads(details)
        who = d.get("annotators") or d.get("by") or d.get("adjudicator")
        out.append({"kind": kind, "item_key": key, "sha256": sha, "country": cc, "cluster_id": cl,
                    "label": label, "value": value, "rule": rule, "n": n, "agreement": agr,
                    "who": _who(who),
                    "reason": d.get("reason"), "at": at})
    return out


def clusters(db) -> list[dict]:
    """Duplicate sets that are not superseded, oldest first: method, scope, concept, status, representative,
    members (representative first, then by distance) and the current dedup-review decision per member."""
    names = concept_names(db)
    members: dict[int, list] = defaultdict(list)
    for cid, sha, dist in db.execute(
            "SELECT m.cluster_id, m.sha256, m.distance FROM dup_members m JOIN dup_clusters c ON "
            "c.id = m.cluster_id WHERE c.status != 'superseded'"):
        members[cid].append((sha, dist))
    review: dict[int, dict[str, dict]] = defaultdict(dict)
    for d in _decision_rows(db, "kind = 'dedup' AND cluster_id IS NOT NULL", []):
        review[d["cluster_id"]][d["sha256"]] = d
    by_sha = current_decisions(db, "dedup")
    out = []
    for cid, run, method, scope, concept, rep, size, status, created, params in db.execute(
            "SELECT c.id, c.run_id, c.method, c.scope, c.concept_id, c.representative, c.size, c.status, "
            "c.created_at, r.params FROM dup_clusters c JOIN dedup_runs r ON r.id = c.run_id "
            "WHERE c.status != 'superseded' ORDER BY c.id"):
        ms = sorted(members.get(cid, []), key=lambda m: (m[0] != rep, m[1] if m[1] is not None else 1e9, m[0]))
        out.append({"id": cid, "run_id": run, "method": method, "scope": scope,
                    "concept": names.get(concept) if concept is not None else None, "representative": rep,
                    "size": size, "status": status, "created_at": created, "params": _loads(params),
                    "members": [{"sha256": s, "distance": d, "representative": s == rep,
                                 "decision": review[cid].get(s) or ({"kind": "dedup (decided in another set)",
                                                                     "label": by_sha[s]} if s in by_sha else None)}
                                for s, d in ms]})
    return out


def flags(db) -> list[dict]:
    """Culture-conflict (and other) flags that are not superseded: the cultures involved (concept × country
    pairs), the evidence, the status, who resolved it, and every current decision about the image."""
    rows = db.execute("SELECT sha256, flag, status, details, created_at FROM image_flags "
                      "WHERE status != 'superseded' ORDER BY created_at, sha256").fetchall()
    shas = [r[0] for r in rows]
    decided: dict[str, list[dict]] = defaultdict(list)
    if shas:
        for d in _decision_rows(db, "sha256 IN (SELECT sha256 FROM image_flags WHERE status != 'superseded')",
                                []):
            decided[d["sha256"]].append(d)
    out = []
    for sha, flag, status, details, created in rows:
        d = _loads(details)
        res = d.get("resolution") if isinstance(d.get("resolution"), dict) else {}
        pairs = [p for p in d.get("pairs", []) if isinstance(p, dict)]
        evidence = d.get("evidence") if isinstance(d.get("evidence"), dict) else {}
        out.append({"sha256": sha, "flag": flag, "status": status, "created_at": created,
                    "pairs": [{"concept": p.get("concept"), "country": p.get("country")} for p in pairs],
                    "countries": sorted({str(p.get("country")) for p in pairs}),
                    "evidence": sorted(evidence), "resolved_by": res.get("by"),
                    "resolution": res.get("resolution"), "resolved_at": res.get("at"),
                    "decisions": decided.get(sha, [])})
    return out


def benchmarks(db) -> list[dict]:
    return [{"id": r[0], "name": r[1], "version": r[2], "kind": r[3], "n_items": r[4], "status": r[5],
             "content_hash": r[6]}
            for r in db.execute("SELECT id, name, version, kind, n_items, status, content_hash FROM benchmarks "
                                "ORDER BY name, version")]


def trials(db, bench: dict) -> list[dict]:
    """The benchmark's trials in exported order (item key), each with its query texts (the snapshot the
    benchmark was built with, else the current queries) and its candidates in exported order (position, then
    the kind's role order — as :func:`cultura.benchmark.export.collect` writes them)."""
    names = concept_names(db)
    order = {r.name: i for i, r in enumerate(KINDS.get(bench["kind"], ()))}
    cands: dict[int, list] = defaultdict(list)
    for iid, role, pos, sha, ccid, cc in db.execute(
            "SELECT bc.item_id, bc.role, bc.position, bc.sha256, bc.concept_id, bc.country FROM "
            "benchmark_candidates bc JOIN benchmark_items bi ON bi.id = bc.item_id WHERE bi.benchmark_id = ?",
            [bench["id"]]):
        cands[iid].append((pos, order.get(role, 99), role, sha, names.get(ccid), cc))
    snap = db.execute("SELECT concept_id, country, language, variant, descriptor_country, text FROM "
                      "benchmark_query_snapshot WHERE benchmark_id = ?", [bench["id"]]).fetchall()
    if not snap:
        snap = db.execute("SELECT concept_id, country, language, variant, descriptor_country, text FROM "
                          "benchmark_queries WHERE status = 'ok'").fetchall()
    queries: dict[tuple, list] = defaultdict(list)
    for cid, cc, lang, variant, dcc, text in snap:
        queries[(cid, cc, lang)].append({"variant": variant, "language": lang, "descriptor_country": dcc,
                                         "text": text})
    out = []
    for iid, key, cid, qc, ql, dc in db.execute(
            "SELECT id, item_key, concept_id, query_country, query_language, descriptor_country FROM "
            "benchmark_items WHERE benchmark_id = ? ORDER BY item_key", [bench["id"]]):
        qs = [q for q in queries.get((cid, qc, ql), []) if q["descriptor_country"] in (None, dc)]
        qs.sort(key=lambda q: (q["descriptor_country"] is not None, q["variant"] != "short", q["variant"]))
        out.append({"item_key": key, "concept": names.get(cid), "query_country": qc, "query_language": ql,
                    "descriptor_country": dc, "queries": qs,
                    "candidates": [{"position": c[0], "role": c[2], "sha256": c[3], "concept": c[4],
                                    "country": c[5]} for c in sorted(cands.get(iid, []))]})
    return out


def _has_table(db, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [name]).fetchone() \
        is not None


def annotation_items(db) -> list[dict]:
    """Annotation items whose annotators disagreed or that were adjudicated: each annotator's current answer
    (label or value, comment), the adjudication and the current decision, with the item's images."""
    if not _has_table(db, "annotations"):
        return []
    answers: dict[int, list[dict]] = defaultdict(list)
    for item, who, purpose, label, value, details, lead in db.execute(
            "SELECT a.item_id, an.name, a.purpose, a.label, a.value, a.details, a.lead_time FROM annotations a "
            "LEFT JOIN annotators an ON an.id = a.annotator_id WHERE a.is_current = 1 AND a.was_cancelled = 0 "
            "AND a.deleted_at IS NULL ORDER BY a.id"):
        d = _loads(details)
        comment = d.get("reason") or d.get("comment")
        answers[item].append({"annotator": who, "purpose": purpose, "label": label, "value": value,
                              "comment": ", ".join(map(str, comment)) if isinstance(comment, list) else comment})
    decisions = {d["item_key"]: d for d in _decision_rows(db, "1 = 1", [])}
    out = []
    for iid, key, kind, sha, cc, cl, payload, campaign in db.execute(
            "SELECT i.id, i.item_key, i.kind, i.sha256, i.country, i.cluster_id, i.payload, c.name FROM "
            "annotation_items i JOIN campaigns c ON c.id = i.campaign_id ORDER BY i.id"):
        got = answers.get(iid, [])
        first = [a for a in got if a["purpose"] == "annotate"]
        adjudicated = [a for a in got if a["purpose"] == "adjudicate"]
        decision = decisions.get(key)
        disagree = len({(a["label"], a["value"]) for a in first}) > 1
        if not disagree and not adjudicated and not (decision and decision["rule"] == "adjudicated"):
            continue
        p = _loads(payload)
        shas = [m.get("sha256") for m in p.get("members", []) if isinstance(m, dict) and m.get("sha256")] \
            or ([sha] if sha else [])
        out.append({"id": iid, "item_key": key, "kind": kind, "campaign": campaign, "country": cc,
                    "cluster_id": cl, "concept": p.get("concept"), "images": shas, "answers": first,
                    "adjudications": adjudicated, "disagree": disagree, "decision": decision})
    return out
