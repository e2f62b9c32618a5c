"""The Ray executor hashes exactly as the in-process one (local Ray, 2 CPUs) and writes the same rows."""
from __future__ import annotations

import io

import numpy as np
import pytest

from cultura.curate import executor, hashing
from cultura.curate.dedup import dedup_images
from cultura.errors import UnknownName
from tests.unit.curate.test_clusters_a_person_can_review import assert_members_confirmed_against_their_representative

# one local Ray at a time: the tests that start one run on the same worker
pytestmark = pytest.mark.xdist_group("ray")

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def blobs(tmp_path, n=24):
    paths = []
    for k in range(n):
        buf = io.BytesIO()
        hashing.synthetic_image(k, (160, 120)).save(buf, "JPEG" if k % 3 else "PNG", quality=85)
        path = tmp_path / f"{k}.img"
        path.write_bytes(buf.getvalue())
        paths.append(path)
    bad = tmp_path / "bad.img"
    bad.write_bytes(b"not an image")
    return paths[:5] + [bad] + paths[5:]


def test_ray_hashes_equal_local_hashes_bit_for_bit(tmp_path, local_ray):
    paths = blobs(tmp_path)
    local = executor.hash_paths(paths, executor="local")
    remote = executor.hash_paths(paths, executor="ray", batch_size=7)
    assert np.array_equal(local.phash, remote.phash) and np.array_equal(local.dhash, remote.dhash)
    assert np.array_equal(local.phash_centre, remote.phash_centre)
    assert np.array_equal(local.phash_variants, remote.phash_variants) and np.array_equal(local.fine, remote.fine)
    assert np.array_equal(local.sizes, remote.sizes) and local.sizes[0].tolist() == [160, 120]  # displayed sizes
    assert list(remote.errors) == [5] and list(local.errors) == [5]
    assert remote.errors[5] == local.errors[5]


def test_a_file_that_cannot_be_read_stops_ray_hashing_with_the_sentence_of_a_local_run(tmp_path, local_ray):
    """Not a Ray traceback: the actor sends the sentence back as its ``fatal`` column."""
    from cultura.errors import CulturaError

    paths = blobs(tmp_path, n=8)
    paths.insert(3, tmp_path / "gone.jpg")
    with pytest.raises(CulturaError, match="Cannot read .*gone.jpg") as local:
        executor.hash_paths(paths, executor="local")
    with pytest.raises(CulturaError, match="On Ray: Cannot read .*gone.jpg") as remote:
        executor.hash_paths(paths, executor="ray", batch_size=4)
    assert str(remote.value) == f"On Ray: {local.value}"


def test_dedup_with_the_ray_executor_writes_the_rows_a_local_run_writes(tmp_path, local_ray):
    from cultura.db import now
    from cultura.db.blobs import store_blob
    from cultura.project import init_project

    def project(name):
        p = init_project(tmp_path / name, countries=["US"])
        for k in range(12):
            im = hashing.synthetic_image(k % 8, (200, 150))
            buf = io.BytesIO()
            (im if k < 8 else im.resize((100, 75))).save(buf, "JPEG", quality=90)
            data = buf.getvalue()
            sha, rel = store_blob(p, data, "jpeg")
            p.db["images"].insert({"sha256": sha, "path": rel, "format": "jpeg", "width": 1, "height": 1,
                                   "bytes": len(data), "created_at": now()})
        return p

    a, b = project("a"), project("b")
    res_a = dedup_images(a, methods=["phash", "dhash"], scope="global", progress=False)
    res_b = dedup_images(b, methods=["phash", "dhash"], scope="global", progress=False, executor="ray")
    assert res_a["hashes_computed"] == res_b["hashes_computed"] == 12
    rows = ("SELECT sha256, phash, dhash, phash_centre, phash_variants, phash_fine, width, height FROM images "
            "ORDER BY sha256")
    assert a.db.execute(rows).fetchall() == b.db.execute(rows).fetchall()
    assert {r[-2:] for r in b.db.execute(rows)} == {(200, 150), (100, 75)}  # the displayed sizes, stored too
    assert res_a["clusters"] == res_b["clusters"] and res_a["clusters"]["phash"] == 4
    assert_members_confirmed_against_their_representative(b)  # the Ray door: no chaining either
    # the work is in the same tables: a local rerun hashes nothing
    assert dedup_images(b, methods=["phash", "dhash"], scope="global", progress=False)["hashes_computed"] == 0


def test_unknown_executor_is_refused(tmp_path):
    with pytest.raises(UnknownName, match="Unknown executor 'spark'") as e:
        executor.hash_paths([tmp_path / "x"], executor="spark")
    assert e.value.param == "executor"
    from cultura.project import init_project

    p = init_project(tmp_path / "p", countries=["US"])
    with pytest.raises(UnknownName, match="executor"):
        dedup_images(p, executor="spark", progress=False)
