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
from ..annotate.decisions import current_decisions, current_rows
from ..annotate.pool import REASON_TEXT, image_exclusions
from ..annotate.report import current_answers, items_with_campaign
from ..benchmark import store
from ..curate import clusters as dup, images as curated
from ..curate.benchmark_queries import live_queries
from ..curate.concepts import concept_names
from ..curate.cultures_decide import live_flag_rows
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


def images(db) -> dict[str, dict]:
    """sha256 → {path, width, height, format, status, reason}: every image, with its pool status
    (``in``, or ``out`` with the first reason of :mod:`cultura.annotate.pool`)."""
    out_of_pool = image_exclusions(db)
    rows = {}
    for im in curated.image_rows(db, by_sha=False):
        sha, path, w, h, fmt, why = im["sha256"], im["path"], im["width"], im["height"], im["format"], im["reason"]
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
    for sha, (title, url, page) in curated.first_sources(db).items():
        out[sha] = {"title": title, "url": strip_userinfo(url) if url else url, "href": safe_href(url),
                    "page": strip_userinfo(page) if page else page, "page_href": safe_href(page)}
    return out


def pool_cells(db) -> dict[tuple[int, str], list[str]]:
    """(concept id, country) → the sha256s found for it (by query rank, then sha256)."""
    cells: dict[tuple[int, str], dict[str, int]] = defaultdict(dict)
    for sha, cid, cc, rank in curated.links_ranked(db):
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


def _decision_rows(rows: list[dict]) -> list[dict]:
    """Current decisions (:func:`cultura.annotate.decisions.current_rows`) as the view shows them."""
    out = []
    for r in rows:
        d = _loads(r["details"])
        who = d.get("annotators") or d.get("by") or d.get("adjudicator")
        out.append({"kind": r["kind"], "item_key": r["item_key"], "sha256": r["sha256"], "country": r["country"],
                    "cluster_id": r["cluster_id"], "label": r["label"], "value": r["value"], "rule": r["rule"],
                    "n": r["n_annotations"], "agreement": r["agreement"], "who": _who(who),
                    "reason": d.get("reason"), "at": r["decided_at"]})
    return out


def clusters(db) -> list[dict]:
    """Duplicate sets that are not superseded, oldest first: method, scope, concept, status, representative,
    members (representative first, then by distance) and the current dedup-review decision per member."""
    names = concept_names(db)
    members: dict[int, list] = defaultdict(list)
    for cid, sha, dist in dup.live_members(db):
        members[cid].append((sha, dist))
    review: dict[int, dict[str, dict]] = defaultdict(dict)
    for d in _decision_rows(current_rows(db, kind="dedup", with_cluster=True)):
        review[d["cluster_id"]][d["sha256"]] = d
    by_sha = current_decisions(db, "dedup")
    out = []
    for cid, run, method, scope, concept, rep, size, status, created, params in dup.live_clusters(db):
        ms = sorted(members.get(cid, []), key=lambda m: (m[0] != rep, m[1] if m[1] is not None else 1e9, m[0]))
        out.append({"id": cid, "run_id": run, "method": method, "scope": scope,
                    "concept": names.get(concept) if concept is not None else None, "representative": rep,
                    "size": size, "status": status, "created_at": created, "params": _loads(params),
                    "members": [{"sha256": s, "distance": d, "representative": s == rep,
                                 "decision": review[cid].get(s) or ({"kind": "dedup (decided in another set)",
                                                                     "label": by_sha[s]} if s in by_sha else None)}
                                for s, d in ms]})
    return out


def duplicate_sets(db) -> list[dict]:
    """The duplicate sets as the dedup review shows them: live clusters that share a member (the pHash and the
    dHash cluster of the same copies, say) merged into one set, oldest cluster first. Each set keeps the fields
    of its oldest cluster (``id``, ``representative``, ``status``: open while any of its clusters is), with
    ``cluster_ids`` and ``methods`` of every cluster merged and the union of their members (a member's distance
    and decision from the first cluster listing it)."""
    rows = clusters(db)
    set_of = dup.cluster_sets({c["id"]: [m["sha256"] for m in c["members"]] for c in rows})
    groups: dict[int, list[dict]] = defaultdict(list)
    for c in rows:
        groups[set_of[c["id"]]].append(c)
    out = []
    for root in sorted(groups):
        parts = groups[root]
        head = dict(parts[0])
        seen = {m["sha256"] for m in head["members"]}
        members = list(head["members"])
        for c in parts[1:]:
            for m in c["members"]:
                if m["sha256"] not in seen:
                    seen.add(m["sha256"])
                    members.append({**m, "representative": False})
        head.update(members=members, size=len(members), cluster_ids=[c["id"] for c in parts],
                    methods=sorted({c["method"] for c in parts}),
                    status="open" if any(c["status"] == "open" for c in parts) else head["status"])
        out.append(head)
    return out


def flags(db) -> list[dict]:
    """Culture-conflict (and other) flags that are not superseded: the cultures involved (concept × country
    pairs), the evidence, the status, who resolved it, and every current decision about the image."""
    rows = live_flag_rows(db)
    shas = [r[0] for r in rows]
    decided: dict[str, list[dict]] = defaultdict(list)
    if shas:
        for d in _decision_rows(current_rows(db, shas=shas)):
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
    return store.benchmark_rows(db)


def trials(db, bench: dict) -> list[dict]:
    """The benchmark's trials in exported order (item key), each with its query texts (the snapshot the
    benchmark was built with, else the current queries) and its candidates in exported order (position, then
    the kind's role order — as :func:`cultura.benchmark.export.collect` writes them)."""
    names = concept_names(db)
    order = {r.name: i for i, r in enumerate(KINDS.get(bench["kind"], ()))}
    cands: dict[int, list] = defaultdict(list)
    for c in store.candidates(db, bench["id"]):
        cands[c["item_id"]].append((c["position"], order.get(c["role"], 99), c["role"], c["sha256"],
                                    names.get(c["concept_id"]), c["country"]))
    snap = store.snapshot(db, bench["id"]) or live_queries(db)
    queries: dict[tuple, list] = defaultdict(list)
    for q in snap:
        cid, cc, lang, variant, dcc, text = (q["concept_id"], q["country"], q["language"], q["variant"],
                                             q["descriptor_country"], q["text"])
        queries[(cid, cc, lang)].append({"variant": variant, "language": lang, "descriptor_country": dcc,
                                         "text": text})
    out = []
    for it in store.items(db, bench["id"], order="item_key"):
        iid, key, cid, qc, ql, dc = (it["id"], it["item_key"], it["concept_id"], it["query_country"],
                                     it["query_language"], it["descriptor_country"])
        qs = [q for q in queries.get((cid, qc, ql), []) if q["descriptor_country"] in (None, dc)]
        qs.sort(key=lambda q: (q["descriptor_country"] is not None, q["variant"] != "short", q["variant"]))
        out.append({"item_key": key, "concept": names.get(cid), "query_country": qc, "query_language": ql,
                    "descriptor_country": dc, "queries": qs,
                    "candidates": [{"position": c[0], "role": c[2], "sha256": c[3], "concept": c[4],
                                    "country": c[5]} for c in sorted(cands.get(iid, []))]})
    return out


def annotation_items(db) -> list[dict]:
    """Annotation items whose annotators disagreed or that were adjudicated: each annotator's current answer
    (label or value, comment), the adjudication and the current decision, with the item's images."""
    answers: dict[int, list[dict]] = defaultdict(list)
    for item, who, purpose, label, value, details, lead in current_answers(db):
        d = _loads(details)
        comment = d.get("reason") or d.get("comment")
        answers[item].append({"annotator": who, "purpose": purpose, "label": label, "value": value,
                              "comment": ", ".join(map(str, comment)) if isinstance(comment, list) else comment})
    decisions = {d["item_key"]: d for d in _decision_rows(current_rows(db))}
    out = []
    for iid, key, kind, sha, cc, cl, payload, campaign in items_with_campaign(db):
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
                    "adjudications": adjudicated, "disagree": disagree, "decision": decision,
                    "state": "adjudicated" if adjudicated or (decision and decision["rule"] == "adjudicated")
                    else "open disagreement"})
    # grouped as the filters ask: by kind, campaign and country, then the item
    out.sort(key=lambda it: (it["kind"] or "", it["campaign"] or "", it["country"] or "", it["item_key"]))
    return out
