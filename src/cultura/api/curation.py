"""``p.concepts`` and ``p.images``: curation, as the ``cultura concepts`` and ``cultura images`` groups."""
from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..annotate.pool import list_clusters, list_images
from ..bounds import COUNT, from_field
from ..config import DownloadSection
from ..curate.concepts import (ConceptCluster, add_concepts, build_queries, dedup_concepts, generate_concepts,
                               list_concepts, list_terms, load_preset, remove_concept, remove_concepts, set_term,
                               set_terms_from_file, translate_concepts)
from ..curate.dedup import dedup_images
from ..curate.download import download_candidates
from ..curate.search import ingest_img2dataset, search_images
from ..curate.status import flags, list_failures, resolve_image_flags, set_image_status
from ..curate.tagging import tag_images
from ..progress import Progress
from .tables import frame as _frame

if TYPE_CHECKING:
    from pandas import DataFrame

    from ..project import Project

Summary = dict[str, Any]
ConceptClusters = list[ConceptCluster]
PathLike = str | os.PathLike[str]


def _words(values: str | Iterable[str]) -> list[str]:
    return [values] if isinstance(values, str) else list(values)


class Concepts:
    """The concepts of the benchmark, their native terms per country, and the search queries made of them."""

    def __init__(self, project: Project):
        self.project = project

    def generate(self, count: int = 100, *, model: str | None = None) -> Summary:
        """Ask the LLM (``llm.model``, or ``model``) for ``count`` culturally-inclusive concepts."""
        return generate_concepts(self.project, n=count, model=model)

    def load(self, preset: str) -> Summary:
        """Load a seed paper's concept list: ``"3xcm"`` (seed 000 Table 10) or ``"globalrg"``."""
        return load_preset(self.project, preset)

    def add(self, *names: str, description: str | None = None) -> Summary:
        """Add concepts by name (``p.concepts.add("bus", "street food")``)."""
        return add_concepts(self.project, list(names), description=description)

    def list(self, status: str | None = "active", *, frame: bool | None = None) -> DataFrame:
        """The concepts with this status (``"active"``, ``"merged"``, ``"removed"``; None: all)."""
        return _frame(list_concepts(self.project, status=status), frame)

    def remove(self, *names: str, path: PathLike | None = None, reason: str = "removed by hand") -> Summary:
        """Set concepts aside (kept, with their status and reason; nothing is deleted): one name, several, or
        those of a text file (``path``: one a line); every name is checked before any is removed."""
        if len(names) == 1 and path is None:
            return remove_concept(self.project, names[0], reason=reason)
        return remove_concepts(self.project, names, path=path, reason=reason)

    def dedup(self, *, threshold: float | None = None, model: str | None = None,
              dry_run: bool = False) -> ConceptClusters:
        """Merge near-duplicate concepts by name embedding (``BAAI/bge-m3`` by default); ``dry_run``: only
        return the clusters."""
        return dedup_concepts(self.project, threshold=threshold, embedder=model, apply=not dry_run)

    def translate(self, *, model: str | None = None, overwrite: bool = False) -> Summary:
        """The native term of every concept per country (LLM; manual terms are never overwritten), then the
        queries."""
        res = translate_concepts(self.project, model=model, overwrite=overwrite)
        res["queries"] = build_queries(self.project)["total"]
        return res

    def set_term(self, concept: str, country: str, term: str, *, language: str | None = None) -> Summary:
        """Set one native term by hand (``p.concepts.set_term("bus", "JP", "バス")``)."""
        res = set_term(self.project, concept, country, term, language=language)
        res["queries"] = build_queries(self.project)["total"]
        return res

    def set_terms(self, path: PathLike) -> Summary:
        """Set many native terms from a TSV/CSV file with the columns concept, country, term (language)."""
        res = set_terms_from_file(self.project, path)
        res["queries"] = build_queries(self.project)["total"]
        return res

    def terms(self, country: str | None = None, *, frame: bool | None = None) -> DataFrame:
        """The native terms, of one country or all."""
        return _frame(list_terms(self.project, country=country), frame)

    def queries(self) -> Summary:
        """Make the search queries from the concepts and terms (English and native); returns counts."""
        return build_queries(self.project)


class Images:
    """The image pool: search, download, de-duplication, tags, and the review of what leaves the pool."""

    def __init__(self, project: Project):
        self.project = project

    def search(self, provider: str | None = None, *, per_query: int | None = None, overwrite: bool = False,
               progress: Progress = None) -> Summary:
        """Search every query (``ddgs``, the default), or read a list of your own: ``"urls:FILE"`` (JSONL, CSV or
        Parquet with url, concept, country) or ``"folder:DIR"`` (``DIR/<COUNTRY>/<concept>/*.jpg``).
        ``overwrite``: search again queries already searched."""
        return search_images(self.project, provider=provider, per_query=per_query, refresh=overwrite,
                             progress=progress)

    def ingest(self, directory: PathLike) -> Summary:
        """Read back an img2dataset output folder (its parquet/json metadata and images)."""
        return ingest_img2dataset(self.project, Path(directory))

    def download(self, *, workers: int | None = None, retry_failed: bool = False, limit: int | None = None,
                 check: str | None = None, processes: int | None = None, progress: Progress = None) -> Summary:
        """Download every pending candidate safely (addresses checked on every hop, caps, sniffing, content
        hashes); ``retry_failed``: failed ones too. ``check``: ``"decode"`` (every image decoded now) or
        ``"header"`` (JPEG/PNG/WebP checked from header and end; :meth:`dedup` decodes them, and they stay out
        of the reviewed pool until then); None: ``download.check``. ``processes``: event loops, each in its own
        process with its share of the hosts and connections (None: from 1,000 candidates on, one per CPU for a
        header check and one per four CPUs when decoding; else one)."""
        # the same ranges as 'cultura images download' (the stage itself checks only that workers >= 1)
        workers = from_field(DownloadSection, "workers").check_optional(workers, "workers")
        limit = COUNT.check_optional(limit, "limit")
        processes = COUNT.check_optional(processes, "processes")
        return download_candidates(self.project, workers=workers, retry_failed=retry_failed, limit=limit,
                                   check=check, processes=processes, progress=progress)

    def dedup(self, methods: str | Iterable[str] | None = None, *, scope: str | None = None,
              phash_threshold: int | None = None, dhash_threshold: int | None = None, model: str | None = None,
              embedding_threshold: float | None = None, executor: str | None = None,
              embedding_index: str | None = None, progress: Progress = None) -> Summary:
        """Find duplicate sets (``sha256``, ``phash``, ``dhash``; ``embedding`` with ``model``)."""
        return dedup_images(self.project, methods=None if methods is None else _words(methods), scope=scope,
                            phash_threshold=phash_threshold, dhash_threshold=dhash_threshold, embedder=model,
                            embedding_threshold=embedding_threshold, executor=executor,
                            embedding_index=embedding_index, progress=progress)

    def tag(self, method: str | None = None, *, model: str | None = None, top_k: int | None = None,
            retry_failed: bool = False, overwrite: bool = False, limit: int | None = None,
            executor: str | None = None, progress: Progress = None) -> Summary:
        """Tag every kept image with concepts: ``"llm"`` (a vision LLM), ``"clip"`` (zero-shot) or ``"auto"``."""
        return tag_images(self.project, method=method, model=model, top_k=top_k, retry_failed=retry_failed,
                          overwrite=overwrite or None, limit=limit, executor=executor, progress=progress)

    def list(self, *, concept: str | None = None, country: str | None = None, status: str | None = None,
             pool: str | None = None, limit: int | None = None, frame: bool | None = None) -> DataFrame:
        """The images with their links and status; ``pool="in"``/``"out"``: only what the reviewed pool keeps
        or leaves out (with the reason)."""
        return _frame(list_images(self.project, concept=concept, country=country, status=status, pool=pool,
                                  limit=limit), frame)

    def failures(self, limit: int | None = 50, *, frame: bool | None = None) -> DataFrame:
        """Candidates that failed or were skipped, with their reason."""
        return _frame(list_failures(self.project, limit=limit), frame)

    def clusters(self, status: str | None = "open", *, frame: bool | None = None) -> DataFrame:
        """Duplicate sets, members with their distances (``status`` None: all)."""
        return _frame(list_clusters(self.project, status=status), frame)

    def flags(self, status: str | None = "open", *, frame: bool | None = None) -> DataFrame:
        """Culture questions and other flags (``status`` None: all)."""
        return _frame(flags(self.project, status=status), frame)

    def resolve_flags(self, sha256: str | Iterable[str], *, reason: str,
                      cultures: Iterable[str] | None = None, flag: str = "culture_conflict") -> Summary:
        """Decide a culture question (the cultures a photo stands for) or close a flag, with the reason.
        ``flag="unreadable"``: an image dedup could not decode goes back to the pool, and the next dedup
        decodes it again."""
        return resolve_image_flags(self.project, _words(sha256), reason=reason, flag=flag,
                                   cultures=None if cultures is None else list(cultures))

    def reopen_flags(self, sha256: str | Iterable[str], *, reason: str, flag: str = "culture_conflict") -> Summary:
        """Open resolved flags again."""
        return resolve_image_flags(self.project, _words(sha256), reason=reason, reopen=True, flag=flag)

    def exclude(self, sha256: str | Iterable[str], *, reason: str) -> Summary:
        """Leave images out of the pool by hand (a status with its reason; nothing is deleted)."""
        return set_image_status(self.project, _words(sha256), exclude=True, reason=reason)

    def include(self, sha256: str | Iterable[str]) -> Summary:
        """Bring excluded images back."""
        return set_image_status(self.project, _words(sha256), exclude=False)


__all__ = ["Concepts", "Images"]
