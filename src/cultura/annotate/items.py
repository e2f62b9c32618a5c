"""Build annotation items from the database state (filter, dedup-review, relevance; entity, context and
translation from their tables) or from an imported JSONL/CSV file (entity, context, translation, or gold
answers for any kind).

An item is ``{"item_key", "kind", "payload", "sha256", "country", "language", "cluster_id", "gold"}``; the
key is stable so a second push recognises items it already has. Task data is made from the payload at push
time (:func:`task_data`), so image URLs follow the current ``annotate.image_base_url``.
"""
from __future__ import annotations

import hashlib
import html
import json
import random
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from ..cultures import registered_labels
from ..curate import clusters as dup, images as curated
from ..curate.benchmark_queries import translation_pairs
from ..curate.contexts import context_item_rows
from ..curate.cultures_decide import inherited_links
from ..curate.entities import entity_item_rows
from ..db.readers import read_rows
from ..errors import CulturaError, unknown
from ..names import endpoint_url_problem
from ..redact import strip_userinfo
from .decisions import dropped_copies, removed_images
from .images import drawn_by_browsers
from .kinds import get_kind

if TYPE_CHECKING:
    from ..project import Project

BUILDERS: dict[str, Callable] = {}


def builder(kind: str):
    def reg(fn):
        BUILDERS[kind] = fn
        return fn
    return reg


def build_items(project: Project, kind: str, *, source: str | Path | None = None, other_countries: int = 1,
                seed: int = 0) -> list[dict]:
    """All items of ``kind`` the project holds now. ``source``: a JSONL/CSV file — the items for entity and
    translation (default: the entity table's candidates, the LLM-written benchmark queries), gold answers
    (``item_key, gold``) for the image kinds."""
    if kind in FILE_KINDS:
        if source:
            return items_from_file(project, kind, source)
        rows = TABLE_ROWS[kind](project)
        if not rows:
            raise CulturaError(f"No {kind} items in the project's tables ({TABLE_HINT[kind]}). Add some, or give "
                               f"a source file (JSONL or CSV with columns {', '.join(FILE_KINDS[kind])}).",
                               param="source")
        return items_from_rows(project, kind, rows, f"the {kind} table")
    if kind not in BUILDERS:
        raise unknown("annotation kind", kind, [*BUILDERS, *FILE_KINDS])
    items = BUILDERS[kind](project, other_countries=other_countries, seed=seed)
    if source:
        apply_gold(items, read_rows(source, strict=True))
    return items


@builder("filter")
def filter_items(project: Project, **_) -> list[dict]:
    """Downloaded, non-excluded images with the concept(s) and countries that found them."""
    out = []
    for sha, path, url, any_url, concepts, countries in curated.ok_image_links(project.db):
        concept = " / ".join(sorted(set(concepts.split(","))))
        out.append({"item_key": f"filter:{sha}", "kind": "filter", "sha256": sha,
                    "country": sorted(countries.split(","))[0],
                    "payload": {"sha256": sha, "path": path, "url": url or any_url, "concept": concept,
                                "countries": sorted(countries.split(","))}})
    return out


@builder("dedup-review")
def dedup_items(project: Project, **_) -> list[dict]:
    """One item per duplicate set: open clusters that share an image (the pHash and the dHash cluster of the
    same copies, say) are merged, so reviewers see each set once. Representative first; the item carries every
    cluster id it covers (all are resolved by its decision)."""
    db = project.db
    clusters = dup.open_clusters(db)
    members_of = {cid: dup.cluster_members(db, cid) for cid, _ in clusters}
    set_of = dup.cluster_sets({cid: [sha for sha, _ in members] for cid, members in members_of.items()})
    groups: dict[int, list[int]] = {}
    for cid, _ in clusters:
        groups.setdefault(set_of[cid], []).append(cid)
    rep_of = dict(clusters)
    out = []
    for root, cids in sorted(groups.items()):
        rep = rep_of[root]
        dist: dict[str, float] = {}
        for cid in cids:
            for sha, d in members_of[cid]:
                dist.setdefault(sha, d)  # the root cluster's distance first (to its representative)
        if len(dist) < 2:
            continue
        members = curated.image_urls(db, dist)
        members.sort(key=lambda m: (m[0] != rep, dist.get(m[0]) if dist.get(m[0]) is not None else 1e9, m[0]))
        out.append({"item_key": f"dedup:{root}", "kind": "dedup-review", "cluster_id": root, "sha256": rep,
                    "payload": {"cluster_id": root, "cluster_ids": cids, "members": [
                        {"sha256": s, "path": p, "url": u or au, "distance": dist.get(s)}
                        for s, p, u, au in members]}})
    return out


@builder("relevance")
def relevance_items(project: Project, *, other_countries: int = 1, seed: int = 0, **_) -> list[dict]:
    """Kept images (not removed by a filter decision) x culture labels: each image's own countries (with those
    of the copies a dedup review dropped in its favour) plus
    ``other_countries`` others drawn (seeded by the image hash) from the project's countries, plus every
    registered free-text culture label (``cultura culture add``; seed 004's "Shinto", "Yoruba"…)."""
    db = project.db
    removed = removed_images(db)
    codes = [c.code for c in project.countries]
    names = {c.code: c.name for c in project.countries}
    # a dropped copy's countries are the kept copy's question (cultures_decide)
    inherited = inherited_links(db, dropped_copies(db))
    out = []
    for sha, path, url, any_url, concepts, countries in curated.ok_image_links(db):
        if sha in removed:
            continue
        own = sorted(set(countries.split(",")) | {k for _, k in inherited.get(sha, {})})
        rng = random.Random(f"{seed}:{sha}")
        others = [c for c in codes if c not in own]
        labels = own + sorted(rng.sample(others, min(other_countries, len(others))))
        for cc in labels:
            name = names.get(cc) or project.registry.country(cc).name
            out.append({"item_key": f"relevance:{sha}:{cc}", "kind": "relevance", "sha256": sha, "country": cc,
                        "payload": {"sha256": sha, "path": path, "url": url or any_url, "culture": cc,
                                    "culture_name": name, "own": cc in own, "concept": concepts}})
        for lab in registered_labels(project):
            out.append({"item_key": f"relevance:{sha}:{lab.key}", "kind": "relevance", "sha256": sha,
                        "country": lab.key,
                        "payload": {"sha256": sha, "path": path, "url": url or any_url, "culture": lab.key,
                                    "culture_name": lab.name, "label_country": lab.country, "own": False,
                                    "concept": concepts}})
    return out


# ------------------------------------------------------------------------------------------- files

FILE_KINDS = {"entity": ["entity", "country", "category", "language", "gold", "key"],
              "context": ["text", "language", "type", "english", "kind", "gold", "key"],
              "translation": ["source", "translation", "language", "source_language", "gold", "key"]}


def _key(kind: str, row: dict, fields: Iterable[str]) -> str:
    if row.get("key"):
        return f"{kind}:{row['key']}"
    h = hashlib.sha256(json.dumps([row.get(f) for f in fields], ensure_ascii=False).encode()).hexdigest()
    return f"{kind}:{h[:16]}"


def _gold(kind_level: str, g) -> dict | None:
    if g is None or g == "":
        return None
    if kind_level == "ordinal":
        return {"value": float(g)}
    return {"label": str(g).strip().lower()}


def entity_table_rows(project: Project) -> list[dict]:
    """Candidate entities of the entity table (seed 001), keyed ``ent-<id>``; an entity without a country gets
    the project's (else the registry's) country of its language (:func:`cultura.curate.entities.entity_item_rows`)."""
    return entity_item_rows(project)


_TYPE_WORDS = {"names_female": "female first name", "names_male": "male first name", "authors": "author",
               "sports_clubs": "sports club"}


def context_table_rows(project: Project) -> list[dict]:
    """Candidate masked contexts of the contexts table (seed 001 §3.3: status ``candidate``), keyed
    ``ctx-<id>``; adjudicated decisions go back to the table
    (:func:`cultura.annotate.kinds.apply_context_decisions`)."""
    return context_item_rows(project)


def translation_table_rows(project: Project) -> list[dict]:
    """LLM-written benchmark queries (verbose and descriptor variants) next to their English counterpart of
    the same concept and variant, keyed ``bq-<id>``; manual and short (native-term) queries are not rated."""
    return [{"key": f"bq-{r['id']}", "source": r["source"], "translation": r["text"], "language": r["language"],
             "source_language": "en", "country": r["country"]} for r in translation_pairs(project.db)]


TABLE_ROWS = {"entity": entity_table_rows, "context": context_table_rows, "translation": translation_table_rows}
TABLE_HINT = {"entity": "candidate entities: 'cultura entities import|collect-wikidata|extract'",
              "context": "candidate contexts: 'cultura contexts import FILE --status candidate'",
              "translation": "LLM-written queries: 'cultura build queries'"}


def items_from_file(project: Project, kind: str, source) -> list[dict]:
    return items_from_rows(project, kind, read_rows(source, strict=True), str(source))


def items_from_rows(project: Project, kind: str, rows: list[dict], source: str) -> list[dict]:
    """Items of the text kinds (entity, translation) from rows of a file or a table."""

    level = get_kind(kind).level
    out = []
    for n, row in enumerate(rows, 1):
        if kind == "entity":
            if not row.get("entity") or not row.get("country"):
                raise CulturaError(f"{source} row {n}: entity rows need 'entity' and 'country' columns.")
            c = project.registry.country(row["country"])
            lang = row.get("language") or c.language
            payload = {"entity": row["entity"], "category": row.get("category") or "entity",
                       "culture": c.code, "culture_name": c.name}
            out.append({"item_key": _key(kind, row, ["entity", "country", "category"]), "kind": kind,
                        "country": c.code, "language": lang, "payload": payload,
                        "gold": _gold(level, row.get("gold"))})
        elif kind == "context":
            if not row.get("text") or not row.get("language") or not row.get("type"):
                raise CulturaError(f"{source} row {n}: context rows need 'text', 'language' and 'type' columns.")
            lang = project.registry.languages.get(row["language"])
            payload = {"text": row["text"], "english": row.get("english") or "(no English translation)",
                       "type": _TYPE_WORDS.get(row["type"], str(row["type"]).replace("_", " ")),
                       "language": row["language"],
                       "language_name": lang.name if lang is not None else row["language"],
                       "proposed_kind": row.get("kind") or None}
            out.append({"item_key": _key(kind, row, ["text", "language", "type"]), "kind": kind,
                        "language": row["language"], "country": row.get("country") or None, "payload": payload,
                        "gold": _gold(level, row.get("gold"))})
        else:
            if not row.get("source") or not row.get("translation") or not row.get("language"):
                raise CulturaError(f"{source} row {n}: translation rows need 'source', 'translation' and "
                                   "'language' columns.")
            payload = {"source": row["source"], "translation": row["translation"], "language": row["language"],
                       "source_language": row.get("source_language") or "en"}
            out.append({"item_key": _key(kind, row, ["source", "translation", "language"]), "kind": kind,
                        "language": row["language"], "country": row.get("country") or None, "payload": payload,
                        "gold": _gold(level, row.get("gold"))})
    return out


def apply_gold(items: list[dict], rows: list[dict]) -> int:
    """Set known answers from rows ``{"item_key": ..., "gold": ...}`` on matching items."""

    by = {it["item_key"]: it for it in items}
    n = 0
    for r in rows:
        it = by.get(r.get("item_key"))
        if it is not None and r.get("gold") not in (None, ""):
            it["gold"] = _gold(get_kind(it["kind"]).level, r["gold"])
            n += 1
    return n


# ------------------------------------------------------------------------------------- task data

def image_url(payload: dict, base: str | None) -> str:
    """Blob URL under ``base`` (serve-images) when set, else the original URL; never base64.

    ``base`` is the server root (``http://127.0.0.1:8081``); a base ending in ``/blobs`` (what serve-images
    once printed) is accepted too, without doubling the folder.

    >>> image_url({"path": "blobs/ab/x.jpg"}, "http://h:1/blobs/")
    'http://h:1/blobs/ab/x.jpg'
    """
    if base and payload.get("path"):
        root, path = strip_userinfo(base.rstrip("/")), payload["path"].lstrip("/")
        if root.endswith("/blobs") and path.startswith("blobs/"):
            root = root[: -len("/blobs")]
        return root + "/" + path
    return strip_userinfo(payload.get("url")) or ""  # never a user:password@ to Label Studio


def browser_loadable(url: str) -> bool:
    """True for an http(s) URL: what a browser showing a Label Studio task can fetch (not file://, not a path)."""
    return str(url).lower().startswith(("http://", "https://"))


def task_data(kind: str, item_key: str, payload: dict, *, image_base: str | None = None) -> dict:
    """The Label Studio task data of one item (every ``$variable`` its template uses, plus item_key)."""
    if kind == "filter":
        return {"item_key": item_key, "image": image_url(payload, image_base), "concept": payload["concept"]}
    if kind == "relevance":
        return {"item_key": item_key, "image": image_url(payload, image_base),
                "culture_name": payload["culture_name"]}
    if kind == "dedup-review":
        figs = "".join(
            f"<figure style='margin:4px;text-align:center'><img src='{html.escape(image_url(m, image_base))}' "
            f"style='max-width:300px;max-height:300px'/><figcaption>image {i}</figcaption></figure>"
            for i, m in enumerate(payload["members"], 1))
        options = [{"value": "keep all (all distinct)"}] + [
            {"value": f"image {i}"} for i in range(1, len(payload["members"]) + 1)]
        return {"item_key": item_key, "cluster": f"<div style='display:flex;flex-wrap:wrap'>{figs}</div>",
                "options": options}
    if kind == "entity":
        return {"item_key": item_key, **{k: payload[k] for k in ("entity", "category", "culture_name")}}
    if kind == "translation":
        return {"item_key": item_key,
                **{k: payload[k] for k in ("source", "translation", "language", "source_language")}}
    if kind == "context":
        return {"item_key": item_key, **{k: payload[k] for k in ("text", "english", "type", "language_name")}}
    raise unknown("annotation kind", kind, ["filter", "dedup-review", "relevance", "entity", "context",
                                            "translation"])


# ------------------------------------------------------------------------------------------- image URLs

IMAGE_URL_HINT = ("Run 'cultura annotate serve-images' (it prints the base URL) and set it as annotate.image_base_url "
                  "in cultura.toml ([annotate] image_base_url = \"http://127.0.0.1:8081\"), or pass image_base "
                  "(--image-base URL).")


def check_image_urls(items: list[dict], image_base: str | None) -> None:
    """Refuse items whose task image a browser cannot load (``file://`` URLs of a local folder, no URL at all):
    every annotator would see a broken image."""
    check_image_base(image_base)
    members = [m for it in items for m in (it["payload"].get("members") or [it["payload"]]) if "path" in m]
    bad = [image_url(m, image_base) for m in members if not browser_loadable(image_url(m, image_base))]
    if bad:
        raise CulturaError(f"{len(bad)} of {len(members)} task images would have a URL annotators' browsers "
                           f"cannot load (e.g. {bad[0] or '(none)'!r}: images from a local folder or an import "
                           f"have no web address). {IMAGE_URL_HINT}")
    # without the image server a task links to the web original, which browsers do not draw for TIFF or AVIF
    undrawn = [m["path"] for m in members if image_base is None and not drawn_by_browsers(m["path"])]
    if undrawn:
        raise CulturaError(f"{len(undrawn)} of {len(members)} task images are stored in a format browsers do not "
                           f"draw (e.g. {undrawn[0]!r}); 'cultura annotate serve-images' converts them. "
                           f"{IMAGE_URL_HINT}")


def check_image_base(image_base: str | None) -> None:
    """Refuse an image base that is not an http(s) URL or does not parse (one sentence, credentials stripped)."""
    if image_base is not None and not browser_loadable(image_base):
        raise CulturaError(f"Image base {strip_userinfo(image_base)!r} is not an http(s) URL, so annotators' "
                           f"browsers cannot load task images from it. {IMAGE_URL_HINT}", param="image_base")
    problem = endpoint_url_problem(image_base) if image_base is not None else None
    if problem:
        raise CulturaError(f"Image base {strip_userinfo(image_base)!r} is not a valid URL ({problem}). "
                           f"{IMAGE_URL_HINT}", param="image_base")
