"""The per-agent part of a step's history entry (one LoRA adapter per agent): each agent's reward, calls, samples,
informative groups and update metrics under `agents.<name>`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..learning.samples import StepSamples
from ..rollouts.agents import AgentRollouts

__all__ = ["agent_history", "agent_history_entry"]


def agent_history(
    read: AgentRollouts, built: Mapping[str, StepSamples], metrics: Mapping[str, float]
) -> dict[str, Any]:
    """The per-agent part of a step's history entry: `{"agents": {name: {reward_mean, calls, samples, ...}}}`."""
    agents: dict[str, Any] = {}
    for name, part in built.items():
        entry: dict[str, Any] = {
            "reward_mean": read.reward_mean(name),
            "calls": read.calls(name),
            "samples": len(part.samples),
            "informative_groups": part.informative_groups,
            "failed_groups": part.failed_groups,
            "rewards_from_rollout": read.rewards_from_rollout.get(name, 0),
        }
        prefix = f"{name}."
        entry.update({k[len(prefix) :]: round(v, 6) for k, v in metrics.items() if k.startswith(prefix)})
        agents[name] = entry
    return {"agents": agents}


def agent_history_entry(
    entry: Mapping[str, Any],
    read: AgentRollouts,
    built: Mapping[str, StepSamples],
    metrics: Mapping[str, float],
) -> dict[str, Any]:
    """A step's history entry with the per-agent part (`agents`) instead of the agents' `<agent>.<metric>` keys."""
    merged = {**entry, **agent_history(read, built, metrics)}
    return {k: v for k, v in merged.items() if not any(k.startswith(f"{agent}.") for agent in built)}
