"""A deterministic fake embedder for tests: vectors seeded by a hash of the input.

The same image pixels (mode, size and bytes) or the same text always give the same vector, across runs and
machines. Different inputs give (nearly) orthogonal random vectors.

Planted-bias fakes: subclass :class:`FakeEmbedder` and override :meth:`image_vector` / :meth:`text_vector`
(return any 1-D array of length ``dim``; the base normalises), and set ``variant`` so the cache keeps the
subclass's vectors apart::

    class WesternBias(FakeEmbedder):
        variant = "western-bias"
        def image_vector(self, img):
            v = super().image_vector(img)
            v[0] += 5.0 if img.info.get("western") else 0.0
            return v

>>> e = FakeEmbedder(dim=4)
>>> bool((e.embed_texts(["a"]) == FakeEmbedder(dim=4).embed_texts(["a"])).all())
True
"""
from __future__ import annotations

import hashlib

import numpy as np

from ...errors import CulturaError
from .base import Embedder, parse_options


class FakeEmbedder(Embedder):
    """Hash-seeded vectors. Spec: ``fake`` or ``fake:dim=32,seed=1``."""

    family = "fake"
    non_model = True
    variant: str = ""  # subclasses set this so their identity (the cache key) differs

    def __init__(self, *, dim: int = 32, seed: int = 0, **kw):
        super().__init__(**kw)
        if int(dim) < 1:
            raise CulturaError(f"fake embedder dim must be ≥ 1, got {dim}.")
        self.fake_dim = int(dim)
        self.seed = int(seed)
        self._dim = self.fake_dim
        self.device = "cpu"

    @property
    def identity(self) -> str:
        name = "fake" if not self.variant and type(self) is FakeEmbedder else \
            f"fake-{self.variant or type(self).__name__.lower()}"
        return f"{name}:dim={self.fake_dim}" + (f",seed={self.seed}" if self.seed else "")

    @property
    def info(self) -> dict:
        return {**super().info, "architecture": "hash", "pretrained": None, "seed": self.seed}

    # -- overridable hooks ------------------------------------------------------------------------------
    def vector_from_bytes(self, data: bytes) -> np.ndarray:
        """A standard-normal vector seeded by sha256(seed, data)."""
        digest = hashlib.sha256(self.seed.to_bytes(8, "little", signed=True) + data).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:16], "little"))
        return rng.standard_normal(self.fake_dim).astype(np.float32)

    def image_vector(self, img) -> np.ndarray:
        """The vector of one PIL image: hash of its mode, size and pixel bytes."""
        head = f"image:{img.mode}:{img.size[0]}x{img.size[1]}:".encode()
        return self.vector_from_bytes(head + img.tobytes())

    def text_vector(self, text: str) -> np.ndarray:
        """The vector of one string: hash of its UTF-8 bytes."""
        return self.vector_from_bytes(b"text:" + text.encode("utf-8"))

    # -- family methods ---------------------------------------------------------------------------------
    def _embed_image_batch(self, images):
        return np.stack([np.asarray(self.image_vector(im), dtype=np.float32) for im in images])

    def _embed_text_batch(self, texts):
        return np.stack([np.asarray(self.text_vector(t), dtype=np.float32) for t in texts])


def from_spec(rest: str, **options) -> FakeEmbedder:
    """``fake`` / ``fake:dim=32,seed=1`` (keyword options override the spec's)."""
    opts: dict = dict(parse_options(rest))
    unknown_keys = set(opts) - {"dim", "seed"}
    if unknown_keys:
        raise CulturaError(f"Unknown fake embedder option(s) {sorted(unknown_keys)}; valid: dim, seed "
                           "(e.g. 'fake:dim=32,seed=1').")
    try:
        parsed = {k: int(v) for k, v in opts.items()}
    except ValueError:
        raise CulturaError(f"fake embedder options must be integers, got {rest!r}.") from None
    parsed.update(options)
    return FakeEmbedder(**parsed)
