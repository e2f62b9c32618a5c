"""The numeric options of the retrieval suites with their ranges (one declaration for the folder: the option
keys are checked folder-wide, so ``--option association.ks=[0]`` is refused like ``prevalence.ks=[0]``)."""
from __future__ import annotations

from ....bounds import Bound
from ..registry import COMMON_OPTIONS

#: ``ks``: the k of Acc@k and NDCG@k; ``freq_k``: the k of the retrieval frequency; a chunk sizes a chunk × chunk
#: score matrix, so 16,384 (1 GiB of float32) is the cap; ``max_points``: the most points of the projection figure.
OPTIONS = {**COMMON_OPTIONS, "ks": Bound(1, 100_000, many=True), "freq_k": Bound(1, 100_000),
           "image_chunk": Bound(1, 16_384), "text_chunk": Bound(1, 16_384), "max_points": Bound(1, 100_000)}
