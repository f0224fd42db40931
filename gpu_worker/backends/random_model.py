"""Randomly initialised Qwen2-VL models and a tiny local tokenizer.

Used by the tests (to exercise the real VLM2Vec code path without downloading weights) and by
the benchmark (to time a Qwen2-VL-2B-sized model on a GPU before the real weights are there).
The embeddings such a model produces are meaningless; only shapes and speed are real.
"""

from __future__ import annotations

from typing import Literal

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
UNK = "[UNK]"

# Enough words for the prompts and typical test queries; anything else maps to [UNK].
_WORD_TEXT = """
find a video that contains the following visual content understand of provided the an and
or in on at to with for from is are was were this that it its my me i you red orange
yellow green blue purple pink brown black white gray grey dark light cat dog person man
woman child car bus bike street room kitchen table chair door window book cup phone screen
sign text shop coffee office park tree sky water food open close left right walking
sitting reading cooking talking where when what who did
"""
_WORDS = tuple(_WORD_TEXT.split())

RandomSize = Literal["tiny", "2b"]


def build_tokenizer():
    """A word-level fast tokenizer carrying the Qwen2-VL special tokens (no download)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {}
    for token in (*SPECIAL_TOKENS, UNK, *_WORDS):
        vocab.setdefault(token, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token=UNK,
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        padding_side="left",
    )
    tokenizer.add_special_tokens({"additional_special_tokens": list(SPECIAL_TOKENS)})
    return tokenizer


# The sizes' shapes side by side, (tiny, 2b); None: the library's default.
_TEXT_SHAPES = {
    "vocab_size": (None, 151936),  # tiny: its tokenizer's
    "hidden_size": (64, 1536),
    "intermediate_size": (128, 8960),
    "num_hidden_layers": (2, 28),
    "num_attention_heads": (4, 12),
    "num_key_value_heads": (2, 2),
    "max_position_embeddings": (4096, 32768),
    "rope_theta": (None, 1_000_000.0),
    "rope_scaling": (
        {"type": "mrope", "mrope_section": [2, 3, 3]},
        {"type": "mrope", "mrope_section": [16, 24, 24]},
    ),
}
_VISION_SHAPES = {
    "depth": (1, 32),
    "embed_dim": (32, 1280),
    "hidden_size": (64, 1536),
    "num_heads": (2, 16),
    "mlp_ratio": (2, 4),
}


def build_config(size: RandomSize, tokenizer):
    """A Qwen2VLConfig: ``tiny`` for tests, ``2b`` with Qwen2-VL-2B's shapes for benchmarks."""
    from transformers import Qwen2VLConfig

    if size not in ("tiny", "2b"):
        raise ValueError(f"unknown random model size {size!r}; expected 'tiny' or '2b'")
    i, ids = int(size == "2b"), {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    text = {k: v[i] for k, v in _TEXT_SHAPES.items() if v[i] is not None}
    text.setdefault("vocab_size", len(tokenizer))
    vision = {k: v[i] for k, v in _VISION_SHAPES.items()}
    vision.update(patch_size=14, spatial_merge_size=2, temporal_patch_size=2)
    tie = size == "2b"
    text.update(
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )
    return Qwen2VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=tie,
    )


def build_random_model(size: RandomSize, *, seed: int = 0, device: str = "cpu", dtype=None):
    """(model, tokenizer) with random weights, built directly on ``device``."""
    import torch
    from transformers import Qwen2VLForConditionalGeneration

    tokenizer = build_tokenizer()
    config = build_config(size, tokenizer)
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen2VLForConditionalGeneration(config)
    if dtype is not None:
        model = model.to(dtype)
    return model.eval(), tokenizer
