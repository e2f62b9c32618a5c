"""Encoder baseline (seed 004 §5.1; spec §6): probe prompts "This image is {level} to {culture}" for the five
relevance levels of Table 12; the level whose text embedding is most similar to the image is the score (1–5).

>>> probe_texts("Japan")[0]
'This image is not relevant to Japan'
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ....cultures import resolve_culture
from ....db import now, transaction
from ...common import embed_images, embed_texts

if TYPE_CHECKING:
    from ....project import Project

#: The five relevance-level phrases of seed 004 §5.1 (Table 12 levels), lower-cased inside the sentence.
LEVELS = ("Not relevant", "Minimally relevant", "Somewhat relevant", "Relevant", "Highly relevant")


def probe_texts(culture: str) -> list[str]:
    """The five probe sentences for one culture label, level 1 first."""
    return [f"This image is {level.lower()} to {culture}" for level in LEVELS]


def baseline_level(image_vec, probe_vecs) -> int:
    """1-based index of the probe most similar to the image (ties → the lower level)."""
    sims = np.asarray(probe_vecs, dtype=float) @ np.asarray(image_vec, dtype=float)
    return int(np.argmax(sims)) + 1


def baseline_scores(project: Project, embedder, sha256s, countries) -> dict[tuple[str, str], int]:
    """``{(sha256, label): level}`` for project images and culture labels (country codes, registered or
    free-text labels; the probe uses the label's display name)."""

    shas = list(dict.fromkeys(sha256s))
    if not shas:
        return {}
    imgs = embed_images(project, embedder, shas)
    out = {}
    for label in countries:
        culture = resolve_culture(project, label)
        cc = culture.key
        probes = embed_texts(project, embedder, probe_texts(culture.name))
        for s, v in zip(shas, imgs):
            out[(s, cc)] = baseline_level(v, probes)
    return out


def run_baseline(project: Project, embedder, sha256s, countries) -> dict:
    """Store the baseline levels in ``attribution_scores`` (judge ``baseline``, context ``none``)."""
    scores = baseline_scores(project, embedder, sha256s, countries)
    ts = now()
    rows = [{"judge": "baseline", "encoder": embedder.identity, "kb": "", "context": "none", "sha256": s,
             "country": cc, "score": float(v), "argmax": v, "logprobs": None, "status": "ok", "reason": None,
             "created_at": ts} for (s, cc), v in scores.items()]
    with transaction(project.db):
        upsert_scores(project.db, rows)
    return {"scored": len(rows)}


def upsert_scores(db, rows: list[dict]) -> None:
    """Insert or update ``attribution_scores`` rows on their natural key (judge, encoder, kb, context, image,
    country)."""
    if not rows:
        return
    cols = list(rows[0])
    sql = (f"INSERT INTO attribution_scores ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
           "ON CONFLICT (judge, encoder, kb, context, sha256, country) DO UPDATE SET "
           + ", ".join(f"{c} = excluded.{c}" for c in cols if c not in
                       ("judge", "encoder", "kb", "context", "sha256", "country")))
    db.conn.executemany(sql, [[r[c] for c in cols] for r in rows])
