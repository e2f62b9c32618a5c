"""The result store: ``eval_runs`` / ``eval_results`` rows and one JSON file per run, read back as
self-describing rows (model identity and info, benchmark name/version/hash, suite, parameters, git revision,
date, metric, value, CI, n, group, details).

The runner (:mod:`cultura.evaluate.runner`) writes through it; the report and the CLI read through it. JSON
files (one per run, under ``reports/results/``) write ``inf``/``nan`` as the strings ``"inf"``/``"nan"``
(JSON has no such numbers).
"""
from __future__ import annotations

import functools
import json
import math
import re
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ..db import reap_runs

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
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return _json_safe(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    return obj


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

def list_runs(project, *, status: str | None = None) -> list[dict]:
    """All ``eval_runs`` rows (newest first), JSON columns decoded."""
    where, args = ("WHERE status = ?", [status]) if status else ("", [])
    out = []
    for r in project.db.query(f"SELECT * FROM eval_runs {where} ORDER BY id DESC", args):
        r = dict(r)
        r["model_info"] = json.loads(r["model_info"] or "{}")
        r["params"] = json.loads(r["params"] or "{}")
        out.append(r)
    return out


def load_results(project, *, suite: str | None = None, model: str | None = None, benchmark: str | None = None,
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
        details = {k: _from_json(v) for k, v in json.loads(r["details"] or "{}").items()}
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
    """Rows with non-finite numbers as strings, ready for ``json.dumps``."""
    return _json_safe(rows)


def write_run_json(project, run_id: int) -> Path:
    """Write the self-describing rows of one run to ``reports/results/run-<id>-<suite>-<model>.json``."""
    rows = load_results(project, latest=False, run_ids=[run_id])
    run = next(iter(project.db.query("SELECT * FROM eval_runs WHERE id = ?", [run_id])))
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", run["model"])[:80]
    path = Path(project.root) / RESULTS_DIR / f"run-{run_id:05d}-{run['suite']}-{slug}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results_json(rows), indent=1, ensure_ascii=False, sort_keys=True), encoding="utf-8")
    tmp.replace(path)
    return path


def remove_run_json(project, run_id: int) -> int:
    """Delete the JSON file(s) of one run (a run that did not commit must leave no side file)."""
    n = 0
    folder = Path(project.root) / RESULTS_DIR
    if folder.is_dir():
        for p in folder.glob(f"run-{int(run_id):05d}-*.json*"):
            p.unlink(missing_ok=True)
            n += 1
    return n


def reap_eval_runs(project) -> int:
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

