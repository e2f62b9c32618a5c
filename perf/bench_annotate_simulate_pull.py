"""Benchmark: ``annotate simulate`` one API request per answer against the bulk writer, and a pull with nothing
new as a whole re-export (what every pull did) against the incremental one; wall and CPU seconds.

Starts a throwaway Label Studio (from the migrated seed in .cache/labelstudio-seed when the tests made one),
records it with its data dir, so every annotator gets a server of their own (the setup a rehearsal runs).
Two cultura projects, each an entity campaign of N_ITEMS items for two annotators (overlap 2: 2 × N_ITEMS
answers): the first simulated with ``bulk=False``, the second in bulk; then on the second a first pull, a
``full`` pull and an incremental pull with nothing new. CPU: this process, its children (the bulk writers)
and every Label Studio server. Writes perf/out/annotate_simulate_pull.json.

    .venv/bin/python perf/bench_annotate_simulate_pull.py [N_ITEMS] [--bulk-only]

``--bulk-only`` leaves out the one-request-per-answer run (minutes on a busy machine): the bulk writer's cost
alone, e.g. to compare two versions of it. The bulk run also prints answers per second and CPU ms per answer.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_download import proc_cpu  # noqa: E402  (a script beside this one)

from cultura.annotate import annotators, pull, push  # noqa: E402
from cultura.annotate.people import _running, status_all  # noqa: E402
from cultura.annotate.server import (find_executable, free_port, launch, seeded_credentials,  # noqa: E402
                                     stop_process, use_server, wait_ready)
from cultura.annotate.simulate import simulate_annotations  # noqa: E402
from cultura.project import init_project  # noqa: E402


def _servers(project, main_pid: int) -> list[int]:
    return [main_pid] + [pid for s in status_all(project) if (pid := _running(project.root / s["data_dir"]))]


def _timed(fn, pids: list[int]) -> tuple[object, dict]:
    """Run ``fn``; wall seconds and CPU seconds of this process, its waited-for children and ``pids``."""
    r0, c0 = os.times(), sum(proc_cpu(p) for p in pids)
    t = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t
    r1, c1 = os.times(), sum(proc_cpu(p) for p in pids)
    cpu = (r1.user - r0.user) + (r1.system - r0.system) + (r1.children_user - r0.children_user) + (
        r1.children_system - r0.children_system) + (c1 - c0)
    return out, {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}


def _campaign(tmp: Path, name: str, url: str, key: str, data: Path, n: int):
    project = init_project(tmp / name, countries=["JP", "US"])
    use_server(project, url, key, data_dir=data)
    src = tmp / f"{name}.jsonl"
    src.write_text("\n".join(json.dumps({"key": f"e{i}", "entity": f"entity {i}", "country": "JP",
                                         "category": "food"}) for i in range(n)), encoding="utf-8")
    for who in ("ann", "bob"):
        annotators.add_annotator(project, who, email=f"{who}.{secrets.token_hex(3)}@example.org", country="JP",
                                 languages=["ja"])
    assert push.push(project, "entity", overlap=2, source=src)["tasks_created"] == 2 * n
    return project


def main(n: int = 1500, bulk_only: bool = False) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="bench-simulate-"))
    data = tmp / "ls"
    data.mkdir()
    creds, _ = seeded_credentials(data, REPO / ".cache" / "labelstudio-seed", "admin@bench.local")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = launch(find_executable(), data, port, username=creds["username"], password=creds["password"],
                  token=creds["api_key"], log_path=data / "server.log")
    made = []
    try:
        wait_ready(url, creds["api_key"], proc, timeout=600, log_path=data / "server.log")
        out: dict = {"n_items": n, "n_answers": 2 * n}
        for name, bulk in (("per_request", False), ("bulk", True))[int(bulk_only):]:
            project = _campaign(tmp, name, url, creds["api_key"], data, n)
            made.append(project)
            res, cost = _timed(lambda: simulate_annotations(project, "entity", seed=3, bulk=bulk, progress=False),
                               _servers(project, proc.pid))
            assert res["simulated_annotations"] == 2 * n, res
            out[f"simulate_{name}"] = {**cost, "answers_per_s": round(2 * n / cost["wall_s"], 1),
                                       "cpu_ms_per_answer": round(1000 * cost["cpu_s"] / (2 * n), 2)}
        project = made[-1]
        pids = _servers(project, proc.pid)
        first, out["pull_first"] = _timed(lambda: pull.pull(project, progress=False), pids)
        assert first["new"] == 2 * n, first
        again, out["pull_nochange_full_export"] = _timed(lambda: pull.pull(project, full=True, progress=False), pids)
        assert again["new"] == 0 and again["annotations_fetched"] == 2 * n, again
        inc, out["pull_nochange_incremental"] = _timed(lambda: pull.pull(project, progress=False), pids)
        assert inc["new"] == 0 and inc["annotations_fetched"] == 0, inc
        if not bulk_only:
            out["simulate_speedup"] = round(out["simulate_per_request"]["wall_s"] / out["simulate_bulk"]["wall_s"], 1)
        out["nochange_pull_speedup"] = round(out["pull_nochange_full_export"]["wall_s"]
                                             / max(out["pull_nochange_incremental"]["wall_s"], 0.01), 1)
        return out
    finally:
        for p in made:
            for s in status_all(p):
                pid = _running(p.root / s["data_dir"])
                if pid:
                    stop_process(pid)
            p.close()
        stop_process(proc.pid)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    res = main(int(args[0]) if args else 1500, bulk_only="--bulk-only" in sys.argv[1:])
    outdir = REPO / "perf" / "out"
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "annotate_simulate_pull.json").write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
