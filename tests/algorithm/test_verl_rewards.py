"""The VERL daemon trains every row of a rollout on the rollout's outcome (its last reward span, `adapter.rewards`),
not on the last reward the adapter's triplet matching left on a call; with `failure_reward`, a rollout in which the
agent raised is trained with that outcome while infrastructure failures stay out of the batch. A real store; a
scripted runner plays the agents and the LLM proxy."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, Optional

import pytest

from agentlightning.adapter import LlmProxyTraceToTriplet
from agentlightning.algorithm.verl.daemon import AgentModeDaemon
from agentlightning.llm_proxy import LLMProxy
from agentlightning.store.memory.store import InMemoryLightningStore
from agentlightning.types import Span
from agentlightning.utils.io_loop import io_loop

pytest.importorskip("numpy")


def _span(rollout_id: str, attempt_id: str, sequence_id: int, name: str, **attributes: Any) -> Span:
    return Span.from_attributes(
        attributes=attributes, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=sequence_id, name=name
    )


async def scripted_runner(store: InMemoryLightningStore, expected: int) -> None:
    """Task {"x": k, "end": how}: two proxy calls, a step reward 0.3 after them, then the outcome k / 10 (the runner
    writes rewards after the proxy numbered both calls); `end` "agent" / "infrastructure" fails the attempt with that
    error source instead of emitting the outcome."""
    done = 0
    while done < expected:
        claimed = await store.dequeue_rollout(worker_id="w1")
        if claimed is None:
            await asyncio.sleep(0.01)
            continue
        task: dict[str, Any] = claimed.input  # type: ignore[assignment]
        rid, aid, x = claimed.rollout_id, claimed.attempt.attempt_id, int(task["x"])
        for seq, token in ((1, 1), (2, 2)):
            ids = {"prompt_token_ids": [100, x, token], "response_token_ids": [token]}
            await store.add_span(
                _span(rid, aid, seq, "raw_gen_ai_request", **ids, **{"gen_ai.response.id": f"{rid}{seq}"})
            )
        await store.add_span(_span(rid, aid, 3, "agentlightning.reward", reward=0.3))
        end: Optional[str] = task.get("end")
        if end is None:
            await store.add_span(_span(rid, aid, 4, "agentlightning.reward", reward=x / 10))
            await store.update_attempt(rid, aid, status="succeeded")
        else:
            await store.update_attempt(rid, aid, status="failed", metadata={"error_source": end})
        done += 1


@pytest.fixture
def store() -> InMemoryLightningStore:
    return InMemoryLightningStore()


def make_daemon(store: InMemoryLightningStore, **settings: Any) -> AgentModeDaemon:
    return AgentModeDaemon(
        train_rollout_n=1,
        train_information={"model": "policy"},
        pad_token_id=0,
        llm_proxy=LLMProxy(store=store),
        store=store,
        adapter=LlmProxyTraceToTriplet(),
        poll_interval=0.05,
        **settings,
    )


def close(daemon: AgentModeDaemon) -> None:
    daemon.close()
    if daemon.llm_proxy is not None and daemon.llm_proxy.is_running():
        daemon.llm_proxy.stop()


@pytest.fixture
def daemon(store: InMemoryLightningStore) -> Iterator[AgentModeDaemon]:
    daemon = make_daemon(store)
    yield daemon
    close(daemon)


def run(daemon: AgentModeDaemon, store: InMemoryLightningStore, tasks: list[dict[str, Any]]) -> None:
    daemon.set_up_data_and_server(tasks, ["127.0.0.1:8000"], is_train=True)
    future = io_loop().submit(scripted_runner(store, len(tasks)))
    daemon.run_until_all_finished(timeout_seconds=60)
    future.result(timeout=60)


def row_rewards(daemon: AgentModeDaemon) -> list[float]:
    batch = daemon.get_train_batch(max_prompt_length=4, max_response_length=2)
    return [sum(scores) for scores in batch.token_level_scores]


def test_every_row_carries_the_rollouts_outcome_not_the_last_reward_the_triplets_matched(
    daemon: AgentModeDaemon, store: InMemoryLightningStore
) -> None:
    run(daemon, store, [{"x": 9}])
    (finished,) = daemon.finished
    assert [t.reward for t in finished.triplets] == [0.9, 0.3]  # the spec's sequence-id matching, for the triplets
    assert finished.reward == 0.9
    assert row_rewards(daemon) == pytest.approx([0.9, 0.9])


def test_without_a_failure_reward_failed_rollouts_are_not_trained(
    daemon: AgentModeDaemon, store: InMemoryLightningStore
) -> None:
    run(daemon, store, [{"x": 5}, {"x": 6, "end": "agent"}, {"x": 7, "end": "infrastructure"}])
    assert row_rewards(daemon) == pytest.approx([0.5, 0.5])
    metrics = daemon.get_train_batch(max_prompt_length=4, max_response_length=2).metrics
    assert (metrics["training/n_rollouts"], metrics["training/n_rollouts_failed"]) == (3, 2)
    assert metrics["training/n_rollouts_failed_scored"] == 0


def test_a_rollout_in_which_the_agent_raised_is_trained_with_the_failure_reward(store: InMemoryLightningStore) -> None:
    daemon = make_daemon(store, failure_reward=-1.0)
    try:
        run(daemon, store, [{"x": 5}, {"x": 6, "end": "agent"}, {"x": 7, "end": "infrastructure"}])
        assert row_rewards(daemon) == pytest.approx([0.5, 0.5, -1.0, -1.0])
        metrics = daemon.get_train_batch(max_prompt_length=4, max_response_length=2).metrics
        assert (metrics["training/n_rollouts_failed"], metrics["training/n_rollouts_failed_scored"]) == (1, 1)
    finally:
        close(daemon)


def test_a_failure_reward_that_is_not_a_number_is_refused(store: InMemoryLightningStore) -> None:
    with pytest.raises(ValueError, match="failure_reward must be a finite number or None"):
        make_daemon(store, failure_reward=float("nan"))
