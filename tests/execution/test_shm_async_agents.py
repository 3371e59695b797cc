"""Async agents under the "shm" strategy: every runner thread's async agents run on one event loop, so clients that
a library keeps per process (LangChain's cached httpx client) work with several runner threads."""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from typing import Any

import pytest

import agentlightning as agl
from agentlightning.execution import SharedMemoryExecutionStrategy

from ..fake_openai_server import FakeOpenAIServer


class LoopRecordingAgent(agl.LitAgent[Any]):
    """Records the event loop each rollout runs on; the first two rollouts wait until both run at once, so both
    runner threads are busy together."""

    def __init__(self) -> None:
        super().__init__()
        self.loops: list[int] = []
        self._lock = threading.Lock()
        self._running = 0

    async def rollout_async(self, task: Any, resources: Any, rollout: Any) -> float:
        with self._lock:
            self.loops.append(id(asyncio.get_running_loop()))
            self._running += 1
        deadline = time.monotonic() + 30
        while task["together"] and self._running < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return 1.0


def test_async_agents_of_all_runner_threads_share_one_event_loop() -> None:
    agent = LoopRecordingAgent()
    trainer = agl.Trainer(strategy="shm", n_runners=2, progress="off", algorithm=agl.Baseline(polling_interval=0.05))
    trainer.dev(agent, [{"together": True}, {"together": True}, {"together": False}])
    rollouts = asyncio.run(trainer.store.query_rollouts())
    assert [rollout.status for rollout in rollouts] == ["succeeded"] * 3
    workers = {asyncio.run(trainer.store.get_latest_attempt(r.rollout_id)).worker_id for r in rollouts}  # type: ignore[union-attr]
    assert len(workers) == 2  # both runner threads ran rollouts
    assert len(agent.loops) == 3 and len(set(agent.loops)) == 1


class NoOpAgent(agl.LitAgent[Any]):
    async def rollout_async(self, task: Any, resources: Any, rollout: Any) -> float:
        return 1.0


def _cross_thread_calls_per_rollout(monkeypatch: pytest.MonkeyPatch, shared_agent_loop: bool, rollouts: int) -> float:
    """`call_soon_threadsafe` calls (each a write to a loop's self-pipe and a GIL hand-off) per rollout of a no-op
    async agent with two runner threads."""
    calls = 0
    original = asyncio.BaseEventLoop.call_soon_threadsafe

    def counting(self: asyncio.BaseEventLoop, *args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return original(self, *args, **kwargs)

    strategy = SharedMemoryExecutionStrategy(n_runners=2, shared_agent_loop=shared_agent_loop)
    trainer = agl.Trainer(strategy=strategy, progress="off", algorithm=agl.Baseline(polling_interval=0.05))
    monkeypatch.setattr(asyncio.BaseEventLoop, "call_soon_threadsafe", counting)
    trainer.dev(NoOpAgent(), list(range(rollouts)))
    monkeypatch.undo()
    rollouts_run = asyncio.run(trainer.store.query_rollouts())
    assert [rollout.status for rollout in rollouts_run] == ["succeeded"] * rollouts
    return calls / rollouts


def test_without_the_shared_agent_loop_async_agents_run_on_their_runners_loops() -> None:
    agent = LoopRecordingAgent()
    strategy = SharedMemoryExecutionStrategy(n_runners=2, shared_agent_loop=False)
    trainer = agl.Trainer(strategy=strategy, progress="off", algorithm=agl.Baseline(polling_interval=0.05))
    trainer.dev(agent, [{"together": True}, {"together": True}])
    assert len(set(agent.loops)) == 2  # one loop per runner thread


def test_the_shared_agent_loop_adds_two_cross_thread_calls_per_rollout(monkeypatch: pytest.MonkeyPatch) -> None:
    # The regression guard of docs/benchmarks-appendix.md ("A regression to find"): the hop to the shared loop and back
    # (a2f1a4c) is what made a no-op shm rollout cost more CPU; a further hop per rollout would cost more again.
    own = _cross_thread_calls_per_rollout(monkeypatch, False, 40)
    shared = _cross_thread_calls_per_rollout(monkeypatch, True, 40)
    assert own < 1.5  # the tracer's span writer answering the runner's loop, once per rollout
    assert 1.9 < shared - own < 2.5  # the agent's start on the shared loop, and its end back on the runner's


def test_shared_agent_loop_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match="shared_agent_loop must be True or False"):
        SharedMemoryExecutionStrategy(n_runners=2, shared_agent_loop="no")  # type: ignore[arg-type]


langchain_openai = pytest.importorskip("langchain_openai")


@agl.rollout
async def langchain_agent(task: Any, llm: agl.LLM) -> float:
    # ChatOpenAI instances share one cached httpx.AsyncClient per process (per base URL and timeout).
    chat = langchain_openai.ChatOpenAI(model=llm.model, base_url=llm.endpoint, api_key="unused", max_retries=0)
    reply = await chat.ainvoke(f"question {task}")
    return 1.0 if reply.content else 0.0


def test_an_async_langchain_agent_works_with_several_shm_runner_threads() -> None:
    with FakeOpenAIServer(delay=0.01) as server:
        trainer = agl.Trainer(
            strategy="shm",
            n_runners=4,
            progress="off",
            algorithm=agl.Baseline(polling_interval=0.05, max_queue_length=8),
            initial_resources={"llm": agl.LLM(endpoint=server.base_url, model="fake")},
        )
        trainer.dev(langchain_agent, list(range(24)))
        rollouts = asyncio.run(trainer.store.query_rollouts())
    errors = []
    for rollout in rollouts:
        if rollout.status != "succeeded":
            attempt = asyncio.run(trainer.store.get_latest_attempt(rollout.rollout_id))
            errors.append((attempt.metadata or {}).get("error") if attempt is not None else None)
    assert collections.Counter(rollout.status for rollout in rollouts) == {"succeeded": 24}, errors
