"""Crash injection: every stage killed (``os._exit``, as kill -9) at chosen writes, then rerun to completion.

For each stage and crash point the test sets up a fresh project, runs the stage in a child process that dies
at the crash point (the test fails if the point is never reached), reruns the stage in a second child, and
asserts

* the stage's outcome equals that of a run that never crashed (every item exactly once: same rows, same
  clusters, same tags, same benchmark, same export, same results),
* the invariants of :func:`tests.integration.reliability.harness.invariants`: no run stuck in ``running`` (a dead run is
  ``interrupted`` with its reason), no cluster without members, no image row without its file nor file
  without its row, no temporary blob file, no half-written export folder, one result JSON per done run.

Label Studio stages (push, pull) live in ``test_annotations_ls.py`` (marker ``labelstudio``).
"""
from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cultura.project import Project, init_project
from tests.fakes.image_server import ImageServer, image_bytes, variant_bytes
from tests.fakes.world import add_image, make_world
from tests.integration.reliability.harness import CRASHED, child_error, invariants, query, run_child

COMMIT = r"^\s*COMMIT"


def _close(p):
    p.close()
    return p.root


# ------------------------------------------------------------------------------------------ stages
# Each stage: setup(tmp) -> root, run(project), digest(root) -> comparable outcome, crash points.

def setup_search(tmp):
    p = init_project(tmp / "p", countries=["US", "JP"])
    rows = [{"url": f"https://img.example.org/{c}/{k}/{i}.jpg", "concept": c, "country": k, "rank": i}
            for c in ("bus", "rice", "temple") for k in ("US", "JP") for i in range(1, 4)]
    rows.append({"url": "ftp://bad.example.org/x.jpg", "concept": "bus", "country": "US"})
    with open(tmp / "urls.csv", "w", newline="") as f:
        w = csv.DictWriter(f, ["url", "concept", "country", "rank"])
        w.writeheader()
        w.writerows(rows)
    return _close(p)


def run_search(p):
    from cultura.curate.search import search_images
    search_images(p, provider=f"urls:{Path(p.root).parent / 'urls.csv'}", progress=False)


def digest_search(root):
    return {"results": query(root, "SELECT c.name, q.country, sr.rank, sr.url FROM search_results sr JOIN queries q "
                                   "ON q.id = sr.query_id JOIN concepts c ON c.id = q.concept_id ORDER BY 1, 2, 3, 4"),
            "searches": query(root, "SELECT provider, status, n_results FROM searches ORDER BY 1, 2, 3"),
            "candidates": query(root, "SELECT url, status FROM candidates ORDER BY url"),
            "rejects": query(root, "SELECT line, reason FROM ingest_rejects ORDER BY 1")}


SERVER: ImageServer | None = None


@pytest.fixture(scope="module", autouse=True)
def _server():
    global SERVER
    with ImageServer() as srv:
        SERVER = srv
        yield srv
    SERVER = None


def setup_download(tmp):
    p = init_project(tmp / "p", countries=["US", "JP"])
    s = p.config.download
    s.allow_hosts = [SERVER.host_port]
    s.workers, s.per_host, s.backoff_base = 4, 4, 0.01
    p.save_config()
    urls = [SERVER.url(f"/img/{k}.jpg") for k in range(300, 340)] + [SERVER.url("/status/404")]
    p.db["candidates"].insert_all([{"url": u, "status": "pending"} for u in urls])
    return _close(p)


def run_download(p):
    from cultura.curate.download import download_candidates
    download_candidates(p, progress=False)


def digest_download(root):
    return {"candidates": query(root, "SELECT url, status, reason, sha256 FROM candidates ORDER BY url"),
            "images": query(root, "SELECT sha256, path, width, height, status FROM images ORDER BY sha256"),
            "files": sorted(str(p.relative_to(root)) for p in (Path(root) / "blobs").glob("??/*"))}


def setup_dedup(tmp):
    p = init_project(tmp / "p", countries=["US", "JP"])
    w = make_world(p, concepts=("bus", "rice"), per_cell=2)
    cid = w["concepts"]["bus"]
    for seed in (11, 12, 13):  # near-duplicate families, found for both countries (culture conflicts)
        add_image(p, cid, "US", image_bytes(seed), rank=seed)
        add_image(p, cid, "JP", variant_bytes(seed, "reencoded"), rank=seed)
        add_image(p, cid, "JP", variant_bytes(seed, "resized"), rank=seed + 10)
    return _close(p)


def run_dedup(p):
    from cultura.curate.dedup import dedup_images
    dedup_images(p, methods=["sha256", "phash", "dhash"], progress=False)


def digest_dedup(root):
    clusters = query(root, "SELECT c.method, c.representative, group_concat(m.sha256) FROM dup_clusters c "
                           "JOIN dup_members m ON m.cluster_id = c.id WHERE c.status = 'open' GROUP BY c.id")
    return {"clusters": sorted((m, r, tuple(sorted(s.split(",")))) for m, r, s in clusters),
            "hashes": query(root, "SELECT sha256, phash, dhash FROM images ORDER BY sha256"),
            "flags": query(root, "SELECT sha256, flag, status FROM image_flags ORDER BY 1, 2")}


def setup_tag(tmp):
    p = init_project(tmp / "p", countries=["US", "JP"])
    make_world(p, concepts=("bus", "rice", "temple"), per_cell=3)
    return _close(p)


def run_tag(p):
    from cultura.curate.tagging import tag_images
    tag_images(p, method="clip", clip_model="fake", progress=False)


def digest_tag(root):
    return {"tags": [(s, t, src, round(sc, 6)) for s, t, src, sc in
                     query(root, "SELECT sha256, tag, source, score FROM image_tags ORDER BY 1, 2, 3")],
            "status": query(root, "SELECT sha256, source, status FROM image_tag_status ORDER BY 1, 2")}


def setup_build(tmp):
    p = init_project(tmp / "p", countries=["US", "JP"])
    make_world(p, concepts=("bus", "rice", "temple"), per_cell=3)
    return _close(p)


def run_build(p):
    from cultura.benchmark.build import build_benchmark
    build_benchmark(p, "association", allow_unreviewed=True, per_pair=2, seed=3)


def digest_build(root):
    return {"benchmarks": query(root, "SELECT name, version, kind, content_hash, n_items, status FROM benchmarks"),
            "items": query(root, "SELECT count(*) FROM benchmark_items")[0][0],
            "candidates": query(root, "SELECT count(*) FROM benchmark_candidates")[0][0],
            "snapshot": query(root, "SELECT count(*) FROM benchmark_query_snapshot")[0][0]}


def setup_export(tmp):
    root = setup_build(tmp)
    assert run_child(root, run_build) == 0, child_error(root)
    return root


def _export_dest(p):
    return Path(p.root).parent / "exports" / "assoc"


def run_export(p):
    from cultura.benchmark.export import export_benchmark
    export_benchmark(p, _export_dest(p), benchmarks=["association@1"])


def digest_export(root):
    dest = Path(root).parent / "exports" / "assoc"
    files = sorted(str(f.relative_to(dest)) for f in dest.rglob("*") if f.is_file())
    rows = {f: pq.read_table(dest / f).num_rows for f in files if f.endswith(".parquet")}
    images = {f: hashlib.sha256((dest / f).read_bytes()).hexdigest() for f in files if f.startswith("images/")}
    return {"files": files, "rows": rows, "images": images}


def setup_evaluate(tmp):
    return setup_export(tmp)


def run_evaluate(p):
    from cultura.evaluate.runner import run_evaluation
    run_evaluation(p, ["fake"], "association", options={"n_resamples": 20})


def digest_evaluate(root):
    done = query(root, "SELECT id FROM eval_runs WHERE status = 'done'")
    assert len(done) == 1, query(root, "SELECT id, status, error FROM eval_runs")
    for rid, status, error in query(root, "SELECT id, status, error FROM eval_runs WHERE status != 'done'"):
        assert status == "interrupted" and "ended before finishing" in error, (rid, status, error)
    res = query(root, "SELECT metric, \"group\", round(value, 9), n FROM eval_results WHERE run_id = ? "
                      "ORDER BY 1, 2", [done[0][0]])
    [js] = (Path(root) / "reports" / "results").glob(f"run-{done[0][0]:05d}-*.json")
    return {"results": res, "json_rows": len(json.loads(js.read_text()))}


def setup_import(tmp):
    p = init_project(tmp / "p", countries=["US", "JP"])
    folder = tmp / "gr"
    folder.mkdir()
    rows = []
    for i in range(12):
        (folder / f"im{i}.jpg").write_bytes(image_bytes(500 + i))
        rows.append({"image": f"im{i}.jpg", "country": ("US", "JP")[i % 2], "concept": ("bus", "rice")[i % 3 == 0]})
    rows.append({"image": "nope.jpg", "country": "US", "concept": "bus"})
    with open(tmp / "gr.csv", "w", newline="") as f:
        w = csv.DictWriter(f, ["image", "country", "concept"])
        w.writeheader()
        w.writerows(rows)
    return _close(p)


def run_import(p):
    from cultura.curate.importers import import_globalrg
    tmp = Path(p.root).parent
    import_globalrg(p, tmp / "gr.csv", tmp / "gr")


def digest_import(root):
    return {"images": query(root, "SELECT sha256, path, status FROM images ORDER BY 1"),
            "rows": query(root, "SELECT kind, key, status, sha256 FROM import_rows ORDER BY 1, 2"),
            "links": query(root, "SELECT c.name, q.country, sr.url FROM search_results sr JOIN queries q "
                                 "ON q.id = sr.query_id JOIN concepts c ON c.id = q.concept_id ORDER BY 1, 2, 3"),
            "candidates": query(root, "SELECT url, status, sha256 FROM candidates ORDER BY 1")}


STAGES = {
    "search": (setup_search, run_search, digest_search, [
        ("sql", r"INSERT INTO searches", 1),          # a query's results written, its searches row not
        ("sql", r"INSERT INTO searches", 4),
        ("sql", r"INSERT OR IGNORE INTO ingest_rejects", 1)]),
    "download": (setup_download, run_download, digest_download, [
        ("after", "cultura.curate.download:store_blob", 3),   # blob files in place, rows not yet
        ("sql", r"INTO images", 1),
        ("sql", r"UPDATE candidates SET status", 5)]),
    "dedup": (setup_dedup, run_dedup, digest_dedup, [
        ("sql", r"UPDATE images SET phash", 1),
        ("sql", r"INTO \W?dup_members\b", 1),      # a cluster written, its members not
        ("sql", r"INTO \W?dup_clusters\b", 2),
        ("sql", r"(INTO|UPDATE) \W?image_flags\b", 1)]),
    "tag": (setup_tag, run_tag, digest_tag, [
        ("sql", r"INTO \W?image_tags\b", 4),
        ("sql", r"INSERT INTO image_tag_status", 2)]),
    "build": (setup_build, run_build, digest_build, [
        ("sql", r"INSERT INTO \[benchmark_items\]", 3),
        ("sql", r"INSERT INTO \[benchmark_query_snapshot\]", 1)]),
    "export": (setup_export, run_export, digest_export, [
        ("call", "pyarrow.parquet:write_table", 2),       # half the tables written
        ("call", "os:rename", 1)]),                        # everything written, not yet moved into place
    "evaluate": (setup_evaluate, run_evaluate, digest_evaluate, [
        ("sql", r"INTO \W?eval_results\b", 1),
        ("after", "cultura.evaluate.runner:write_run_json", 1),   # JSON written, 'done' not committed
        ("sql", r"UPDATE \W?eval_runs\W? SET \W?benchmark", 1)]),
    "import": (setup_import, run_import, digest_import, [
        ("after", "cultura.curate.importers:store_blob", 2),     # blob stored, its rows not
        ("sql", r"INTO \W?import_rows\b", 3),
        ("sql", r"INTO \W?search_results\b", 2)]),
}

_REFERENCE: dict[str, object] = {}


def _reference(name, tmp_path_factory):
    """A never-failed run's digest, per stage and per image server (a module that imports this one starts a
    server of its own, on another port, and the download digest holds the URLs)."""
    key = (name, SERVER.host_port if SERVER is not None else None)
    if key not in _REFERENCE:
        setup, run, digest, _ = STAGES[name]
        tmp = tmp_path_factory.mktemp(f"ref-{name}")
        root = setup(tmp)
        assert run_child(root, run) == 0, child_error(root)
        _REFERENCE[key] = digest(root)
    return _REFERENCE[key]


CASES = [(name, point) for name, spec in STAGES.items() for point in spec[3]]


@pytest.mark.parametrize("name,point", CASES, ids=[f"{n}-{p[0]}:{p[1].split(':')[-1][:24]}#{p[2]}"
                                                     for n, p in CASES])
def test_crash_then_rerun(name, point, tmp_path, tmp_path_factory):
    setup, run, digest, _ = STAGES[name]
    expected = _reference(name, tmp_path_factory)
    root = setup(tmp_path)
    code = run_child(root, run, point)
    assert code == CRASHED, f"the crash point {point} was never reached (exit {code}): {child_error(root)}"
    if name == "export":  # a crashed export leaves no half-written folder where the export belongs
        dest = tmp_path / "exports" / "assoc"
        assert not dest.exists() or not any(dest.iterdir())
    code = run_child(root, run)
    assert code == 0, child_error(root)
    assert invariants(root, export_dirs=[tmp_path / "exports" / "assoc"]) == []
    assert digest(root) == expected
    # and a further rerun changes nothing that matters (idempotent)
    if name not in ("evaluate", "export"):
        assert run_child(root, run) == 0, child_error(root)
        assert digest(root) == expected and invariants(root) == []


def test_crashed_runs_become_interrupted_with_reason(tmp_path):
    """A run row left 'running' by a dead process is marked on the next start of that stage, with the reason;
    a run of a live process is left alone."""
    root = setup_tag(tmp_path)
    assert run_child(root, run_tag, ("sql", r"INTO \W?image_tags\b", 2)) == CRASHED
    assert query(root, "SELECT status FROM runs WHERE stage = 'images.tag'") == [("running",)]
    p = Project(root)
    try:
        from cultura.db import start_run
        mine = start_run(p.db, "images.tag")       # this (live) process's run: not touched by the next start
    finally:
        p.close()
    assert run_child(root, run_tag) == 0, child_error(root)
    rows = query(root, "SELECT id, status, error FROM runs WHERE stage = 'images.tag' ORDER BY id")
    assert rows[0][1] == "interrupted" and "ended before finishing" in rows[0][2]
    assert rows[1] == (mine, "running", None) and rows[2][1] == "done"


def test_missing_blob_is_marked_and_fetched_again(tmp_path):
    """A row whose file has gone is marked 'missing' (not fatal for tagging) and the next download fetches it
    again."""
    root = setup_download(tmp_path)
    assert run_child(root, run_download) == 0, child_error(root)
    (rel, sha), *_ = query(root, "SELECT path, sha256 FROM images ORDER BY sha256")
    (Path(root) / rel).unlink()
    p = Project(root)
    try:
        p.db["concepts"].insert({"name": "bus", "source": "manual", "status": "active", "created_at": "x"})
    finally:
        p.close()
    assert run_child(root, run_tag) == 0, child_error(root)      # tagging goes on without the file
    assert query(root, "SELECT status, reason FROM images WHERE sha256 = ?", [sha]) == [("missing", "file missing")]
    assert query(root, "SELECT status FROM candidates WHERE sha256 = ?", [sha]) == [("pending",)]
    assert run_child(root, run_download) == 0, child_error(root)
    assert query(root, "SELECT status FROM images WHERE sha256 = ?", [sha]) == [("ok",)]
    assert (Path(root) / rel).is_file() and invariants(root) == []


def test_missing_imported_blob_is_imported_again(tmp_path):
    root = setup_import(tmp_path)
    assert run_child(root, run_import) == 0, child_error(root)
    before = digest_import(root)
    (rel, sha), *_ = query(root, "SELECT path, sha256 FROM images ORDER BY sha256")
    (Path(root) / rel).unlink()
    assert run_child(root, run_dedup) == 0, child_error(root)        # dedup goes on without the file
    assert query(root, "SELECT status FROM images WHERE sha256 = ?", [sha]) == [("missing",)]
    assert query(root, "SELECT DISTINCT status FROM import_rows WHERE sha256 = ?", [sha]) == [("missing",)]
    assert run_child(root, run_import) == 0, child_error(root)
    assert (Path(root) / rel).is_file() and digest_import(root) == before and invariants(root) == []
