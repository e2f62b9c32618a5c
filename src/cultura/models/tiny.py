"""A tiny random-initialised GPT-2 with a byte-level BPE tokenizer trained locally — no download.

Used by the tests and the demo to exercise the real scoring path (transformers forward pass, tokenization,
log-softmax, batching) in seconds. Its numbers mean nothing: it is random. Build it with
:func:`build_tiny_lm` (idempotent; the folder is reused when it holds a complete model) and load it with the
``hf:`` scorer spec ``hf:cultura-tiny-gpt2`` (built under the user cache) or ``hf:/path/to/folder``.

>>> # doctest: +SKIP
>>> path = build_tiny_lm("/tmp/tiny")
>>> from cultura.models.scorers import get_scorer
>>> get_scorer(f"hf:{path}").score([("I ate ", "sushi")])
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..files import user_cache

TINY_NAME = "cultura-tiny-gpt2"
#: The word a random-init model's identity carries (``openclip:cultura-tiny/random_init@seed0``,
#: ``hf:cultura-tiny-gpt2@…/random_init``): results, tags and reports recognise it with :func:`is_random_init`.
RANDOM_INIT = "random_init"
#: A file written beside a tiny model's weights: the folder holds a random-init model.
MARKER = "CULTURA_RANDOM_INIT"


def is_random_init(identity: str | None) -> bool:
    """True when a model identity (or a tag source such as ``clip:<identity>``) names a random-init model.

    >>> is_random_init("clip:openclip:cultura-tiny/random_init@seed0"), is_random_init("openclip:ViT-B-32/openai")
    (True, False)
    """
    # "/random@" is how other random-init identities read (mclip, and open_clip before the marker was renamed)
    return bool(identity) and (RANDOM_INIT in str(identity) or "/random@" in str(identity))


def folder_is_random_init(path: str | os.PathLike) -> bool:
    """True when ``path`` is a model folder built by :func:`build_tiny_lm` (it holds the marker file)."""
    return (Path(path) / MARKER).is_file()

#: Training text: a few sentences in the demo's languages so the byte-level BPE learns some merges for
#: Latin, Japanese and Thai. Content is irrelevant to the (random) model weights.
_CORPUS = [
    "I ate sushi and ramen in Tokyo yesterday, it was delicious.",
    "My friend Hiroshi cooked pad thai and tom yum for dinner.",
    "We had pizza, pasta and a hamburger in New York.",
    "昨日、東京で寿司とラーメンを食べました。とても美味しかった。",
    "友達の健太さんはカレーライスを作りました。",
    "เมื่อวานฉันกินผัดไทและต้มยำที่กรุงเทพฯ อร่อยมาก",
    "เพื่อนของฉันชื่อสมชายชอบกินส้มตำ",
    "John, Emma and Michael drank coffee and tea in London.",
]


def tiny_lm_dir() -> Path:
    """Default folder of the tiny model: in cultura's user cache (:func:`cultura.files.user_cache`), or in the
    temporary folder when ``CULTURA_CACHE_DIR=off``."""
    base = user_cache()
    return (Path(tempfile.gettempdir()) / "cultura" if base is None else base) / TINY_NAME


def build_tiny_lm(path: str | os.PathLike | None = None, *, vocab_size: int = 512, seed: int = 0) -> Path:
    """Train a byte-level BPE tokenizer on a built-in corpus and save a random GPT-2 (2 layers, 32 dims)
    beside it; returns the folder. Deterministic for a given ``seed``; a complete folder is reused."""
    out = Path(path) if path is not None else tiny_lm_dir()
    if (out / "config.json").exists() and (out / "tokenizer.json").exists() and \
            any(out.glob("model.safetensors")):
        if not (out / MARKER).is_file():  # folders built before the marker existed
            (out / MARKER).write_text("random-init model built by cultura.models.tiny: its numbers mean nothing\n")
        return out
    import torch  # deferred: heavy optional dependency, loaded on first use
    from tokenizers import ByteLevelBPETokenizer  # deferred: heavy optional dependency, loaded on first use
    from transformers import (  # deferred: heavy optional dependency, loaded on first use
        GPT2Config,
        GPT2LMHeadModel,
        PreTrainedTokenizerFast,
    )

    out.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(_CORPUS * 4, vocab_size=vocab_size, min_frequency=1,
                            special_tokens=["<|endoftext|>"], show_progress=False)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                  unk_token="<|endoftext|>", pad_token="<|endoftext|>")
    tok.save_pretrained(str(out))
    torch.manual_seed(seed)
    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    cfg = GPT2Config(vocab_size=len(tok), n_positions=256, n_embd=32, n_layer=2, n_head=2,
                     bos_token_id=eos, eos_token_id=eos)
    model = GPT2LMHeadModel(cfg)
    model.eval()
    model.save_pretrained(str(out), safe_serialization=True)
    (out / MARKER).write_text("random-init model built by cultura.models.tiny: its numbers mean nothing\n")
    return out
