"""Zero-shot labelling with an image-text embedder (curation's tagging fallback).

Scores: each label ``l`` becomes the prompt ``template.format(l)``; with unit-norm image embedding ``x`` and
prompt embeddings ``t_l``, the cosine is ``c_l = x · t_l``. With ``softmax=True`` (default) the score is
``p_l = exp(100·c_l) / Σ_k exp(100·c_k)`` — CLIP's zero-shot probability with its learned logit scale fixed
at 100 (so scores of one image sum to 1 over ``labels``). With ``softmax=False`` the score is the raw cosine
``c_l`` in [-1, 1], comparable across label sets.

>>> from PIL import Image
>>> from cultura.models.embedders import get_embedder
>>> out = zero_shot(get_embedder("fake"), [Image.new("RGB", (4, 4))], ["tea", "rice"], top_k=1)
>>> len(out), len(out[0])
(1, 1)
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...errors import CulturaError
from .base import Embedder

LOGIT_SCALE = 100.0


def zero_shot(embedder: Embedder, images: Sequence, labels: Sequence[str], *,
              template: str = "a photo of a {}", top_k: int = 3, softmax: bool = True,
              image_embeddings: np.ndarray | None = None) -> list[list[tuple[str, float]]]:
    """Top-``top_k`` ``(label, score)`` pairs per image, best first (ties keep ``labels`` order).

    ``image_embeddings`` (rows in ``images`` order, e.g. from :func:`embed_images_cached`) skips embedding
    the images again; ``images`` may then be an empty list or the sha256s.
    """
    labels = list(labels)
    if not labels:
        raise CulturaError("zero_shot needs at least one label.")
    if len(set(labels)) != len(labels):
        raise CulturaError("zero_shot labels must be unique.")
    if "{}" not in template:
        raise CulturaError(f"zero_shot template {template!r} needs a '{{}}' where the label goes, "
                           "e.g. 'a photo of a {}'.")
    if not isinstance(top_k, int) or top_k < 1:
        raise CulturaError(f"top_k must be a positive integer, got {top_k!r}.")
    img = image_embeddings if image_embeddings is not None else embedder.embed_images(list(images))
    img = np.asarray(img, dtype=np.float32)
    txt = embedder.embed_texts([template.format(label) for label in labels])
    sims = img @ txt.T
    if softmax:
        z = LOGIT_SCALE * sims
        z = np.exp(z - z.max(axis=1, keepdims=True))
        scores = z / z.sum(axis=1, keepdims=True)
    else:
        scores = sims
    k = min(top_k, len(labels))
    out = []
    for row in scores:
        order = np.argsort(-row, kind="stable")[:k]
        out.append([(labels[i], float(row[i])) for i in order])
    return out
