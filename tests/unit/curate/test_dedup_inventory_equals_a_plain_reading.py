"""``load_inventory`` reads the whole project in a few aggregate queries per rowid range; whatever the project
holds, its Inventory must equal the one a plain row-by-row reading through sqlite3 gives, field by field."""
from __future__ import annotations

import random
import sqlite3

import numpy as np
import pytest

import cultura
from cultura.curate import confirm, dedup_inventory_rows, hashing
from cultura.curate.dedup_inventory import load_inventory
from cultura.db import now, transaction
from cultura.db.blobs import store_blob
from cultura.project import init_project
from tests.fakes.real_photos import encode, photos

N_VARIANTS, N_FINE = len(hashing.VARIANTS), len(confirm.FINE_VIEWS)


# ------------------------------------------------------------------------------ the plain reading
def plain_inventory(db_path) -> dict:
    """The Inventory's fields read the obvious way: one row at a time, one Python value per column."""
    con = sqlite3.connect(db_path)
    rows = con.execute("SELECT sha256, width, height, bytes, phash, dhash, phash_centre, phash_variants, phash_fine "
                       "FROM images WHERE status = 'ok' ORDER BY rowid").fetchall()

    def hex_words(v, width):
        return [int(v[k:k + 16], 16) for k in range(0, width, 16)] if v and len(v) == width else [0] * (width // 16)

    sha = [r[0] for r in rows]
    index = {s: i for i, s in enumerate(sha)}
    concepts = {cid: (name, status, merged) for cid, name, status, merged in
                con.execute("SELECT id, name, status, merged_into FROM concepts")}

    def final(cid, seen=()):  # a merged concept counts as the one it was merged into; a removed one not at all
        row = concepts.get(cid)
        if row is None or row[1] == "removed":
            return None
        if row[1] == "merged" and row[2] and cid not in seen:
            return final(row[2], (*seen, cid))
        return cid

    queries = {qid: (cid, country) for qid, cid, country in con.execute("SELECT id, concept_id, country FROM queries")}
    countries = sorted({country for _, country in queries.values()})
    triples = set()
    for qid, cand_sha in con.execute("SELECT sr.query_id, c.sha256 FROM search_results sr "
                                     "JOIN candidates c ON c.id = sr.candidate_id"):
        if cand_sha in index and qid in queries and final(queries[qid][0]) is not None:
            triples.add((index[cand_sha], final(queries[qid][0]), countries.index(queries[qid][1])))
    triples = sorted(triples)
    unreadable = {index[s] for (s,) in con.execute(
        "SELECT sha256 FROM image_flags WHERE flag = 'unreadable' AND status = 'open'") if s in index}
    con.close()
    return {
        "sha": sha,
        "pixels": np.array([int(r[1] * r[2]) for r in rows], dtype=np.int64),
        "nbytes": np.array([int(r[3]) for r in rows], dtype=np.int64),
        "phash": np.array([int(r[4], 16) if r[4] else 0 for r in rows], dtype=np.uint64),
        "dhash": np.array([int(r[5], 16) if r[5] else 0 for r in rows], dtype=np.uint64),
        "has_phash": np.array([bool(r[4]) for r in rows], dtype=bool),
        "has_dhash": np.array([bool(r[5]) for r in rows], dtype=bool),
        "phash_centre": np.array([int(r[6], 16) if r[6] else 0 for r in rows], dtype=np.uint64),
        "has_phash_centre": np.array([bool(r[6]) for r in rows], dtype=bool),
        "phash_variants": np.array([hex_words(r[7], 16 * N_VARIANTS) for r in rows],
                                   dtype=np.uint64).reshape(-1, N_VARIANTS),
        "has_phash_variants": np.array([bool(r[7]) and len(r[7]) == 16 * N_VARIANTS for r in rows], dtype=bool),
        "fine": np.array([hex_words(r[8], 32 * N_FINE) for r in rows], dtype=np.uint64).reshape(-1, N_FINE, 2),
        "has_fine": np.array([bool(r[8]) and len(r[8]) == 32 * N_FINE for r in rows], dtype=bool),
        "link_img": np.array([t[0] for t in triples], dtype=np.int64),
        "link_concept": np.array([t[1] for t in triples], dtype=np.int64),
        "link_country": np.array([t[2] for t in triples], dtype=np.int64),
        "countries": countries,
        "concept_names": {cid: v[0] for cid, v in concepts.items()},
        "unreadable": unreadable,
    }


def assert_equal_inventories(inv, plain: dict) -> None:
    for name, want in plain.items():
        got = getattr(inv, name)
        if isinstance(want, np.ndarray):
            assert isinstance(got, np.ndarray) and got.dtype == want.dtype, (name, got)
            assert got.shape == want.shape and np.array_equal(got, want), name
        else:
            assert type(got) is type(want) and got == want, name


# ------------------------------------------------------------------------------ projects
def hex_of(rng: random.Random, chars: int) -> str:
    return "".join(f"{rng.getrandbits(64):016x}" for _ in range(chars // 16))


class Rows:
    """Writes images, concepts, queries, candidates, search results and flags as the project's tables hold
    them, with any value the schema accepts (not only what the pipeline writes)."""

    def __init__(self, project):
        self.db = project.db
        self.rank = 0

    def concept(self, name, status="active", merged_into=None) -> int:
        return self.db["concepts"].insert({"name": name, "source": "manual", "status": status,
                                           "merged_into": merged_into, "created_at": now()}).last_pk

    def query(self, concept_id, country, text=None) -> int:
        return self.db["queries"].insert({"concept_id": concept_id, "country": country, "language": "en",
                                          "kind": "english", "text": text or f"{concept_id} {country}",
                                          "created_at": now()}).last_pk

    def image(self, sha, *, width=640, height=480, nbytes=1000, status="ok", rowid=None, **hashes) -> None:
        row = {"sha256": sha, "path": f"blobs/{sha}.jpg", "format": "jpeg", "width": width, "height": height,
               "bytes": nbytes, "status": status, "created_at": now(), **hashes}
        if rowid is not None:
            row["rowid"] = rowid
        cols = ", ".join(row)
        self.db.execute(f"INSERT INTO images ({cols}) VALUES ({', '.join('?' * len(row))})", list(row.values()))

    def link(self, query_id, sha) -> None:
        self.rank += 1
        url = f"http://img.test/{self.rank}"
        cand = self.db["candidates"].insert({"url": url, "status": "downloaded" if sha else "pending",
                                             "sha256": sha}).last_pk
        self.db["search_results"].insert({"query_id": query_id, "provider": "test", "rank": self.rank,
                                          "candidate_id": cand, "url": url, "found_at": now()})

    def flag(self, sha, status="open", flag="unreadable") -> None:
        self.db["image_flags"].insert({"sha256": sha, "flag": flag, "status": status, "created_at": now()},
                                      replace=True)


def full_hashes(rng) -> dict:
    return {"phash": hex_of(rng, 16), "dhash": hex_of(rng, 16), "phash_centre": hex_of(rng, 16),
            "phash_variants": hex_of(rng, 16 * N_VARIANTS), "phash_fine": hex_of(rng, 32 * N_FINE)}


@pytest.fixture
def project(tmp_path):
    p = init_project(tmp_path / "p", countries=["US", "JP", "DE"])
    yield p
    p.close()


@pytest.fixture(params=[3, 64, 131_072], ids=lambda n: f"ranges_of_{n}")
def ranges_of(request, monkeypatch):
    """Small ranges put clean and odd rows in ranges of their own and odd ones beside clean ones."""
    monkeypatch.setattr(dedup_inventory_rows, "ROWS_CHUNK", request.param)
    return request.param


def odd_project(project) -> None:
    """Every odd case a project's tables allow, between clean rows."""
    rng = random.Random(7)
    w = Rows(project)
    with transaction(project.db):
        bread, old_bread, older_bread = w.concept("bread"), w.concept("old bread"), w.concept("older bread")
        gone, into_gone, temple = w.concept("gone", "removed"), w.concept("into gone"), w.concept("temple")
        w.db.execute("UPDATE concepts SET status = 'merged', merged_into = ? WHERE id = ?", [bread, old_bread])
        w.db.execute("UPDATE concepts SET status = 'merged', merged_into = ? WHERE id = ?", [old_bread, older_bread])
        w.db.execute("UPDATE concepts SET status = 'merged', merged_into = ? WHERE id = ?", [gone, into_gone])
        q = {(c, k): w.query(c, k) for c in (bread, old_bread, older_bread, gone, into_gone, temple)
             for k in ("US", "JP")}
        w.query(temple, "DE")  # a country no image was found for is still one of the countries
        clean = [hex_of(rng, 64) for _ in range(12)]
        for s in clean[:4]:
            w.image(s, **full_hashes(rng))
        odd = {  # sha -> hashes: each kind of missing or stale hash
            "null phash": {**full_hashes(rng), "phash": None},
            "empty phash": {**full_hashes(rng), "phash": ""},
            "empty dhash": {**full_hashes(rng), "dhash": ""},
            "no centre": {**full_hashes(rng), "phash_centre": None},
            "no variants": {**full_hashes(rng), "phash_variants": None},
            "variants of an older version": {**full_hashes(rng), "phash_variants": hex_of(rng, 32)},
            "no fine hashes": {**full_hashes(rng), "phash_fine": ""},
            "fine hashes of an older version": {**full_hashes(rng), "phash_fine": hex_of(rng, 64)},
            "never hashed": {},
            "all zero": {k: "0" * len(v) for k, v in full_hashes(rng).items()},
        }
        shas = {name: hex_of(rng, 64) for name in odd}
        for name, hashes in odd.items():
            w.image(shas[name], **hashes)
        w.image(clean[4], status="excluded", **full_hashes(rng))
        w.image(clean[5], width=641, height=3, nbytes=2**40, **full_hashes(rng))
        w.image(clean[6], width=640.5, height=2, **full_hashes(rng))  # a REAL the INTEGER column kept
        for s in clean[7:10]:
            w.image(s, **full_hashes(rng))
        w.db.execute("DELETE FROM images WHERE sha256 = ?", [clean[8]])  # a gap in the rowids
        w.image(clean[10], rowid=10**12, **full_hashes(rng))  # far past the others: empty ranges between
        w.image(clean[11], status="excluded", rowid=10**12 + 5, **full_hashes(rng))
        for i, s in enumerate(clean[:4] + list(shas.values()) + clean[5:]):
            if i % 5 != 4:  # every fifth image has no link
                w.link(q[(bread, "US")], s)
            if i % 3 == 0:
                w.link(q[(older_bread, "JP")], s)  # merged twice: counts as bread
                w.link(q[(bread, "JP")], s)         # the same (concept, country) again
                w.link(q[(into_gone, "US")], s)     # merged into a removed concept: no link
        w.link(q[(temple, "US")], clean[0].upper())    # not the image: another string
        w.link(q[(temple, "US")], hex_of(rng, 64))     # a downloaded file that is no image row
        w.link(q[(temple, "US")], "f" * 32 + clean[3][32:])  # ends as an image's sha256 does
        w.link(q[(temple, "US")], None)                 # pending
        w.link(q[(temple, "JP")], clean[4])             # an excluded image
        w.flag(clean[1])
        w.flag(shas["never hashed"], status="resolved")
        w.flag(clean[4])                                # open, but the image is excluded
        w.flag(clean[2], flag="culture_conflict")


def test_a_project_with_every_odd_case_reads_as_the_plain_reading(project, ranges_of):
    odd_project(project)
    assert_equal_inventories(load_inventory(project), plain_inventory(project.db_path))


@pytest.mark.parametrize("names", [
    ["A" * 64, "a" * 64, "0" * 52 + "with a space", "0" * 64, "F" * 63 + "f"],
    ["short", "é" * 64, "a" * 64, "a" * 65],
], ids=["64 characters", "other lengths and letters"])
def test_names_that_are_not_hex_hashes_read_as_the_plain_reading(project, ranges_of, names):
    """Image keys that are not 64 lowercase hex characters: a link finds the image of the same string only
    (never one that reads as the same hex, or that ends the same)."""
    rng = random.Random(3)
    w = Rows(project)
    with transaction(project.db):
        q = w.query(w.concept("bread"), "US")
        for s in names:
            w.image(s, **full_hashes(rng))
            w.link(q, s)
        for s in ("a" * 63 + "A", "f" * 64, "b" * 32 + "a" * 32, "é" * 64, names[1].upper(), names[1].lower()):
            w.link(q, s)
        w.flag(names[2])
    assert_equal_inventories(load_inventory(project), plain_inventory(project.db_path))


def test_a_name_with_a_space_where_a_separator_would_fall_is_not_another_name(project, ranges_of):
    """Image names of 65 and 63 characters, the first ending in a space: joined they look like two names of
    64; a link to the first 64 characters finds no image, as in the plain reading."""
    rng = random.Random(4)
    w = Rows(project)
    with transaction(project.db):
        q = w.query(w.concept("bread"), "US")
        for s in ("e" * 64 + " ", "b" * 63, "c" * 64):
            w.image(s, **full_hashes(rng))
        for s in ("e" * 64, "c" * 64):
            w.link(q, s)
    inv = load_inventory(project)
    assert_equal_inventories(inv, plain_inventory(project.db_path))
    assert [inv.sha[i] for i in inv.link_img] == ["c" * 64]


def test_names_with_the_same_last_half_each_keep_their_links(project, ranges_of):
    """Links are looked up sorted on a mix of a name's last 32 characters: two images that share them are
    still told apart (by all 64)."""
    rng = random.Random(6)
    w = Rows(project)
    names = ["b" * 32 + "c" * 32, "d" * 32 + "c" * 32, "a" * 64]
    with transaction(project.db):
        q = w.query(w.concept("bread"), "US")
        for s in names:
            w.image(s, **full_hashes(rng))
            w.link(q, s)
    inv = load_inventory(project)
    assert_equal_inventories(inv, plain_inventory(project.db_path))
    assert sorted(inv.sha[i] for i in inv.link_img) == sorted(names)


def test_wrong_lengths_that_add_up_to_right_ones_read_as_missing(project, ranges_of):
    """A hash too short beside one too long: together as long as two right ones, each still missing."""
    rng = random.Random(5)
    w = Rows(project)
    with transaction(project.db):
        for k in range(8):
            hashes = full_hashes(rng)
            if k in (3, 4):
                hashes["phash_variants"] = hex_of(rng, 16 * N_VARIANTS + (16 if k == 3 else -16))
            if k in (5, 6):
                hashes["phash_fine"] = hex_of(rng, 32 * N_FINE + (32 if k == 6 else -32))
            w.image(hex_of(rng, 64), **hashes)
    inv = load_inventory(project)
    assert inv.has_phash_variants.tolist() == [True] * 3 + [False] * 2 + [True] * 3
    assert inv.has_fine.tolist() == [True] * 5 + [False] * 2 + [True]
    assert_equal_inventories(inv, plain_inventory(project.db_path))


def test_an_empty_project_reads_as_empty(project):
    inv = load_inventory(project)
    assert_equal_inventories(inv, plain_inventory(project.db_path))
    assert inv.n == 0 and len(inv.link_img) == 0


@pytest.mark.parametrize("seed", range(6))
def test_random_projects_read_as_the_plain_reading(project, monkeypatch, seed):
    rng = random.Random(seed)
    monkeypatch.setattr(dedup_inventory_rows, "ROWS_CHUNK", rng.choice([1, 5, 50, 131_072]))
    w = Rows(project)
    with transaction(project.db):
        concepts = [w.concept(f"c{k}") for k in range(rng.randint(1, 6))]
        for cid in concepts[1:]:
            kind = rng.random()
            if kind < 0.25:
                w.db.execute("UPDATE concepts SET status = 'removed' WHERE id = ?", [cid])
            elif kind < 0.5:
                w.db.execute("UPDATE concepts SET status = 'merged', merged_into = ? WHERE id = ?",
                             [rng.choice(concepts), cid])
        queries = [w.query(c, k) for c in concepts for k in rng.sample(["US", "JP", "DE"], rng.randint(1, 3))]
        sha, deleted = [], set()
        for i in range(rng.randint(0, 300)):
            s = hex_of(rng, 64) if rng.random() < 0.97 else rng.choice(["x", "Y" * 64, "a b"]) + str(i)
            hashes = {k: v if rng.random() < 0.9 else rng.choice([None, "", v[:len(v) // 2]])
                      for k, v in full_hashes(rng).items() if rng.random() < 0.95}
            # pHash, dHash and centre are 16 characters or missing (nothing ever wrote another length)
            hashes = {k: v if k in ("phash_variants", "phash_fine") or not v else v.ljust(16, "0")
                      for k, v in hashes.items()}
            w.image(s, width=rng.randint(1, 5000), height=rng.randint(1, 5000), nbytes=rng.randint(0, 2**35),
                    status="ok" if rng.random() < 0.9 else "excluded", **hashes)
            sha.append(s)
            if rng.random() < 0.05:
                w.db.execute("DELETE FROM images WHERE sha256 = ?", [s])
                deleted.add(s)
        for _ in range(rng.randint(0, 500)):
            target = rng.choice(sha) if sha and rng.random() < 0.9 else rng.choice([None, hex_of(rng, 64)])
            w.link(rng.choice(queries), target)
        kept = [s for s in sha if s not in deleted]
        for s in rng.sample(kept, min(len(kept), rng.randint(0, 10))):
            w.flag(s, status=rng.choice(["open", "resolved"]))
    assert_equal_inventories(load_inventory(project), plain_inventory(project.db_path))


@pytest.mark.parametrize("missing", [False, True], ids=["every hash stored", "some never hashed in each range"])
def test_a_project_as_the_pipeline_writes_it_is_read_without_a_row_by_row_query(project, monkeypatch, missing):
    """Each rowid range costs its one aggregate query, none falls back to the plain reading (which is what
    makes the reading fast at a million images), also where some images have no hash at all (an unreadable
    image is never hashed) or only the hashes of an older version (no variants, no fine hashes)."""
    monkeypatch.setattr(dedup_inventory_rows, "ROWS_CHUNK", 16)
    rng = random.Random(1)
    w = Rows(project)
    with transaction(project.db):
        q = w.query(w.concept("bread"), "US")
        for k in range(100):
            s = hex_of(rng, 64)
            hashes = full_hashes(rng)
            if missing and k % 7 == 3:
                hashes = {} if k % 2 else {**hashes, "phash_variants": None, "phash_fine": "", "phash_centre": ""}
            w.image(s, **hashes)
            w.link(q, s)
    statements = []
    project.db.conn.set_trace_callback(statements.append)
    try:
        inv = load_inventory(project)
    finally:
        project.db.conn.set_trace_callback(None)
    assert inv.n == 100 and len(inv.link_img) == 100
    per_row = [s for s in statements if "group_concat" not in s and ("FROM images" in s or "search_results" in s)
               and "min(rowid)" not in s]
    assert per_row == [] and sum("group_concat" in s for s in statements) == 7 + 7
    assert_equal_inventories(inv, plain_inventory(project.db_path))
    assert (not inv.has_phash.all()) == missing


def test_real_photographs_hashed_by_dedup_read_as_the_plain_reading(tmp_path):
    """Through the front door: real photographs stored, linked and de-duplicated (which stores their hashes),
    then the inventory the next dedup reads."""
    pictures = list(photos().values())[:6]
    with cultura.init(tmp_path / "p", countries=["US", "JP"]) as p:
        w = Rows(p)
        with transaction(p.db):
            q = [w.query(c, k) for c in (w.concept("bread"), w.concept("temple")) for k in ("US", "JP")]
            for i, im in enumerate(pictures):
                data = encode(im.resize((im.width // 4, im.height // 4)))
                sha, rel = store_blob(p, data, "jpeg")
                w.db["images"].insert({"sha256": sha, "path": rel, "format": "jpeg", "width": im.width // 4,
                                       "height": im.height // 4, "bytes": len(data), "created_at": now()})
                w.link(q[i % 4], sha)
        p.images.dedup("phash")
        inv = load_inventory(p)
        assert inv.n == len(pictures) and inv.has_fine.all() and inv.has_phash_variants.all()
        assert_equal_inventories(inv, plain_inventory(p.db_path))
