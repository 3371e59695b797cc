"""LitAgent: rollout method dispatch, async detection, trainer/runner/tracer accessors, pickling."""

from __future__ import annotations

import gc
import pickle
from typing import Any

import pytest

from agentlightning.litagent import LitAgent, is_v0_1_rollout_api
from agentlightning.litagent.litagent import running_rollout
from agentlightning.runner import LitAgentRunner
from agentlightning.tracer import DummyTracer


class SyncAgent(LitAgent[Any]):
    def rollout(self, task: Any, resources: Any, rollout: Any) -> Any:
        return 1.0


class AsyncAgent(LitAgent[Any]):
    async def rollout_async(self, task: Any, resources: Any, rollout: Any) -> Any:
        return 1.0


class Holder:
    tracer = DummyTracer()


def test_is_async_follows_the_overridden_methods() -> None:
    assert not SyncAgent().is_async()
    assert AsyncAgent().is_async()


def test_an_agent_without_rollout_says_what_to_implement() -> None:
    with pytest.raises(NotImplementedError, match="rollout"):
        LitAgent().training_rollout({}, {}, None)  # type: ignore[arg-type]


def test_trainer_and_runner_are_weak_references() -> None:
    agent = SyncAgent()
    with pytest.raises(ValueError, match="not been set"):
        agent.get_trainer()
    holder = Holder()
    agent.set_trainer(holder)
    assert agent.trainer is holder
    del holder
    gc.collect()
    with pytest.raises(ValueError, match="garbage-collected"):
        agent.get_trainer()


def test_the_tracer_comes_from_the_runner_else_the_trainer() -> None:
    agent = SyncAgent()
    trainer = Holder()
    agent.set_trainer(trainer)
    assert agent.tracer is trainer.tracer
    runner = LitAgentRunner(tracer=DummyTracer())
    agent.set_runner(runner)
    assert agent.tracer is runner.tracer


def test_inside_a_rollout_the_runner_is_the_one_running_it() -> None:
    agent = SyncAgent()
    first, second = LitAgentRunner(tracer=DummyTracer()), LitAgentRunner(tracer=DummyTracer())
    agent.set_runner(first)
    with running_rollout(second):
        assert agent.runner is second
    assert agent.runner is first


def test_a_pickled_agent_leaves_its_trainer_and_runner_behind() -> None:
    agent = SyncAgent()
    holder = Holder()
    agent.set_trainer(holder)
    copy = pickle.loads(pickle.dumps(agent))
    with pytest.raises(ValueError, match="not been set"):
        copy.get_trainer()


def test_trained_agents_is_deprecated() -> None:
    with pytest.warns(DeprecationWarning):
        SyncAgent(trained_agents="x")


def test_v0_1_signature_detection() -> None:
    assert is_v0_1_rollout_api(lambda task, rollout_id, resources: None)
    assert not is_v0_1_rollout_api(lambda task, resources, rollout: None)
