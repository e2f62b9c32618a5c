"""The images and their links, read as arrays for de-duplication (:func:`cultura.curate.dedup_inventory.load_inventory`).

Each rowid range is read by one query whose every column is one aggregate: group_concat joins a column's
values with spaces, so 1M rows cost a few C-level parses instead of 11M Python objects. All aggregates of
one query see the rows in the same order, and ``NOT INDEXED`` makes that order the table's: rowid order.
A missing hash is read as :data:`MISSING` characters (no hex digit), so a column stays one value of fixed
width per image whatever is missing: an unreadable image, never hashed, does not slow its range. A range
whose string is not exactly what the fast parse expects (a NULL that group_concat skipped, a pHash of an
odd length, a value with a space, a number) has that column read again row by row, the plain way, so the
result is the plain reading's for whatever the tables hold (tests/unit/curate/
test_dedup_inventory_equals_a_plain_reading.py).
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np

from . import confirm, hashing

ROWS_CHUNK = 131_072  # rowids read per query (a few MB of text a column)


def hex_array(values) -> np.ndarray:
    """16-hex strings (None / '' for missing) -> uint64 array with 0 where missing; vectorised."""
    filled = [v if v else "0" * 16 for v in values]
    if not filled:
        return np.zeros(0, dtype=np.uint64)
    return np.frombuffer(bytes.fromhex("".join(filled)), dtype=">u8").astype(np.uint64)


# name, characters, per-image shape of its uint64 values, the plain parse of a list of its strings
HEX_COLUMNS = (("phash", 16, (), hex_array), ("dhash", 16, (), hex_array),
                ("phash_centre", 16, (), hex_array),
                ("phash_variants", 16 * len(hashing.VARIANTS), (len(hashing.VARIANTS),), hashing.variants_from_hex),
                ("phash_fine", 32 * len(confirm.FINE_VIEWS), (len(confirm.FINE_VIEWS), 2), confirm.from_hex))
_RANGE = "rowid >= ? AND rowid < ?"
MISSING = "x"  # what a missing hash reads as in the fast query, one per character


def _hex_expr(name: str, width: int) -> str:
    """The fast query's expression of one hash column: ``width`` :data:`MISSING` characters where it is NULL
    or empty, else the value as stored (one of another length, or not text, makes the range's text fail the
    fast parse: the plain reading decides). The cheapest form SQLite evaluates (a ``length`` or ``typeof``
    test on every row cost more than the parse saves). Two values no writer stores, on which the plain
    reading fails, read otherwise: a hash of :data:`MISSING` characters reads as missing, and a number of
    exactly ``width`` decimal digits as that hex hash."""
    return f"CASE WHEN {name} IS NULL OR {name} = '' THEN '{MISSING * width}' ELSE {name} END"


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
        if not _fixed_width(text, n, width) or not text.isascii():
            return None
        has = np.frombuffer(text[::width + 1].encode("ascii"), dtype=np.uint8) != ord(MISSING)
        if text.count(MISSING) != width * (n - int(has.sum())):  # only whole missing values hold it
            return None
        raw = _hex_values(text.replace(MISSING, "0"), n, width)
        if raw is None:
            return None
        return has, raw.view(">u8").astype(np.uint64).reshape((n, *shape))
    return parse


def _slow_hex(width: int, from_hex):
    """The plain reading of one hash column: None / '' missing, and a hash that has one value per image
    (pHash, dHash, centre) present whatever its length, the others only at their length."""
    if width == 16:
        return lambda vals: (np.array([bool(v) for v in vals], dtype=bool), from_hex(vals))
    return lambda vals: (np.array([bool(v) and len(v) == width for v in vals], dtype=bool), from_hex(vals))


def _ints(vals) -> np.ndarray:
    return np.array(vals, dtype=np.int64)


# name -> (the expression the fast query joins, the expression read row by row, the fast parse (joined text,
# rows) -> values or None, the plain conversion of the list of its values)
_IMAGE_COLUMNS = {
    "pixels": ("width * height", "width * height", _fast_ints, _ints),
    "bytes": ("bytes", "bytes", _fast_ints, _ints),
    **{name: (_hex_expr(name, width), name, _fast_hex(width, shape), _slow_hex(width, parse))
       for name, width, shape, parse in HEX_COLUMNS},
}


def _ranges(db, table: str):
    """``(lo, hi)`` rowid ranges of ``ROWS_CHUNK`` covering ``table``'s rows, empty stretches skipped."""
    lo = db.execute(f"SELECT min(rowid) FROM {table}").fetchone()[0]
    while lo is not None:
        yield lo, lo + ROWS_CHUNK
        lo = db.execute(f"SELECT min(rowid) FROM {table} WHERE rowid >= ?", [lo + ROWS_CHUNK]).fetchone()[0]


def read_images(db) -> tuple[list[str], np.ndarray | None, dict]:
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
        for (k, (_, expr, parse, convert)), text in zip(_IMAGE_COLUMNS.items(), texts):
            value = parse(text, n)
            parts[k].append(convert(plain(expr, lo, hi)) if value is None else value)
        del texts
    out = {k: np.concatenate(parts[k]) if parts[k] else np.zeros(0, dtype=np.int64) for k in ("pixels", "bytes")}
    for k, _, shape, _ in HEX_COLUMNS:
        out[k] = (tuple(np.concatenate(x) for x in zip(*parts[k])) if parts[k] else
                  (np.zeros(0, dtype=bool), np.zeros((0, *shape), dtype=np.uint64)))
    keys = None if keys is None else np.concatenate(keys) if keys else np.zeros((0, 64), dtype=np.uint8)
    return sha, keys, out


def _ascii_keys(text: str | None, n: int) -> np.ndarray | None:
    """``n`` ASCII strings of 64 characters joined by spaces -> ``(n, 64)`` uint8 (their characters), else
    None. Comparing these rows compares the strings: no case or hex reading enters."""
    if n == 0:
        return np.zeros((0, 64), dtype=np.uint8)
    if not _fixed_width(text, n, 64) or not text.isascii() or text.count(" ") != n - 1:  # a value with a space
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


class Positions:
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


def read_links(db, positions: Positions) -> tuple[np.ndarray, np.ndarray]:
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
