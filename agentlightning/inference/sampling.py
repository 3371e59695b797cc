"""Sampling parameters and the per-step token choice (temperature, top-k, top-p, seeded generators)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    import torch


class SamplingError(ValueError):
    """A sampling parameter is out of range; the message names it."""


@dataclass
class SamplingParams:
    max_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    n: int = 1
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    seed: Optional[int] = None
    logprobs: bool = False
    top_logprobs: int = 0
    ignore_eos: bool = False
    adapter: Optional[str] = None
    """The LoRA adapter to generate with (None: the base weights); the server sets it from the request's model."""

    def validate(self, max_context: int, prompt_length: int) -> None:
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise SamplingError(f"max_tokens must be a positive integer, got {self.max_tokens!r}")
        if prompt_length + self.max_tokens > max_context:
            raise SamplingError(
                f"The prompt ({prompt_length} tokens) plus max_tokens ({self.max_tokens}) exceeds the model's "
                f"context of {max_context} tokens"
            )
        if not isinstance(self.temperature, (int, float)) or not 0 <= self.temperature <= 100:
            raise SamplingError(f"temperature must be between 0 and 100, got {self.temperature!r}")
        if not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1:
            raise SamplingError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.top_k, int) or (self.top_k < 1 and self.top_k != -1):
            raise SamplingError(f"top_k must be -1 (disabled) or a positive integer, got {self.top_k!r}")
        if not isinstance(self.n, int) or not 1 <= self.n <= 64:
            raise SamplingError(f"n must be between 1 and 64, got {self.n!r}")
        if not isinstance(self.top_logprobs, int) or not 0 <= self.top_logprobs <= 20:
            raise SamplingError(f"top_logprobs must be between 0 and 20, got {self.top_logprobs!r}")
        if len(self.stop) > 16 or any(not isinstance(s, str) or not s for s in self.stop):
            raise SamplingError("stop must be a list of at most 16 non-empty strings")


def make_generator(seed: Optional[int]) -> Optional[torch.Generator]:
    import torch

    if seed is None:
        return None
    generator = torch.Generator()
    generator.manual_seed(int(seed) & 0xFFFFFFFFFFFF)
    return generator


def choose_tokens(logits: torch.Tensor, params: SamplingParams, generator: Any) -> torch.Tensor:
    """Pick one token per row of `logits` ([rows, vocab]); greedy when temperature is 0."""
    import torch

    if params.temperature == 0:
        return torch.argmax(logits, dim=-1)
    scores = logits / params.temperature
    if params.top_k > 0 and params.top_k < scores.shape[-1]:
        kth = torch.topk(scores, params.top_k, dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, -math.inf)
    if params.top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=True, dim=-1)
        cumulative = torch.softmax(sorted_scores, dim=-1).cumsum(dim=-1)
        remove = cumulative - torch.softmax(sorted_scores, dim=-1) >= params.top_p
        sorted_scores = sorted_scores.masked_fill(remove, -math.inf)
        scores = torch.full_like(scores, -math.inf).scatter(-1, order, sorted_scores)
    probabilities = torch.softmax(scores, dim=-1)
    if generator is not None and probabilities.device != generator.device:
        # a seeded request draws from its own CPU generator wherever the model runs (one random stream per seed)
        probabilities = probabilities.cpu()
    return torch.multinomial(probabilities, num_samples=1, generator=generator).squeeze(-1)
