"""Benchmark: push 10k Label Studio tasks (bulk import) and pull them back; seconds per 1k tasks.

Target: push of 10k tasks <= 30 s. Starts a throwaway Label Studio (from the migrated seed in
.cache/labelstudio-seed when the tests created one, else fresh: ~1 min of migrations, not timed).
Items are entity rows from a generated JSONL file; every pushed task (or the first N_ANNOTATED) is annotated
through the API (the simulated annotator, timed separately) before the pull, so the pull brings back what
was pushed and ``pull_s_per_1k_annotations`` divides by the annotations pulled. Writes
perf/out/annotate_push.json.

    .venv/bin/python perf/bench_annotate_push.py [N_TASKS [N_ANNOTATED]]
"""
from __future__ import annotations

import json
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.fakes.labelstudio helpers when run from a checkout

from cultura.annotate import annotators, pull, push  # noqa: E402
from cultura.annotate.kinds import get_kind  # noqa: E402
from cultura.annotate.server import (find_executable, free_port, launch, seeded_credentials,  # noqa: E402
                                     stop_process, use_server, wait_ready)
from cultura.project import init_project  # noqa: E402


def main(n: int = 10_000, n_annotated: int | None = None) -> dict:
    n_annotated = n if n_annotated is None else n_annotated
    tmp = Path(tempfile.mkdtemp(prefix="bench-annotate-"))
    seed = REPO / ".cache" / "labelstudio-seed"
    data = tmp / "ls"
    data.mkdir()
    creds, _ = seeded_credentials(data, seed, "admin@bench.local")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    proc = launch(find_executable(), data, port, username=creds["username"], password=creds["password"],
                  token=creds["api_key"], log_path=data / "server.log")
    try:
        wait_ready(url, creds["api_key"], proc, timeout=600, log_path=data / "server.log")
        startup = time.perf_counter() - t0
        project = init_project(tmp / "proj", countries=["JP", "US"])
        conn = use_server(project, url, creds["api_key"])
        src = tmp / "entities.jsonl"
        src.write_text("\n".join(json.dumps({"key": f"e{i}", "entity": f"entity {i}", "country": "JP",
                                             "category": "food"}) for i in range(n)), encoding="utf-8")
        annotators.add_annotator(project, "bench", email=f"bench.{secrets.token_hex(3)}@example.org",
                                 country="JP", languages=["ja"])
        t = time.perf_counter()
        res = push.push(project, "entity", overlap=1, source=src, conn=conn)
        push_s = time.perf_counter() - t
        assert res["tasks_created"] == n, res
        t = time.perf_counter()
        again = push.push(project, "entity", overlap=1, source=src, conn=conn)
        repush_s = time.perf_counter() - t
        assert again["tasks_created"] == 0
        rows = project.db.execute("SELECT a.ls_task_id, an.ls_user_id FROM assignments a JOIN annotators an ON "
                                  "an.id = a.annotator_id ORDER BY a.id LIMIT ?", [n_annotated]).fetchall()
        spec = get_kind("entity")
        t = time.perf_counter()
        for task, uid in rows:
            conn.client.annotations.create(task, result=spec.result_for("local"), completed_by=uid, lead_time=2.0)
        annotate_s = time.perf_counter() - t
        t = time.perf_counter()
        p1 = pull.pull(project, conn=conn)
        pull_s = time.perf_counter() - t
        t = time.perf_counter()
        p2 = pull.pull(project, conn=conn)
        repull_s = time.perf_counter() - t
        assert p1["new"] == len(rows) and p2["new"] == 0
        out = {"n_tasks": n, "n_annotated": len(rows), "server_startup_s": round(startup, 2),
               "push_s": round(push_s, 2), "push_s_per_1k_tasks": round(push_s / n * 1000, 3),
               "push_target_met": push_s <= 30 * n / 10_000,
               "repush_noop_s": round(repush_s, 2),
               "simulated_annotation_s_per_1k": round(annotate_s / max(len(rows), 1) * 1000, 2),
               "pull_s": round(pull_s, 2),
               "pull_s_per_1k_annotations": round(pull_s / max(len(rows), 1) * 1000, 3),
               "repull_noop_s": round(repull_s, 2)}
        project.close()
        return out
    finally:
        stop_process(proc.pid)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    res = main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000,
               int(sys.argv[2]) if len(sys.argv) > 2 else None)
    outdir = REPO / "perf" / "out"
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "annotate_push.json").write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
