"""A tiny, randomly initialised chat model with a character-level tokenizer, built in code.

Used by tests and demos that need a real model (real token ids, a real chat template, real weights to update)
without loading the 135M-parameter default. Deterministic for a given seed.
"""

from __future__ import annotations

import string
from typing import Any

from .engine import InferenceEngine

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<pad>", "<unk>", "<|im_start|>", "<|im_end|>"]


def build_tiny_tokenizer() -> Any:
    """A character-level fast tokenizer: printable ASCII plus the ChatML special tokens."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    characters = [c for c in string.printable if c not in "\x0b\x0c"]
    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS + characters)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens(SPECIAL_TOKENS)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token="<unk>",
        pad_token="<pad>",
        eos_token="<|im_end|>",
        bos_token="<|im_start|>",
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_tiny_engine(
    *, seed: int = 0, model_name: str = "tiny-chat", hidden_size: int = 32, max_batch_size: int = 32
) -> InferenceEngine:
    """An engine around a 2-layer Llama with random weights (a few hundred thousand parameters)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,  # a character-level tokenizer needs room for multi-turn tool prompts
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = LlamaForCausalLM(config)
    finally:
        torch.random.set_rng_state(generator_state)
    return InferenceEngine(model, tokenizer, model_name=model_name, max_batch_size=max_batch_size)
