"""A tiny random-init ColQwen2 (Qwen2-VL backbone: 2 text layers, 1 vision block, 32 dims; a byte-level BPE
tokenizer with Qwen2-VL's special tokens trained locally) saved with save_pretrained — loaded by cultura's
``colqwen:`` family through ``from_pretrained`` exactly as a hub checkpoint. Its config says
``cultura_random_init`` so its identity says so too."""
from __future__ import annotations

from pathlib import Path

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
            "<|video_pad|>"]


def build_tiny_colqwen(out: Path, *, seed: int = 0) -> Path:
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import (ColQwen2Config, ColQwen2ForRetrieval, ColQwen2Processor, PreTrainedTokenizerFast,
                              Qwen2VLConfig, Qwen2VLImageProcessor)

    out.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["a photo of a train in Japan", "Query: bus temple wedding รถไฟ 電車"] * 20,
                            vocab_size=300, min_frequency=1, special_tokens=SPECIALS, show_progress=False)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                  unk_token="<|endoftext|>")
    ip = Qwen2VLImageProcessor(min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 16, patch_size=14, merge_size=2,
                               temporal_patch_size=2)
    ColQwen2Processor(image_processor=ip, tokenizer=tok).save_pretrained(str(out))
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIALS}
    vlm = Qwen2VLConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
                         bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|endoftext|>"],
                         rope_scaling={"type": "mrope", "mrope_section": [2, 2, 4]}),
        vision_config=dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2, in_channels=3),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|endoftext|>"])
    cfg = ColQwen2Config(vlm_config=vlm, embedding_dim=16)
    cfg.cultura_random_init = True
    torch.manual_seed(seed)
    ColQwen2ForRetrieval(cfg).eval().save_pretrained(str(out), safe_serialization=True)
    return out
