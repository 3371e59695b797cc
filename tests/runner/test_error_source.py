"""The runner records where a failure came from (`error_source` in the attempt's metadata): "agent" when the agent's
own code raised, "infrastructure" for timeouts, connection failures and everything around the agent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentlightning.litagent import LitAgent
from agentlightning.runner import LitAgentRunner
from agentlightning.runner.results import ERROR_SOURCE, RunnerInterrupted, is_connection_failure, outcome_of_exception
from agentlightning.store import InMemoryLightningStore
from agentlightning.tracer import DummyTracer
from agentlightning.types import RolloutConfig


class ScriptedFailures(LitAgent[Any]):
    """{"do": "parse"} raises ValueError (an answer the agent cannot parse); "connection" a ConnectionError;
    "wrapped" a ValueError raised from a ConnectionError; "sleep" outlives its timeout; anything else returns 1.0."""

    async def rollout_async(self, task: Any, resources: Any, rollout: Any) -> Any:
        action = task.get("do")
        if action == "parse":
            raise ValueError("the model's answer is not a number")
        if action == "connection":
            raise ConnectionError("the LLM server refused the connection")
        if action == "wrapped":
            try:
                raise ConnectionError("reset by peer")
            except ConnectionError as exc:
                raise ValueError("no answer") from exc
        if action == "sleep":
            await asyncio.sleep(10)
        return 1.0


@pytest.fixture
async def store() -> AsyncIterator[InMemoryLightningStore]:
    instance = InMemoryLightningStore()
    yield instance
    await instance.close()


async def _sources(store: InMemoryLightningStore, tasks: list[dict[str, str]]) -> list[tuple[str, Any]]:
    config = RolloutConfig(timeout_seconds=0.5)
    ids = [(await store.enqueue_rollout(task, config=config)).rollout_id for task in tasks]
    runner = LitAgentRunner[Any](tracer=DummyTracer(), max_rollouts=len(tasks), poll_interval=0.05)
    with runner.run_context(agent=ScriptedFailures(), store=store):
        await asyncio.wait_for(runner.iter(), timeout=30)
    result: list[tuple[str, Any]] = []
    for rollout_id in ids:
        attempt = await store.get_latest_attempt(rollout_id)
        assert attempt is not None
        result.append((attempt.status, (attempt.metadata or {}).get(ERROR_SOURCE)))
    return result


async def test_an_exception_the_agent_raises_on_the_models_output_is_recorded_as_the_agents(
    store: InMemoryLightningStore,
) -> None:
    assert await _sources(store, [{"do": "parse"}, {"do": "ok"}]) == [("failed", "agent"), ("succeeded", None)]


async def test_connection_failures_raised_in_the_agent_and_timeouts_are_infrastructure(
    store: InMemoryLightningStore,
) -> None:
    tasks = [{"do": "connection"}, {"do": "wrapped"}, {"do": "sleep"}]
    assert await _sources(store, tasks) == [
        ("failed", "infrastructure"),
        ("failed", "infrastructure"),
        ("timeout", "infrastructure"),
    ]


def test_a_failure_outside_the_agents_code_is_infrastructure_even_when_it_is_an_ordinary_error() -> None:
    assert outcome_of_exception(RuntimeError("the store refused the result")).source == "infrastructure"
    assert outcome_of_exception(RunnerInterrupted(), raised_by_agent=True).source == "infrastructure"


class _Status(Exception):
    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code


def test_server_errors_are_connection_failures_and_client_errors_are_not() -> None:
    assert is_connection_failure(_Status(503)) and not is_connection_failure(_Status(400))
    assert outcome_of_exception(_Status(400), raised_by_agent=True).source == "agent"
