"""A scripted causal LM for tests: the real engine, batching, server and parsers, with answers chosen by a function.

`ScriptedModel` looks like a transformers causal LM to the engine (config, forward with a key/value cache, logits).
It keeps each row's token ids in its "cache", finds the prompt text of each row, asks `reply(prompt_text)` for the
answer, and puts all the probability on the next token of that answer (then on the end-of-turn token).
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, Optional

import torch
from transformers import DynamicCache

from agentlightning.inference.engine import InferenceEngine
from agentlightning.inference.tiny import build_tiny_tokenizer

ASSISTANT_START = "<|im_start|>assistant\n"


class ScriptedModel(torch.nn.Module):
    def __init__(self, tokenizer: Any, reply: Callable[[str], str]) -> None:
        super().__init__()
        self.tokenizer = tokenizer
        self.reply = reply
        self.eos = int(tokenizer.eos_token_id)
        self.config = SimpleNamespace(vocab_size=len(tokenizer), max_position_embeddings=4096)
        self.generation_config = SimpleNamespace(eos_token_id=self.eos)
        self.prompts: list[str] = []
        self._answers: dict[tuple[int, ...], list[int]] = {}

    def forward(
        self,
        input_ids: torch.Tensor,
        past_key_values: Optional[DynamicCache] = None,
        attention_mask: Optional[torch.Tensor] = None,
        **_: Any,
    ) -> SimpleNamespace:
        cache = past_key_values if past_key_values is not None else DynamicCache()
        as_kv = input_ids.to(torch.float32)[:, None, :, None]
        keys, _values = cache.update(as_kv, as_kv, 0)
        tokens = keys[:, 0, :, 0].to(torch.long)
        mask = attention_mask if attention_mask is not None else torch.ones_like(tokens)
        logits = torch.full((tokens.shape[0], 1, self.config.vocab_size), -1e4)
        for row in range(tokens.shape[0]):
            ids = tokens[row][mask[row].bool()].tolist()
            logits[row, 0, self._next_token(ids)] = 0.0
        return SimpleNamespace(logits=logits, past_key_values=cache)

    def _next_token(self, ids: list[int]) -> int:
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        start = text.rfind(ASSISTANT_START)
        prompt_end = start + len(ASSISTANT_START)
        prompt_ids = self.tokenizer.encode(text[:prompt_end], add_special_tokens=False)
        key = tuple(prompt_ids)
        if key not in self._answers:
            self.prompts.append(text[:prompt_end])
            self._answers[key] = self.tokenizer.encode(self.reply(text[:prompt_end]), add_special_tokens=False)
        answer = self._answers[key]
        generated = len(ids) - len(prompt_ids)
        return answer[generated] if generated < len(answer) else self.eos


def scripted_engine(reply: Callable[[str], str], model_name: str = "scripted") -> InferenceEngine:
    """An engine whose model answers `reply(prompt_text)` (the prompt rendered by the tiny ChatML template)."""
    tokenizer = build_tiny_tokenizer()
    return InferenceEngine(ScriptedModel(tokenizer, reply), tokenizer, model_name=model_name)


WEATHER_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
"""The tool call `weather_reply` answers with, in the Hermes format the server parses."""
WEATHER_PARAMETERS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def weather_reply(prompt: str) -> str:
    """A scripted weather agent's model: call the weather tool when it is offered, then answer with what it
    returned; "Hello there!" otherwise."""
    if "<tool_response>" in prompt:
        result = prompt.rsplit("<tool_response>\n", 1)[1].split("\n</tool_response>", 1)[0]
        return f"The weather in Paris: {result}."
    if "get_weather" in prompt:
        return "Let me check.\n" + WEATHER_CALL
    return "Hello there!"
