"""``p.evaluate`` and ``p.view``: evaluation and the browsable site, as ``cultura evaluate`` and
``cultura view``."""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..evaluate.report import write_report
from ..evaluate.results import export_samples, list_runs, load_samples
from ..evaluate.runner import RunRecord, load_results, run_evaluation
from ..evaluate.suites import load_suites
from ..models.embedders import cache_size, clear_cache
from ..models.embedders.presets import preset_table
from ..progress import Progress
from ..view.site import PAGE_SIZE, build_view, view_dir
from .tables import frame as _frame

if TYPE_CHECKING:
    from pandas import DataFrame

    from ..models.embedders import Embedder
    from ..project import Project

Summary = dict[str, Any]
Records = list[RunRecord]
PathLike = str | os.PathLike[str]


def _many(values: str | Iterable[str] | None) -> list[str] | None:
    if values is None:
        return None
    return [values] if isinstance(values, str) else list(values)


class Evaluate:
    """The seed papers' metric suites over models; results stored with their provenance, and the report."""

    def __init__(self, project: Project):
        self.project = project

    def run(self, models: str | Embedder | Iterable[str | Embedder], suites: str | Iterable[str] = "all", *,
            benchmark: str | None = None, batch_size: int | None = None, device: str | None = None,
            options: Mapping[str, Any] | None = None, log_samples: bool | None = None, limit: int | None = None,
            output_path: PathLike | None = None, overwrite: bool = False, executor: str | None = None,
            progress: Progress = None) -> Records:
        """Run ``suites`` (names, or ``"all"``) over ``models`` (specs such as ``"openclip:ViT-B-32/openai"``, or
        embedders); one record per model × suite. ``options``: ``{"n_resamples": 200}`` for every suite, or
        ``{"association": {...}}`` per suite. ``limit``: a smoke run, marked as such everywhere. ``output_path``:
        also write the results JSON there (an existing file is refused unless ``overwrite``)."""
        specs = [models] if isinstance(models, str) or not isinstance(models, Iterable) else list(models)
        return run_evaluation(self.project, specs, suites if isinstance(suites, str) else list(suites),
                              benchmark=benchmark, batch_size=batch_size, device=device,
                              options=None if options is None else dict(options), progress=progress,
                              executor=executor, log_samples=log_samples, limit=limit, output_path=output_path,
                              overwrite=overwrite)

    def results(self, *, suite: str | None = None, model: str | None = None, benchmark: str | None = None,
                all_runs: bool = False, frame: bool | None = None) -> DataFrame:
        """The stored results (latest run per model × suite × benchmark unless ``all_runs``): one row per
        metric and group, with value, CI, n and provenance."""
        return _frame(load_results(self.project, suite=suite, model=model, benchmark=benchmark,
                                   latest=not all_runs), frame)

    def runs(self, *, status: str | None = None, frame: bool | None = None) -> DataFrame:
        return _frame(list_runs(self.project, status=status), frame)

    def report(self, out: PathLike | None = None, *, models: str | Iterable[str] | None = None,
               suites: str | Iterable[str] | None = None,
               benchmarks: str | Iterable[str] | None = None, overwrite: bool = False,
               progress: Progress = None) -> dict[str, Path]:
        """Write the report (HTML, Markdown, CSV, figures, LaTeX tables); default ``reports/evaluation.html``
        (a named ``out`` that exists is refused unless ``overwrite``)."""
        return write_report(self.project, None if out is None else Path(out), models=_many(models),
                            suites=_many(suites), benchmarks=_many(benchmarks), overwrite=overwrite,
                            progress=progress)

    def samples(self, run_id: int, *, kind: str | None = None, frame: bool | None = None) -> DataFrame:
        """The per-sample log of a run (every scored trial, query, context or judge answer)."""
        return _frame(load_samples(self.project, run_id, kind=kind), frame)

    def export_samples(self, run_id: int, path: PathLike, *, overwrite: bool = False) -> Path:
        """Write a run's per-sample log to ``path`` (.jsonl or .parquet; an existing file is refused unless
        ``overwrite``)."""
        return export_samples(self.project, run_id, path, overwrite=overwrite)

    def suites(self, *, frame: bool | None = None) -> DataFrame:
        """The registered suites (built-in and from plugins)."""
        return _frame([{"suite": s.name, "benchmark_kind": s.benchmark_kind, "in_all": s.in_all,
                        "description": s.description} for s in load_suites().values()], frame)

    def models(self, *, cache_dir: PathLike | None = None, frame: bool | None = None) -> DataFrame:
        """The named model presets (the seed papers' models) and whether each is ready offline."""
        return _frame(preset_table(None if cache_dir is None else str(cache_dir)), frame)

    def cache_size(self) -> Summary:
        """How many embeddings are cached, per model."""
        return cache_size(self.project)

    def clear_cache(self, model: str | None = None) -> int:
        """Delete cached embeddings (of one model identity, or all); they are recomputed when needed."""
        return clear_cache(self.project, model)


class View:
    """``reports/view/``: the pool, duplicate sets, culture flags, trials and disagreements as a static site."""

    def __init__(self, project: Project):
        self.project = project

    @property
    def path(self) -> Path:
        """The site's index page."""
        return view_dir(self.project) / "index.html"

    def build(self, *, overwrite: bool = False, page_size: int = PAGE_SIZE, progress: Progress = None) -> Summary:
        """Write (or update: only changed pages) the site; ``overwrite`` remakes every thumbnail."""
        return build_view(self.project, overwrite=overwrite, page_size=page_size, progress=progress)


__all__ = ["Evaluate", "View"]
