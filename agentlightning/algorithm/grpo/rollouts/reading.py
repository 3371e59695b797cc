"""From finished rollouts to training samples: rewards, triplets with exact token ids, and what was skipped.

Each rollout contributes its outcome (its final reward) to its group (the task it was enqueued for) and every
selected LLM call of its latest attempt as a sample; the rewards are read as `agentlightning.adapter.rewards` rules
(the outcome on the final call, step rewards on the calls they follow). Nothing is guessed: a rollout without a
reward, a failed rollout, or one whose calls carry no token ids is left out and counted in `SkipCounts`; with a
`failure_reward`, a rollout in which the agent raised (`agentlightning.algorithm.failures`) is trained with that
reward as its outcome and counted as `rollouts_failed_scored`.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Optional

from agentlightning.adapter.llm_proxy import LlmProxyTraceToTriplet
from agentlightning.adapter.rewards import RolloutRewards, rollout_rewards
from agentlightning.adapter.triplet import TraceToTripletBase
from agentlightning.algorithm.failures import read_failed_in_agent
from agentlightning.types import Rollout, Span, Triplet

from .proxy_calls import ProxyCallIndex, index_proxy_calls
from .sampling_check import SamplingRecord, recorded_sampling

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["RolloutData", "SkipCounts", "read_rollouts", "select_call_spans", "select_calls"]

logger = logging.getLogger(__name__)

_READ_CONCURRENCY = 8


@dataclass
class SkipCounts:
    """Cumulative counts of what a run could not learn from (all reported in the step metrics and summary)."""

    rollouts_failed: int = 0
    rollouts_failed_scored: int = 0  # the agent raised; trained with the failure reward (GRPO `failure_reward`)
    rollouts_unfinished: int = 0
    rollouts_without_reward: int = 0
    rollouts_reward_not_finite: int = 0
    rollouts_without_token_ids: int = 0
    groups_zero_variance: int = 0
    groups_too_small: int = 0
    steps_without_update: int = 0
    responses_truncated: int = 0
    calls_other_sampling: int = 0  # sampled otherwise than configured: left out (call_checks)
    calls_other_adapter: int = 0  # served by another adapter than their agent's: left out (call_checks)
    calls_hit_length_limit: int = 0  # stopped on the length limit, masked or given truncation_reward (call_checks)

    def add(self, other: SkipCounts) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class RolloutData:
    """What one finished rollout contributes: its reward (None: none usable) and its LLM calls with token ids."""

    rollout: Rollout
    reward: Optional[float]
    calls: list[Triplet] = field(default_factory=list)
    error: Optional[str] = None
    source: str = "none"  # where the calls came from: "adapter" (client-side spans), "proxy" or "none"
    sampling: list[SamplingRecord] = field(default_factory=list)  # how each call the proxy recorded sampled
    proxy_calls: Optional[ProxyCallIndex] = None  # what the proxy recorded of each call (log-probs, finish reason)
    rewards: Optional[RolloutRewards] = None  # the outcome and each call's step reward (None: built by hand)
    failed_scored: bool = False  # the agent raised and `reward` is the failure reward


def _has_ids(triplet: Triplet) -> bool:
    return bool(triplet.prompt.get("token_ids")) and bool(triplet.response.get("token_ids"))


def select_calls(
    spans: Sequence[Span], adapter: Optional[TraceToTripletBase], *, agent_match: Optional[str]
) -> tuple[list[Triplet], str]:
    """The LLM calls to train on and where they came from: those the adapter (client-side spans) finds with token
    ids ("adapter"); without an `agent_match`, the calls recorded by the LLM proxy when the client side has none
    ("proxy")."""
    calls, source = select_call_spans(spans, adapter, agent_match=agent_match)
    return [triplet for _, triplet in calls], source


def _training_calls(adapter: TraceToTripletBase, spans: list[Span]) -> list[tuple[Optional[Span], Triplet]]:
    method = getattr(adapter, "_training_calls", None)
    if method is None:  # an adapter that does not derive from TraceToTripletBase
        return [(None, triplet) for triplet in adapter.adapt(spans)]
    return list(method(spans))


def select_call_spans(
    spans: Sequence[Span], adapter: Optional[TraceToTripletBase], *, agent_match: Optional[str]
) -> tuple[list[tuple[Optional[Span], Triplet]], str]:
    """`select_calls`, each call with its span (None where the adapter names none)."""
    calls: list[tuple[Optional[Span], Triplet]] = []
    if adapter is not None:
        try:
            calls = [(span, t) for span, t in _training_calls(adapter, list(spans)) if _has_ids(t)]
        except Exception as exc:
            logger.warning("The adapter %s failed on a rollout's spans: %r", type(adapter).__name__, exc)
            calls = []
    if calls:
        return calls, "adapter"
    if agent_match is None:
        proxy = LlmProxyTraceToTriplet()._training_calls(list(spans))  # pyright: ignore[reportPrivateUsage]
        calls = [(span, t) for span, t in proxy if _has_ids(t)]
    return calls, "proxy" if calls else "none"


async def read_rollouts(
    store: LightningStore,
    rollouts: Sequence[Rollout],
    adapter: Optional[TraceToTripletBase],
    *,
    agent_match: Optional[str],
    with_calls: bool = True,
    failure_reward: Optional[float] = None,
) -> list[RolloutData]:
    """Outcome, step rewards and selected calls of every rollout's latest attempt (failed rollouts: no reward, no
    calls; with a `failure_reward`, those in which the agent raised are read with it as their outcome)."""
    semaphore = asyncio.Semaphore(_READ_CONCURRENCY)

    async def read(rollout: Rollout) -> RolloutData:
        failed = rollout.status != "succeeded"
        if failed and (failure_reward is None or not await read_failed_in_agent(store, rollout)):
            return RolloutData(rollout, None, error=f"rollout {rollout.status}")
        async with semaphore:
            try:
                spans = list(await store.query_spans(rollout.rollout_id, "latest"))
            except Exception as exc:
                return RolloutData(rollout, None, error=f"spans unreadable: {exc!r}")
        calls, source = select_call_spans(spans, adapter, agent_match=agent_match) if with_calls else ([], "none")
        rewards = rollout_rewards([span for span, _ in calls], spans, failed=failed)
        if failed:
            rewards = rewards.with_outcome(failure_reward)
        return RolloutData(
            rollout,
            rewards.outcome,
            [triplet for _, triplet in calls],
            source=source,
            sampling=recorded_sampling(spans),
            rewards=rewards,
            failed_scored=failed,
            proxy_calls=index_proxy_calls(spans),
        )

    return list(await asyncio.gather(*(read(rollout) for rollout in rollouts)))


def count_skips(data: Sequence[RolloutData]) -> SkipCounts:
    """Count the rollouts that cannot contribute (failed, no reward, non-finite reward, no token ids)."""
    counts = SkipCounts()
    for item in data:
        if item.failed_scored:
            counts.rollouts_failed_scored += 1
        elif item.rollout.status != "succeeded":
            counts.rollouts_failed += 1
        elif item.reward is None:
            counts.rollouts_without_reward += 1
        elif not math.isfinite(item.reward):
            counts.rollouts_reward_not_finite += 1
        elif not item.calls:
            counts.rollouts_without_token_ids += 1
    return counts
