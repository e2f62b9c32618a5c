"""What de-duplication works on: the images under consideration as arrays (:class:`Inventory`, read by
:func:`load_inventory` in one snapshot, streamed, with their (concept, country) links), the hashes an image
still lacks computed and stored (:func:`ensure_hashes`), and the change counter that tells dedup whether
anything it reads or writes changed since a call (:class:`Writes`). :mod:`cultura.curate.dedup` finds the
pairs and writes the clusters from here."""
from __future__ import annotations

import contextlib
import itertools
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..db import chunks, dumps, now, transaction
from ..progress import Progress
from ..progress import task as progress_task
from . import confirm, hashing
from .images import image_paths
from . import executor as executors

if TYPE_CHECKING:
    from ..project import Project

UNREADABLE = "unreadable"
HASH_CHUNK = 1024  # images hashed and written per step (an interrupted run keeps what it finished)
ROWS_CHUNK = 131_072  # rowids read per query while loading the inventory (a few MB of text a column)
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
                   phash=_hex_array(phash), dhash=_hex_array(dhash),
                   has_phash=np.array([bool(v) for v in phash], dtype=bool),
                   has_dhash=np.array([bool(v) for v in dhash], dtype=bool),
                   link_img=cols[:, 0], link_concept=cols[:, 1], link_country=cols[:, 2],
                   countries=countries, concept_names=dict(concept_names or {}), unreadable=set(unreadable or ()),
                   phash_centre=_hex_array(phash_centre),
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


def _hex_array(values) -> np.ndarray:
    """16-hex strings (None / '' for missing) -> uint64 array with 0 where missing; vectorised."""
    filled = [v if v else "0" * 16 for v in values]
    if not filled:
        return np.zeros(0, dtype=np.uint64)
    return np.frombuffer(bytes.fromhex("".join(filled)), dtype=">u8").astype(np.uint64)


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
    (:func:`_read_images`: no per-image Python objects but the sha256 strings), with sequential scans only:
    the links are joined in memory (search result -> candidate sha256 -> image, :class:`_Positions`) and the
    (concept, country) of a query and the de-duplication of links are done with numpy.
    """
    db = project.db
    with read_snapshot(db):
        sha, keys, cols = _read_images(db)
        (has_ph, ph_a), (has_dh, dh_a), (has_pc, pc_a), (has_pv, pv_a), (has_fine, fine_a) = (
            cols[name] for name, *_ in _HEX_COLUMNS)

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
        positions = _Positions(sha, keys)
        del keys
        img, q = _read_links(db, positions)
        flagged = [s for (s,) in db.execute("SELECT sha256 FROM image_flags WHERE flag = ? AND status = 'open'",
                                            [UNREADABLE])]
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


# ------------------------------------------------------------------------------------ reading in ranges
# Each rowid range is read by one query whose every column is one aggregate: group_concat joins a column's
# values with spaces, so 1M rows cost a few C-level parses instead of 11M Python objects. All aggregates of
# one query see the rows in the same order, and ``NOT INDEXED`` makes that order the table's: rowid order.
# A range whose string is not exactly what the fast parse expects (a NULL that group_concat skipped, a
# missing or odd-length hash, a value with a space) has that column read again row by row, the plain way.
# Exact for whatever the tables hold but one thing no writer stores: a NULL beside a value twice as long
# with a space where the separator would fall. pHash, dHash and centre are read as the plain reading joins
# them (16 characters each, or missing).

# name, characters, per-image shape of its uint64 values, the plain parse of a list of its strings
_HEX_COLUMNS = (("phash", 16, (), _hex_array), ("dhash", 16, (), _hex_array),
                ("phash_centre", 16, (), _hex_array),
                ("phash_variants", 16 * len(hashing.VARIANTS), (len(hashing.VARIANTS),), hashing.variants_from_hex),
                ("phash_fine", 32 * len(confirm.FINE_VIEWS), (len(confirm.FINE_VIEWS), 2), confirm.from_hex))
_RANGE = "rowid >= ? AND rowid < ?"


def _fixed_width(text: str | None, n: int, width: int) -> bool:
    """Whether ``text`` is ``n`` values of ``width`` characters joined by spaces (a space inside a value is
    left to the caller: it shows as more values, or as fewer bytes of hex)."""
    return (text is not None and len(text) == n * (width + 1) - 1
            and text[width::width + 1] == " " * (n - 1))


def _hex_values(text: str | None, n: int, width: int) -> np.ndarray | None:
    """``n`` hex values of ``width`` characters joined by spaces -> ``(n, width // 2)`` uint8, else None."""
    if not _fixed_width(text, n, width):
        return None
    try:
        raw = bytes.fromhex(text)  # skips the spaces between values
    except ValueError:
        return None
    return np.frombuffer(raw, dtype=np.uint8).reshape(n, -1) if len(raw) * 2 == n * width else None


def _fast_ints(text: str | None, n: int) -> np.ndarray | None:
    """Exactly ``n`` space-separated integers -> int64, else None (a REAL, a text, a NULL skipped)."""
    if text is None:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy only warns when it stops at something that is not an integer
        try:
            out = np.fromstring(text, dtype=np.int64, sep=" ")
        except (DeprecationWarning, ValueError):
            return None
    return out if len(out) == n else None


def _fast_hex(width: int, shape: tuple[int, ...]):
    def parse(text: str | None, n: int):
        raw = _hex_values(text, n, width)
        if raw is None:
            return None
        return np.ones(n, dtype=bool), raw.view(">u8").astype(np.uint64).reshape((n, *shape))
    return parse


def _slow_hex(width: int, from_hex):
    """The plain reading of one hash column: None / '' missing, and a hash that has one value per image
    (pHash, dHash, centre) present whatever its length, the others only at their length."""
    if width == 16:
        return lambda vals: (np.array([bool(v) for v in vals], dtype=bool), from_hex(vals))
    return lambda vals: (np.array([bool(v) and len(v) == width for v in vals], dtype=bool), from_hex(vals))


def _ints(vals) -> np.ndarray:
    return np.array(vals, dtype=np.int64)


# name -> (the expression read, its fast parse (joined text, rows) -> values or None, the plain conversion
# of the list of its values)
_IMAGE_COLUMNS = {
    "pixels": ("width * height", _fast_ints, _ints),
    "bytes": ("bytes", _fast_ints, _ints),
    **{name: (name, _fast_hex(width, shape), _slow_hex(width, parse)) for name, width, shape, parse in _HEX_COLUMNS},
}


def _ranges(db, table: str):
    """``(lo, hi)`` rowid ranges of ``ROWS_CHUNK`` covering ``table``'s rows, empty stretches skipped."""
    lo = db.execute(f"SELECT min(rowid) FROM {table}").fetchone()[0]
    while lo is not None:
        yield lo, lo + ROWS_CHUNK
        lo = db.execute(f"SELECT min(rowid) FROM {table} WHERE rowid >= ?", [lo + ROWS_CHUNK]).fetchone()[0]


def _read_images(db) -> tuple[list[str], np.ndarray | None, dict]:
    """``images`` (status ok) in rowid order: the sha256 list, the sha256 as ``(n, 64)`` characters (None
    unless every one is 64 ASCII characters, :func:`_ascii_keys`) and every other column as arrays."""
    fast = ", ".join(f"group_concat({expr}, ' ')" for expr, *_ in _IMAGE_COLUMNS.values())
    sha: list[str] = []
    keys: list[np.ndarray] | None = []
    parts: dict[str, list] = {k: [] for k in _IMAGE_COLUMNS}

    def plain(expr, lo, hi):
        return [v for (v,) in db.execute(f"SELECT {expr} FROM images NOT INDEXED WHERE {_RANGE} "
                                         "AND status = 'ok' ORDER BY rowid", [lo, hi])]

    for lo, hi in _ranges(db, "images"):
        n, sha_text, *texts = db.execute(f"SELECT count(*), group_concat(sha256, ' '), {fast} FROM images "
                                         f"NOT INDEXED WHERE {_RANGE} AND status = 'ok'", [lo, hi]).fetchone()
        if not n:
            continue
        chunk = sha_text.split(" ") if _fixed_width(sha_text, n, 64) else None
        if chunk is None or len(chunk) != n:
            chunk = plain("sha256", lo, hi)
        sha.extend(chunk)
        if keys is not None:
            key = _ascii_keys(sha_text, n)
            keys = None if key is None else [*keys, key]
        del sha_text, chunk
        for (k, (expr, parse, convert)), text in zip(_IMAGE_COLUMNS.items(), texts):
            value = parse(text, n)
            parts[k].append(convert(plain(expr, lo, hi)) if value is None else value)
        del texts
    out = {k: np.concatenate(parts[k]) if parts[k] else np.zeros(0, dtype=np.int64) for k in ("pixels", "bytes")}
    for k, _, shape, _ in _HEX_COLUMNS:
        out[k] = (tuple(np.concatenate(x) for x in zip(*parts[k])) if parts[k] else
                  (np.zeros(0, dtype=bool), np.zeros((0, *shape), dtype=np.uint64)))
    keys = None if keys is None else np.concatenate(keys) if keys else np.zeros((0, 64), dtype=np.uint8)
    return sha, keys, out


def _ascii_keys(text: str | None, n: int) -> np.ndarray | None:
    """``n`` ASCII strings of 64 characters joined by spaces -> ``(n, 64)`` uint8 (their characters), else
    None. Comparing these rows compares the strings: no case or hex reading enters."""
    if n == 0:
        return np.zeros((0, 64), dtype=np.uint8)
    if not _fixed_width(text, n, 64) or not text.isascii():
        return None
    return np.ndarray((n, 64), dtype=np.uint8, buffer=text.encode("ascii"), strides=(65, 1)).copy()


def _tails(keys: np.ndarray) -> np.ndarray:
    """One uint64 per key mixed from its last 32 characters (a sha256's last 128 bits, as hex)."""
    words = keys.view(np.uint64)
    out = words[:, 4].copy()
    for k in (5, 6, 7):
        out *= np.uint64(0x9E3779B97F4A7C15)
        out ^= words[:, k]
    return out


class _Positions:
    """sha256 -> position in the image list, for many at once.

    When every image's sha256 is 64 ASCII characters and their mixed last 32 (:func:`_tails`) tell them
    apart (always, but for made-up names), a looked-up sha256 is found by binary search on that mix and
    confirmed on all 64 characters; otherwise (and for a looked-up text that is not 64-character ASCII
    strings) through a dict of the strings.
    """

    def __init__(self, sha: list[str], keys: np.ndarray | None):
        self.sha, self.keys, self._dict = sha, keys, None
        if keys is not None and len(keys):
            tail = _tails(keys)
            self.order = np.argsort(tail)
            self.sorted = tail[self.order]
            if bool((self.sorted[1:] == self.sorted[:-1]).any()):
                self.keys = None

    def of_text(self, text: str | None, n: int) -> np.ndarray | None:
        """Positions (-1: not an image) of ``n`` sha256 joined by spaces; None where ``text`` is not that."""
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        key = None if self.keys is None or not len(self.keys) else _ascii_keys(text, n)
        if key is None:
            return None
        tail = _tails(key)
        by_tail = np.argsort(tail)  # sorted needles walk the table forward: 5x faster than in random order
        at = np.empty(n, dtype=np.int64)
        at[by_tail] = np.searchsorted(self.sorted, tail[by_tail])
        np.minimum(at, len(self.sorted) - 1, out=at)
        pos = self.order[at]
        found = (self.sorted[at] == tail) & (self.keys[pos] == key).all(axis=1)
        return np.where(found, pos, -1)

    def of_list(self, shas) -> np.ndarray:
        """Positions (-1: not an image) of a list of sha256 (any strings or None)."""
        if all(isinstance(s, str) for s in shas) and (pos := self.of_text(" ".join(shas), len(shas))) is not None:
            return pos
        if self._dict is None:
            self._dict = dict(zip(self.sha, range(len(self.sha))))
        return np.fromiter(map(self._dict.get, shas, itertools.repeat(-1)), dtype=np.int64, count=len(shas))


def _read_links(db, positions: _Positions) -> tuple[np.ndarray, np.ndarray]:
    """(image position or -1, query id) of every search result whose candidate has a sha256."""
    join = ("FROM search_results sr NOT INDEXED CROSS JOIN candidates c ON c.id = sr.candidate_id "
            "WHERE sr.rowid >= ? AND sr.rowid < ? AND c.sha256 IS NOT NULL")
    img_parts, q_parts = [], []
    for lo, hi in _ranges(db, "search_results"):
        n, q_text, sha_text = db.execute(f"SELECT count(*), group_concat(sr.query_id, ' '), "
                                         f"group_concat(c.sha256, ' ') {join}", [lo, hi]).fetchone()
        if not n:
            continue
        qids, pos = _fast_ints(q_text, n), positions.of_text(sha_text, n)
        del q_text, sha_text
        if qids is None or pos is None:
            qids, shas = zip(*db.execute(f"SELECT sr.query_id, c.sha256 {join}", [lo, hi]))
            qids, pos = np.array(qids, dtype=np.int64), positions.of_list(shas)
        q_parts.append(qids)
        img_parts.append(pos)
    cat = (lambda parts: np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64))
    return cat(img_parts), cat(q_parts)


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


def ensure_hashes(project: Project, inv: Inventory, *, progress: Progress = None, writes: Writes | None = None,
                  executor: str = "local") -> dict:
    """Compute and store the hashes of the images that lack any of them (pHash, dHash, centre pHash, pHash
    variants: an image hashed before a hash was added is hashed again, all its hashes from one decode, so
    an upgrade re-hashes step by step and an interrupted run resumes) and their displayed width and height;
    an unreadable blob gets an ``unreadable`` flag (skipped by later runs until that flag is resolved).
    Returns counts.

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
