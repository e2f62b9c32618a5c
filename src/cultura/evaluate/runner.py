"""Run suites over models and store self-describing results (``eval_runs`` / ``eval_results`` and JSON).

Usage::

    from cultura.evaluate.runner import run_evaluation, load_results
    runs = run_evaluation(project, ["fake", "openclip:ViT-B-32/openai"], "all")
    rows = load_results(project, suite="association")

Each model is loaded once and evaluated on every requested suite; each (model, suite) pair is one
``eval_runs`` row written first with status ``running`` and finished last with ``done``, ``skipped`` (the
project has no data for the suite, with the reason) or ``failed`` (with the error). Nothing is deleted: a
rerun adds runs, and :func:`load_results` reads the latest done run per model × suite × benchmark. Embeddings
go through the project's cache, so rerunning a model computes none (``n_embedded`` = 0).

Every stored row is self-describing: model identity and info, benchmark name/version/hash, suite, parameters,
git revision, date, metric, value, CI, n, group and details. JSON files (one per run, under
``reports/results/``) write ``inf``/``nan`` as the strings ``"inf"``/``"nan"`` (JSON has no such numbers).
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..db import dumps, now, owner_token, transaction
from ..bounds import BATCH_SIZE, COUNT, OutOfRange
from ..errors import CulturaError
from ..files import refuse_existing
from ..executor import use_executor
from ..progress import Progress, task
from ..models.embedders import get_embedder
from ..redact import scrub, scrub_obj
from .data import resolve_benchmark
from .results import (  # noqa: F401
    _from_json,
    _json_safe,
    _sql_value,
    cultura_version,
    git_revision,
    list_runs,
    load_results,
    SMALL_SAMPLES,
    reap_eval_runs,
    remove_run_json,
    results_json,
    store_samples,
    write_results_document,
    write_run_json,
)
from .suites import ROW_KEYS, Suite, SuiteSkipped, get_suite, load_suites, resolve_suites
from .suites.registry import explain_numbers, suite_run

if TYPE_CHECKING:
    from ..project import Project


@dataclass
class RunRecord:
    """What happened to one (model, suite) evaluation."""

    run_id: int
    model: str
    spec: str
    suite: str
    status: str
    benchmark: str | None = None
    benchmark_version: int | None = None
    n_results: int = 0
    n_embedded: int = 0
    reason: str | None = None
    json_path: str | None = None
    extra: dict = field(default_factory=dict)


def run_evaluation(project: Project, models, suites="all", *, benchmark: str | None = None,
                   batch_size: int | None = None,
                   device: str | None = None, options: dict | None = None, progress: Progress = None,
                   executor: str | None = None, log_samples: bool | None = None, limit: int | None = None,
                   output_path=None, overwrite: bool = False) -> list[RunRecord]:
    """Evaluate every model spec (or :class:`Embedder`) on every suite; returns one record per pair.

    ``suites``: a name, a comma-separated string, a list, or ``"all"``. ``options``: per-suite options
    ``{"association": {"n_resamples": 200}, ...}`` (a flat dict applies to every suite). Library errors of one
    pair (model unavailable, bad benchmark) are recorded as ``failed`` runs and do not stop the others;
    programming errors propagate after being recorded. ``executor`` (default ``evaluate.executor``): where
    the embeddings and LM scores missing from the caches are computed, ``local`` or ``ray``
    (:mod:`cultura.executor`; the results are the same).

    ``log_samples``: store every scored unit of each run (``eval_samples``; :func:`results.load_samples`);
    ``None`` (default) stores them when a run has at most ``SMALL_SAMPLES``, ``False`` never. ``limit``: a
    smoke run on the first ``limit`` units of each suite, marked as such in the runs, results JSON and report.
    ``output_path``: also write the results JSON of this call (and the sample logs) there
    (:func:`results.write_results_document`); the path is in each record's ``extra["results_json"]``. An
    existing ``.json`` file there is refused before anything runs unless ``overwrite``.
    """
    limit = COUNT.check_optional(limit, "limit")
    batch_size = BATCH_SIZE.check_optional(batch_size, "batch_size")
    if output_path is not None and Path(output_path).suffix == ".json":
        refuse_existing(output_path, overwrite=overwrite)  # before the runs, not after an hour of them
    with use_executor(executor or project.config.evaluate.executor, config=project.config):
        records = _run_evaluation(project, models, suites, benchmark=benchmark, batch_size=batch_size,
                                  device=device, options=options, progress=progress, log_samples=log_samples,
                                  limit=None if limit is None else int(limit))
    if output_path is not None:
        config = {"models": [m if isinstance(m, str) else m.identity for m in
                             ([models] if isinstance(models, str) or not hasattr(models, "__iter__") else models)],
                  "suites": suites, "benchmark": benchmark, "batch_size": batch_size, "device": device,
                  "options": scrub_obj(options or {}), "executor": executor or project.config.evaluate.executor,
                  "log_samples": log_samples, "limit": limit}
        paths = write_results_document(project, [r.run_id for r in records], output_path, config=config,
                                       overwrite=overwrite)
        for r in records:
            r.extra["results_json"] = paths["results"]
    return records


def _run_evaluation(project: Project, models, suites, *, benchmark, batch_size, device, options, progress,
                    log_samples=None, limit=None) -> list[RunRecord]:

    if isinstance(models, str) or not hasattr(models, "__iter__"):
        models = [models]
    models = list(models)
    if not models:
        raise CulturaError("No model given: give at least one model spec (e.g. "
                           "openclip:ViT-B-32/openai, or fake to try the pipeline).", param="models")
    requested = [suites] if isinstance(suites, str) else list(suites)
    expanded = "all" in [s.strip() for r in requested for s in str(r).split(",")]
    chosen = resolve_suites(requested)
    check_options(chosen, options)
    reap_eval_runs(project)  # runs left 'running' by a dead process become 'interrupted'
    records: list[RunRecord] = []
    kw = {k: v for k, v in (("batch_size", batch_size), ("device", device), ("progress", progress))
          if v is not None}
    # a bar of its own for the suites' work after the embedding bars (metrics, bootstraps, stores)
    bar = task("evaluating (model × suite)", len(models) * len(chosen), progress=progress)
    for spec in models:
        embedder, error = None, None
        for suite in chosen:
            bar.update(done=len(records), suite=suite.name)
            opts = _suite_options(options, suite.name)
            if suite.model_kind == "llm" and isinstance(spec, str) and not expanded:
                # a suite of language models named on the command line: --model is the LLM
                opts.setdefault("llm", spec)
                records.append(run_suite(project, ModelRef(opts["llm"]), suite, benchmark=benchmark,
                                         options=opts, spec=opts["llm"], from_all=expanded,
                                         log_samples=log_samples, limit=limit))
                continue
            if embedder is None and error is None:
                try:
                    # loaded on the first vector missing from the cache (a cached run loads no model)
                    embedder = spec if not isinstance(spec, str) else get_embedder(spec, deferred=True, **kw)
                except CulturaError as e:
                    error = scrub(str(e))
            if error is not None:
                # a model that cannot be built is one failure, not one per suite (a mistyped --model would
                # otherwise start one failing run per suite)
                records.append(_record_failure(project, str(spec), suite, benchmark, error))
                break
            records.append(run_suite(project, embedder, suite, benchmark=benchmark, options=opts,
                                     spec=spec if isinstance(spec, str) else embedder.identity,
                                     from_all=expanded, extra_params={k: v for k, v in kw.items()
                                                                      if k != "progress"},
                                     log_samples=log_samples, limit=limit))
    bar.update(done=len(models) * len(chosen))
    bar.close()
    return records


_OPTION_READ = re.compile(r"""\b(?:o|opts?|options|cfg)\s*(?:\.get\(|\.pop\(|\[)\s*["']([A-Za-z_][A-Za-z0-9_]*)["']""")
_SHARED_MODULES = ("common.py", "data.py", "stats.py", "stats_extra.py")


@functools.lru_cache(maxsize=None)
def suite_option_keys(suite_name: str) -> frozenset[str]:
    """The option keys a suite reads: every ``opts.get("key")`` / ``o["key"]`` in its folder (and in the
    evaluation modules it shares). A suite registered from outside the package returns an empty set (not
    checked)."""
    suite = get_suite(suite_name)
    mod = getattr(suite.func, "__module__", "") or ""
    here = Path(__file__).resolve().parent
    if not mod.startswith(__package__ + ".suites."):
        return frozenset()
    folder = here / "suites" / mod.split(".")[-2]
    files = [*folder.glob("*.py"), *(here / m for m in _SHARED_MODULES)]
    keys: set[str] = set()
    for f in files:
        if f.is_file():
            keys.update(_OPTION_READ.findall(f.read_text(encoding="utf-8")))
    return frozenset(keys)


def check_options(suites: list[Suite], options: dict | None) -> None:
    """Refuse options no chosen suite reads, and numbers outside the range a suite declares for them
    (:attr:`Suite.options`), before anything runs."""
    if not options:
        return
    per = {s.name: _suite_options(options, s.name) for s in suites}
    for s in suites:
        for key, value in per[s.name].items():
            if key in s.options:
                try:
                    s.options[key].check(value, f"Option {key} of suite {s.name}")
                except OutOfRange as e:
                    e.param = "options"
                    raise
    known = {s.name: suite_option_keys(s.name) for s in suites}
    unchecked = {n for n, k in known.items() if not k}
    bad = sorted({k for n, opts in per.items() if n not in unchecked for k in opts} -
                 {k for n, opts in per.items() for k in opts if n in unchecked or k in known[n]})
    if bad:
        valid = sorted({k for ks in known.values() for k in ks})
        raise CulturaError(f"Unknown option{'s' if len(bad) > 1 else ''} {', '.join(bad)} for suite"
                           f"{'s' if len(per) > 1 else ''} {', '.join(sorted(per))}. Valid options: "
                           f"{', '.join(valid)}.")


class ModelRef:
    """Stands in for an embedder when a suite evaluates another kind of model (an LLM): its identity is
    the spec; the suite builds the model itself from ``options["llm"]``."""

    def __init__(self, spec: str):
        self.identity = spec
        self.info = {"family": "llm", "spec": spec}
        self.stats = {}


def _suite_options(options: dict | None, name: str) -> dict:
    if not options:
        return {}
    names = set(load_suites())
    if any(k in names for k in options):
        return dict(options.get(name) or {})
    return dict(options)


def run_suite(project: Project, embedder, suite: Suite | str, *, benchmark: str | None = None,
              options: dict | None = None,
              spec: str | None = None, from_all: bool = False, extra_params: dict | None = None,
              log_samples: bool | None = None, limit: int | None = None) -> RunRecord:
    """Run one suite for one embedder, store its rows (and, see :func:`run_evaluation`, its per-sample log),
    and return the run record."""
    suite = get_suite(suite) if isinstance(suite, str) else suite
    options = dict(options or {})
    db = project.db
    identity = scrub(embedder.identity)
    run = {"model": identity, "model_spec": scrub(spec or identity), "model_info": dumps(scrub_obj(_info(embedder))),
           "benchmark": benchmark, "suite": suite.name,
           "params": dumps({"options": options, "benchmark_arg": benchmark, **(extra_params or {}),
                            "suite_version": suite.version, "log_samples": log_samples,
                            **({"limit": limit, "smoke_run": True} if limit is not None else {})}),
           "git_revision": git_revision(), "cultura_version": cultura_version(), "status": "running",
           "started_at": now(), "owner": owner_token(db)}
    with transaction(db):
        run_id = db["eval_runs"].insert(run).last_pk
    rec = RunRecord(run_id=run_id, model=identity, spec=run["model_spec"], suite=suite.name, status="running")
    before = _embedded(embedder)
    try:
        bench_arg = benchmark
        if suite.benchmark_kind:
            bench = resolve_benchmark(project, benchmark, None if benchmark else suite.benchmark_kind)
            if bench.kind != suite.benchmark_kind:
                msg = (f"Benchmark {bench.ref} is a {bench.kind} benchmark; suite {suite.name} reads "
                       f"{suite.benchmark_kind} benchmarks; give one of that kind.")
                raise SuiteSkipped(msg) if from_all else CulturaError(msg)
            bench_arg = bench.ref
            _set_bench(rec, run, bench.provenance())
        with suite_run(samples=log_samples is not False, cap=SMALL_SAMPLES if log_samples is None else None,
                       limit=limit) as samples:
            rows = suite.func(project, embedder, benchmark=bench_arg, options=options)
        if samples is not None and samples.overflow:
            samples = None  # large: kept only when asked for (--log-samples)
        rows = explain_numbers([_check_row(r, suite.name) for r in rows], suite.name)
        _require_measurement(suite.name, rows)
        prov = next((r["details"].get("provenance") for r in rows if r["details"].get("provenance")), None)
        if prov and not suite.benchmark_kind:
            _set_bench(rec, run, prov)
        for r in rows:
            r["details"].pop("provenance", None)
        rec.n_results, rec.n_embedded = len(rows), _embedded(embedder) - before
        # results, the JSON side file and status 'done' land together: the JSON is written inside the
        # transaction (it reads the rows through it) and removed again if the commit does not happen
        try:
            with transaction(db):
                db["eval_results"].insert_all(
                    [{"run_id": run_id, "suite": r["suite"], "metric": r["metric"],
                      "value": _sql_value(r["value"]), "ci_low": _sql_value(r["ci_low"]),
                      "ci_high": _sql_value(r["ci_high"]), "n": r["n"], "group": dumps(r["group"]),
                      "details": dumps(_json_safe(r["details"]))} for r in rows])
                n_samples = store_samples(db, run_id, samples) if samples is not None else None
                db["eval_runs"].update(run_id, {"benchmark": run["benchmark"],
                                                "benchmark_version": run.get("benchmark_version"),
                                                "benchmark_hash": run.get("benchmark_hash"), "status": "done",
                                                "n_results": len(rows), "n_embedded": rec.n_embedded,
                                                "n_samples": n_samples, "finished_at": now()})
                rec.extra["n_samples"] = n_samples
                rec.json_path = str(write_run_json(project, run_id))
        except BaseException:
            remove_run_json(project, run_id)
            rec.json_path = None
            raise
        rec.status = "done"
    except SuiteSkipped as e:
        rec.status, rec.reason = ("skipped" if from_all else "failed"), scrub(str(e))
        _finish(db, run_id, rec, embedder, before)
    except CulturaError as e:
        rec.status, rec.reason = "failed", scrub(str(e))
        _finish(db, run_id, rec, embedder, before)
    except BaseException as e:  # a bug or an interrupt: recorded, then raised
        rec.status, rec.reason = "failed", scrub(f"{type(e).__name__}: {e}")
        _finish(db, run_id, rec, embedder, before)
        raise
    return rec


def _set_bench(rec: RunRecord, run: dict, prov: dict) -> None:
    run["benchmark"] = prov.get("benchmark")
    run["benchmark_version"] = prov.get("benchmark_version")
    run["benchmark_hash"] = prov.get("benchmark_hash")
    rec.benchmark, rec.benchmark_version = run["benchmark"], run["benchmark_version"]


def _finish(db, run_id: int, rec: RunRecord, embedder, before: int) -> None:
    rec.n_embedded = _embedded(embedder) - before
    with transaction(db):
        db["eval_runs"].update(run_id, {"status": rec.status, "error": rec.reason, "n_embedded": rec.n_embedded,
                                        "benchmark": rec.benchmark, "benchmark_version": rec.benchmark_version,
                                        "finished_at": now()})


def _record_failure(project: Project, spec: str, suite: Suite, benchmark, reason: str) -> RunRecord:
    with transaction(project.db):
        run_id = project.db["eval_runs"].insert({
            "model": spec, "model_spec": spec, "model_info": "{}", "benchmark": benchmark, "suite": suite.name,
            "params": "{}", "git_revision": git_revision(), "cultura_version": cultura_version(),
            "owner": owner_token(project.db), "status": "failed", "error": reason, "n_results": 0, "n_embedded": 0, "started_at": now(),
            "finished_at": now()}).last_pk
    return RunRecord(run_id=run_id, model=spec, spec=spec, suite=suite.name, status="failed", reason=reason)


def _info(embedder) -> dict:
    try:
        return _json_safe(dict(embedder.info))
    except CulturaError:
        return {"identity": embedder.identity}


def _embedded(embedder) -> int:
    stats = getattr(embedder, "stats", None) or {}
    return int(stats.get("images", 0)) + int(stats.get("texts", 0))


def _require_measurement(suite: str, rows: list[dict]) -> None:
    """Empty results are not results: a suite whose every row is undefined (no trials, nothing measured) is
    skipped (or, asked for by name, failed) with the rows' reasons and the command that fixes it."""
    def undefined(v):
        return v is None or (isinstance(v, float) and math.isnan(v))
    if not rows or not all(undefined(r["value"]) for r in rows):
        return
    reasons = sorted({str(r["details"].get("reason")) for r in rows if r["details"].get("reason")})
    excluded: dict[str, int] = {}
    for r in rows:
        for k, v in (r["details"].get("excluded") or {}).items():
            if isinstance(v, (int, float)) and v:
                excluded[k] = max(excluded.get(k, 0), int(v))
    msg = f"Suite {suite} measured nothing: every result is undefined ({'; '.join(reasons) or 'no reason given'})"
    if excluded:
        msg += " — items left out: " + ", ".join(f"{k} {v}" for k, v in sorted(excluded.items()))
    if any("'cultura " in r for r in reasons):
        pass  # the suite's own reason already names the command that fixes it
    elif excluded.get("missing_query"):
        msg += (". The benchmark's items have no query text of this variant (descriptor benchmarks need the "
                "mention_<COUNTRY> texts): run 'cultura build queries', then evaluate again")
    elif excluded.get("missing_candidate"):
        msg += ". Rebuild the benchmark ('cultura build association' / 'cultura build descriptor')"
    raise SuiteSkipped(msg + ".")


def _check_row(r: dict, suite: str) -> dict:

    missing = [k for k in ROW_KEYS if k not in r]
    if missing:
        raise CulturaError(f"Suite {suite!r} returned a row without {', '.join(missing)}; build rows with "
                           "cultura.evaluate.suites.row().")
    out = dict(r)
    out["group"] = dict(r.get("group") or {})
    out["details"] = dict(r.get("details") or {})
    return out


def records_table(records: list[RunRecord]) -> list[dict]:
    """Records as plain dicts for printing."""
    return [{k: v for k, v in asdict(r).items() if k != "extra"} for r in records]
