"""The second, stricter look a candidate pair gets before it joins a cluster, and clusters that cannot chain.

Why: the hash search (:mod:`cultura.curate.hash_search`) compares every pHash view of an image with every
view of the other at a tolerant threshold, so that cropped, padded and mirrored copies are found; on what a
web scrape holds (faces, tiles of one texture, crops of similar scenes) that tolerance also matches images
that only look alike, and linking every matched pair into connected components glued thousands of
unrelated images into one cluster. Two rules, with no model:

- **confirmation** (:func:`confirm_pairs`): a candidate pair is kept only when the two images agree on a
  finer hash of the same view, the *fine hash* (:func:`fine_from_thumbs`): the signs of the 128 lowest
  DCT coefficients (DC left out, in zig-zag order, within the 12x12 lowest frequencies) of each 32x32 view
  thumbnail the pHash is taken from (full content box, 5 % and 10 % centre crops). The pHash keeps 64 bits
  of the 8x8 lowest frequencies compared to their median; the fine hash adds the next frequencies, where
  two faces or two tiles of one texture differ while a re-encoded, resized, cropped or mirrored copy does
  not. A sign hash flips exactly under a flip: a mirrored thumbnail has the coefficients of odd horizontal
  frequency negated, a flipped one those of odd vertical frequency, so a flipped copy is compared through
  an XOR mask (:data:`FLIP_MASKS`: none, mirror, upside down, both) and needs no thumbnail of its own.
  Two images are confirmed when some view of one and some view of the other, under some flip, are within
  :data:`FINE_THRESHOLD` of the 128 bits (chance agreement is 64);
- **no chaining** (:func:`star_clusters`): a cluster is a representative and images confirmed against it
  directly. Images are taken best first (largest resolution, then most bytes, then smallest sha256: the
  representative's order); each one not yet in a cluster starts one with its confirmed neighbours not yet
  in a cluster. A chain a~b~c with a and c unrelated gives {a, b} and leaves c out (a question for a later
  review of its own, never glued to a through b). The result depends only on the pairs and the order, so
  a rerun gives the same clusters. With ``agree`` (what :func:`cultura.curate.dedup.scoped_clusters`
  passes: the fine hashes of two images agree, or one has none), a neighbour joins only when it also agrees
  with every member already in, best first: two members that each overlap the representative from either
  side are not one cluster (the second is left for a cluster of its own).

The fine hashes come from the decode the pHashes use (stored in ``images.phash_fine``, 32 hex per view);
confirmation reads them only for the images of candidate pairs, so the 1M-scale search is unchanged.

>>> import numpy as np
>>> [g.tolist() for g in star_clusters(np.array([[0, 1], [1, 2]]), np.array([0, 1, 2]))]  # a~b~c
[[0, 1]]
"""
from __future__ import annotations

import numpy as np

from ..lazy import lazy

fftpack = lazy("scipy.fftpack")  # imported on first use (start-up)

#: Bits of the fine hash per view (two 64-bit words).
FINE_BITS = 128
#: The views a fine hash is stored for (the thumbnails of hashing.thumbnails, in that order).
FINE_VIEWS = ("full", "centre5", "centre10")
#: Two views agree when at most this many of the 128 fine bits differ (chance: 64). Measured on the
#: real photographs with planted copies and on look-alikes (perf/bench_dedup_quality.py): copies against
#: their original differ by at most ~23 bits, different faces by 29 and more.
FINE_THRESHOLD = 26
#: Names the confirmation (goes into each hash dedup run's parameters: a change is a new run).
VERSION = f"fine{FINE_BITS}-dct12-sign/t{FINE_THRESHOLD}/flips4/star"


def _zigzag(size: int = 12, count: int = FINE_BITS) -> tuple[np.ndarray, np.ndarray]:
    """The (vertical, horizontal) frequency of the first ``count`` coefficients below ``size`` in zig-zag order,
    DC left out."""
    cells = sorted(((u + v, u, v) for u in range(size) for v in range(size) if u or v))[:count]
    return np.array([c[1] for c in cells]), np.array([c[2] for c in cells])


_U, _V = _zigzag()


def _mask(bits: np.ndarray) -> np.ndarray:
    """128 booleans -> two uint64 words (first bit most significant)."""
    return np.packbits(bits.astype(bool)).view(">u8").astype(np.uint64)


#: XOR masks (4, 2) that turn a fine hash into the fine hash of the flipped thumbnail: none, mirror (left to
#: right), upside down, both (180 degrees).
FLIP_MASKS = np.stack([_mask(np.zeros(FINE_BITS)), _mask(_V % 2 == 1), _mask(_U % 2 == 1),
                       _mask((_U + _V) % 2 == 1)])


def fine_from_thumbs(thumbs: np.ndarray) -> np.ndarray:
    """``(n, v, 2)`` uint64 fine hashes of ``(n, v, 32, 32)`` grey view thumbnails."""
    t = np.asarray(thumbs, dtype=np.float64)
    n, v = t.shape[:2]
    if not n:
        return np.zeros((0, v, 2), dtype=np.uint64)
    flat = t.reshape(n * v, 32, 32)
    dct = fftpack.dct(fftpack.dct(flat, axis=1), axis=2)
    bits = dct[:, _U, _V] > 0
    return np.ascontiguousarray(np.packbits(bits, axis=1)).view(">u8").astype(np.uint64).reshape(n, v, 2)


def to_hex(fine: np.ndarray) -> list[str]:
    """``(n, v, 2)`` uint64 -> ``images.phash_fine`` strings (16 hex per word, views in order)."""
    return ["".join(f"{int(w):016x}" for w in row) for row in np.asarray(fine, dtype=np.uint64).reshape(len(fine), -1)]


def from_hex(values, views: int = len(FINE_VIEWS)) -> np.ndarray:
    """``images.phash_fine`` strings (None or '' for missing: zeros) -> ``(n, views, 2)`` uint64."""
    width = 32 * views
    filled = "".join(v if v and len(v) == width else "0" * width for v in values)
    return np.frombuffer(bytes.fromhex(filled), dtype=">u8").astype(np.uint64).reshape(-1, views, 2)


def combination_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(m, v * v * flips)`` fine-hash distances of every (view of ``a[i]``, view of ``b[i]``, flip)
    combination, in that order (both ``(m, v, 2)`` uint64)."""
    x = a[:, :, None, None, :] ^ b[:, None, :, None, :] ^ FLIP_MASKS[None, None, None, :, :]
    return np.bitwise_count(x).sum(axis=-1, dtype=np.int64).reshape(len(a), -1)


def fine_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise smallest fine-hash distance between any view of ``a[i]`` and any view of ``b[i]`` under
    any flip (both ``(m, v, 2)`` uint64); 128 where either has no fine hash (all zero)."""
    a, b = np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64)
    if not len(a):
        return np.zeros(0, dtype=np.int64)
    d = combination_distances(a, b).min(axis=1)
    missing = ~a.reshape(len(a), -1).any(axis=1) | ~b.reshape(len(b), -1).any(axis=1)
    d[missing] = FINE_BITS
    return d


def confirm_pairs(pairs: np.ndarray, fine: np.ndarray, *, threshold: int = FINE_THRESHOLD,
                  step: int = 200_000) -> np.ndarray:
    """The candidate ``pairs`` (``(m, 2)`` indexes into ``fine``) whose fine hashes agree
    (:func:`fine_distances` ``<= threshold``), in their order."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    keep = np.zeros(len(pairs), dtype=bool)
    for s in range(0, len(pairs), step):
        p = pairs[s:s + step]
        keep[s:s + step] = fine_distances(fine[p[:, 0]], fine[p[:, 1]]) <= threshold
    return pairs[keep]


def runs(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The positions ``starts[k], starts[k] + 1, ..., starts[k] + sizes[k] - 1`` of every run ``k``, one
    after the other (``runs([5, 0], [2, 3])`` is ``[5, 6, 0, 1, 2]``)."""
    starts, sizes = np.asarray(starts, dtype=np.int64), np.asarray(sizes, dtype=np.int64)
    return np.repeat(starts, sizes) + np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)


def split_flat(flat: np.ndarray, sizes: np.ndarray) -> list[np.ndarray]:
    """``flat`` cut into consecutive pieces of ``sizes``."""
    return np.split(flat, np.cumsum(sizes)[:-1]) if len(sizes) else []


def star_clusters(pairs: np.ndarray, rank: np.ndarray, agree=None) -> list[np.ndarray]:
    """Clusters (size >= 2, each sorted) of the graph with edges ``pairs`` in which every member is linked to
    the cluster's best node directly; ``rank[node]``: lower is better (ties: the smaller node). Sorted by
    first member. See the module docstring."""
    return split_flat(*star_clusters_flat(pairs, rank, agree))


def star_clusters_flat(pairs: np.ndarray, rank: np.ndarray, agree=None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`star_clusters` as ``(members, sizes)``: the clusters' members one after the other (each cluster
    sorted, clusters by first member) and each cluster's size.

    Two images paired with each other and nothing else (most clusters of a scrape) are a cluster whatever
    the order and ``agree`` (a second member is never compared with anyone but the first): those are taken
    at once, and only the nodes of larger components are visited one by one."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if not len(pairs):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    nodes, local = np.unique(pairs, return_inverse=True)
    local = local.reshape(-1, 2)
    m = len(nodes)
    src = np.concatenate([local[:, 0], local[:, 1]])
    dst = np.concatenate([local[:, 1], local[:, 0]])
    degree = np.bincount(src, minlength=m)
    alone = (degree[local[:, 0]] == 1) & (degree[local[:, 1]] == 1)
    twos = np.sort(nodes[local[alone]], axis=1)
    done = np.zeros(m, dtype=bool)
    done[local[alone].reshape(-1)] = True
    groups = []
    if not done.all():
        order = np.argsort(src, kind="stable")
        dst = dst[order].tolist()
        starts = np.searchsorted(src[order], np.arange(m + 1)).tolist()
        visit = np.lexsort((nodes, np.asarray(rank)[nodes])).tolist()
        taken = done.tolist()  # the lone pairs are clusters already
        position = [0] * m  # each node's place in the visit
        for k, u in enumerate(visit):
            position[u] = k
        for u in visit:
            if taken[u]:
                continue
            members = [u]
            for v in sorted((v for v in dst[starts[u]:starts[u + 1]] if not taken[v]), key=position.__getitem__):
                others = nodes[members[1:]]
                if agree is None or not len(others) or bool(np.all(agree(np.full(len(others), nodes[v]), others))):
                    members.append(v)
            if len(members) < 2:
                continue
            for v in members:
                taken[v] = True
            groups.append(np.sort(nodes[members]))
    sizes = np.concatenate([np.full(len(twos), 2, dtype=np.int64),
                            np.array([len(g) for g in groups], dtype=np.int64)])
    flat = np.concatenate([twos.reshape(-1), *groups]) if groups else twos.reshape(-1)
    if not len(sizes):
        return flat, sizes
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    by_first = np.argsort(flat[starts], kind="stable")
    sizes = sizes[by_first]
    return flat[runs(starts[by_first], sizes)], sizes
