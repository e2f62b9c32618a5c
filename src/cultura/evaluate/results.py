"""The result store: ``eval_runs`` / ``eval_results`` rows and one JSON file per run, read back as
self-describing rows (model identity and info, benchmark name/version/hash, suite, parameters, git revision,
date, metric, value, CI, n, group, details).

The runner (:mod:`cultura.evaluate.runner`) writes through it; the report and the CLI read through it. JSON
files (one per run, under ``reports/results/``) and the results JSON of a run write every number as a JSON
number, or null with the reason (``value_reason``), and say for each row whether higher is better
(:mod:`.published`). The database keeps ``inf``/``nan`` in details as the strings ``"inf"``/``"nan"``.
"""
from __future__ import annotations

import datetime as dt
import functools
import json
import math
import platform
import re
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from ..bounds import ROW_ID
from ..db import now, reap_runs
from ..errors import CulturaError
from ..files import refuse_existing, write_atomic
from .published import ci_method, finite_or, numbers, published_row

if TYPE_CHECKING:
    from ..project import Project

RESULTS_DIR = "reports/results"


@functools.lru_cache(maxsize=1)
def git_revision() -> str | None:
    """The git commit of the cultura source tree (``+dirty`` when it has local changes), or None outside a
    checkout."""
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
        return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def cultura_version() -> str | None:
    try:
        return version("cultura")
    except PackageNotFoundError:
        return None


def _sql_value(x):
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def _json_safe(obj):
    """Replace non-finite floats by the strings 'inf', '-inf', 'nan' (recursively); numpy scalars → Python."""
    return finite_or(obj, lambda x: "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf"))


def _from_json(x):
    """Back from :func:`_json_safe`: "inf"/"-inf"/"nan" → floats, inside lists and dicts too."""
    if isinstance(x, str) and x in ("inf", "-inf", "nan"):
        return float(x)
    if isinstance(x, list):
        return [_from_json(v) for v in x]
    if isinstance(x, dict):
        return {k: _from_json(v) for k, v in x.items()}
    return x


# -- reading results --------------------------------------------------------------------------------

def list_runs(project: Project, *, status: str | None = None) -> list[dict]:
    """All ``eval_runs`` rows (newest first), JSON columns decoded."""
    where, args = ("WHERE status = ?", [status]) if status else ("", [])
    out = []
    for r in project.db.query(f"SELECT * FROM eval_runs {where} ORDER BY id DESC", args):
        r = dict(r)
        r["model_info"] = json.loads(r["model_info"] or "{}")
        r["params"] = json.loads(r["params"] or "{}")
        out.append(r)
    return out


def load_results(project: Project, *, suite: str | None = None, model: str | None = None, benchmark: str | None = None,
                 latest: bool = True, run_ids=None) -> list[dict]:
    """Self-describing result rows. ``latest``: only the newest done run per (model, suite, benchmark,
    benchmark version). Values are floats (``inf`` for an infinite SP, ``nan`` for an undefined value)."""
    where, args = ["r.status = 'done'"], []
    for col, val in (("r.suite", suite), ("r.model", model), ("r.benchmark", benchmark)):
        if val is not None:
            where.append(f"{col} = ?")
            args.append(val)
    if run_ids is not None:
        ids = [int(i) for i in run_ids] or [-1]
        where.append(f"r.id IN ({','.join('?' * len(ids))})")
        args += ids
    if latest:
        where.append("r.id = (SELECT max(r2.id) FROM eval_runs r2 WHERE r2.status = 'done' AND r2.model = r.model "
                     "AND r2.suite = r.suite AND coalesce(r2.benchmark, '') = coalesce(r.benchmark, '') "
                     "AND coalesce(r2.benchmark_version, -1) = coalesce(r.benchmark_version, -1))")
    sql = ("SELECT e.*, r.model, r.model_spec, r.model_info, r.benchmark, r.benchmark_version, r.benchmark_hash, "
           "r.params, r.git_revision, r.cultura_version, r.finished_at AS date FROM eval_results e "
           f"JOIN eval_runs r ON r.id = e.run_id WHERE {' AND '.join(where)} ORDER BY e.run_id, e.id")
    out = []
    for r in project.db.query(sql, args):
        details = _restore(json.loads(r["details"] or "{}"))  # nested inf/nan too (sp_rounds)
        value = r["value"]
        if value is None:
            value = float("nan")
        out.append({
            "run_id": r["run_id"], "model": r["model"], "model_spec": r["model_spec"],
            "model_info": json.loads(r["model_info"] or "{}"), "benchmark": r["benchmark"],
            "benchmark_version": r["benchmark_version"], "benchmark_hash": r["benchmark_hash"],
            "suite": r["suite"], "params": json.loads(r["params"] or "{}"), "git_revision": r["git_revision"],
            "cultura_version": r["cultura_version"], "date": r["date"], "metric": r["metric"],
            "value": float(value), "ci_low": _nan(r["ci_low"]), "ci_high": _nan(r["ci_high"]), "n": r["n"],
            "group": json.loads(r["group"] or "{}"), "details": details,
        })
    return out


def _nan(x):
    return float("nan") if x is None else float(x)


def results_json(rows: list[dict]) -> list[dict]:
    """Rows ready for ``json.dumps``: numbers as numbers, null + ``<field>_reason`` for a non-finite one, and
    ``higher_is_better`` (:func:`cultura.evaluate.published.published_row`)."""
    return [published_row(r) for r in rows]


def write_run_json(project: Project, run_id: int) -> Path:
    """Write the self-describing rows of one run to ``reports/results/run-<id>-<suite>-<model>.json``."""
    rows = load_results(project, latest=False, run_ids=[run_id])
    run = next(iter(project.db.query("SELECT * FROM eval_runs WHERE id = ?", [run_id])))
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", run["model"])[:80]
    path = Path(project.root) / RESULTS_DIR / f"run-{run_id:05d}-{run['suite']}-{slug}.json"
    return write_atomic(path, json.dumps(results_json(rows), indent=1, ensure_ascii=False, sort_keys=True))


def remove_run_json(project: Project, run_id: int) -> int:
    """Delete the JSON file(s) of one run (a run that did not commit must leave no side file)."""
    n = 0
    folder = Path(project.root) / RESULTS_DIR
    if folder.is_dir():
        for p in folder.glob(f"run-{int(run_id):05d}-*.json*"):
            p.unlink(missing_ok=True)
            n += 1
    return n


def reap_eval_runs(project: Project) -> int:
    """Runs left ``running`` by a dead process become ``interrupted`` (with the reason), and a JSON file such a
    run may have left is removed. Runs of live processes are left alone. Returns how many were marked."""
    db = project.db
    before = {r[0] for r in db.execute("SELECT id FROM eval_runs WHERE status = 'running'").fetchall()}
    n = reap_runs(db, table="eval_runs")
    if n:
        after = {r[0] for r in db.execute("SELECT id FROM eval_runs WHERE status = 'running'").fetchall()}
        for run_id in before - after:
            remove_run_json(project, run_id)
    return n



# -- the results JSON of one 'evaluate run' (lm-eval's shape) and the per-sample logs -----------------------

#: the packages whose versions a results JSON records (distribution names)
VERSIONED = ("torch", "transformers", "open_clip_torch", "sentence-transformers", "numpy")

#: ``log_samples=None`` (the default) stores a run's samples only up to this many
SMALL_SAMPLES = 200_000


def environment() -> dict:
    """Versions and platform of this process, read from package metadata (nothing heavy is imported)."""
    versions = {"python": platform.python_version()}
    for dist in VERSIONED:
        try:
            versions[dist] = version(dist)
        except PackageNotFoundError:
            versions[dist] = None
    return {"versions": versions, "platform": platform.platform(), "executable": sys.executable}


def store_samples(db, run_id: int, samples: list[dict]) -> int:
    """Insert a run's samples (inside the caller's transaction)."""
    db["eval_samples"].insert_all(
        ({"run_id": run_id, "idx": i, "kind": s["kind"],
          "data": json.dumps(_json_safe({k: v for k, v in s.items() if k != "kind"}), ensure_ascii=False,
                             sort_keys=True)} for i, s in enumerate(samples)), batch_size=2000)
    return len(samples)


def load_samples(project: Project, run_id: int, *, kind: str | None = None) -> list[dict]:
    """The logged samples of one run, in order: ``{"kind", **data}`` (``inf``/``nan`` restored)."""
    where, args = "run_id = ?", [int(run_id)]
    if kind:
        where, args = where + " AND kind = ?", args + [kind]
    return [{"kind": r[0], **_restore(json.loads(r[1]))} for r in project.db.execute(
        f"SELECT kind, data FROM eval_samples WHERE {where} ORDER BY idx", args)]


def _restore(obj):
    if isinstance(obj, dict):
        return {k: _restore(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_restore(v) for v in obj]
    return _from_json(obj)


def export_samples(project: Project, run_id: int, path, *, overwrite: bool = False) -> Path:
    """Write one run's samples to ``path``: JSON Lines (``.jsonl``) or Parquet (``.parquet``: ``run_id``,
    ``idx``, ``kind`` and one typed column per field of the records, nested ones as lists and structs). An
    existing ``path`` is refused unless ``overwrite``."""
    run_id, path = ROW_ID.check(run_id, "run_id"), Path(path)
    if path.suffix not in (".jsonl", ".parquet"):
        raise CulturaError(f"{path.name}: sample logs are written as .jsonl or .parquet; give a file name with "
                           "one of these extensions.", param="path")
    run = project.db.execute("SELECT n_samples FROM eval_runs WHERE id = ?", [int(run_id)]).fetchone()
    if run is None:
        raise CulturaError(f"No evaluation run {run_id}; list them with 'cultura evaluate results --all-runs'.", param="run_id")
    if run[0] is None:
        raise CulturaError(f"Run {run_id} kept no per-sample log. Run the evaluation again with --log-samples.",
                           param="run_id")
    refuse_existing(path, overwrite=overwrite)
    rows = project.db.execute("SELECT idx, kind, data FROM eval_samples WHERE run_id = ? ORDER BY idx",
                              [int(run_id)]).fetchall()

    def write(tmp: Path) -> None:
        if path.suffix == ".jsonl":
            with open(tmp, "w", encoding="utf-8", newline="\n") as f:
                for idx, kind, data in rows:
                    f.write(json.dumps({"run_id": int(run_id), "idx": idx, "kind": kind, **json.loads(data)},
                                       ensure_ascii=False, sort_keys=True) + "\n")
        else:
            import pyarrow as pa  # deferred: heavy
            import pyarrow.parquet as pq  # deferred: heavy

            # typed columns, one per field of the records (nested lists and structs stay nested), so that the
            # file reads as a table and not as one JSON string per row; nan/inf are floats again
            records = [{"run_id": int(run_id), "idx": idx, "kind": kind, **_restore(json.loads(data))}
                       for idx, kind, data in rows]
            try:
                table = pa.Table.from_pylist(records)
            except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
                raise CulturaError(f"Run {run_id}'s samples mix types in one field ({e}); write them as .jsonl.",
                                   param="path") from None
            pq.write_table(table, tmp, compression="zstd")

    return write_atomic(path, writer=write, overwrite=overwrite)


def results_document(project: Project, run_ids, *, config: dict) -> dict:
    """The results JSON of one ``evaluate run`` in the spirit of lm-eval's: cultura version and git revision,
    package versions, platform, device, seed, suite versions, the full options, and per run the model identity,
    the benchmark name@version and content hash, the date and the result rows. ``config["limit"]`` set: every
    part says ``smoke_run``."""
    runs = []
    smoke = config.get("limit") is not None
    for run_id in run_ids:
        r = next(iter(project.db.query("SELECT * FROM eval_runs WHERE id = ?", [int(run_id)])))
        params = json.loads(r["params"] or "{}")
        suite_version = params.get("suite_version")
        info = json.loads(r["model_info"] or "{}")
        runs.append({
            "run_id": r["id"], "suite": r["suite"], "suite_version": suite_version, "status": r["status"],
            "reason": r["error"], "model": {"identity": r["model"], "spec": r["model_spec"], "info": info,
                                            "kind": model_kind(info)},
            "benchmark": (f"{r['benchmark']}@{r['benchmark_version']}" if r["benchmark_version"] is not None
                          else r["benchmark"]),
            "benchmark_hash": r["benchmark_hash"], "options": params.get("options", {}),
            "device": params.get("device") or info.get("device"), "seed": params.get("options", {}).get("seed", 0),
            "limit": params.get("limit"), "smoke_run": params.get("limit") is not None,
            "date": r["finished_at"] or r["started_at"], "started_at": r["started_at"],
            "finished_at": r["finished_at"], "duration_s": _duration(r["started_at"], r["finished_at"]),
            "ci": ci_method(params.get("options")), "n_results": r["n_results"], "n_samples": r["n_samples"],
            "results": [published_row({k: x[k] for k in ("metric", "value", "ci_low", "ci_high", "n", "group",
                                                         "details")})
                        for x in load_results(project, latest=False, run_ids=[r["id"]])]})
    return numbers({
        "cultura_version": cultura_version(), "git_revision": git_revision(), "date": now(),
        **environment(), "device": config.get("device") or sorted({str(r["device"]) for r in runs
                                                                    if r["device"]}) or None,
        "seed": (config.get("options") or {}).get("seed", 0) if isinstance(config.get("options"), dict) else 0,
        "smoke_run": smoke, "config": config,
        "suite_versions": {r["suite"]: r["suite_version"] for r in runs}, "runs": runs})


def _duration(start: str | None, end: str | None) -> float | None:
    """Seconds between two stored timestamps (to the second, as stored); None while a run has no end."""
    if not start or not end:
        return None
    return (dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds()


def write_results_document(project: Project, run_ids, output_path, *, config: dict,
                           overwrite: bool = False) -> dict:
    """Write :func:`results_document` to ``output_path`` (a ``.json`` file, or a folder: then
    ``results_<date>.json`` in it) and each run's samples beside it (``samples_<run>_<suite>.jsonl``); a file
    of these that exists already is refused (before any is written) unless ``overwrite``.
    Returns ``{"results": path, "samples": [paths]}``."""
    out = Path(output_path)
    doc = results_document(project, run_ids, config=config)
    if out.suffix == ".json":
        folder, path = out.parent, out
    else:
        folder = out
        path = out / f"results_{doc['date'].replace(':', '-').replace('+00-00', 'Z')}.json"
    logged = {run["run_id"]: folder / f"samples_{run['run_id']:05d}_{run['suite']}.jsonl"
              for run in doc["runs"] if run["n_samples"] is not None}
    for p in (path, *logged.values()):
        refuse_existing(p, overwrite=overwrite)
    folder.mkdir(parents=True, exist_ok=True)
    samples = []
    for run in doc["runs"]:
        if run["run_id"] in logged:
            samples.append(str(export_samples(project, run["run_id"], logged[run["run_id"]], overwrite=overwrite)))
            run["samples_file"] = Path(samples[-1]).name
    write_atomic(path, json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=True), overwrite=overwrite)
    return {"results": str(path), "samples": samples}


def model_kind(info: dict) -> str:
    """``model`` for a real model; ``random-init`` for random weights; ``non-model`` for a stand-in that is no
    model at all (the ``fake`` hash embedder, stub judges): reports put the last two under a banner."""
    if info.get("non_model") or info.get("family") in ("fake", "stub"):
        return "non-model"
    if info.get("random_init"):
        return "random-init"
    return "model"
