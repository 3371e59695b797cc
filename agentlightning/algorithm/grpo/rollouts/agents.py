"""Several agents trained at once, one LoRA adapter each (`GRPO(agent_match={"solver": ..., "reviewer": ...})`).

Which calls are an agent's: every LLM call belongs to the innermost agent span around it (`agent.name` and the other
attributes `TraceTree.agent_name` reads); agent `name` trains the calls whose agent name `re.search`es its pattern.
A call two patterns select is an error (`AgentMatchError`), and so is a pattern that selected no call in the run's
first step although its rollouts made calls (the error lists the agent names seen): nothing is trained silently on
nothing. Later steps count each agent's calls in the step's history (`agents.<name>.calls`), an agent that is only
called now and then being normal.

Which reward is an agent's: the last reward emitted inside that agent's span (`agl.emit_reward` within
`agl.operation(..., **{"agent.name": ...})`) is its outcome, on its final call, and the earlier ones are step rewards
on the agent's calls they follow (`agentlightning.adapter.rewards`); a rollout where the agent emitted none gives it
the rollout's outcome (counted per agent as `rewards_from_rollout`). With a `failure_reward`, a rollout in which the
agent code raised gives every agent that failure reward as its outcome. Each agent's groups are then built exactly
as for a single policy (its calls, its rewards, compared within the task's group) and its adapter takes its own
optimizer step.
"""

from __future__ import annotations

import asyncio
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

from agentlightning.adapter.rewards import RolloutRewards, rollout_rewards
from agentlightning.adapter.trace_tree import TraceTree
from agentlightning.adapter.triplet import TracerTraceToTriplet
from agentlightning.algorithm.failures import read_failed_in_agent
from agentlightning.emitter.reward import get_reward_value
from agentlightning.types import Rollout, Span, Triplet

from .proxy_calls import index_proxy_calls
from .reading import RolloutData, _has_ids
from .sampling_check import recorded_sampling

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = [
    "AgentMatch",
    "AgentMatchError",
    "AgentRollouts",
    "agent_rewards",
    "assign_calls",
    "parse_agent_match",
    "read_agent_rollouts",
]

AgentMatch = Union[str, Sequence[str], Mapping[str, str], None]
_NAME = re.compile(r"[A-Za-z0-9_-]+")
_READ_CONCURRENCY = 8


class AgentMatchError(ValueError):
    """The agent patterns are malformed, overlap on a call, or select no call; the message names them."""


def parse_agent_match(agent_match: AgentMatch) -> Optional[dict[str, str]]:
    """`{adapter name: pattern}` for several agents, or None for the single-policy forms (None or one pattern).

    A list names agents by plain names (each is its own pattern); a dict maps adapter names to regex patterns.
    Names are what the served adapters are called: letters, digits, `_` and `-`.
    """
    if agent_match is None or isinstance(agent_match, str):
        return None
    if isinstance(agent_match, Mapping):
        agents = {str(name): pattern for name, pattern in agent_match.items()}
    elif isinstance(agent_match, Sequence):
        agents = {}
        for name in agent_match:
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise AgentMatchError(
                    f"agent_match list entries are agent names (letters, digits, '_', '-'), got {name!r}; to match "
                    'agents by a regex, pass a dict {"adapter_name": "pattern"}'
                )
            if name in agents:
                raise AgentMatchError(f"agent_match names agent {name!r} twice")
            agents[name] = name
    else:
        raise AgentMatchError(f"agent_match must be a pattern, a list of names or a dict, got {agent_match!r}")
    if not agents:
        raise AgentMatchError("agent_match is empty: name at least one agent to train")
    for name, pattern in agents.items():
        if not _NAME.fullmatch(name):
            raise AgentMatchError(f"Agent adapter name {name!r} must be letters, digits, '_' or '-'")
        if not isinstance(pattern, str) or not pattern:
            raise AgentMatchError(f"The pattern of agent {name!r} must be a non-empty string, got {pattern!r}")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise AgentMatchError(f"The pattern of agent {name!r} is not a valid regex ({pattern!r}): {exc}") from exc
    return agents


def owner_of(agent_name: Optional[str], agents: Mapping[str, str]) -> Optional[str]:
    """The adapter whose pattern selects `agent_name` (None: none does); AgentMatchError when several do."""
    if not agent_name:
        return None
    owners = [name for name, pattern in agents.items() if re.search(pattern, agent_name)]
    if len(owners) > 1:
        raise AgentMatchError(
            f"The calls of agent {agent_name!r} match the patterns of several adapters {owners} "
            f"({ {name: agents[name] for name in owners} }): make the patterns exclusive (e.g. anchor them: '^solver$')"
        )
    return owners[0] if owners else None


def assign_calls(calls: Sequence[Triplet], agents: Mapping[str, str]) -> dict[str, list[Triplet]]:
    """Each adapter's calls among `calls` (triplets whose `metadata["agent_name"]` is their innermost agent)."""
    assigned: dict[str, list[Triplet]] = {name: [] for name in agents}
    for call in calls:
        owner = owner_of(call.metadata.get("agent_name"), agents)
        if owner is not None:
            assigned[owner].append(call)
    return assigned


def agent_rewards(spans: Sequence[Span]) -> dict[str, float]:
    """The last reward emitted inside each agent's span (by the innermost agent around the reward span)."""
    owned = _agent_reward_spans(spans)
    return {agent: float(get_reward_value(rewards[-1])) for agent, rewards in owned.items()}  # type: ignore[arg-type]


def _agent_reward_spans(spans: Sequence[Span]) -> dict[str, list[Span]]:
    """The numeric reward spans emitted inside each agent's span (by the innermost agent around each), in the order
    they started."""
    if not spans:
        return {}
    tree = TraceTree.from_spans(list(spans))
    tree.repair_hierarchy()
    found: dict[str, list[Span]] = {}
    stack: list[tuple[TraceTree, Optional[str]]] = [(tree, None)]
    while stack:
        node, agent = stack.pop()
        agent = node.agent_name() or agent
        value = get_reward_value(node.span)
        if agent is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
            found.setdefault(agent, []).append(node.span)
        stack.extend((child, agent) for child in reversed(node.children))
    for owned in found.values():
        owned.sort(key=lambda span: span.start_time or 0.0)  # stable: ties keep the tree's order
    return found


@dataclass
class AgentRollouts:
    """One read of a step's rollouts: all calls (for the step's counts) and each adapter's own view."""

    merged: list[RolloutData] = field(default_factory=list)
    by_agent: dict[str, list[RolloutData]] = field(default_factory=dict)
    agent_names: set[str] = field(default_factory=set)  # agent names seen on calls (for error messages)
    rewards_from_rollout: dict[str, int] = field(default_factory=dict)  # per adapter: final reward used instead

    def extend(self, other: AgentRollouts) -> None:
        self.merged.extend(other.merged)
        for name, items in other.by_agent.items():
            self.by_agent.setdefault(name, []).extend(items)
        self.agent_names |= other.agent_names
        for name, count in other.rewards_from_rollout.items():
            self.rewards_from_rollout[name] = self.rewards_from_rollout.get(name, 0) + count

    def calls(self, agent: str) -> int:
        return sum(len(item.calls) for item in self.by_agent.get(agent, []))

    def reward_mean(self, agent: str) -> Optional[float]:
        values = [
            item.reward
            for item in self.by_agent.get(agent, [])
            if item.reward is not None and math.isfinite(item.reward)
        ]
        return statistics.fmean(values) if values else None

    def require_calls(self, agents: Mapping[str, str], step: int) -> None:
        """AgentMatchError when an adapter's pattern selected no call although the rollouts made calls."""
        if not any(item.calls for item in self.merged):
            return
        idle = [name for name in agents if not self.calls(name)]
        if idle:
            raise AgentMatchError(
                f"GRPO step {step}: the pattern(s) of {[f'{n}: {agents[n]!r}' for n in idle]} matched none of the "
                f"step's LLM calls; the calls were made by agents {sorted(self.agent_names)} (an agent is the "
                "innermost span with agent.name around a call)"
            )


def _split(
    rollout: Rollout,
    spans: Sequence[Span],
    agents: Mapping[str, str],
    *,
    failed: bool = False,
    failure_reward: Optional[float] = None,
) -> AgentRollouts:
    sampling = recorded_sampling(spans)
    proxy_calls = index_proxy_calls(spans)
    adapter = TracerTraceToTriplet()
    found = adapter._training_calls(list(spans))  # pyright: ignore[reportPrivateUsage]
    paired = [(span, t) for span, t in found if _has_ids(t)]
    calls = [t for _, t in paired]
    view = rollout_rewards([span for span, _ in paired], spans, failed=failed)
    if failed:
        view = view.with_outcome(failure_reward)
    result = AgentRollouts(
        merged=[
            RolloutData(
                rollout,
                view.outcome,
                calls,
                source="adapter" if calls else "none",
                sampling=sampling,
                rewards=view,
                failed_scored=failed,
                proxy_calls=proxy_calls,
            )
        ],
        agent_names={str(c.metadata.get("agent_name")) for c in calls},
    )
    owned: dict[str, list[Span]] = {}
    for agent_name, reward_spans in _agent_reward_spans(spans).items():
        owner = owner_of(agent_name, agents)
        if owner is not None:
            owned.setdefault(owner, []).extend(reward_spans)
    for reward_spans in owned.values():
        reward_spans.sort(key=lambda span: span.start_time or 0.0)  # several agent names, one adapter
    for name in agents:
        indices = [i for i, call in enumerate(calls) if owner_of(call.metadata.get("agent_name"), agents) == name]
        if owned.get(name):
            mine = rollout_rewards([paired[i][0] for i in indices], owned[name], failed=failed)
            if failed:
                mine = mine.with_outcome(failure_reward)
        elif indices:
            mine = RolloutRewards((None,) * len(indices), view.outcome)
            result.rewards_from_rollout[name] = 1
        else:  # the agent did not act in this rollout: nothing of it counts in the agent's groups
            mine = RolloutRewards((), None)
        result.by_agent[name] = [
            RolloutData(
                rollout,
                mine.outcome,
                [calls[i] for i in indices],
                source="adapter",
                rewards=mine,
                failed_scored=failed,
                proxy_calls=proxy_calls,
            )
        ]
    return result


async def read_agent_rollouts(
    store: LightningStore,
    rollouts: Sequence[Rollout],
    agents: Mapping[str, str],
    *,
    failure_reward: Optional[float] = None,
) -> AgentRollouts:
    """Every rollout's calls and rewards, split by adapter (failed or unreadable rollouts: no reward, no calls;
    with a `failure_reward`, those in which the agent raised are read with it as every agent's outcome)."""
    semaphore = asyncio.Semaphore(_READ_CONCURRENCY)

    async def read(rollout: Rollout) -> AgentRollouts:
        failed = rollout.status != "succeeded"
        if failed and (failure_reward is None or not await read_failed_in_agent(store, rollout)):
            return _empty(rollout, agents, f"rollout {rollout.status}")
        async with semaphore:
            try:
                spans = list(await store.query_spans(rollout.rollout_id, "latest"))
            except Exception as exc:
                return _empty(rollout, agents, f"spans unreadable: {exc!r}")
        return _split(rollout, spans, agents, failed=failed, failure_reward=failure_reward)

    result = AgentRollouts(by_agent={name: [] for name in agents})
    for part in await asyncio.gather(*(read(rollout) for rollout in rollouts)):
        result.extend(part)
    return result


def _empty(rollout: Rollout, agents: Mapping[str, str], error: str) -> AgentRollouts:
    return AgentRollouts(
        merged=[RolloutData(rollout, None, error=error)],
        by_agent={name: [RolloutData(rollout, None, error=error)] for name in agents},
    )


def agent_resource_name(agent: str) -> str:
    """The resource key under which GRPO hands agent `agent` its own `LLM` (its adapter)."""
    return f"{agent}_llm"


def describe_agents(agents: Mapping[str, str]) -> dict[str, Any]:
    return {name: {"pattern": pattern, "resource": agent_resource_name(name)} for name, pattern in agents.items()}
