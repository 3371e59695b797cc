"""Training batches of exact token ids, their log-probabilities under a model, and the clipped GRPO loss."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Optional

from agentlightning.utils.token_prefix import shared_prefix_length

if TYPE_CHECKING:
    import torch

    from .entropy import EntropySum

__all__ = ["PolicyBatch", "Sample", "clipped_policy_loss", "make_batch", "sequence_log_probs"]


@dataclass
class Sample:
    """One sequence to train on: the exact prompt ids, then every later id, and the advantage.

    A single LLM call: `response_ids` is its response. A multi-turn sequence (several calls of one conversation
    stitched, see `agentlightning.adapter.trajectory`): `response_ids` also holds the tokens the model did not
    generate (tool results, user turns), which `loss_mask` (one 0/1 per response id) leaves out of the loss.
    `token_advantages` (one per response id) replaces `advantage` where turns differ (turn-level credit).
    `sampler_log_probs` (one per response id) holds the sampler's recorded log-prob of each generated token, None
    where it recorded none and on the tokens the model did not generate (see `sampler_gap`).
    """

    prompt_ids: list[int]
    response_ids: list[int]
    advantage: float
    rollout_id: str = ""
    group: str = ""
    loss_mask: Optional[list[int]] = None
    token_advantages: Optional[list[float]] = None
    calls: int = 1  # LLM calls the sequence holds
    sampler_log_probs: Optional[list[Optional[float]]] = None

    def __post_init__(self) -> None:
        for name in ("loss_mask", "token_advantages", "sampler_log_probs"):
            values = getattr(self, name)
            if values is not None and len(values) != len(self.response_ids):
                raise ValueError(f"Sample.{name} has {len(values)} entries for {len(self.response_ids)} response ids")

    @property
    def trained_tokens(self) -> int:
        """Response tokens the loss covers."""
        return len(self.response_ids) if self.loss_mask is None else sum(1 for m in self.loss_mask if m)

    @property
    def length(self) -> int:
        """Tokens a forward pass over this sample processes."""
        return len(self.prompt_ids) + len(self.response_ids)


MIN_SHARED_PREFIX = 32
"""Rows sharing at least this many leading ids compute them once (see `PolicyBatch.shared_prefix`)."""


@dataclass
class PolicyBatch:
    """Right-padded `prompt ‖ response` rows; `response_mask[i, t]` is 1 where `input_ids[i, t + 1]` is a trained
    response token (the mask is aligned with the next-token predictions, which are one shorter than the rows);
    `advantages[i, t]` is the advantage of that token.

    `first_prediction` is the first position whose prediction any row trains on (the end of the shortest prompt):
    logits are computed from there on only. `shared_prefix` (0: none) is how many leading ids every row has in
    common and that precede every row's first trained prediction (a GRPO group's prompt, an agent's system prompt
    and worked examples): they are run once and their keys and values shared by the rows, which gives the same
    log-probabilities and gradients as running each row whole.

    `sampler_log_probs` (aligned like `response_mask`, 0 where absent) and `sampler_mask` (1 where a sampler log-prob
    was recorded) are None when no sample of the batch carries sampler log-probs.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    response_mask: torch.Tensor
    advantages: torch.Tensor
    first_prediction: int = 0
    shared_prefix: int = 0
    sampler_log_probs: Optional[torch.Tensor] = None
    sampler_mask: Optional[torch.Tensor] = None


def make_batch(samples: Sequence[Sample], pad_token_id: int, device: Optional[Any] = None) -> PolicyBatch:
    """Pad `samples` into one batch (padding never enters attention or the loss), built on the CPU and moved to
    `device` (None: left on the CPU) in one transfer per tensor."""
    import torch

    if not samples:
        raise ValueError("Cannot build a batch from no samples")
    for sample in samples:
        if not sample.prompt_ids or not sample.response_ids:
            raise ValueError("Every sample needs a non-empty prompt and response")
    width = max(len(s.prompt_ids) + len(s.response_ids) for s in samples)
    input_ids = torch.full((len(samples), width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(samples), width), dtype=torch.long)
    response_mask = torch.zeros((len(samples), width - 1), dtype=torch.float32)
    advantages = torch.zeros((len(samples), width - 1), dtype=torch.float32)
    for row, sample in enumerate(samples):
        ids = sample.prompt_ids + sample.response_ids
        input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        attention[row, : len(ids)] = 1
        start = len(sample.prompt_ids) - 1  # the prediction of the first response token
        end = start + len(sample.response_ids)
        if sample.loss_mask is None:
            response_mask[row, start:end] = 1.0
        else:
            response_mask[row, start:end] = torch.tensor(sample.loss_mask, dtype=torch.float32)
        if sample.token_advantages is None:
            advantages[row, start:end] = sample.advantage
        else:
            advantages[row, start:end] = torch.tensor(sample.token_advantages, dtype=torch.float32)
    sampler_log_probs, sampler_mask = _sampler_tensors(samples, width)
    if device is not None:
        input_ids, attention = input_ids.to(device), attention.to(device)
        response_mask, advantages = response_mask.to(device), advantages.to(device)
        if sampler_log_probs is not None and sampler_mask is not None:
            sampler_log_probs, sampler_mask = sampler_log_probs.to(device), sampler_mask.to(device)
    first_prediction = min(len(s.prompt_ids) for s in samples) - 1
    shared = shared_prefix_length([s.prompt_ids + s.response_ids for s in samples], limit=first_prediction)
    return PolicyBatch(
        input_ids,
        attention,
        response_mask,
        advantages,
        first_prediction=first_prediction,
        shared_prefix=shared if len(samples) > 1 and shared >= MIN_SHARED_PREFIX else 0,
        sampler_log_probs=sampler_log_probs,
        sampler_mask=sampler_mask,
    )


def _sampler_tensors(samples: Sequence[Sample], width: int) -> tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
    """The samples' sampler log-probs and their presence mask, aligned like `response_mask` (None: none has any)."""
    import torch

    if all(sample.sampler_log_probs is None for sample in samples):
        return None, None
    values = torch.zeros((len(samples), width - 1), dtype=torch.float32)
    present = torch.zeros((len(samples), width - 1), dtype=torch.float32)
    for row, sample in enumerate(samples):
        if sample.sampler_log_probs is None:
            continue
        start = len(sample.prompt_ids) - 1
        for offset, value in enumerate(sample.sampler_log_probs):
            if value is not None:
                values[row, start + offset] = value
                present[row, start + offset] = 1.0
    return values, present


def sequence_log_probs(
    model: Any, batch: PolicyBatch, temperature: float = 1.0, entropy: Optional[EntropySum] = None
) -> torch.Tensor:
    """Log-probability of every next token of the rows under `model` sampled at `temperature`, shape
    (batch, width - 1): the logits are divided by the temperature first, as the inference server does when it
    samples, so the ratio and the gradient are those of the distribution the responses were drawn from.

    Only predictions from `batch.first_prediction` on are computed (earlier positions hold 0); a `shared_prefix` is
    run once for all rows. Positions outside `response_mask` hold values too, but are meaningless; callers mask them.
    With `entropy`, the entropy of the sampling distribution at every trained position is added to it (detached).
    """
    import torch

    if not temperature > 0:
        raise ValueError(f"temperature must be positive to compute sampling log-probabilities, got {temperature!r}")
    rows, width = batch.input_ids.shape
    position_ids = (batch.attention_mask.cumsum(-1) - 1).clamp(min=0)
    start = max(batch.first_prediction, 0)
    if batch.shared_prefix > 0:
        shared = batch.shared_prefix
        prefix = _forward(model, 1, input_ids=batch.input_ids[:1, :shared], use_cache=True)
        cache = _output_cache(prefix)
        for layer in cache.layers:  # one computed copy, seen by every row (gradients add up through the expand)
            layer.keys = layer.keys.expand(rows, -1, -1, -1)
            layer.values = layer.values.expand(rows, -1, -1, -1)
        logits = _forward(
            model,
            width - start,
            input_ids=batch.input_ids[:, shared:],
            attention_mask=batch.attention_mask,
            position_ids=position_ids[:, shared:],
            use_cache=True,
            **{_cache_argument(model): cache},
        ).logits
    else:
        logits = _forward(
            model,
            width - start,
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            position_ids=position_ids,
        ).logits
    logits = logits[:, -(width - start) : -1, :].float()  # predictions of positions start .. width - 2
    if temperature != 1.0:
        logits = logits / temperature
    if entropy is not None:
        entropy.add(logits, batch.response_mask[:, start:])
    targets = batch.input_ids[:, start + 1 :]
    computed = -torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none"
    ).view(targets.shape)
    if start == 0:
        return computed
    return torch.cat([computed.new_zeros((rows, start)), computed], dim=1)


def _forward(model: Any, keep: int, **kwargs: Any) -> Any:
    """`model(**kwargs)` computing logits for the last `keep` positions only where the model can (transformers'
    `logits_to_keep`); other models return them all and the caller slices."""
    try:
        return model(logits_to_keep=keep, **kwargs)
    except TypeError as exc:
        if "logits_to_keep" not in str(exc):
            raise
    return model(**kwargs)


def _output_cache(output: Any) -> Any:
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def _cache_argument(model: Any) -> str:
    """The keyword the model takes its key/value cache under (`cache` in newer transformers)."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    try:
        parameters = inspect.signature(base.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in parameters else "past_key_values"


def clipped_policy_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    clip_epsilon: float,
    ref_log_probs: Optional[torch.Tensor] = None,
    kl_coef: float = 0.0,
    aggregation: Literal["token", "sequence"] = "token",
    token_normaliser: Optional[float] = None,
    sequence_normaliser: Optional[float] = None,
    token_weights: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The PPO-clipped surrogate with per-sequence (batch,) or per-token (batch, width - 1) advantages, plus
    `kl_coef` x KL to the reference.

    Per token: `-min(r * A, clip(r, 1 - eps, 1 + eps) * A)` with `r = exp(log_probs - old_log_probs)`; the KL term
    is the non-negative estimator `exp(ref - lp) - (ref - lp) - 1`. "token" aggregation divides the masked sum by
    the number of response tokens (`token_normaliser`, default: of this batch); "sequence" averages each sequence
    over its tokens, then sums over sequences divided by `sequence_normaliser` (default: the batch size). The
    normalisers let gradient accumulation over micro-batches equal one pass over the whole batch.
    `token_weights` (detached, shaped like `response_mask`) multiply each token's policy term (truncated importance
    sampling of the sampler/trainer gap, see `sampler_gap`); the KL term is not weighted.
    Returns the loss and metrics (mean ratio, clipped fraction, mean KL).
    """
    import torch

    ratio = torch.exp(log_probs - old_log_probs)
    advantage = advantages if advantages.dim() == 2 else advantages.unsqueeze(-1)
    unclipped = ratio * advantage
    clipped = torch.clamp(ratio, 1.0 - clip_epsilon, 1.0 + clip_epsilon) * advantage
    per_token = -torch.minimum(unclipped, clipped)
    if token_weights is not None:
        per_token = per_token * token_weights.detach()
    kl: Optional[torch.Tensor] = None
    if ref_log_probs is not None and kl_coef > 0:
        delta = ref_log_probs - log_probs
        kl = torch.exp(delta) - delta - 1.0
        per_token = per_token + kl_coef * kl
    mask = response_mask
    tokens = mask.sum()
    if aggregation == "token":
        loss = (per_token * mask).sum() / (token_normaliser if token_normaliser is not None else tokens.clamp(min=1))
    else:
        per_sequence = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1)
        loss = per_sequence.sum() / (sequence_normaliser if sequence_normaliser is not None else mask.shape[0])
    with torch.no_grad():
        count = float(tokens.clamp(min=1))
        metrics = {
            "ratio_mean": float((ratio * mask).sum()) / count,
            "clip_fraction": float((((ratio - 1.0).abs() > clip_epsilon).float() * mask).sum()) / count,
            "kl": float((kl * mask).sum()) / count if kl is not None else 0.0,
        }
    return loss, metrics
