"""The eligible image pool of a build: which images a benchmark may use, their cultures (``image_links`` minus
links rated below ``min_relevance``), the ratings that cover them, their tags and duplicate clusters.

Eligible images passed the human filter (or ``allow_unreviewed`` when no filter decision exists), are inside the
reviewed pool (:mod:`cultura.annotate.pool`) and keep at least one culture after the relevance ratings.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..bounds import Bound
from ..annotate.decisions import current_per_image, dropped_copies, filter_reviewed
from ..annotate.pool import EXCLUSION_REASONS as POOL_REASONS
from ..annotate.pool import image_exclusions
from ..curate import images as curated
from ..curate.clusters import memberships, open_sets
from ..curate.concepts import active_concept_ids
from ..curate.concepts import concept_names as names_of_concepts
from ..curate.cultures_decide import decided_links
from ..errors import CulturaError
from ..models.tiny import is_random_init

if TYPE_CHECKING:
    from ..project import Project


class BuildError(CulturaError):
    """A benchmark cannot be built as asked (the message names the fix)."""


EXCLUSION_REASONS = (*POOL_REASONS, "low_relevance")
#: The lowest mean relevance rating (on the 1-5 scale) an image × culture link keeps; none: ratings are not used.
MIN_RELEVANCE = Bound(1, 5, float, optional=True)


# ------------------------------------------------------------------ the pool

@dataclass
class Pool:
    """Eligible images and what the rules need to know about them."""

    links: dict[str, set[tuple[int, str]]]          # sha -> {(concept_id, country)}
    tags: dict[str, set[str]]                       # sha -> tag names (own concepts included)
    clusters: dict[str, set[int]]                   # sha -> duplicate cluster ids
    concept_names: dict[int, str]
    excluded: dict[str, str]                        # sha -> first exclusion reason
    total: int
    reviewed: bool                                  # filter decisions exist
    ratings: bool                                   # relevance decisions exist
    low_relevance_links: int = 0
    rated: set[tuple[str, str]] = field(default_factory=set)   # (sha, country) links with a relevance rating
    random_tag_sources: list[str] = field(default_factory=list)   # tags used from random-init models
    sets: dict[str, int] = field(default_factory=dict)   # sha -> open duplicate set (one photograph until reviewed)

    def cultures(self, sha: str) -> set[str]:
        return {c for _, c in self.links[sha]}

    def report(self) -> dict:
        counts = {r: 0 for r in EXCLUSION_REASONS}
        for r in self.excluded.values():
            counts[r] += 1
        return {"total": self.total, "eligible": len(self.links), "excluded": counts,
                "low_relevance_links": self.low_relevance_links, "reviewed": self.reviewed,
                "unreviewed_used": 0 if self.reviewed else len(self.links),
                "ratings": self.ratings, "random_tag_sources": self.random_tag_sources,
                "excluded_images": [{"sha256": s, "reason": r} for s, r in sorted(self.excluded.items())]}


def load_pool(project: Project, *, allow_unreviewed: bool = False, min_relevance: float | None = 4.0,
              allow_random_tags: bool = False) -> Pool:
    """Read the eligible images, their links, tags and duplicate clusters (see module doc for the rules).

    Raises :class:`BuildError` when no filter decision exists and ``allow_unreviewed`` is false, and when tags
    come from a random-init model (``openclip:cultura-tiny`` …) and ``allow_random_tags`` is false: such tags
    are noise and would steer which images may be distractors."""
    min_relevance = MIN_RELEVANCE.check(min_relevance, "min_relevance")
    db = project.db
    concept_names = names_of_concepts(db)
    active = active_concept_ids(db)
    raw_links: dict[str, set[tuple[int, str]]] = defaultdict(set)
    for sha, cid, country in curated.links(db):
        if cid in active:
            raw_links[sha].add((cid, country))
    reviewed = filter_reviewed(db)
    if not reviewed and not allow_unreviewed:
        raise BuildError("No filter decisions exist, so no image has passed the human filter. Run the filter "
                         "campaign ('cultura annotate push filter', then 'cultura annotate pull' and 'cultura "
                         "annotate adjudicate'), or pass --allow-unreviewed to build from unreviewed images.")
    pool_excluded = image_exclusions(db, require_review=True)
    rel = {(d["sha256"], d["country"]): d["value"] for d in current_per_image(db, "relevance")
           if d["value"] is not None}
    # the one culture rule (cultures_decide)
    raw_links, rel = decided_links(db, raw_links, rel, dropped=dropped_copies(db), active=active)
    ratings = bool(rel) and min_relevance is not None

    excluded: dict[str, str] = {}
    links: dict[str, set[tuple[int, str]]] = {}
    low_links = 0
    for sha in sorted(raw_links):
        if sha in pool_excluded:
            excluded[sha] = pool_excluded[sha]
        else:
            kept = raw_links[sha]
            if ratings:
                kept = {(c, k) for c, k in kept if rel.get((sha, k), min_relevance) >= min_relevance}
                low_links += len(raw_links[sha]) - len(kept)
            if kept:
                links[sha] = kept
            else:
                excluded[sha] = "low_relevance"
    tags: dict[str, set[str]] = {sha: {concept_names[c] for c, _ in ls} for sha, ls in links.items()}
    random_sources = sorted(src for src in curated.tag_sources(db) if is_random_init(src))
    if random_sources and not allow_random_tags:
        raise BuildError(f"Image tags from a random-init model ({', '.join(random_sources)}) would steer the "
                         "distractor choice with noise. Tag with a trained model ('cultura images tag --method "
                         "llm', or --clip-model with pretrained weights), or pass --allow-random-tags "
                         "(allow_random_tags=True) to use them anyway.")
    for sha, tag, _score, _source in curated.tag_rows(db):
        if sha in tags:
            tags[sha].add(tag)
    clusters: dict[str, set[int]] = defaultdict(set)
    for cid, sha in memberships(db):
        clusters[sha].add(cid)
    return Pool(links=links, tags=tags, clusters=dict(clusters), concept_names=concept_names,
                excluded=excluded, total=len(raw_links), reviewed=reviewed, ratings=ratings,
                low_relevance_links=low_links, random_tag_sources=random_sources, rated=set(rel),
                sets={sha: s for sha, s in open_sets(db).items() if sha in links})
