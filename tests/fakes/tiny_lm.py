"""A tiny random-initialised GPT-2 with a locally trained byte-level BPE tokenizer (no download), built once
per test session into a temporary folder. Fixture ``tiny_lm``: the folder path (use ``hf:<path>``).
:func:`wordlevel_tokenizer`: a word-level tokenizer trained on a few sentences, for the tiny text towers."""
from __future__ import annotations

import pytest


def wordlevel_tokenizer(folder, corpus, special, template, **names):
    """Train a word-level tokenizer on ``corpus`` (``special`` tokens first; ``template``: the post-processing
    of one sequence, e.g. ``"<s> $A </s>"``), save it to ``folder`` as a ``PreTrainedTokenizerFast`` with the
    token ``names`` (bos_token, eos_token, unk_token, …) and return it."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token=names["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=special))
    bos, eos = names["bos_token"], names["eos_token"]
    tok.post_processor = processors.TemplateProcessing(
        single=template, special_tokens=[(bos, tok.token_to_id(bos)), (eos, tok.token_to_id(eos))])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=32, **names)
    fast.save_pretrained(folder)
    return fast


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory):
    from cultura.models.tiny import build_tiny_lm

    return build_tiny_lm(tmp_path_factory.mktemp("tiny-gpt2") / "model")
