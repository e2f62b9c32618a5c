"""Duplicate clusters a person can review: on real photographs with look-alikes beside the copies, the copies
are clustered with their original, the look-alikes are not, and no cluster chains unrelated images (every
member is confirmed against its representative), through every door that makes clusters."""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image, ImageOps

from cultura.curate import aligned, confirm, hashing
from cultura.curate.dedup import Inventory, dedup_images, scoped_clusters
from cultura.curate.importers import store_image
from cultura.project import init_project
from tests.fakes import lookalikes
from tests.fakes import real_photos as rp

PHOTOS = ["astronaut", "chelsea", "coffee", "rocket", "camera", "china"]
COPIES = ["jpeg_q30", "resize_50", "crop_10", "mirror", "border_10", "watermark"]


@pytest.fixture(scope="module")
def scrape():
    """``{key: (owner, bytes)}``: six photographs with six copies each, 40 different faces and the 16 tiles of
    one texture photograph (tiles share no pixel): the copies beside the look-alikes."""
    pytest.importorskip("skimage.data")
    photos = rp.photos()
    out = {}
    for name in PHOTOS:
        copies = rp.copies(photos[name])
        for kind in ["original", *COPIES]:
            out[f"{name}/{kind}"] = (name, copies[kind])
        out[f"{name}/flip_v"] = (name, lookalikes.encode(ImageOps.flip(photos[name])))
    for key, data in [*list(lookalikes.faces().items())[:40], *lookalikes.tiles(["brick"]).items()]:
        out[key] = (key, data)
    return out


def stored(tmp_path, scrape):
    p = init_project(tmp_path / "p", countries=["US", "JP"])
    owner = {store_image(p, data): owner for owner, data in scrape.values()}
    return p, owner


def clusters_of(p, method=None) -> list[tuple[str, set[str]]]:
    """``(representative, members)`` of the open clusters (of ``method``)."""
    sql = ("SELECT c.id, c.representative, m.sha256 FROM dup_clusters c JOIN dup_members m ON m.cluster_id = c.id "
           "WHERE c.status = 'open'" + (" AND c.method = ?" if method else ""))
    out: dict[int, tuple[str, set]] = {}
    for cid, rep, sha in p.db.execute(sql, [method] if method else []):
        out.setdefault(cid, (rep, set()))[1].add(sha)
    return list(out.values())


def assert_reviewable(p, owner):
    """Every photograph's copies are in one pHash cluster with its original, and no cluster of either
    method holds two owners: the faces and the tiles are in none. (dHash, one view, may split a photograph's
    copies in two stars: a padded copy, the largest, is the representative and not every copy is within
    dHash's threshold of it.)"""
    found = clusters_of(p)
    assert found
    for rep, members in found:
        assert len({owner[s] for s in members}) == 1, sorted(owner[s] for s in members)
        assert owner[rep] in PHOTOS
    for name in PHOTOS:
        together = [m for _, m in clusters_of(p, "phash") if owner[next(iter(m))] == name]
        assert len(together) == 1, name
    phash_members = set().union(*(m for _, m in clusters_of(p, "phash")))
    copies = {s for s, o in owner.items() if o in PHOTOS}
    assert len(phash_members & copies) >= 0.9 * len(copies)   # nearly every copy found by pHash alone


def assert_members_confirmed_against_their_representative(p):
    """The one invariant of every stored cluster: each member is within the run's threshold of the
    representative itself and (hash methods) its fine hashes confirm the pair and its aligned detail
    agrees."""
    rows = p.db.execute(
        "SELECT c.method, c.representative, m.sha256, m.distance, r.params FROM dup_clusters c "
        "JOIN dup_members m ON m.cluster_id = c.id JOIN dedup_runs r ON r.id = c.run_id "
        "WHERE c.status IN ('open', 'resolved')").fetchall()
    assert rows
    fine = {s: f for s, f in p.db.execute("SELECT sha256, phash_fine FROM images")}
    hashed = []
    for method, rep, sha, distance, params in rows:
        params = json.loads(params)
        if method == "embedding":
            assert distance <= 1 - params["threshold"] + 1e-6
            continue
        assert distance <= params["threshold"]
        d = confirm.fine_distances(confirm.from_hex([fine[rep]]), confirm.from_hex([fine[sha]]))[0]
        assert d <= confirm.FINE_THRESHOLD or sha == rep
        if sha != rep:
            hashed.append((rep, sha))
    # and their aligned detail agrees (curate/aligned.py), read from the blobs as dedup reads them
    shas = sorted({s for pair in hashed for s in pair})
    at = {s: k for k, s in enumerate(shas)}
    path = dict(p.db.execute("SELECT sha256, path FROM images").fetchall())
    thumbs = aligned.load_thumbs([p.blob_path(path[s]) for s in shas])
    pairs = np.array([[at[a], at[b]] for a, b in hashed], dtype=np.int64).reshape(-1, 2)
    kept = aligned.verify_pairs(pairs, confirm.from_hex([fine[s] for s in shas]), lambda idx: [thumbs[i] for i in idx])
    assert len(kept) == len(pairs)


def test_copies_are_clustered_and_lookalikes_are_not_through_the_cli(tmp_path, scrape):
    from click.testing import CliRunner

    from cultura.cli import cli

    p, owner = stored(tmp_path, scrape)
    r = CliRunner().invoke(cli, ["--project", str(p.root), "images", "dedup", "--scope", "global", "--json"])
    assert r.exit_code == 0, r.output
    assert_reviewable(p, owner)
    assert_members_confirmed_against_their_representative(p)
    first = sorted(sorted(m) for _, m in clusters_of(p))
    r = CliRunner().invoke(cli, ["--project", str(p.root), "images", "dedup", "--scope", "global", "--json"])
    assert json.loads(r.stdout)["new_clusters"] == {"phash": 0, "dhash": 0}
    assert sorted(sorted(m) for _, m in clusters_of(p)) == first  # a rerun keeps the same clusters


def test_copies_are_clustered_and_lookalikes_are_not_through_the_python_api(tmp_path, scrape):
    import cultura

    p = cultura.init(tmp_path / "api", countries=["US", "JP"])
    owner = {store_image(p, data): o for o, data in scrape.values()}
    summary = p.images.dedup(["phash", "dhash"], scope="global", progress=False)
    assert summary["clusters"]["phash"] == len(PHOTOS)
    assert_reviewable(p, owner)


@pytest.mark.parametrize("method", ["phash", "dhash"])
@pytest.mark.parametrize("scope", ["global", "within-concept"])
def test_every_member_is_confirmed_against_its_representative_by_each_hash_door(tmp_path, scrape, method, scope):
    """The hash doors (pHash views, dHash; both scopes). The embedding door is checked in
    tests/integration/curate/test_dedup_by_embedding.py, the Ray one in test_ray_hashing.py, with the same
    assertion."""
    from tests.unit.curate.test_dedup import Builder

    p = init_project(tmp_path / "p", countries=["US", "JP"])
    b = Builder(p)
    for key, (owner, data) in scrape.items():
        b.add(data, ("photo", "US"), ("photo", "JP") if owner in PHOTOS[:3] else ("other", "JP"))
    dedup_images(p, methods=[method], scope=scope, progress=False)
    assert_members_confirmed_against_their_representative(p)


def test_a_chain_of_matching_pairs_is_never_one_cluster():
    """a~b~c~d (each only with its neighbour): no cluster holds two images that were not paired, and the
    best image is the representative (a: the largest)."""
    n = 4
    inv = Inventory.from_lists([f"{i:064x}" for i in range(n)], [400, 300, 200, 100], [1] * n,
                               links=[{(1, "US")}] * n)
    chain = np.array([[0, 1], [1, 2], [2, 3]])
    for scope in ("global", "within-concept"):
        got = [m.tolist() for _, m in scoped_clusters(inv, chain, scope)]
        assert got == [[0, 1], [2, 3]]


def test_two_neighbours_of_the_best_member_that_disagree_with_each_other_are_not_one_cluster():
    """b and c both pair with a (the best member) but their own look says they differ (two crops from either
    side of a): b joins a, c does not; without that look both would."""
    a, b, c = 0, 1, 2
    pairs = np.array([[a, b], [a, c]])
    rank = np.array([0, 1, 2])
    differ = {(b, c), (c, b)}

    def agree(x, y):
        return np.array([(int(i), int(j)) not in differ for i, j in zip(x, y)])

    assert [g.tolist() for g in confirm.star_clusters(pairs, rank)] == [[a, b, c]]
    assert [g.tolist() for g in confirm.star_clusters(pairs, rank, agree)] == [[a, b]]


@pytest.mark.parametrize("seed", range(4))
def test_star_clusters_pair_every_member_with_the_best_member(seed):
    rng = np.random.default_rng(seed)
    pairs = np.unique(np.sort(rng.integers(0, 200, size=(600, 2)), axis=1), axis=0)
    pairs = pairs[pairs[:, 0] < pairs[:, 1]]
    rank = rng.permutation(200)
    edges = {tuple(p) for p in pairs.tolist()}
    groups = confirm.star_clusters(pairs, rank)
    seen = set()
    for g in groups:
        best = min(g.tolist(), key=lambda i: rank[i])
        assert all((min(best, m), max(best, m)) in edges for m in g.tolist() if m != best)
        assert not seen & set(g.tolist())
        seen |= set(g.tolist())
    assert confirm.star_clusters(pairs[::-1], rank)[0].tolist() == groups[0].tolist()  # order of pairs: no matter


def test_a_flipped_thumbnail_has_the_fine_hash_of_the_original_under_its_mask():
    """The flips need no stored thumbnail: mirroring or turning a view thumbnail upside down flips exactly the
    sign bits :data:`confirm.FLIP_MASKS` says."""
    rng = np.random.default_rng(0)
    thumbs = rng.normal(128, 40, size=(5, 3, 32, 32))
    fine = confirm.fine_from_thumbs(thumbs)
    for mask, flipped in zip(confirm.FLIP_MASKS[1:], [thumbs[..., ::-1], thumbs[..., ::-1, :],
                                                      thumbs[..., ::-1, ::-1]]):
        assert np.array_equal(confirm.fine_from_thumbs(flipped), fine ^ mask)
    assert (confirm.fine_distances(fine, confirm.fine_from_thumbs(thumbs[..., ::-1, :])) == 0).all()


def test_a_lookalike_face_is_not_confirmed_though_its_phash_matches():
    """Faces whose pHash views match within the threshold (candidates of the search) are told apart by the
    fine hashes, while each photograph's copies are confirmed against it."""
    faces = list(lookalikes.faces().values())
    res = hashing.hash_images(faces)
    candidates = hashing.pair_views(res.views(), 10)
    assert len(candidates)                                        # the search alone would pair faces
    assert not len(confirm.confirm_pairs(candidates, res.fine))
    photo = rp.photos()["coffee"]
    copies = hashing.hash_images([rp.copies(photo)[k] for k in ["original", "crop_10", "mirror", "jpeg_q30"]]
                                 + [lookalikes.encode(photo.transpose(Image.Transpose.ROTATE_180))])
    d = confirm.fine_distances(np.repeat(copies.fine[:1], 4, axis=0), copies.fine[1:])
    assert (d <= confirm.FINE_THRESHOLD).all()
