"""`RolloutCollector`: how a GRPO run gets rollouts, for a training step or an evaluation.

It publishes the resources version the runners read (the served model behind the proxy, at the step's sampling
temperature), enqueues a group of rollouts per task through the store and waits for them (`dispatch`), and reads back
each finished rollout's reward and calls once the proxy has written its spans (`trained.read`: one policy, or split by
agent). A training step's rollouts are checked too: an agent pattern that selects none of the first step's calls, or a
step whose rollouts made no LLM call at all, stops the run with an error saying why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, Protocol

from agentlightning.types import Rollout, RolloutMode

from ...errors import CAPTURE_HINT, NoLLMCallsError
from .agents import AgentRollouts
from .dispatch import run_rollouts
from .reading import RolloutData, SkipCounts

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

    from ..config import GRPOConfig

__all__ = ["RolloutCollector", "require_llm_calls"]

Read = tuple[list[RolloutData], Optional[AgentRollouts]]
"""The finished rollouts' calls and rewards (all agents' together), and with several agents each agent's view."""


class Served(Protocol):
    """What serves the model behind the proxy (`serving.endpoint.Endpoint`), as the collector uses it."""

    async def publish_resources(
        self,
        store: LightningStore,
        resources_id: str,
        resource_name: str,
        temperature: float,
        initial: Optional[Mapping[str, Any]],
    ) -> str: ...

    async def flush(self) -> None: ...


class Reader(Protocol):
    """How the trained policy or policies read rollouts (`trained.OnePolicy` / `trained.AgentAdapters`)."""

    async def read(self, store: LightningStore, finished: list[Any], failure_reward: Optional[float]) -> Read: ...

    def check_first_step(self, read: Optional[AgentRollouts], step: int) -> None: ...


ProgressCallback = Callable[[RolloutMode, int, int], None]
"""Called with `(mode, finished, enqueued)` while a batch of rollouts runs."""


class RolloutCollector:
    """Runs and reads a run's rollouts against `store`, served through `endpoint` (see the module docstring).

    `meta` is added to every rollout's `metadata["grpo"]` (the health record's pointer); rollouts that run past
    `config.rollout_timeout` are cancelled and counted in `skips`; `config.failure_reward` scores the failures the
    agent raised, where set.
    """

    def __init__(
        self,
        store: LightningStore,
        endpoint: Served,
        trained: Reader,
        config: GRPOConfig,
        *,
        resource_name: str,
        initial_resources: Optional[Mapping[str, Any]],
        skips: SkipCounts,
        on_progress: ProgressCallback,
        meta: Mapping[str, Any],
    ) -> None:
        self.store = store
        self.endpoint = endpoint
        self.trained = trained
        self.config = config
        self.resource_name = resource_name
        self.initial_resources = initial_resources
        self.skips = skips
        self.on_progress = on_progress
        self.meta = dict(meta)

    async def publish(self, version: str, *, temperature: float, suffix: str = "") -> str:
        """Publish the resources of weights `version` sampled at `temperature` as `grpo-<version><suffix>`; return
        that id."""
        return await self.endpoint.publish_resources(
            self.store, f"grpo-{version}{suffix}", self.resource_name, temperature, self.initial_resources
        )

    async def run(
        self, tasks: Sequence[Any], mode: RolloutMode, resources_id: str, repeat: int, meta: dict[str, Any]
    ) -> tuple[list[Rollout], list[int]]:
        """Enqueue `repeat` rollouts per task; return the finished rollouts and each one's task index."""

        def progress(done: int, total: int) -> None:
            self.on_progress(mode, done, total)

        return await run_rollouts(
            self.store,
            tasks,
            mode=mode,
            resources_id=resources_id,
            repeat=repeat,
            meta={**meta, **self.meta},
            timeout=self.config.rollout_timeout,
            skips=self.skips,
            on_progress=progress,
        )

    async def read(self, finished: list[Rollout]) -> Read:
        """The finished rollouts' calls and rewards, once the proxy wrote its spans (with several agents: split by
        agent, the merged view first)."""
        await self.endpoint.flush()
        return await self.trained.read(self.store, finished, self.config.failure_reward)

    async def run_greedy(self, tasks: list[Any], version: str, label: str) -> tuple[Read, list[int]]:
        """Every task once with greedy decoding (temperature 0) against `version`'s weights: what `read` returns, and
        each finished rollout's task position."""
        resources_id = await self.publish(version, temperature=0.0, suffix="-greedy")
        finished, positions = await self.run(tasks, "val", resources_id, 1, {"evaluation": label, "version": version})
        return await self.read(finished), positions

    async def read_training(self, finished: list[Rollout], *, step: int, first: bool) -> Read:
        """`read`, and the checks of training step `step`'s calls (`first`: the run's first step, where an agent
        pattern that selects none of the calls is an error)."""
        data, read = await self.read(finished)
        if first:
            self.trained.check_first_step(read, step)
        require_llm_calls(step, data, self.resource_name)
        return data, read


def require_llm_calls(step: int, data: list[RolloutData], resource_name: str) -> None:
    """Stop the run when step `step`'s rollouts ran but none recorded an LLM call (client-side or through the
    proxy)."""
    succeeded = sum(1 for item in data if item.rollout.status == "succeeded")
    if succeeded and not any(item.calls or item.sampling for item in data):
        raise NoLLMCallsError(
            f"GRPO step {step}: none of the {len(data)} finished rollouts ({succeeded} succeeded) made an "
            f"LLM call through the published model {resource_name!r}, so there is nothing to train on. " + CAPTURE_HINT
        )
