"""What one GRPO update divides its summed loss by (`GRPOConfig.loss_normaliser`).

"tokens" divides by what the update holds (its trained response tokens, or its samples with "sequence"
aggregation), so a step that kept fewer completions takes a larger step per token. "constant" (Dr. GRPO) divides by
what a step is configured to hold, the same every step: `max_response_tokens` x the completions of a step
(`group_size` x `tasks_per_step`) with "token" aggregation, the completions with "sequence" aggregation. A number
is that divisor. Micro-batches all divide by the update's normaliser, so accumulating them equals one pass.
"""

from __future__ import annotations

from ..config import GRPOConfig

__all__ = ["configured_completions", "loss_normalisers"]


def configured_completions(config: GRPOConfig) -> int:
    """The completions a step is configured to train on: `group_size` x `tasks_per_step`."""
    return config.group_size * config.tasks_per_step


def loss_normalisers(config: GRPOConfig, samples: int, tokens: float) -> tuple[float, float]:
    """`(token_normaliser, sequence_normaliser)` of an update over `samples` samples holding `tokens` trained
    response tokens (the arguments of `clipped_policy_loss`; the one `config.loss_aggregation` uses applies)."""
    normaliser = config.loss_normaliser
    if normaliser == "tokens":
        return float(tokens), float(samples)
    if normaliser == "constant":
        completions = float(configured_completions(config))
        return float(config.max_response_tokens) * completions, completions
    return float(normaliser), float(normaliser)
