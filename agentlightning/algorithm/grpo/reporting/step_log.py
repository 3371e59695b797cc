"""What one GRPO step records and logs: its history entry, the run's drift and sampling counts (with warnings), the
stop when a step's rollouts recorded no LLM call at all (every later step would train on nothing, without an error),
and the log lines of a step and of an evaluation."""

from __future__ import annotations

import logging
import statistics
import time
from typing import Any, Optional

from ..learning.samples import DriftCounts, StepSamples
from ..rollouts.reading import RolloutData, SkipCounts
from ..rollouts.sampling_check import SamplingMismatches, count_mismatches
from ..sampling.balance import Strata, stratum_counts
from ..sampling.rounds import SampledGroups
from .evaluation import EvaluationReport

__all__ = [
    "check_sampling",
    "count_drift",
    "describe_skips",
    "history_entry",
    "log_evaluation",
    "log_no_update",
    "log_step",
    "step_details",
]

logger = logging.getLogger("agentlightning.algorithm.grpo.grpo")

NORMAL_SKIPS = frozenset({"groups_zero_variance", "steps_without_update", "rollouts_failed_scored"})
"""Skips that are a normal state (a task set the policy solves, or cannot yet; failures trained with the failure
reward): logged at INFO, not as warnings."""
MAX_ROLLOUT_DRIFT_KEPT = 1000


def history_entry(
    step: int, sampled: SampledGroups, built: StepSamples, skips: SkipCounts, metrics: dict[str, float]
) -> dict[str, Any]:
    """The history entry of step `step` (before its per-agent part, sampling mismatches and timings)."""
    data = sampled.data
    succeeded = [d for d in data if d.rollout.status == "succeeded"]
    return {
        "step": step,
        "reward_mean": statistics.fmean(built.rewards) if built.rewards else None,
        "rollouts": len(data),
        "tasks": len(sampled.indices),
        "sampling_rounds": sampled.rounds,
        "informative_groups": built.informative_groups,
        "failed_groups": built.failed_groups,
        "samples": len(built.samples),
        "response_tokens": sum(s.trained_tokens for s in built.samples),
        "sample_tokens": sum(s.length for s in built.samples),
        "transition_tokens": built.transition_tokens,
        "calls_per_rollout": round(sum(len(d.calls) for d in succeeded) / len(succeeded), 3) if succeeded else None,
        "drift": built.drift.to_dict(),
        "calls_from": {
            source: sum(len(d.calls) for d in data if d.source == source) for source in ("adapter", "proxy")
        },
        **{k: round(v, 6) for k, v in metrics.items()},
        "skips": skips.to_dict(),
    }


def step_details(
    sampled: SampledGroups,
    mismatches: SamplingMismatches,
    *,
    saturated: bool,
    strata: Optional[Strata],
    truncated: str,
    update_seconds: float,
    swap_seconds: float,
    started: float,
) -> dict[str, Any]:
    """The rest of a step's history entry, after its per-agent part: its sampling mismatches, whether the reward
    saturated (no extra tasks were sampled, see `sampling/saturation.py`), the tasks it drew per stratum (with
    `balance_by`), its truncation rate, whether truncated calls are kept (the length limit is then part of the task:
    no warning) and the seconds of its parts (`started`: the step's `time.monotonic()` at its start)."""
    details: dict[str, Any] = {"sampling_mismatches": mismatches.to_dict(), "reward_saturated": saturated}
    if strata is not None:
        details["strata"] = stratum_counts(strata, sampled.indices)
    details["truncation_rate"] = round(sampled.built.truncation_rate, 4)
    details["truncation_kept"] = truncated == "keep"
    details["seconds"] = {
        "rollout": round(sampled.rollout_seconds, 3),
        "adapter": round(sampled.adapter_seconds, 3),
        "update": round(update_seconds, 3),
        "weight_swap": round(swap_seconds, 3),
        "total": round(time.monotonic() - started, 3),
    }
    return details


def count_drift(step: int, built: StepSamples, drift: DriftCounts, rollout_drift: dict[str, float]) -> None:
    """Add the step's drift to the run's (`drift`; each drifted rollout's rate, the first 1,000, to `rollout_drift`)
    and warn when calls that continued a conversation did not extend its token ids."""
    drift.add(built.drift)
    for rollout_id, rate in built.rollout_drift.items():
        if len(rollout_drift) >= MAX_ROLLOUT_DRIFT_KEPT:
            break
        rollout_drift[rollout_id] = rate
    if built.drift.drifted:
        logger.warning(
            "GRPO step %d: %d of %d calls that continued a conversation did not extend its token ids "
            "(drift %.0f%%): they are trained one call at a time. Check the chat template and the server's "
            "token ids (docs/algorithms.md, 'Multi-turn samples')",
            step,
            built.drift.drifted,
            built.drift.continuations,
            100 * built.drift.rate,
        )


def check_sampling(
    step: int, data: list[RolloutData], temperature: float, total: SamplingMismatches
) -> SamplingMismatches:
    """Count (add to `total`, and warn about) calls that did not sample at `temperature` over the full vocabulary:
    their log-probabilities under the training's distribution are not those they were drawn with."""
    mismatches = count_mismatches([record for item in data for record in item.sampling], temperature)
    total.add(mismatches)
    if mismatches.any:
        logger.warning(
            "GRPO step %d: of %d LLM calls, %d sampled at another temperature than %s, %d with top_p < 1, %d "
            "with top_k; training assumes the configured temperature over the full vocabulary: pass "
            "llm.sampling_parameters['temperature'] on and leave top_p / top_k unset",
            step,
            mismatches.calls,
            mismatches.temperature,
            temperature,
            mismatches.top_p,
            mismatches.top_k,
        )
    return mismatches


def log_no_update(step: int, skips: SkipCounts) -> None:
    """A step with nothing to learn from: at INFO when its only skips are normal ones, else as a warning."""
    others = {k: v for k, v in skips.to_dict().items() if k not in NORMAL_SKIPS}
    log = logger.warning if any(others.values()) else logger.info
    log("GRPO step %d: nothing to learn from (%s); weights unchanged", step, describe_skips(skips))


def describe_skips(skips: SkipCounts) -> str:
    parts = [f"{name.replace('_', ' ')}: {value}" for name, value in skips.to_dict().items() if value]
    return "; ".join(parts) or "no rollouts"


def log_step(entry: dict[str, Any], built: StepSamples, metrics: dict[str, float]) -> None:
    """The INFO line of a finished step (its history `entry`)."""
    logger.info(
        "GRPO step %d: reward %s over %d rollouts (%d tasks, %d informative groups%s), %d samples, drift %.2f, "
        "%s lineages per rollout, loss %.4f (%s)",
        entry["step"],
        "n/a" if entry["reward_mean"] is None else f"{entry['reward_mean']:.3f}",
        entry["rollouts"],
        entry["tasks"],
        built.informative_groups,
        f", {built.failed_groups} failed groups trained" if built.failed_groups else "",
        len(built.samples),
        built.drift.rate,
        "n/a" if built.drift.lineages_per_rollout is None else f"{built.drift.lineages_per_rollout:.2f}",
        metrics.get("loss", 0.0),
        ", ".join(f"{k} {v:.1f}s" for k, v in entry["seconds"].items()),
    )


def log_evaluation(report: EvaluationReport) -> None:
    logger.info(
        "GRPO evaluation %r at step %d: mean reward %s over %d tasks (%d failed, %d unfinished)",
        report.label,
        report.step,
        report.mean_reward,
        len(report.items),
        report.failed,
        report.unfinished,
    )
