"""One GRPO update of the policy on a step's samples (blocking; the algorithm runs it in a worker thread)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from agentlightning.utils.token_prefix import shared_prefix_length

from ..config import GRPOConfig
from .entropy import EntropySum
from .loss import MIN_SHARED_PREFIX, Sample, clipped_policy_loss, make_batch, sequence_log_probs
from .normaliser import loss_normalisers
from .policy import Policy
from .sampler_gap import GapTotals, gap_totals, tis_weights

__all__ = ["apply_update", "micro_batches", "prefix_order", "shared_opening", "update_chunks"]


def prefix_order(samples: Sequence[Sample]) -> list[Sample]:
    """`samples` sorted by their prompt ids, so that conversations of one kind sit together.

    A step's samples arrive rollout by rollout; an agent with several conversations per rollout (a main one and a
    summariser, say) interleaves them, and a micro-batch cut from that order mixes prompts that share no prefix and
    differ in length. Sorted, each micro-batch holds prompts of one kind: their shared leading ids (the system prompt
    and worked examples) run once (`PolicyBatch.shared_prefix`) and the logits start later. The loss and gradient are
    sums over samples, so the order changes them only by float rounding. The sort is stable."""
    return sorted(samples, key=lambda sample: sample.prompt_ids)


def update_chunks(samples: Sequence[Sample], max_rows: int, max_tokens: int) -> list[Sequence[Sample]]:
    """The micro-batches an update runs: `samples` in `prefix_order`, split where the prompts stop sharing at least
    `MIN_SHARED_PREFIX` leading ids with the first of their run, each run cut by `micro_batches` with the opening the
    whole run shares counted once. A micro-batch then never straddles two kinds of conversation, each one's shared
    opening runs once, and a step whose samples all open with the same system prompt and worked examples fits in
    fewer micro-batches (each of which would compute that opening again)."""
    chunks: list[Sequence[Sample]] = []
    run: list[Sample] = []
    for sample in prefix_order(samples):
        if run and run[0].prompt_ids[:MIN_SHARED_PREFIX] != sample.prompt_ids[:MIN_SHARED_PREFIX]:
            chunks += micro_batches(run, max_rows, max_tokens, shared=shared_opening(run))
            run = []
        run.append(sample)
    return chunks + (micro_batches(run, max_rows, max_tokens, shared=shared_opening(run)) if run else [])


def shared_opening(samples: Sequence[Sample]) -> int:
    """How many leading ids every one of `samples` has in common before its first trained prediction: what a
    micro-batch of any of them runs once (`PolicyBatch.shared_prefix`); 0 below `MIN_SHARED_PREFIX` or for one
    sample. Any micro-batch cut from `samples` shares at least this much."""
    if len(samples) < 2:
        return 0
    shared = shared_prefix_length([s.prompt_ids for s in samples], limit=min(len(s.prompt_ids) for s in samples) - 1)
    return shared if shared >= MIN_SHARED_PREFIX else 0


def micro_batches(
    samples: Sequence[Sample], max_rows: int, max_tokens: int, *, shared: int = 0
) -> list[Sequence[Sample]]:
    """Consecutive chunks of at most `max_rows` samples whose computed positions stay within `max_tokens` (a single
    longer sample is a chunk of its own): memory per forward stays bounded however long the multi-turn sequences
    are. A chunk of `rows` samples padded to `width` computes `shared + rows x (width - shared)` positions, where
    `shared` is an opening every sample has in common (see `shared_opening`; 0: padded rows x longest)."""
    chunks: list[Sequence[Sample]] = []
    start, longest = 0, 0
    for index, sample in enumerate(samples):
        rows = index - start
        width = max(longest, sample.length)
        if rows and (rows >= max_rows or shared + (rows + 1) * (width - shared) > max_tokens):
            chunks.append(samples[start:index])
            start, width = index, sample.length
        longest = width
    if start < len(samples):
        chunks.append(samples[start:])
    return chunks


def apply_update(
    policy: Policy, samples: Sequence[Sample], config: GRPOConfig, *, sampler_correction: bool = False
) -> dict[str, float]:
    """`ppo_epochs` optimisation passes over `samples` in micro-batches; returns loss, KL, clip fraction, grad norm,
    the sampler/trainer gap (`sampler_gap.GapTotals.metrics`) and, from the first pass (the weights the samples were
    drawn with), the mean entropy of the sampling distribution over the trained tokens (`entropy`) and their mean
    negative log-probability (`sampled_nll`).

    The gap compares the sampler's recorded log-probs with the trainer's before the first optimizer step; with
    `sampler_correction` each token's loss is weighted by its truncated importance weight (cap `config.tis_cap`).

    A pass accumulates the gradients of every micro-batch (normalised as one batch) and takes one optimizer step.
    A non-finite loss or gradient skips the optimizer step (counted in `skipped_nonfinite`). Weights shared with an
    inference engine are claimed first (`Policy.claim_weights`): its generation waits for the next publish.
    """
    import torch

    policy.claim_weights()
    loss_settings, temperature, tis_cap = config.loss, config.sampler.temperature, config.sampler.tis_cap
    chunks = update_chunks(samples, config.samples.micro_batch_size, config.samples.micro_batch_tokens)
    batches = [make_batch(chunk, policy.pad_token_id, device=policy.device) for chunk in chunks]
    total_tokens = float(sum(float(batch.response_mask.sum()) for batch in batches))
    token_normaliser, sequence_normaliser = loss_normalisers(config, len(samples), total_tokens)
    model = policy.model
    model.train()
    old: list[Any] = []
    reference: list[Any] = []
    with torch.no_grad(), policy.autocast():
        if loss_settings.ppo_epochs > 1:
            old = [sequence_log_probs(model, batch, temperature) for batch in batches]
        if loss_settings.kl_coef > 0:
            with policy.reference() as ref_model:
                reference = [sequence_log_probs(ref_model, batch, temperature) for batch in batches]
    metrics = {"loss": 0.0, "kl": 0.0, "clip_fraction": 0.0, "grad_norm": 0.0, "skipped_nonfinite": 0.0}
    entropy = EntropySum()
    sampled_nll = 0.0
    gap = GapTotals()
    weights: list[Any] = [None] * len(batches)
    for epoch in range(loss_settings.ppo_epochs):
        policy.optimizer.zero_grad(set_to_none=True)
        loss_total = 0.0
        stats = {"kl": 0.0, "clip_fraction": 0.0}
        for index, batch in enumerate(batches):
            with policy.autocast():
                log_probs = sequence_log_probs(model, batch, temperature, entropy=entropy if epoch == 0 else None)
            if epoch == 0:
                sampled_nll -= float((log_probs.detach() * batch.response_mask).sum())
            old_log_probs = old[index] if old else log_probs.detach()
            if epoch == 0:
                gap.add(_batch_gap(batch, old_log_probs, tis_cap))
                if sampler_correction and batch.sampler_log_probs is not None and batch.sampler_mask is not None:
                    weights[index] = tis_weights(old_log_probs, batch.sampler_log_probs, batch.sampler_mask, tis_cap)
            loss, batch_stats = clipped_policy_loss(
                log_probs,
                old_log_probs,
                batch.advantages,
                batch.response_mask,
                clip_epsilon=loss_settings.clip_epsilon,
                ref_log_probs=reference[index] if reference else None,
                kl_coef=loss_settings.kl_coef,
                aggregation=loss_settings.loss_aggregation,
                token_normaliser=token_normaliser,
                sequence_normaliser=sequence_normaliser,
                token_weights=weights[index],
            )
            loss.backward()
            loss_total += float(loss.detach())
            weight = float(batch.response_mask.sum()) / max(total_tokens, 1.0)
            for key in stats:
                stats[key] += batch_stats[key] * weight
        parameters = [p for p in model.parameters() if p.requires_grad]
        max_norm = config.optimizer.max_grad_norm if config.optimizer.max_grad_norm is not None else float("inf")
        grad_norm = float(torch.nn.utils.clip_grad_norm_(parameters, max_norm))
        if not (math.isfinite(loss_total) and math.isfinite(grad_norm)):
            policy.optimizer.zero_grad(set_to_none=True)
            metrics["skipped_nonfinite"] += 1
        else:
            policy.optimizer.step()
        metrics.update(loss=loss_total, grad_norm=grad_norm, **stats)
    policy.optimizer.zero_grad(set_to_none=True)
    if entropy.mean is not None:
        metrics.update(entropy=entropy.mean, sampled_nll=sampled_nll / max(total_tokens, 1.0))
    metrics.update(gap.metrics(corrected=sampler_correction))
    metrics["samples_without_sampler_logprobs"] = float(sum(1 for s in samples if not _has_sampler_log_probs(s)))
    return metrics


def _batch_gap(batch: Any, train_log_probs: Any, cap: float) -> GapTotals:
    return gap_totals(train_log_probs, batch.sampler_log_probs, batch.sampler_mask, batch.response_mask, cap)


def _has_sampler_log_probs(sample: Sample) -> bool:
    return sample.sampler_log_probs is not None and any(v is not None for v in sample.sampler_log_probs)
