"""``p.benchmarks`` and ``p.imports``: assembly, export and existing datasets, as ``cultura build``,
``cultura export`` and ``cultura import``."""
from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..benchmark.build import build_benchmark, build_stats, get_benchmark, list_benchmarks
from ..benchmark.export import export_benchmark
from ..benchmark.verify import check_benchmark
from ..benchmark import hub
from ..curate.benchmark_queries import build_mention_queries, build_queries, list_queries
from ..curate.query_edits import set_queries_from_file, set_query
from ..errors import CulturaError
from ..benchmark.releases import import_3xcm_benchmark, import_3xcm_images, import_globalrg_release
from ..annotate.ratings import import_ratings
from ..curate.importers import import_captions, import_globalrg
from .tables import frame as _frame

if TYPE_CHECKING:
    from pandas import DataFrame

    from ..project import Project

Summary = dict[str, Any]
PathLike = str | os.PathLike[str]


def _some(values: str | Iterable[str] | None) -> list[str] | None:
    if values is None:
        return None
    return [v.strip() for v in values.split(",") if v.strip()] if isinstance(values, str) else list(values)


class Benchmarks:
    """Versioned benchmarks (association, descriptor) built from the reviewed pool, and their export."""

    def __init__(self, project: Project):
        self.project = project

    def build(self, kind: str, *, name: str | None = None, version: int | None = None, seed: int = 0,
              per_pair: int = 1, concepts: str | Iterable[str] | None = None,
              countries: str | Iterable[str] | None = None, descriptors: str | Iterable[str] | None = None,
              allow_unreviewed: bool = False, min_relevance: float | None = 4.0, allow_random_tags: bool = False,
              allow_unrated: bool = False) -> Summary:
        """Build a benchmark of ``kind`` (``"association"`` or ``"descriptor"``); a new version when anything
        changed, the same one (``reused``) when nothing did. Refuses what is not complete, in one sentence."""
        return build_benchmark(self.project, kind, name=name, version=version, seed=seed, per_pair=per_pair,
                               concepts=_some(concepts), countries=_some(countries), descriptors=_some(descriptors),
                               allow_unreviewed=allow_unreviewed, min_relevance=min_relevance,
                               allow_random_tags=allow_random_tags, allow_unrated=allow_unrated)

    def list(self, *, frame: bool | None = None) -> DataFrame:
        """Every benchmark version with its kind, trials, content hash and status."""
        return _frame(list_benchmarks(self.project), frame)

    def get(self, spec: str | None = None) -> Summary:
        """One benchmark: ``NAME`` (its latest version) or ``NAME@VERSION``."""
        return get_benchmark(self.project, spec)

    def check(self, spec: str) -> Summary:
        """What of one benchmark version (``NAME`` or ``NAME@VERSION``) the current state no longer supports:
        ``supported``, ``changes`` (each ``what``, ``count``, ``images``, ``text``), ``rebuild`` and ``message``."""
        return check_benchmark(self.project, get_benchmark(self.project, spec))

    def stats(self, *, min_images: int = 3, benchmark: str | None = None) -> Summary:
        """How many images each concept × country cell holds (of the eligible pool, or of a benchmark)."""
        return build_stats(self.project, min_images=min_images, benchmark=benchmark)

    def queries(self, *, short_only: bool = False, descriptors: bool = True, model: str | None = None,
                concepts: str | Iterable[str] | None = None, overwrite: bool = False) -> Summary:
        """The query variants per concept × country: short (the native terms), verbose and descriptor (LLM)."""
        return build_queries(self.project, verbose=not short_only, descriptors=descriptors and not short_only,
                             model=model, concepts=_some(concepts), overwrite=overwrite)

    def mention_queries(self, *, method: str = "llm", model: str | None = None,
                        concepts: str | Iterable[str] | None = None, countries: str | Iterable[str] | None = None,
                        descriptors: str | Iterable[str] | None = None, overwrite: bool = False) -> Summary:
        """The short descriptor queries ``mention_<CC>`` (``method="pattern"``: from a language's pattern)."""
        return build_mention_queries(self.project, method=method, model=model, concepts=_some(concepts),
                                     countries=_some(countries), descriptors=_some(descriptors), overwrite=overwrite)

    def set_query(self, concept: str | None = None, country: str | None = None, variant: str | None = None,
                  text: str | None = None, *, path: PathLike | None = None) -> Summary:
        """Write one query text by hand (checked like the LLM's), or many from a CSV/JSONL/Parquet file
        (``path``: columns concept, country, variant, text; bad rows are reject rows with their reason)."""
        if path is not None:
            return set_queries_from_file(self.project, path)
        if concept is None or country is None or variant is None or text is None:
            raise CulturaError("Give concept, country, variant and text, or path= for a file of them.",
                               param="concept")
        return set_query(self.project, concept, country, variant, text)

    def list_queries(self, *, concept: str | None = None, country: str | None = None, status: str | None = None,
                     frame: bool | None = None) -> DataFrame:
        return _frame(list_queries(self.project, concept=concept, country=country, status=status), frame)

    def export(self, directory: PathLike, *, benchmarks: str | Iterable[str] | None = None, fmt: str = "parquet",
               images: bool = True, embed_images: bool = False, push_to_hub: str | None = None,
               private: bool = False, as_built: bool = False) -> Summary:
        """Export to ``directory`` (new or empty) as a Hugging Face dataset that ``datasets.load_dataset``
        loads as is; ``push_to_hub="owner/name"`` then uploads it (token from ``HF_TOKEN``; ``croissant.json``
        names that repository's page). ``warnings`` in the result: what to fix before publishing. A version the
        current state no longer supports is refused unless ``as_built`` (the card then says what changed)."""
        res = export_benchmark(self.project, directory, benchmarks=_some(benchmarks), fmt=fmt, images=images,
                               embed_images=embed_images, as_built=as_built,
                               url=hub.dataset_url(push_to_hub) if push_to_hub else None)
        if push_to_hub:
            res["hub"] = hub.push_to_hub(res["dir"], push_to_hub, private=private)
        return res



class Imports:
    """Existing datasets brought into the project: GlobalRG, Crossmodal-3600 captions, CAIRe ratings, 3XCM."""

    def __init__(self, project: Project):
        self.project = project

    def globalrg(self, table: PathLike, *, images: PathLike, image_column: str | None = None,
                 country_column: str | None = None, concept_column: str | None = None) -> Summary:
        return import_globalrg(self.project, table, images, image_column=image_column,
                               country_column=country_column, concept_column=concept_column)

    def globalrg_parquet(self, table: PathLike, *, images: PathLike | None = None,
                         columns: dict[str, str] | None = None) -> Summary:
        """GlobalRG-Retrieval as released (Parquet with the image bytes embedded)."""
        return import_globalrg_release(self.project, table, images_dir=images, columns=columns or {})

    def captions(self, captions: PathLike, *, images: PathLike) -> Summary:
        return import_captions(self.project, captions, images)

    def ratings(self, path: PathLike, *, image_column: str | None = None, country_column: str | None = None,
                score_column: str | None = None) -> Summary:
        """Per-image culture ratings (image, country, 1–5 score) as relevance decisions."""
        return import_ratings(self.project, path, image_column=image_column, country_column=country_column,
                              score_column=score_column)

    def threexcm(self, table: PathLike, *, trials: bool = False, kind: str | None = None, name: str = "3xcm",
                 version: int | None = None, images: PathLike | None = None,
                 columns: dict[str, str] | None = None) -> Summary:
        """The 3XCM release (seed 000): its image table, or with ``trials`` its trials as a benchmark."""
        if trials:
            return import_3xcm_benchmark(self.project, table, name=name, version=version, kind=kind,
                                         images_dir=images, columns=columns or {})
        return import_3xcm_images(self.project, table, images_dir=images, columns=columns or {})


__all__ = ["Benchmarks", "Imports"]
