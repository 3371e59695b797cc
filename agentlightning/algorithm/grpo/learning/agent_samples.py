"""Each agent's samples of a step (one LoRA adapter per agent): built from the agent's own calls and rewards exactly
as for a single policy (`samples.build_samples`), and merged into the step's totals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

from ..config import GRPOConfig
from ..rollouts.agents import AgentRollouts
from ..rollouts.call_checks import ServedBy
from ..rollouts.reading import SkipCounts
from .samples import StepSamples, build_samples

__all__ = ["agent_step_samples", "merge_step_samples"]


def merge_step_samples(parts: Sequence[StepSamples]) -> StepSamples:
    """The agents' samples of one step as one (for the step's totals)."""
    merged = StepSamples()
    for part in parts:
        merged.add(part)
    return merged


def agent_step_samples(
    read: AgentRollouts,
    agents: Mapping[str, str],
    groups: list[int],
    indices: list[int],
    skips: SkipCounts,
    config: GRPOConfig,
    *,
    served: Optional[ServedBy] = None,
) -> dict[str, StepSamples]:
    """Each agent's samples of a step (or of one sampling round of it), built from its own calls and rewards;
    `served` (what may serve an agent's calls) leaves out the calls another adapter served."""
    return {
        agent: build_samples(read.by_agent[agent], groups, indices, skips, config, agent=agent, served=served)
        for agent in agents
    }
