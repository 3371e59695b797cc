"""Log-probabilities of given completions under a causal LM, for a padded batch (what a policy-gradient step needs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def sequence_logprobs(
    model: Any,
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    *,
    pad_token_id: int = 0,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability of every completion token given its prompt and the completion tokens before it.

    The sequences (prompt + completion) are right-padded into one batch with an attention mask, so each row's
    log-probs are those it would get alone. Returns `(logprobs, mask)`, both `[batch, longest completion]`: padded
    positions hold 0 in `logprobs` and 0 in `mask`. Gradients flow to the model's parameters unless called under
    `torch.no_grad()`/`torch.inference_mode()`. `temperature` divides the logits first (use the sampling
    temperature to get the sampling distribution's log-probs; the engine reports log-probs at temperature 1).
    """
    import torch

    if len(prompts) != len(completions):
        raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
    if not prompts:
        raise ValueError("The batch is empty")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    for index, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        if not prompt:
            raise ValueError(f"Prompt {index} is empty (the first completion token needs a context)")
        if not completion:
            raise ValueError(f"Completion {index} is empty")
    device = next(model.parameters()).device
    lengths = [len(p) + len(c) for p, c in zip(prompts, completions, strict=True)]
    longest = max(lengths)
    longest_completion = max(len(c) for c in completions)
    batch = len(prompts)
    input_ids = torch.full((batch, longest), pad_token_id, dtype=torch.long, device=device)
    attention = torch.zeros((batch, longest), dtype=torch.long, device=device)
    # positions[i, t]: the position whose logits predict completion token t of row i (the token just before it)
    positions = torch.zeros((batch, longest_completion), dtype=torch.long, device=device)
    targets = torch.full((batch, longest_completion), pad_token_id, dtype=torch.long, device=device)
    mask = torch.zeros((batch, longest_completion), dtype=torch.float32, device=device)
    for row, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        tokens = list(prompt) + list(completion)
        input_ids[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        attention[row, : len(tokens)] = 1
        count = len(completion)
        positions[row, :count] = torch.arange(len(prompt) - 1, len(prompt) - 1 + count)
        targets[row, :count] = torch.tensor(list(completion), dtype=torch.long)
        mask[row, :count] = 1.0
    logits = model(input_ids=input_ids, attention_mask=attention, use_cache=False).logits
    selected = logits.gather(1, positions.unsqueeze(-1).expand(-1, -1, logits.shape[-1])).float()
    log_probs = torch.log_softmax(selected / temperature, dim=-1)
    chosen = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return chosen * mask, mask
