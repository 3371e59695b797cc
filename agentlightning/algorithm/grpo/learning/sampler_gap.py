"""The gap between the sampler and the trainer, measured every step and corrected by truncated importance sampling.

The tokens GRPO trains on were sampled by one computation (the inference engine's weights in its dtype, vLLM, an
external server) and are trained by another (the policy's float32 master weights, autocast or not). Where the sampler
recorded its log-prob of a token, the step reports `|log p_train - log p_sampler|` over the trained tokens (mean and
max) and the share of trained tokens that had one. When the two computations are not the same tensors in the same
dtype (`correction_needed`), each such token's loss is weighted by the detached truncated importance weight
`min(exp(log p_train - log p_sampler), C)` (`tis_weights`); tokens without a sampler log-prob keep weight 1.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Optional

if TYPE_CHECKING:
    import torch

__all__ = [
    "GapTotals",
    "SamplerDescription",
    "SamplerKind",
    "choose_correction",
    "correction_needed",
    "describe_sampler",
    "gap_totals",
    "tis_weights",
]

logger = logging.getLogger("agentlightning.algorithm.grpo.grpo")  # GRPO's log lines keep its logger's name

SamplerKind = Literal["in_process", "remote", "vllm"]


@dataclass(frozen=True)
class SamplerDescription:
    """Who samples and in which dtype: `kind`, the in-process engine's weight dtype (None: not in process) and the
    dtype the trainer's forward passes compute in ("float32", or "bfloat16" under autocast)."""

    kind: SamplerKind
    engine_dtype: Optional[str]
    trainer_dtype: str


def correction_needed(mode: str, sampler: SamplerDescription) -> bool:
    """Whether truncated importance sampling applies: "on"/"off" as said; "auto" unless the sampler is the in-process
    engine holding float32 weights while the trainer computes in float32 (the same weights, the same arithmetic)."""
    if mode == "on":
        return True
    if mode == "off":
        return False
    if mode != "auto":
        raise ValueError(f"sampler_correction must be 'auto', 'on' or 'off', got {mode!r}")
    same = sampler.kind == "in_process" and sampler.engine_dtype == "float32" and sampler.trainer_dtype == "float32"
    return not same


def _dtype_name(dtype: Any) -> Optional[str]:
    return str(dtype).removeprefix("torch.") if dtype is not None else None


def choose_correction(mode: str, serving: Any, compute_dtype: Any) -> bool:
    """Whether truncated importance sampling applies to a run sampled by `serving` (a GRPO serving) and trained in
    `compute_dtype` (`correction_needed` of `describe_sampler`), logged with who samples in which dtypes."""
    sampler = describe_sampler(serving, compute_dtype)
    corrected = correction_needed(mode, sampler)
    logger.info(
        "GRPO samples with %s (engine weights %s, trainer %s): truncated importance sampling %s",
        sampler.kind,
        sampler.engine_dtype or "n/a",
        sampler.trainer_dtype,
        "on" if corrected else "off",
    )
    return corrected


def describe_sampler(serving: Any, compute_dtype: Any) -> SamplerDescription:
    """The `SamplerDescription` of a GRPO serving (`LocalServing`, `RemoteServing`, `VllmServing`) and the policy's
    autocast dtype (None: float32)."""
    trainer = _dtype_name(compute_dtype) or "float32"
    engine = getattr(serving, "engine", None)
    if engine is not None and getattr(engine, "model", None) is not None:
        parameter = next(iter(engine.model.parameters()), None)
        return SamplerDescription("in_process", _dtype_name(getattr(parameter, "dtype", None)), trainer)
    if type(serving).__name__ == "VllmServing":
        return SamplerDescription("vllm", None, trainer)
    return SamplerDescription("remote", None, trainer)


def tis_weights(
    train_log_probs: torch.Tensor, sampler_log_probs: torch.Tensor, sampler_mask: torch.Tensor, cap: float
) -> torch.Tensor:
    """Detached per-token weights `min(exp(train - sampler), cap)` where `sampler_mask` is 1, and 1 elsewhere."""
    import torch

    with torch.no_grad():
        delta = (train_log_probs.detach().float() - sampler_log_probs.float()) * sampler_mask
        weights = torch.clamp(torch.exp(delta), max=cap)
        return torch.where(sampler_mask > 0, weights, torch.ones_like(weights))


@dataclass
class GapTotals:
    """Sums over a step's batches, turned into the step's metrics by `metrics`."""

    trained_tokens: float = 0.0
    with_sampler: float = 0.0  # trained tokens with a recorded sampler log-prob
    gap_sum: float = 0.0
    gap_max: float = 0.0
    weight_sum: float = 0.0  # of the importance weights of the tokens with a sampler log-prob
    clipped: float = 0.0  # of those whose weight was capped

    def add(self, other: GapTotals) -> None:
        self.trained_tokens += other.trained_tokens
        self.with_sampler += other.with_sampler
        self.gap_sum += other.gap_sum
        self.gap_max = max(self.gap_max, other.gap_max)
        self.weight_sum += other.weight_sum
        self.clipped += other.clipped

    def metrics(self, *, corrected: bool) -> dict[str, float]:
        """`sampler_gap_mean`, `sampler_gap_max`, `sampler_logprob_share`, `sampler_correction` (1: weighted), and
        when corrected `tis_weight_mean` and `tis_clipped_share` (over the tokens with a sampler log-prob)."""
        counted = max(self.with_sampler, 1.0)
        result = {
            "sampler_gap_mean": self.gap_sum / counted if self.with_sampler else 0.0,
            "sampler_gap_max": self.gap_max,
            "sampler_logprob_share": self.with_sampler / self.trained_tokens if self.trained_tokens else 0.0,
            "sampler_correction": 1.0 if corrected else 0.0,
        }
        if corrected:
            result["tis_weight_mean"] = self.weight_sum / counted if self.with_sampler else 1.0
            result["tis_clipped_share"] = self.clipped / counted if self.with_sampler else 0.0
        return result


def gap_totals(
    train_log_probs: torch.Tensor,
    sampler_log_probs: Optional[torch.Tensor],
    sampler_mask: Optional[torch.Tensor],
    response_mask: torch.Tensor,
    cap: float,
) -> GapTotals:
    """The gap sums of one batch over its trained tokens (`response_mask`), with the weights `tis_weights` gives."""
    import torch

    trained = float(response_mask.sum())
    if sampler_log_probs is None or sampler_mask is None:
        return GapTotals(trained_tokens=trained)
    with torch.no_grad():
        counted = (response_mask > 0) & (sampler_mask > 0)
        if not bool(counted.any()):
            return GapTotals(trained_tokens=trained)
        delta = train_log_probs.detach().float() - sampler_log_probs.float()
        gaps = delta.abs()[counted]
        weights = tis_weights(train_log_probs, sampler_log_probs, sampler_mask, cap)[counted]
        raw = torch.exp(delta[counted])
        return GapTotals(
            trained_tokens=trained,
            with_sampler=float(counted.sum()),
            gap_sum=float(gaps.sum()),
            gap_max=float(gaps.max()),
            weight_sum=float(weights.sum()),
            clipped=float((raw > cap).sum()),
        )
