"""What de-duplication works on: the images under consideration as arrays (:class:`Inventory`, read by
:func:`load_inventory` in one snapshot, streamed, with their (concept, country) links), the hashes an image
still lacks computed and stored (:func:`ensure_hashes`), and the change counter that tells dedup whether
anything it reads or writes changed since a call (:class:`Writes`). :mod:`cultura.curate.dedup` finds the
pairs and writes the clusters from here."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..db import chunks, dumps, now, transaction
from ..progress import Progress
from ..progress import task as progress_task
from . import confirm, hashing
from .dedup_inventory_rows import HEX_COLUMNS, Positions, hex_array, read_images, read_links
from .images import RESOLVE_OPEN_FLAG, UNDECODED, UNREADABLE, image_paths, open_flagged, resolution
from . import executor as executors

if TYPE_CHECKING:
    from ..project import Project

HASH_CHUNK = 1024  # images hashed and written per step (an interrupted run keeps what it finished)
COUNTER = "dedup"  # change_counters row bumped by triggers on every input and output table (db/schema.py)


@dataclass
class Inventory:
    """The images under consideration (status ``ok``), in ``images`` rowid order, as arrays.

    ``phash`` / ``dhash`` are uint64 (0 where ``has_phash`` / ``has_dhash`` is False). Links — the
    (concept, country) pairs an image was found for, merged concepts counted as the one they were merged
    into, removed concepts left out — are three parallel arrays sorted by image: ``link_img``,
    ``link_concept`` and ``link_country`` (an index into ``countries``), each triple once.
    """

    sha: list[str]
    pixels: np.ndarray
    nbytes: np.ndarray
    phash: np.ndarray
    dhash: np.ndarray
    has_phash: np.ndarray
    has_dhash: np.ndarray
    link_img: np.ndarray
    link_concept: np.ndarray
    link_country: np.ndarray
    countries: list[str]
    concept_names: dict[int, str]
    unreadable: set[int] = field(default_factory=set)
    phash_centre: np.ndarray | None = None      # uint64 centre pHash (hashing.CENTRE_CROP), 0 where missing
    has_phash_centre: np.ndarray | None = None
    phash_variants: np.ndarray | None = None    # (n, len(hashing.VARIANTS)): mirror, 10 % centre, flip pHash
    has_phash_variants: np.ndarray | None = None
    fine: np.ndarray | None = None              # (n, 3, 2) uint64 fine hashes (confirm.py), 0 where missing
    has_fine: np.ndarray | None = None

    def __post_init__(self):
        if self.phash_centre is None:
            self.phash_centre = np.zeros(self.n, dtype=np.uint64)
        if self.has_phash_centre is None:
            self.has_phash_centre = np.zeros(self.n, dtype=bool)
        if self.phash_variants is None:
            self.phash_variants = np.zeros((self.n, len(hashing.VARIANTS)), dtype=np.uint64)
        if self.has_phash_variants is None:
            self.has_phash_variants = np.zeros(self.n, dtype=bool)
        if self.fine is None:
            self.fine = np.zeros((self.n, len(confirm.FINE_VIEWS), 2), dtype=np.uint64)
        if self.has_fine is None:
            self.has_fine = np.zeros(self.n, dtype=bool)

    def phash_views(self) -> np.ndarray:
        """``(n, 5)`` uint64 pHash views (full, 5 % centre, mirror, 10 % centre, flip; 0 where missing), the
        columns :func:`hashing.pair_views` compares."""
        centre = np.where(self.has_phash_centre, self.phash_centre, np.uint64(0))
        variants = np.where(self.has_phash_variants[:, None], self.phash_variants, np.uint64(0))
        return np.column_stack([self.phash, centre, variants]).astype(np.uint64)

    @classmethod
    def from_lists(cls, sha, pixels, nbytes, *, phash=None, dhash=None, links=None, concept_names=None,
                   unreadable=None, phash_centre=None, phash_variants=None, phash_fine=None) -> "Inventory":
        """An inventory from Python lists (hex hashes or None, one set of (concept, country) per image)."""
        n = len(sha)
        phash = phash if phash is not None else [None] * n
        dhash = dhash if dhash is not None else [None] * n
        phash_centre = phash_centre if phash_centre is not None else [None] * n
        phash_variants = phash_variants if phash_variants is not None else [None] * n
        phash_fine = phash_fine if phash_fine is not None else [None] * n
        links = links if links is not None else [set()] * n
        countries = sorted({k for s in links for _, k in s})
        triples = sorted((i, c, countries.index(k)) for i, s in enumerate(links) for c, k in s)
        cols = np.array(triples, dtype=np.int64).reshape(-1, 3)
        return cls(sha=list(sha), pixels=np.asarray(pixels, dtype=np.int64),
                   nbytes=np.asarray(nbytes, dtype=np.int64),
                   phash=hex_array(phash), dhash=hex_array(dhash),
                   has_phash=np.array([bool(v) for v in phash], dtype=bool),
                   has_dhash=np.array([bool(v) for v in dhash], dtype=bool),
                   link_img=cols[:, 0], link_concept=cols[:, 1], link_country=cols[:, 2],
                   countries=countries, concept_names=dict(concept_names or {}), unreadable=set(unreadable or ()),
                   phash_centre=hex_array(phash_centre),
                   has_phash_centre=np.array([bool(v) for v in phash_centre], dtype=bool),
                   phash_variants=hashing.variants_from_hex(phash_variants),
                   has_phash_variants=np.array([bool(v) for v in phash_variants], dtype=bool),
                   fine=confirm.from_hex(phash_fine), has_fine=np.array([bool(v) for v in phash_fine], dtype=bool))

    @property
    def n(self) -> int:
        return len(self.sha)

    def hashes(self, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """(indexes of images that have a ``kind`` hash, their uint64 hashes)."""
        has, h = (self.has_phash, self.phash) if kind == "phash" else (self.has_dhash, self.dhash)
        idx = np.flatnonzero(has)
        return idx, h[idx]

    def _bounds(self) -> np.ndarray:
        """``link_img`` offsets: image ``i``'s links are ``[b[i], b[i + 1])`` (cached)."""
        key = (len(self.link_img), self.n)
        if getattr(self, "_bounds_cache", (None,))[0] != key:
            self._bounds_cache = (key, np.searchsorted(self.link_img, np.arange(self.n + 1)))
        return self._bounds_cache[1]

    def links_of(self, members) -> list[tuple[int, str]]:
        """Sorted distinct (concept_id, country) pairs of one image or of several."""
        b = self._bounds()
        out = set()
        for i in np.atleast_1d(members).tolist():
            for k in range(b[i], b[i + 1]):
                out.add((int(self.link_concept[k]), self.countries[self.link_country[k]]))
        return sorted(out)


@contextlib.contextmanager
def read_snapshot(db):
    """One read transaction: every SELECT inside sees the same state of the database (WAL snapshot)."""
    conn = db.conn
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


def _final_concepts(db) -> tuple[dict[int, str], dict[int, int | None]]:
    """Concept names, and each concept's final id (merged -> the one it was merged into; removed -> None)."""
    concepts = {cid: (name, status, merged) for cid, name, status, merged in
                db.execute("SELECT id, name, status, merged_into FROM concepts").fetchall()}

    def final(cid):
        seen = set()
        while cid in concepts and concepts[cid][1] == "merged" and concepts[cid][2] and cid not in seen:
            seen.add(cid)
            cid = concepts[cid][2]
        return None if cid not in concepts or concepts[cid][1] == "removed" else cid

    return {cid: v[0] for cid, v in concepts.items()}, {cid: final(cid) for cid in concepts}


def load_inventory(project: Project) -> Inventory:
    """Read ``images`` (status ok), their (concept, country) links and open ``unreadable`` flags.

    Reads rowid range by rowid range, each column of a range as one string SQLite joins
    (:func:`~cultura.curate.dedup_inventory_rows.read_images`: no per-image Python objects but the sha256 strings), with sequential scans only:
    the links are joined in memory (search result -> candidate sha256 -> image, :class:`~cultura.curate.dedup_inventory_rows.Positions`) and the
    (concept, country) of a query and the de-duplication of links are done with numpy.
    """
    db = project.db
    with read_snapshot(db):
        sha, keys, cols = read_images(db)
        (has_ph, ph_a), (has_dh, dh_a), (has_pc, pc_a), (has_pv, pv_a), (has_fine, fine_a) = (
            cols[name] for name, *_ in HEX_COLUMNS)

        names, final = _final_concepts(db)
        queries = db.execute("SELECT id, concept_id, country FROM queries").fetchall()
        countries = sorted({q[2] for q in queries})
        max_q = max((q[0] for q in queries), default=0)
        q_concept = np.full(max_q + 1, -1, dtype=np.int64)
        q_country = np.zeros(max_q + 1, dtype=np.int64)
        country_index = {k: i for i, k in enumerate(countries)}
        for qid, cid, country in queries:
            c = final.get(cid)
            q_concept[qid] = -1 if c is None else c
            q_country[qid] = country_index[country]
        # a join on images' TEXT sha256 key in SQL costs one random index lookup per row: 4x slower at 1M
        positions = Positions(sha, keys)
        del keys
        img, q = read_links(db, positions)
        flagged = open_flagged(db, UNREADABLE)
        unreadable = set(positions.of_list(flagged).tolist()) - {-1}
        del positions
        ok = (img >= 0) & (q >= 0) & (q <= max_q)
        img, q = img[ok], q[ok]
        concept = q_concept[q]
        keep = concept >= 0
        img, concept, country = img[keep], concept[keep], q_country[q][keep]
        n_c, n_k = int(concept.max()) + 1 if len(concept) else 1, max(len(countries), 1)
        key = np.unique((img * n_c + concept) * n_k + country)
    return Inventory(sha=sha, pixels=cols["pixels"], nbytes=cols["bytes"], phash=ph_a, dhash=dh_a,
                     has_phash=has_ph, has_dhash=has_dh, link_img=key // (n_c * n_k),
                     link_concept=key // n_k % n_c, link_country=key % n_k, countries=countries,
                     concept_names=names, unreadable=unreadable, phash_centre=pc_a, has_phash_centre=has_pc,
                     phash_variants=pv_a, has_phash_variants=has_pv, fine=fine_a, has_fine=has_fine)


class Writes:
    """Tracks the dedup change counter across this call's own write transactions.

    Each write runs in :func:`cultura.db.transaction`; inside it the counter is compared with the value the
    previous step left (a difference means another writer changed an input or an output meanwhile), and the
    value after the write becomes the expected one. A call whose chain is unbroken may record a fingerprint.
    """

    def __init__(self, db, start: int | None):
        self.db, self.expected, self.foreign = db, start, start is None

    @contextlib.contextmanager
    def __call__(self):
        with transaction(self.db):
            if read_counter(self.db) != self.expected:
                self.foreign = True
            yield self.db
            self.expected = read_counter(self.db)


def bump_counter(db) -> None:
    """Count one change for dedup's own bulk inserts (clusters, culture_conflict flags), which no row trigger
    counts; every other write to a watched table is counted by its trigger."""
    db.execute("UPDATE change_counters SET value = value + 1 WHERE name = ?", [COUNTER])


def read_counter(db) -> int | None:
    try:
        row = db.execute("SELECT value FROM change_counters WHERE name = ?", [COUNTER]).fetchone()
    except Exception:  # noqa: BLE001 - a database without the counter table: never skip
        return None
    return None if row is None else int(row[0])


def decode_waiting(db) -> bool:
    """Whether an image waits for the decode :func:`ensure_hashes` gives: stored after a header check (an open
    ``undecoded`` flag) or sent back by a person (a resolved ``unreadable`` flag), and still without hashes."""
    return db.execute(
        "SELECT 1 FROM image_flags f JOIN images i ON i.sha256 = f.sha256 WHERE i.phash IS NULL AND i.status = 'ok' "
        "AND ((f.flag = ? AND f.status = 'open') OR (f.flag = ? AND f.status = 'resolved')) LIMIT 1",
        [UNDECODED, UNREADABLE]).fetchone() is not None


def ensure_hashes(project: Project, inv: Inventory, *, progress: Progress = None, writes: Writes | None = None,
                  executor: str = "local") -> dict:
    """Compute and store the hashes of the images that lack any of them (pHash, dHash, centre pHash, pHash
    variants: an image hashed before a hash was added is hashed again, all its hashes from one decode, so
    an upgrade re-hashes step by step and an interrupted run resumes) and their displayed width and height;
    an unreadable blob gets an ``unreadable`` flag (skipped by later runs until that flag is resolved). The
    ``undecoded`` flag of an image stored after a header check only (``download.check = "header"``) is
    resolved in the same transaction, whichever way its decode went. Returns counts.

    ``executor``: ``local`` (this process) or ``ray`` (:mod:`cultura.curate.executor`; same hashes)."""
    missing = ~(inv.has_phash & inv.has_dhash & inv.has_phash_centre & inv.has_phash_variants & inv.has_fine)
    if inv.unreadable:
        missing[list(inv.unreadable)] = False
    todo = np.flatnonzero(missing).tolist()
    done = failed = 0
    if not todo:
        return {"hashes_computed": 0, "hash_failures": 0}
    db = project.db
    writes = writes or Writes(db, read_counter(db))
    bar = progress_task("hashing images", len(todo), progress=progress)
    step = HASH_CHUNK if executor == "local" else HASH_CHUNK * 64  # a Ray job per 64k images
    try:
        for part in chunks(todo, step):
            shas = [inv.sha[i] for i in part]
            paths = image_paths(db, shas)
            res = executors.hash_paths([project.blob_path(paths[s]) for s in shas], executor=executor)
            ph, dh, pc = hashing.to_hex(res.phash), hashing.to_hex(res.dhash), hashing.to_hex(res.phash_centre)
            pv = hashing.variants_to_hex(res.phash_variants)
            fine = confirm.to_hex(res.fine)
            size = res.sizes.tolist()
            ts = now()
            with writes():
                # the size too: a row written before sizes were the displayed ones gets its displayed size
                ok = [(ph[k], dh[k], pc[k], pv[k], fine[k], *size[k], inv.sha[i]) for k, i in enumerate(part)
                      if k not in res.errors]
                db.conn.executemany("UPDATE images SET phash = ?, dhash = ?, phash_centre = ?, phash_variants = ?, "
                                    "phash_fine = ?, width = ?, height = ? WHERE sha256 = ?", ok)
                db.conn.executemany(
                    "INSERT INTO image_flags (sha256, flag, status, details, created_at) VALUES (?, ?, 'open', ?, ?) "
                    "ON CONFLICT (sha256, flag) DO UPDATE SET status = excluded.status, details = excluded.details, "
                    "created_at = excluded.created_at",
                    [(inv.sha[part[k]], UNREADABLE, dumps({"stage": "dedup", "error": err}), ts)
                     for k, err in res.errors.items()])
                db.conn.executemany(RESOLVE_OPEN_FLAG, [
                    (resolution("dedup", "decoded" if k not in res.errors else UNREADABLE, ts), inv.sha[i], UNDECODED)
                    for k, i in enumerate(part)])
            for k, i in enumerate(part):
                if k in res.errors:
                    inv.unreadable.add(i)
                else:
                    inv.phash[i], inv.dhash[i], inv.phash_centre[i] = res.phash[k], res.dhash[k], res.phash_centre[k]
                    inv.phash_variants[i], inv.fine[i] = res.phash_variants[k], res.fine[k]
                    inv.pixels[i] = size[k][0] * size[k][1]
                    inv.has_phash[i] = inv.has_dhash[i] = inv.has_phash_centre[i] = True
                    inv.has_phash_variants[i] = inv.has_fine[i] = True
            done += len(part) - len(res.errors)
            failed += len(res.errors)
            bar.advance(len(part))
    finally:
        bar.close()
    return {"hashes_computed": done, "hash_failures": failed}
