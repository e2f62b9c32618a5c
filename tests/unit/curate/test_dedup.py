"""Image de-duplication: hashes, exact pair search, clusters, representatives, culture conflicts, reruns."""
from __future__ import annotations

import io
import json
import os
import time

import imagehash
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from cultura.curate import aligned, dedup, hash_search, hashing, vector_search
from cultura.curate.dedup import Inventory, cosine_pairs, dedup_images, representative
from cultura.curate.dedup_clusters import image_ranks
from cultura.curate import blobs
from cultura.curate.blobs import check_blobs
from cultura.db import dumps, now
from cultura.db.blobs import store_blob
from cultura.errors import ConfigError, UnknownName
from cultura.project import init_project
from tests.fakes.real_photos import grey16, turned

SIZE = (320, 240)


# ------------------------------------------------------------------------------------------ helpers
def encode(im: Image.Image, fmt: str = "JPEG", **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def crop(im: Image.Image, frac: float = 0.03) -> Image.Image:
    w, h = im.size
    dx, dy = int(w * frac), int(h * frac)
    return im.crop((dx // 2, dy // 2, w - (dx - dx // 2), h - (dy - dy // 2)))


class Builder:
    """Writes blobs, images rows and the queries/candidates/search_results that link them."""

    def __init__(self, project):
        self.p = project
        self.db = project.db
        self.rank = 0

    def concept(self, name: str) -> int:
        row = self.db.execute("SELECT id FROM concepts WHERE name = ?", [name]).fetchone()
        if row:
            return row[0]
        return self.db["concepts"].insert({"name": name, "source": "manual", "created_at": now()}).last_pk

    def query(self, concept: str, country: str) -> int:
        cid = self.concept(concept)
        lang = {"US": "en", "JP": "ja"}[country]
        self.db["queries"].insert({"concept_id": cid, "country": country, "language": lang, "kind": "native",
                                   "text": f"{concept} {country}", "created_at": now()}, ignore=True)
        return self.db.execute("SELECT id FROM queries WHERE concept_id = ? AND country = ?",
                               [cid, country]).fetchone()[0]

    def add(self, data: bytes, *links: tuple[str, str]) -> str:
        with Image.open(io.BytesIO(data)) as im:
            fmt, (w, h) = im.format.lower(), im.size
        sha, rel = store_blob(self.p, data, fmt)
        self.db["images"].insert({"sha256": sha, "path": rel, "format": fmt, "width": w, "height": h,
                                  "bytes": len(data), "created_at": now()}, ignore=True)
        for concept, country in links:
            self.rank += 1
            url = f"http://img.test/{sha}/{self.rank}"
            cand = self.db["candidates"].insert({"url": url, "status": "downloaded", "sha256": sha,
                                                 "bytes": len(data)}).last_pk
            self.db["search_results"].insert({"query_id": self.query(concept, country), "provider": "test",
                                              "rank": self.rank, "candidate_id": cand, "url": url,
                                              "found_at": now()})
        return sha


@pytest.fixture(scope="module")
def pictures():
    """Encoded test images: originals and planted near-duplicates."""
    base = {k: hashing.synthetic_image(seed, SIZE) for k, seed in
            {"A": 11, "B": 12, "C": 13, "D": 14, "E": 15, "F": 16, "G": 17}.items()}
    return {
        "A": encode(base["A"], quality=90),
        "A_small": encode(base["A"].resize((160, 120), Image.Resampling.LANCZOS), quality=90),
        "A_q60": encode(base["A"], quality=60),
        "B": encode(base["B"], quality=90),
        "B_crop": encode(crop(base["B"], 0.03), quality=90),
        "B_crop2": encode(crop(base["B"], 0.02), quality=85),
        "C": encode(base["C"], quality=90),
        "C_small": encode(base["C"].resize((240, 180), Image.Resampling.LANCZOS), quality=90),
        "D": encode(base["D"], quality=90),
        "E": encode(base["E"], quality=90),
        "F": encode(base["F"], "PNG"),
        "G_png1": encode(base["G"], "PNG", compress_level=1),
        "G_png9": encode(base["G"], "PNG", compress_level=9),
    }


@pytest.fixture
def world(tmp_path, pictures):
    """A project with the planted duplicates, returning (project, {name: sha256})."""
    p = init_project(tmp_path / "p", countries=["US", "JP"])
    b = Builder(p)
    shas = {
        "A": b.add(pictures["A"], ("bread", "US")),
        "A_small": b.add(pictures["A_small"], ("bread", "US")),
        "A_q60": b.add(pictures["A_q60"], ("bread", "JP")),        # same picture, other country
        "B": b.add(pictures["B"], ("bread", "US")),
        "B_crop": b.add(pictures["B_crop"], ("bread", "US")),
        "C": b.add(pictures["C"], ("bread", "JP")),
        "C_small": b.add(pictures["C_small"], ("temple", "JP")),   # same picture, other concept
        "D": b.add(pictures["D"], ("bread", "US"), ("bread", "JP")),  # one image found for two countries
        "E": b.add(pictures["E"], ("temple", "US")),
        "F": b.add(pictures["F"], ("temple", "US")),
        "G_png1": b.add(pictures["G_png1"], ("temple", "JP")),
        "G_png9": b.add(pictures["G_png9"], ("temple", "JP")),     # same pixels, other bytes
    }
    b.add(pictures["D"], ("bread", "US"))  # the same bytes found again: still one images row
    yield p, shas, b
    p.close()


def clusters(p, method, scope=None, status=("open", "resolved")):
    """{frozenset(member names' sha256): row} of the active clusters of one method."""
    out = {}
    sql = ("SELECT c.id, c.concept_id, c.representative, c.status, c.scope, group_concat(m.sha256) AS members "
           "FROM dup_clusters c JOIN dup_members m ON m.cluster_id = c.id WHERE c.method = ? "
           f"AND c.status IN ({','.join('?' * len(status))}) GROUP BY c.id")
    for row in p.db.query(sql, [method, *status]):
        if scope is None or row["scope"] == scope:
            out[frozenset(row["members"].split(","))] = row
    return out


def names(shas, *keys):
    return frozenset(shas[k] for k in keys)


def flags(p, flag="culture_conflict"):
    return {r["sha256"]: r for r in p.db.query("SELECT * FROM image_flags WHERE flag = ?", [flag])}


# ------------------------------------------------------------------------------------------ hashing
def test_hashes_equal_imagehash_on_small_images():
    rng = np.random.default_rng(0)
    ims = [Image.fromarray(rng.integers(0, 256, (24, 24, 3), dtype=np.uint8)) for _ in range(10)]
    ims.append(hashing.synthetic_image(3, (24, 20)))
    ph, dh = hashing.compute_hashes(ims)
    assert hashing.to_hex(ph) == [str(imagehash.phash(im)) for im in ims]
    assert hashing.to_hex(dh) == [str(imagehash.dhash(im)) for im in ims]
    assert (hashing.from_hex(hashing.to_hex(ph)) == ph).all()


def test_compute_hashes_paths_and_bytes_agree_and_errors_name_the_file(tmp_path, pictures):
    path = tmp_path / "a.jpg"
    path.write_bytes(pictures["A"])
    p1, d1 = hashing.compute_hashes([path])
    p2, d2 = hashing.compute_hashes([pictures["A"]])
    assert p1[0] == p2[0] and d1[0] == d2[0]
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not an image")
    with pytest.raises(hashing.HashingError, match="bad.jpg"):
        hashing.compute_hashes([path, bad])
    res = hashing.hash_images([path, bad])
    assert list(res.errors) == [1] and res.ok.tolist() == [True, False]


def brute_pairs(h: np.ndarray, t: int) -> np.ndarray:
    d = np.bitwise_count(h[:, None] ^ h[None, :])
    i, j = np.nonzero(np.triu(d <= t, 1))
    return np.stack([i, j], axis=1).astype(np.int64).reshape(-1, 2)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=60), st.integers(0, 64), st.data())
def test_hamming_pairs_equals_brute_force(values, threshold, data):
    h = np.array(values, dtype=np.uint64)
    if len(h) > 2:  # plant near-duplicates: copies with a few bits flipped
        k = data.draw(st.integers(0, len(h) // 2))
        for i in range(k):
            bits = data.draw(st.lists(st.integers(0, 63), max_size=12))
            h[-1 - i] = h[i] ^ np.uint64(sum(1 << b for b in set(bits)))
    pairs, dist = hashing.hamming_pairs(h, threshold, return_distances=True)
    expected = brute_pairs(h, threshold)
    assert pairs.tolist() == expected.tolist()
    assert dist.tolist() == np.bitwise_count(h[expected[:, 0]] ^ h[expected[:, 1]]).tolist()


@pytest.mark.parametrize("threshold", [1, 3, 8, 10, 12])
def test_multi_index_path_is_exact(threshold):
    rng = np.random.default_rng(threshold)
    h = rng.integers(0, 2**64, size=3000, dtype=np.uint64)
    h[1500:] = h[:1500]
    for _ in range(threshold // 2 + 1):
        h[1500:] ^= np.uint64(1) << rng.integers(0, 64, 1500).astype(np.uint64)
    h[2900:] = h[2800:2900]  # exact duplicates too
    expected = {tuple(x) for x in brute_pairs(h, threshold).tolist()}
    # splits with small per-part radii (the ones the planner picks), incl. the pure pigeonhole split
    ok = [m for m in range(2, threshold + 2) if -(-(threshold - m + 1) // m) <= 2 and 64 // m <= 16]
    for n_parts in sorted({*ok[:2], threshold + 1} - {1}):
        widths = [64 // n_parts + (i < 64 % n_parts) for i in range(n_parts)]
        total = threshold - n_parts + 1
        ts = [total // n_parts + (i < total % n_parts) for i in range(n_parts)]
        parts = [(sum(widths[:i]), widths[i], ts[i]) for i in range(n_parts)]
        fi, fj, _ = hash_search._gph_pairs(h, threshold, parts)
        got = set(zip(np.concatenate(fi).tolist(), np.concatenate(fj).tolist()))
        assert got == expected, (threshold, parts)


def test_hamming_pairs_validates_arguments():
    with pytest.raises(ValueError, match="threshold"):
        hashing.hamming_pairs(np.zeros(3, dtype=np.uint64), 65)
    with pytest.raises(ValueError, match="hashes"):
        hashing.hamming_pairs(np.zeros((3, 2), dtype=np.uint64), 3)
    assert hashing.hamming_pairs(np.zeros(1, dtype=np.uint64), 3).shape == (0, 2)


def test_cosine_pairs_equals_brute_force():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(80, 8)).astype(np.float32)
    x[40:] = x[:40] + rng.normal(scale=0.2, size=(40, 8))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    sims = x @ x.T
    i, j = np.nonzero(np.triu(sims >= 0.95, 1))
    assert cosine_pairs(x, 0.95).tolist() == np.stack([i, j], 1).tolist()


def test_representative_prefers_resolution_then_bytes_then_sha():
    inv = Inventory.from_lists(["c", "b", "a", "d"], pixels=[100, 200, 200, 200], nbytes=[9, 5, 5, 4])
    assert representative(inv, np.array([0, 1, 2, 3])) == 2      # tie on pixels and bytes: smallest sha
    assert representative(inv, np.array([0, 3])) == 3            # resolution first
    assert representative(inv, np.array([0, 1, 3])) == 1         # then bytes


# ------------------------------------------------------------------------------------------ dedup
def test_within_concept_clusters_representatives_and_conflicts(world):
    p, s, _ = world
    res = dedup_images(p, methods=["sha256", "phash", "dhash"], progress=False)
    assert res["hashes_computed"] == 12 and res["images"] == 12
    expected = {names(s, "A", "A_small", "A_q60"), names(s, "B", "B_crop"), names(s, "G_png1", "G_png9")}
    for method in ("phash", "dhash"):
        got = clusters(p, method)
        assert set(got) == expected, method
        assert got[names(s, "A", "A_small", "A_q60")]["representative"] == s["A"]  # largest resolution
        rep_g = got[names(s, "G_png1", "G_png9")]["representative"]              # same size: most bytes
        assert rep_g == s[max(("G_png1", "G_png9"), key=lambda k: len(world_bytes(p, s[k])))]
        assert all(r["concept_id"] is not None and r["scope"] == "within-concept" for r in got.values())
    rep_dist = p.db.execute("SELECT m.distance FROM dup_members m JOIN dup_clusters c ON c.id = m.cluster_id "
                            "WHERE m.sha256 = c.representative").fetchall()
    assert {d for (d,) in rep_dist} == {0.0}
    assert res["clusters"] == {"phash": 3, "dhash": 3}
    assert res["images_in_clusters"] == {"phash": 7, "dhash": 7}

    f = flags(p)
    assert set(f) == names(s, "A", "A_small", "A_q60", "D")
    d = json.loads(f[s["D"]]["details"])
    assert [(x["concept"], x["country"]) for x in d["pairs"]] == [("bread", "JP"), ("bread", "US")]
    assert "sha256" in d["evidence"]
    a = json.loads(f[s["A_small"]]["details"])
    assert {(x["concept"], x["country"]) for x in a["pairs"]} == {("bread", "US"), ("bread", "JP")}
    assert set(a["evidence"]) == {"phash/within-concept", "dhash/within-concept"}
    assert all(r["status"] == "open" for r in f.values())
    assert res["conflicts_flagged"] == 4 and res["conflicts_new"] == 4
    assert res["multi_linked_images"] == 1
    # flag texts are assembled from shared pieces: each must be the canonical text of what it holds, so a
    # rerun that compares them finds nothing to rewrite
    assert all(r["details"] == dumps(json.loads(r["details"])) for r in f.values())
    before = {k: (r["details"], r["status"]) for k, r in f.items()}
    p.db.execute("INSERT INTO concepts (name, source, created_at) VALUES ('unrelated', 'manual', 'x')")  # a rerun
    again = dedup_images(p, methods=["sha256", "phash", "dhash"], progress=False)
    assert not again["unchanged"] and again["conflicts_new"] == 0
    assert {k: (r["details"], r["status"]) for k, r in flags(p).items()} == before


def test_a_pair_both_hashes_find_gets_one_aligned_look_per_run(world, monkeypatch):
    """The aligned look's verdict depends on the two images only: a copy pHash and dHash both find is decoded
    and compared once, and each method's clusters are those it finds alone."""
    p, s, _ = world
    alone = {}
    for method in ("phash", "dhash"):
        dedup_images(p, methods=[method], progress=False)
        alone[method] = set(clusters(p, method))
    looked: list[tuple[int, int]] = []
    real = aligned.verify_pairs

    def spy(pairs, *a, **kw):
        looked.extend(map(tuple, np.asarray(pairs).reshape(-1, 2).tolist()))
        return real(pairs, *a, **kw)

    monkeypatch.setattr(aligned, "verify_pairs", spy)
    p.db.execute("INSERT INTO concepts (name, source, created_at) VALUES ('unrelated', 'manual', 'x')")  # a rerun
    dedup_images(p, methods=["phash", "dhash"], progress=False)
    assert len(looked) == len(set(looked)) >= 3  # every plain copy is found by both: looked at once
    assert {m: set(clusters(p, m)) for m in alone} == alone
    assert alone["phash"] == alone["dhash"] == {names(s, "A", "A_small", "A_q60"), names(s, "B", "B_crop"),
                                                names(s, "G_png1", "G_png9")}


def world_bytes(p, sha):
    return (p.root / p.db.execute("SELECT path FROM images WHERE sha256 = ?", [sha]).fetchone()[0]).read_bytes()


def test_rerun_is_idempotent_and_hashes_nothing(world):
    p, s, _ = world
    dedup_images(p, progress=False)
    before = {t: p.db[t].count for t in ("dedup_runs", "dup_clusters", "dup_members", "image_flags")}
    flags_before = {k: (r["details"], r["status"]) for k, r in flags(p).items()}
    res = dedup_images(p, progress=False)
    assert res["hashes_computed"] == 0
    assert res["new_clusters"] == {"phash": 0, "dhash": 0}
    assert res["superseded_clusters"] == {"phash": 0, "dhash": 0}
    assert {t: p.db[t].count for t in before} == before
    assert {k: (r["details"], r["status"]) for k, r in flags(p).items()} == flags_before
    assert p.db.execute("SELECT count(*) FROM runs WHERE stage = 'dedup' AND status = 'done'").fetchone()[0] == 2


def test_new_member_supersedes_only_the_changed_cluster_and_keeps_reviews(world, pictures):
    p, s, b = world
    dedup_images(p, methods=["phash"], progress=False)
    old = clusters(p, "phash")
    a_id = old[names(s, "A", "A_small", "A_q60")]["id"]
    p.db.execute("UPDATE dup_clusters SET status = 'resolved' WHERE id = ?", [a_id])
    p.db.conn.commit()
    s["B_crop2"] = b.add(pictures["B_crop2"], ("bread", "US"))
    res = dedup_images(p, methods=["phash"], progress=False)
    assert res["hashes_computed"] == 1
    assert res["new_clusters"] == {"phash": 1} and res["superseded_clusters"] == {"phash": 1}
    now_ = clusters(p, "phash")
    assert set(now_) == {names(s, "A", "A_small", "A_q60"), names(s, "B", "B_crop", "B_crop2"),
                         names(s, "G_png1", "G_png9")}
    assert now_[names(s, "A", "A_small", "A_q60")]["id"] == a_id
    assert now_[names(s, "A", "A_small", "A_q60")]["status"] == "resolved"
    sup = clusters(p, "phash", status=("superseded",))
    assert set(sup) == {names(s, "B", "B_crop")}
    assert p.db["dedup_runs"].count == 2


def test_global_scope_links_across_concepts(world):
    p, s, _ = world
    within = dedup_images(p, methods=["phash"], scope="within-concept", progress=False)
    assert names(s, "C", "C_small") not in clusters(p, "phash", "within-concept")
    res = dedup_images(p, methods=["phash"], scope="global", progress=False)
    assert res["hashes_computed"] == 0
    glob = clusters(p, "phash", "global")
    assert names(s, "C", "C_small") in glob
    assert glob[names(s, "C", "C_small")]["concept_id"] is None
    assert len(glob) == within["clusters"]["phash"] + 1
    d = json.loads(flags(p)[s["C_small"]]["details"])
    assert {(x["concept"], x["country"]) for x in d["pairs"]} == {("bread", "JP"), ("temple", "JP")}
    assert set(d["evidence"]) == {"phash/global"}


def test_resolved_flag_reopens_only_when_pairs_grow(world):
    p, s, b = world
    dedup_images(p, methods=["sha256"], progress=False)
    p.db.execute("UPDATE image_flags SET status = 'resolved' WHERE sha256 = ?", [s["D"]])
    p.db.conn.commit()
    dedup_images(p, methods=["sha256"], progress=False)
    assert flags(p)[s["D"]]["status"] == "resolved"
    b.add(world_bytes(p, s["D"]), ("temple", "US"))
    dedup_images(p, methods=["sha256"], progress=False)
    assert flags(p)[s["D"]]["status"] == "open"
    assert len(json.loads(flags(p)[s["D"]]["details"])["pairs"]) == 3


def test_unreadable_blob_is_flagged_once(world):
    p, s, _ = world
    path = p.root / p.db.execute("SELECT path FROM images WHERE sha256 = ?", [s["E"]]).fetchone()[0]
    path.write_bytes(b"broken")
    res = dedup_images(p, methods=["phash"], progress=False)
    assert res["hash_failures"] == 1 and res["hashes_computed"] == 11
    assert json.loads(flags(p, "unreadable")[s["E"]]["details"])["error"]
    res = dedup_images(p, methods=["phash"], progress=False)
    assert res["hash_failures"] == 0 and res["hashes_computed"] == 0


def test_embedding_method_with_fake_embedder(world):
    from cultura.models.embedders import get_embedder

    p, s, _ = world
    emb = get_embedder("fake")
    res = dedup_images(p, methods=["embedding"], embedder=emb, embedding_threshold=0.99, progress=False)
    got = clusters(p, "embedding")
    assert set(got) == {names(s, "G_png1", "G_png9")}  # identical pixels only
    assert res["hashes_computed"] == 0
    params = json.loads(p.db.execute("SELECT params FROM dedup_runs WHERE method = 'embedding'").fetchone()[0])
    assert params == {"embedder": emb.identity, "threshold": 0.99, "index": vector_search.index_params()}
    assert p.db.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 12
    emb.reset_stats()
    dedup_images(p, methods=["embedding"], embedder=emb, embedding_threshold=0.99, progress=False)
    assert emb.stats["images"] == 0 and p.db["dedup_runs"].count == 1


def test_options_are_validated(world):
    p, _, _ = world
    with pytest.raises(UnknownName, match="phash"):
        dedup_images(p, methods=["phsah"], progress=False)
    with pytest.raises(ConfigError, match="phash_threshold"):
        dedup_images(p, methods=["phash"], phash_threshold=70, progress=False)
    with pytest.raises(UnknownName, match="global"):
        dedup_images(p, scope="globl", progress=False)


def test_defaults_come_from_config(world):
    p, _, _ = world
    p.config.dedup.phash_threshold = 0
    dedup_images(p, methods=["phash"], progress=False)
    params = json.loads(p.db.execute("SELECT params FROM dedup_runs").fetchone()[0])
    assert params["threshold"] == 0 and params["hash"] == hashing.HASH_VERSION


# ------------------------------------------------------------------------------------------ scale
def reference_star(pairs, key):
    """Star clusters the slow, obvious way: images best first (``key``), each one not yet taken starts a
    cluster with its direct neighbours not yet taken."""
    from collections import defaultdict

    adj = defaultdict(set)
    for i, j in pairs:
        adj[i].add(j)
        adj[j].add(i)
    taken, out = set(), []
    for u in sorted(adj, key=key):
        members = sorted(v for v in adj[u] if v not in taken)
        if u in taken or not members:
            continue
        taken |= {u, *members}
        out.append(sorted([u, *members]))
    return sorted(out)


def reference_scoped_clusters(links, pairs, scope):
    """A per-pair Python implementation, the reference for the vectorised one (images rank by index here:
    equal resolution and bytes, sha256 in index order)."""
    from collections import defaultdict

    if scope == "global":
        return [(None, c) for c in reference_star(pairs.tolist(), key=lambda i: i)]
    concepts = [{c for c, _ in s} for s in links]
    edges = defaultdict(list)
    for i, j in pairs.tolist():
        for c in concepts[i] & concepts[j]:
            edges[c].append((i, j))
    return [(c, m) for c in sorted(edges) for m in reference_star(edges[c], key=lambda i: i)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("scope", ["within-concept", "global"])
def test_scoped_clusters_equals_the_per_pair_reference(seed, scope):
    from cultura.curate.dedup import scoped_clusters

    rng = np.random.default_rng(seed)
    n = 300
    links = [{(int(rng.integers(1, 6)), str(rng.choice(["US", "JP", "DE"])))
              for _ in range(int(rng.integers(0, 4)))} for _ in range(n)]
    pairs = np.unique(np.sort(rng.integers(0, n, size=(400, 2)), axis=1), axis=0)
    pairs = pairs[pairs[:, 0] < pairs[:, 1]]
    inv = Inventory.from_lists([f"{i:064x}" for i in range(n)], [1] * n, [1] * n, links=links)
    got = [(c, m.tolist()) for c, m in scoped_clusters(inv, pairs, scope)]
    assert got == reference_scoped_clusters(links, pairs, scope)
    assert got  # the draw has clusters


def test_noop_rerun_reads_nothing_and_any_change_reruns(world, pictures, monkeypatch):
    from cultura.curate import dedup

    p, s, b = world
    first = dedup_images(p, progress=False)
    assert first["unchanged"] is False
    monkeypatch.setattr(dedup, "load_inventory", lambda project: pytest.fail("a no-op rerun read the images"))
    again = dedup_images(p, progress=False)
    assert again["unchanged"] is True
    assert again["clusters"] == first["clusters"] and again["conflicts_flagged"] == first["conflicts_flagged"]
    assert again["new_clusters"] == {"phash": 0, "dhash": 0} and again["conflicts_new"] == 0
    with pytest.raises(pytest.fail.Exception):  # other options: not the recorded call
        dedup_images(p, phash_threshold=9, progress=False)
    monkeypatch.undo()

    # a reviewer's decision is a change: the next call recomputes (and changes nothing)
    cid = p.db.execute("SELECT id FROM dup_clusters WHERE method = 'phash' LIMIT 1").fetchone()[0]
    p.db.execute("UPDATE dup_clusters SET status = 'resolved' WHERE id = ?", [cid])
    p.db.conn.commit()
    res = dedup_images(p, progress=False)
    assert res["unchanged"] is False and res["new_clusters"] == {"phash": 0, "dhash": 0}
    assert dedup_images(p, progress=False)["unchanged"] is True

    # a new image is found
    s["B_crop2"] = b.add(pictures["B_crop2"], ("bread", "US"))
    res = dedup_images(p, progress=False)
    assert res["unchanged"] is False and res["hashes_computed"] == 1 and res["new_clusters"]["phash"] == 1
    assert names(s, "B", "B_crop", "B_crop2") in clusters(p, "phash")


def test_a_write_by_someone_else_during_the_run_is_not_recorded_as_seen(world, pictures, monkeypatch):
    from cultura.curate import dedup

    p, s, b = world
    real = dedup.scoped_clusters
    added = []

    def meanwhile(inv, pairs, scope):  # another process links a new image while this run computes
        if not added:
            from cultura.project import Project

            other = Project(p.root)  # its own connection, as another process would have
            writer = Builder(other)
            writer.rank = 1000
            added.append(writer.add(pictures["B_crop2"], ("bread", "US")))
            other.close()
        return real(inv, pairs, scope)

    monkeypatch.setattr(dedup, "scoped_clusters", meanwhile)
    dedup_images(p, methods=["phash"], progress=False)
    monkeypatch.undo()
    res = dedup_images(p, methods=["phash"], progress=False)
    assert res["unchanged"] is False and res["hashes_computed"] == 1
    assert frozenset({s["B"], s["B_crop"], added[0]}) in clusters(p, "phash")


def test_concept_pairs_equal_global_pairs_restricted_to_a_shared_concept():
    from cultura.curate.dedup import concept_pairs

    rng = np.random.default_rng(3)
    n = 400
    links = [{(int(rng.integers(1, 5)), "US") for _ in range(int(rng.integers(0, 3)))} for _ in range(n)]
    inv = Inventory.from_lists([f"{i:064x}" for i in range(n)], [1] * n, [1] * n, links=links)
    h = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    h[200:] = h[:200] ^ (np.uint64(1) << rng.integers(0, 64, 200).astype(np.uint64))
    mask = rng.random(n) < 0.9
    got = concept_pairs(inv, mask, lambda idx: hashing.hamming_pairs(h[idx], 4))
    concepts = [{c for c, _ in s} for s in links]
    idx = np.flatnonzero(mask)
    every = idx[hashing.hamming_pairs(h[idx], 4)]
    expected = [[i, j] for i, j in every.tolist() if concepts[i] & concepts[j]]
    assert got.tolist() == expected and len(expected) > 20


def test_cached_embeddings_stream_into_one_matrix_in_input_order(world):
    from cultura.models.embedders import embed_images_cached, get_embedder

    p, s, _ = world
    emb = get_embedder("fake")
    keys = [s["A"], s["B"], s["A"], s["C"]]
    first = embed_images_cached(p, emb, keys)              # computed and stored
    out = np.full((4, first.shape[1]), np.nan, dtype=np.float32)
    again = embed_images_cached(p, emb, keys, out=out)     # read back from the cache into `out`
    assert again is out and np.array_equal(again, first) and np.array_equal(again[0], again[2])


# ------------------------------------------------------------------------------------------ real photographs
PHOTOS = ["astronaut", "chelsea", "coffee", "rocket", "camera", "coins", "moon", "hubble_deep_field",
          "immunohistochemistry", "retina", "clock", "cell"]


def real_photos() -> dict[str, Image.Image]:
    """The photographs scikit-image and scikit-learn ship (no download), as RGB."""
    skdata = pytest.importorskip("skimage.data")
    from sklearn.datasets import load_sample_images

    out = {name: Image.fromarray(getattr(skdata, name)()).convert("RGB") for name in PHOTOS}
    for name, a in zip(["china", "flower"], load_sample_images().images):
        out[name] = Image.fromarray(a).convert("RGB")
    return out


def planted_copies(im: Image.Image) -> dict[str, bytes]:
    """The original (JPEG q=90) and four copies: half size, re-encoded at q=50, 5% cut off each side, +20%
    brightness."""
    from PIL import ImageEnhance

    w, h = im.size
    dx, dy = round(w * 0.05), round(h * 0.05)
    return {"original": encode(im, quality=90),
            "resized": encode(im.resize((w // 2, h // 2), Image.Resampling.LANCZOS), quality=90),
            "reencoded": encode(im, quality=50),
            "cropped": encode(im.crop((dx, dy, w - dx, h - dy)), quality=90),
            "brightened": encode(ImageEnhance.Brightness(im).enhance(1.2), quality=90)}


def pixel_copies(im: Image.Image) -> dict[str, bytes]:
    """Copies whose bytes store the pixels otherwise while a browser shows the original: ``exif_rotated``,
    the pixels turned a quarter anticlockwise with EXIF orientation 6 (turn clockwise to show), and
    ``grey16``, the grey picture as a 16-bit PNG (each 8-bit level v stored as 257 v)."""
    return {"exif_rotated": turned(im, 6, quality=90), "grey16": grey16(im)}


def test_real_photos_pair_recall_at_precision_one_with_default_methods(tmp_path):
    """14 real photographs with planted copies; every pair of images of one photograph is a true
    pair. The default methods (sha256, pHash with centre hashes, dHash) must put >= 95% of the true pairs in
    one cluster and never two different photographs (full hashes alone: 0.93, the crops were missed).

    The pixel copies (:func:`pixel_copies`) are each in a cluster with their original: the hashes are of the
    picture a browser shows (an EXIF-turned copy was hashed sideways; 16-bit grey was hashed as white, so
    the 14 grey copies, look-alikes to the hashes, made one cluster). The rows are written with the stored,
    sideways size, as cultura once did: dedup's hashing stores the displayed width x height."""
    photos = real_photos()
    p = init_project(tmp_path / "p", countries=["US", "JP"])
    b = Builder(p)
    owner, kind = {}, {}
    for k, (name, im) in enumerate(photos.items()):
        for v, data in {**planted_copies(im), **pixel_copies(im)}.items():
            sha = b.add(data, ("photo", "US" if k % 2 else "JP"))
            owner[sha], kind[sha] = name, v
    res = dedup_images(p, progress=False)
    assert res["images"] == 7 * len(photos)
    together = set()
    for members in clusters(p, "phash") | clusters(p, "dhash"):
        ms = sorted(members)
        together |= {(a, c) for i, a in enumerate(ms) for c in ms[i + 1:]}
    true = {(a, c) for a in owner for c in owner if a < c and owner[a] == owner[c]}
    assert together <= true, "two different photographs were merged"
    recall = len(together & true) / len(true)
    assert recall >= 0.95, recall
    crops = [s for s in owner if any(s in m for m in clusters(p, "phash"))]
    assert len(crops) == len(owner)  # every image, the crops included, is in a pHash cluster
    original = {owner[s]: s for s in owner if kind[s] == "original"}
    missed = [(owner[s], kind[s]) for s in owner if kind[s] in ("exif_rotated", "grey16")
              and tuple(sorted((s, original[owner[s]]))) not in together]
    assert not missed, missed
    size = {r["sha256"]: (r["width"], r["height"]) for r in p.db.query("SELECT sha256, width, height FROM images")}
    turned = [s for s in owner if kind[s] == "exif_rotated"]
    assert all(size[s] == photos[owner[s]].size for s in turned), [(owner[s], size[s]) for s in turned]
    assert any(w != h for w, h in (photos[owner[s]].size for s in turned))  # the check can tell


def test_centre_phash_comes_from_the_same_decode_and_matches_a_crop():
    im = real_photos()["coffee"]
    copies = planted_copies(im)
    res = hashing.hash_images([copies["original"], copies["cropped"]])
    assert res.phash_centre is not None and not res.errors
    full_vs_full = int(hashing.hamming_to_each(res.phash[:1], res.phash[1:])[0])
    crop_vs_centre = int(hashing.hamming_to_each(res.phash_centre[:1], res.phash[1:])[0])
    assert crop_vs_centre < full_vs_full and crop_vs_centre <= 4
    pairs = hashing.hamming_pairs_with_centre(res.phash, res.phash_centre, crop_vs_centre)
    assert pairs.tolist() == [[0, 1]]


# ------------------------------------------------------------------------------------------ decode once
def test_sniffing_hashes_equal_dedups_hashes_and_imports_need_no_second_decode(tmp_path, pictures):
    from cultura.curate.download import sniff_image
    from cultura.curate.importers import store_image

    photos = real_photos()
    blobs = [encode(photos["astronaut"], quality=85), encode(photos["china"], "PNG"), pictures["G_png1"],
             pictures["A_small"], encode(photos["camera"].convert("L"), quality=90),
             *pixel_copies(photos["chelsea"]).values()]
    res = hashing.hash_images(blobs)
    for k, data in enumerate(blobs):
        info = sniff_image(data, max_pixels=10**8, min_side=1)
        assert (info.phash, info.dhash, info.phash_centre) == (
            hashing.to_hex(res.phash[k:k + 1])[0], hashing.to_hex(res.dhash[k:k + 1])[0],
            hashing.to_hex(res.phash_centre[k:k + 1])[0])
        assert (info.width, info.height) == tuple(res.sizes[k])  # both the displayed size
    p = init_project(tmp_path / "p", countries=["US", "JP"])
    shas = [store_image(p, data) for data in blobs]
    stored = p.db.execute("SELECT count(*) FROM images WHERE phash IS NOT NULL AND dhash IS NOT NULL "
                          "AND phash_centre IS NOT NULL").fetchone()[0]
    assert stored == len(shas)
    assert dedup_images(p, methods=["phash", "dhash"], progress=False)["hashes_computed"] == 0


def test_check_blobs_marks_only_rows_whose_file_is_gone(world):
    """A deleted blob and a whole deleted shard folder are found (folders are listed, not each file stat'ed);
    the other images stay ``ok``, ``shas=`` restricts the check, and the candidates go back to pending."""
    p, shas, _ = world
    path = {s: r for s, r in p.db.execute("SELECT sha256, path FROM images")}
    (p.root / path[shas["B"]]).unlink()
    assert check_blobs(p, shas=[shas["A"], shas["C"]]) == {"missing": 0}  # B not asked about
    folder = (p.root / path[shas["E"]]).parent
    lost = {s for s, r in path.items() if (p.root / r).parent == folder}
    for f in folder.iterdir():
        f.unlink()
    folder.rmdir()
    assert check_blobs(p) == {"missing": len(lost | {shas["B"]})}
    missing = {s for (s,) in p.db.execute("SELECT sha256 FROM images WHERE status = 'missing'")}
    assert missing == lost | {shas["B"]}
    assert {r for (r,) in p.db.execute("SELECT reason FROM images WHERE status = 'missing'")} == {"file missing"}
    pending = {s for (s,) in p.db.execute("SELECT sha256 FROM candidates WHERE status = 'pending'")}
    assert pending == missing
    assert check_blobs(p) == {"missing": 0}  # missing rows are not 'ok' any more: nothing twice


def test_check_blobs_lists_only_what_changed_since_the_last_check(world, monkeypatch):
    """A second check of an unchanged project lists no folder; a deleted file is found by its folder's changed
    time; an image that becomes 'ok' again is rechecked even in a folder whose time did not change."""
    p, shas, _ = world
    path = {s: r for s, r in p.db.execute("SELECT sha256, path FROM images")}
    folders = {(p.root / r).parent for r in path.values()}
    past = time.time_ns() - 60 * 10**9

    def age():  # folder times well before the clock: trusted (a time within RACY_NS of it is not)
        for f in folders:
            os.utime(f, ns=(past, past))

    listed = []
    real = os.listdir
    # folder listings (the list of blob folders itself is not counted)
    monkeypatch.setattr(blobs.os, "listdir", lambda d: (os.path.basename(d) != "blobs" and listed.append(str(d)))
                        or real(d))
    age()
    assert blobs.check_blobs(p) == {"missing": 0} and len(listed) == len(folders)
    listed.clear()
    assert blobs.check_blobs(p) == {"missing": 0} and listed == []       # unchanged: nothing listed
    (p.root / path[shas["B"]]).unlink()                                   # changes B's folder time
    # only B's folder is listed (twice: its time is within RACY_NS of the clock, so it is listed again once
    # that window has passed, and then trusted)
    assert blobs.check_blobs(p) == {"missing": 1} and set(listed) == {str((p.root / path[shas["B"]]).parent)}
    listed.clear()
    assert blobs.check_blobs(p) == {"missing": 0} and listed == []
    age()
    blobs.check_blobs(p)
    # E is excluded, its file deleted, and its folder's time happens to be what the last check saw
    p.db.execute("UPDATE images SET status = 'excluded' WHERE sha256 = ?", [shas["E"]])
    (p.root / path[shas["E"]]).unlink()
    age()
    listed.clear()
    assert blobs.check_blobs(p) == {"missing": 0}                         # E is not 'ok': not checked
    p.db.execute("UPDATE images SET status = 'ok' WHERE sha256 = ?", [shas["E"]])  # included again
    assert blobs.check_blobs(p) == {"missing": 1}
    assert p.db.execute("SELECT status FROM images WHERE sha256 = ?", [shas["E"]]).fetchone() == ("missing",)
    assert blobs.check_blobs(p) == {"missing": 0}


def test_representatives_and_cluster_ranks_equal_representative_per_cluster():
    """The vectorised choice, and the ranks clusters are made with (the best-ranked member is where a star
    starts), equal the one-cluster rule: largest resolution, then most bytes, then sha256."""
    rng = np.random.default_rng(3)
    n = 400
    sha = [f"{x:064x}" for x in rng.integers(0, 50, n)]  # repeated values: the sha256 tie-break is exercised
    inv = dedup.Inventory.from_lists(sha, rng.integers(1, 4, n) * 100, rng.integers(1, 4, n))
    perm = rng.permutation(n)
    clusters = [np.sort(c) for c in np.split(perm, np.sort(rng.choice(np.arange(1, n), 90, replace=False)))]
    want = [dedup.representative(inv, c) for c in clusters]
    assert dedup.representatives(inv, clusters).tolist() == want
    assert [int(c[np.argmin(image_ranks(inv, c)[c])]) for c in clusters] == want


def test_concept_pairs_in_parallel_equal_one_by_one():
    """Concepts searched by a thread pool give the pairs of the sequential search, for the pHash search with
    centre hashes and the dHash one, each search single-threaded inside the pool."""
    rng = np.random.default_rng(5)
    n = 3000
    full = rng.integers(0, 2**63, n, dtype=np.int64).view(np.uint64)
    centre = rng.integers(0, 2**63, n, dtype=np.int64).view(np.uint64)
    src = rng.integers(0, n, 600)
    full[:600] = full[src] ^ (np.uint64(1) << rng.integers(0, 64, 600).astype(np.uint64))  # near-copies
    centre[600:900] = full[rng.integers(0, n, 300)]                                     # crops
    links = [{(int(c), "US")} for c in rng.integers(1, 12, n)]
    inv = dedup.Inventory.from_lists([f"{i:064x}" for i in range(n)], [1] * n, [1] * n, links=links)
    mask = np.ones(n, dtype=bool)
    for search in (lambda idx, w=None: hashing.hamming_pairs_with_centre(full[idx], centre[idx], 10, workers=w),
                   lambda idx, w=None: hashing.hamming_pairs(full[idx], 10, workers=w)):
        one = dedup.concept_pairs(inv, mask, search)
        pooled = dedup.concept_pairs(inv, mask, lambda idx: search(idx, 1), workers=3)
        assert len(one) > 20 and np.array_equal(one, pooled)
