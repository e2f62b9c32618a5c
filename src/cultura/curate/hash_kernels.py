"""The multi-index search's inner loop compiled with numba (``cultura[fast]``); imported only where numba is
installed and a search is large enough (:func:`cultura.curate.hash_search.compiled_walk`).

:func:`cultura.curate.hash_search.hamming_pairs` verifies every candidate of a band (two codes whose band keys
are within the band's radius) on all 64 bits. In numpy that is a handful of whole-array passes per column of
candidates, about 20 ns a candidate; at a million images a within-concept search meets some 7 million
candidates per concept of 5,000 images (five pHash views each), so the verification is most of the search. The
loop below does the same walk code by code, a few ns a candidate, and releases the GIL, so the concepts
searched in parallel threads use every core. numba caches the compiled code on disk (``cache=True``): only
the first search on a machine compiles.
"""
from __future__ import annotations

import numba
import numpy as np

_M1, _M2, _M4, _H01 = (np.uint64(0x5555555555555555), np.uint64(0x3333333333333333), np.uint64(0x0F0F0F0F0F0F0F0F),
                       np.uint64(0x0101010101010101))


@numba.njit(cache=True, nogil=True)
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return (x * _H01) >> np.uint64(56)


@numba.njit(cache=True, nogil=True)
def _walk(sh, skey, begins, counts, masks, threshold, out_a, out_b, out_d):
    """Writes the pairs found into ``out_*`` while they have room; returns how many there are (more than the
    room: the caller runs it again with room for all)."""
    n = sh.shape[0]
    cap = out_a.shape[0]
    m = 0
    for a in range(n):
        ka = skey[a]
        ha = sh[a]
        for f in range(-1, masks.shape[0]):
            if f < 0:  # the code's own bucket: the codes after it
                start = a + 1
                end = begins[ka] + counts[ka]
            else:
                kb = ka ^ masks[f]
                if kb <= ka:  # each pair of buckets once, from the smaller key
                    continue
                start = begins[kb]
                end = start + counts[kb]
            for b in range(start, end):
                d = _popcount(ha ^ sh[b])
                if d <= threshold:
                    if m < cap:
                        out_a[m] = a
                        out_b[m] = b
                        out_d[m] = d
                    m += 1
    return m


def band_walk(sh: np.ndarray, skey: np.ndarray, begins: np.ndarray, counts: np.ndarray, masks: np.ndarray,
              threshold: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions ``(a, b)`` in the key-sorted codes ``sh`` (their band keys ``skey``) of every pair within
    ``threshold`` bits whose keys are equal (then ``a < b``) or differ by one of ``masks`` (nonzero; each pair
    of buckets once, from the smaller key), with their distances. ``begins``/``counts``: each key's run in
    ``sh`` (a dense table over every key)."""
    args = (np.ascontiguousarray(sh, dtype=np.uint64), np.ascontiguousarray(skey, dtype=np.int64),
            np.ascontiguousarray(begins, dtype=np.int64), np.ascontiguousarray(counts, dtype=np.int64),
            np.ascontiguousarray(masks, dtype=np.int64), np.uint64(threshold))
    room = max(1024, len(sh))
    while True:
        out = np.empty((3, room), dtype=np.int64)
        m = _walk(*args, out[0], out[1], out[2])
        if m <= room:
            return out[0, :m], out[1, :m], out[2, :m]
        room = m
