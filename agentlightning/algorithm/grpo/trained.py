"""What a GRPO run trains: one policy (`OnePolicy`), or one LoRA adapter per agent on one shared base model
(`AgentAdapters`, `GRPO(agent_match=[...] or {...})`; see `rollouts/agents.py`).

The run loop takes one path for both; where they differ it asks this object, chosen once from `agent_match`
(`trained_for`): how the policy is built (`serving.base.PolicyFactory`), how a step's rollouts are read, how a
sampling round's samples are built, what its update runs, how new weights are served, and what the step's history
entry, an evaluation and a checkpoint record besides what every run records.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union, cast

from .config import GRPOConfig
from .learning.agent_samples import agent_step_samples, merge_step_samples
from .learning.samples import StepSamples
from .reporting.agent_history import agent_history_entry
from .rollouts.agents import AgentMatch, AgentRollouts, describe_agents, parse_agent_match, read_agent_rollouts
from .rollouts.collector import Read
from .rollouts.reading import RolloutData, read_rollouts
from .sampling.rounds import SampledGroups, build_round_samples

if TYPE_CHECKING:
    from agentlightning.adapter.triplet import TraceToTripletBase
    from agentlightning.inference.engine import InferenceEngine
    from agentlightning.store.base import LightningStore

    from .learning.agent_policy import AgentPolicies
    from .learning.policy import Policy
    from .rollouts.call_checks import ServedBy
    from .serving.base import Serving

__all__ = ["AgentAdapters", "OnePolicy", "Trained", "trained_for"]

logger = logging.getLogger("agentlightning.algorithm.grpo.grpo")


class OnePolicy:
    """One policy trained on every call the adapter selects (with an `agent_match` pattern: the calls made inside
    the agents it matches)."""

    agents: Optional[dict[str, str]] = None

    def __init__(self, agent_match: Optional[str], adapter: Callable[[], Any]) -> None:
        self.agent_match = agent_match
        self._given_adapter = adapter  # the Trainer's adapter (raises ValueError when there is none)
        self.policies: Optional[AgentPolicies] = None  # no adapters: the policy is the one GRPO builds
        self.evaluations: dict[str, dict[str, Optional[float]]] = {}

    adapter_count = 1

    def from_pretrained(self, path: Path, config: GRPOConfig) -> Policy:
        from .learning.policy import Policy

        return Policy.from_pretrained(path, config)

    def from_engine(self, engine: InferenceEngine, config: GRPOConfig, *, default_model: bool) -> tuple[Policy, bool]:
        """The policy trains the served tensors (or a copy of them); the engine serves its weights."""
        from .learning.policy import Policy

        if default_model and config.precision == "bfloat16":
            # The engine holds the embedded model rounded to bfloat16; the policy's float32 master weights come from
            # the file, so training starts from exactly the weights a float32 run starts from.
            from agentlightning.inference.model_files import ensure_converted

            return Policy.from_pretrained(ensure_converted(), config), True
        return Policy.from_engine(engine, config, share_base=True), True

    def _adapter(self) -> Optional[TraceToTripletBase]:
        """The adapter the rollouts are read with: one selecting `agent_match`'s calls, else the Trainer's (when it
        builds triplets from traces), else the default one."""
        from agentlightning.adapter.triplet import TracerTraceToTriplet, TraceToTripletBase

        if self.agent_match is not None:
            return TracerTraceToTriplet(agent_match=self.agent_match)
        try:
            adapter = self._given_adapter()
        except ValueError:
            return None
        return adapter if isinstance(adapter, TraceToTripletBase) else None

    async def read(self, store: LightningStore, finished: list[Any], failure_reward: Optional[float]) -> Read:
        data = await read_rollouts(
            store, finished, self._adapter(), agent_match=self.agent_match, failure_reward=failure_reward
        )
        return data, None

    def check_first_step(self, read: Optional[AgentRollouts], step: int) -> None:
        """Nothing beyond the check of every step (a step whose rollouts made no LLM call at all is an error)."""

    build_round = staticmethod(build_round_samples)

    def update(
        self, policy: Policy, sampled: SampledGroups, config: GRPOConfig, correct: bool
    ) -> Callable[[], dict[str, float]]:
        """The step's update, to run on the update thread."""
        samples = sampled.built.samples

        def run() -> dict[str, float]:
            from .learning.update import apply_update

            return apply_update(policy, samples, config, sampler_correction=correct)

        return run

    def publish(self, serving: Serving, policy: Policy, version: str) -> None:
        serving.publish(policy, version)

    def history_entry(self, entry: dict[str, Any], sampled: SampledGroups, metrics: dict[str, float]) -> dict[str, Any]:
        return entry

    def evaluated(self, label: str, read: Optional[AgentRollouts]) -> None:
        """Nothing per agent to record."""

    def state(self) -> dict[str, Any]:
        return {}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Nothing per agent to restore."""


class AgentAdapters:
    """One LoRA adapter per agent (`agents`: `{adapter name: pattern}`), each trained on its own agent's calls and
    rewards with its own optimizer."""

    agent_match: Optional[str] = None

    def __init__(self, agents: dict[str, str]) -> None:
        self.agents = agents
        self.policies: Optional[AgentPolicies] = None  # the adapters, once built
        self.evaluations: dict[str, dict[str, Optional[float]]] = {}  # label -> agent -> mean reward

    @property
    def adapter_count(self) -> int:
        return len(self.agents)

    def from_pretrained(self, path: Path, config: GRPOConfig) -> Policy:
        from .learning.agent_policy import AgentPolicies

        self.policies = AgentPolicies.from_pretrained(path, config, list(self.agents))
        return cast("Policy", self.policies)  # the run loop and checkpoints use what both kinds have

    def from_engine(self, engine: InferenceEngine, config: GRPOConfig, *, default_model: bool) -> tuple[Policy, bool]:
        """The adapters on the engine's model (its tensors, or a copy); the engine serves none of them yet."""
        from .learning.agent_policy import AgentPolicies

        self.policies = AgentPolicies.from_engine(engine, config, list(self.agents))
        return cast("Policy", self.policies), False

    async def read(self, store: LightningStore, finished: list[Any], failure_reward: Optional[float]) -> Read:
        read = await read_agent_rollouts(store, finished, self.agents, failure_reward=failure_reward)
        return read.merged, read

    def check_first_step(self, read: Optional[AgentRollouts], step: int) -> None:
        """A pattern that selects none of the first step's calls is an error (`AgentMatchError`)."""
        if read is not None:
            read.require_calls(self.agents, step)

    def build_round(
        self,
        sampled: SampledGroups,
        data: list[RolloutData],
        read: Optional[AgentRollouts],
        groups: list[int],
        config: GRPOConfig,
        served: Optional[ServedBy],
    ) -> None:
        """Each agent's samples of one round, built from its own view of the rollouts (`sampling.rounds.BuildRound`);
        the step's totals hold every agent's samples together, in the agents' order."""
        assert read is not None
        if not sampled.per_agent:
            sampled.per_agent = {agent: StepSamples() for agent in self.agents}
        per_agent = agent_step_samples(
            read, self.agents, groups, sampled.indices, sampled.build_skips, config, served=served
        )
        for agent, part in per_agent.items():
            sampled.per_agent[agent].add(part)
        sampled.built = merge_step_samples(list(sampled.per_agent.values()))

    def update(
        self, policy: Policy, sampled: SampledGroups, config: GRPOConfig, correct: bool
    ) -> Callable[[], dict[str, float]]:
        """Each agent's update on its own adapter, to run on the update thread (metrics as `<agent>.<metric>`)."""
        policies = self.policies
        assert policies is not None
        samples = {agent: part.samples for agent, part in sampled.per_agent.items()}

        def run() -> dict[str, float]:
            from .learning.agent_policy import run_agent_updates

            return run_agent_updates(policies, samples, config, sampler_correction=correct)

        return run

    def publish(self, serving: Serving, policy: Policy, version: str) -> None:
        from .serving.base import publish_adapters

        assert self.policies is not None
        publish_adapters(serving, self.policies, version)

    def history_entry(self, entry: dict[str, Any], sampled: SampledGroups, metrics: dict[str, float]) -> dict[str, Any]:
        return agent_history_entry(entry, sampled.agents, sampled.per_agent, metrics)

    def evaluated(self, label: str, read: Optional[AgentRollouts]) -> None:
        if read is None:
            return
        self.evaluations[label] = {agent: read.reward_mean(agent) for agent in self.agents}
        logger.info("GRPO evaluation %r per agent: %s", label, self.evaluations[label])

    def state(self) -> dict[str, Any]:
        return {"agents": describe_agents(self.agents), "agent_evaluations": self.evaluations}

    def restore(self, state: Mapping[str, Any]) -> None:
        self.evaluations = dict(state.get("agent_evaluations", {}))


Trained = Union[OnePolicy, AgentAdapters]


def trained_for(
    agent_match: AgentMatch,
    config: GRPOConfig,
    *,
    server_url: Optional[str],
    vllm_options: Mapping[str, Any],
    adapter: Callable[[], Any],
) -> Trained:
    """What `agent_match` asks to train (a list or dict: one adapter per agent, which these settings must allow);
    `adapter` returns the Trainer's adapter (raising ValueError when there is none)."""
    agents = parse_agent_match(agent_match)
    if agents is None:
        return OnePolicy(agent_match if isinstance(agent_match, str) else None, adapter)
    if config.lora_rank is None:
        raise ValueError("agent_match with several agents trains one LoRA adapter per agent: set lora_rank")
    if server_url is not None:
        raise ValueError(
            "One adapter per agent is served by the in-process engine or vLLM (serving='vllm'): leave server_url out"
        )
    if vllm_options.get("publish") == "merged":
        raise ValueError(
            "vllm publish='merged' serves one set of weights; one adapter per agent needs runtime adapters: "
            "leave publish out (or 'adapter')"
        )
    return AgentAdapters(agents)
