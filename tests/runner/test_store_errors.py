"""Which store errors a runner rides out and for how long: an outage (connection errors, 502/503/504, a busy or
reopening database) is retried for `store_retry_timeout` seconds per call of an attempt, a server error (a 500) for
`SERVER_ERROR_RETRY_SECONDS`; a store call that fails for good fails the attempt (or, for its status, leaves it to the
store's health rules) and the runner goes on. A server error on a claim is retried: the runner lives on."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Optional

import pytest

import agentlightning as agl
from agentlightning.runner import LitAgentRunner, store_calls
from agentlightning.runner.errors import is_retryable_store_error, is_server_error, is_transient_store_error
from agentlightning.store import InMemoryLightningStore
from agentlightning.store.errors import InvalidArgumentError, StoreBusyError, StoreClosedError, StoreOpenError
from agentlightning.store.http.errors import StoreConnectionError, StoreHTTPError
from agentlightning.tracer import DummyTracer
from agentlightning.types import ResourcesUpdate, RolloutConfig, Span

from .agents import ScriptedAgent


def _runner(**kwargs: Any) -> LitAgentRunner[Any]:
    kwargs.setdefault("tracer", DummyTracer())
    kwargs.setdefault("heartbeat_interval", 0.05)
    kwargs.setdefault("interval_jitter", 0.0)
    kwargs.setdefault("poll_interval", 0.05)
    return LitAgentRunner(**kwargs)


@pytest.mark.parametrize(
    "error",
    [
        ConnectionError("refused"),
        StoreConnectionError("cannot reach"),
        TimeoutError(),
        asyncio.TimeoutError(),
        StoreHTTPError(502, "bad gateway"),
        StoreHTTPError(503, "unavailable"),
        StoreHTTPError(504, "gateway timeout"),
        StoreBusyError("database is locked"),
        StoreOpenError("reopening"),
        StoreClosedError("restarting"),
    ],
    ids=repr,
)
def test_an_outage_is_transient(error: Exception) -> None:
    assert is_transient_store_error(error)


@pytest.mark.parametrize(
    "error",
    [
        StoreHTTPError(500, "a bug in the store"),
        StoreHTTPError(501, "not implemented"),
        StoreHTTPError(404, "no such route"),
        InvalidArgumentError("bad argument"),
        PermissionError("read-only file system"),
        OSError(24, "Too many open files"),
        ValueError("unknown rollout"),
    ],
    ids=repr,
)
def test_an_error_that_would_repeat_is_not_transient(error: Exception) -> None:
    assert not is_transient_store_error(error)


@pytest.mark.parametrize(
    "error",
    [StoreHTTPError(500, "a bug or a passing fault"), StoreHTTPError(507, "disk full")],
    ids=repr,
)
def test_a_server_error_is_retried_for_a_while(error: Exception) -> None:
    assert is_server_error(error) and is_retryable_store_error(error) and not is_transient_store_error(error)


@pytest.mark.parametrize(
    "error", [StoreHTTPError(404, "no such route"), InvalidArgumentError("bad argument"), ValueError("x")], ids=repr
)
def test_a_client_error_is_not_retried(error: Exception) -> None:
    assert not is_retryable_store_error(error)


class RejectingStore(InMemoryLightningStore):
    """A real in-memory store that answers 500 to every span write of a rollout whose task is {"bad": ...}."""

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        for span in spans:
            rollout = await self.get_rollout_by_id(span.rollout_id)
            if rollout is not None and isinstance(rollout.input, dict) and "bad" in rollout.input:
                raise StoreHTTPError(500, "duplicate key value violates a constraint", "IntegrityError")
        return await super().add_many_spans(spans)


async def test_a_500_answer_to_a_result_write_that_persists_fails_the_attempt_and_the_runner_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(store_calls, "SERVER_ERROR_RETRY_SECONDS", 0.5)
    store = RejectingStore()
    ids = [(await store.enqueue_rollout(task)).rollout_id for task in ({"bad": 1, "reward": 0.3}, {"reward": 0.7})]
    runner = _runner(max_rollouts=2)
    with runner.run_context(agent=ScriptedAgent(), store=store):
        await asyncio.wait_for(runner.iter(), timeout=20)
    rollouts = await store.wait_for_rollouts(rollout_ids=ids, timeout=5)
    assert [rollout.status for rollout in rollouts] == ["failed", "succeeded"]
    attempt = await store.get_latest_attempt(ids[0])
    assert attempt is not None and (attempt.metadata or {})["error_type"] == "ResultNotStored"
    assert "HTTP 500 (IntegrityError): duplicate key value" in (attempt.metadata or {})["error"]


class StatusWriteOutageStore(InMemoryLightningStore):
    """A real in-memory store whose every status write answers 503 (heartbeats still get through)."""

    async def update_attempt(self, rollout_id: str, attempt_id: str, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("status") is not None:
            raise StoreHTTPError(503, "the write path is down")
        return await super().update_attempt(rollout_id, attempt_id, *args, **kwargs)


async def test_a_status_write_that_keeps_failing_is_given_up_and_the_store_health_rules_take_over() -> None:
    store = StatusWriteOutageStore()
    config = RolloutConfig(unresponsive_seconds=0.5, max_attempts=1)
    rollout = await store.enqueue_rollout({"reward": 1.0}, config=config)
    runner = _runner(max_rollouts=1, store_retry_timeout=0.5)
    with runner.run_context(agent=ScriptedAgent(), store=store):
        await asyncio.wait_for(runner.iter(), timeout=20)  # gave up on the write instead of retrying forever
    # The attempt gets no more heartbeats, so the store declares it unresponsive (the healthcheck runs on reads).
    finished = await store.wait_for_rollouts(rollout_ids=[rollout.rollout_id], timeout=20)
    assert [r.status for r in finished] == ["failed"]
    attempt = await store.get_latest_attempt(rollout.rollout_id)
    assert attempt is not None and attempt.status == "unresponsive"


class FlakyClaimStore(InMemoryLightningStore):
    """Answers the first `failures` claims with `error`."""

    def __init__(self, failures: int, error: Exception) -> None:
        super().__init__()
        self.failures = failures
        self.error = error
        self.claims = 0

    async def dequeue_rollout(self, worker_id: Optional[str] = None) -> Any:
        self.claims += 1
        if self.claims <= self.failures:
            raise self.error
        return await super().dequeue_rollout(worker_id=worker_id)


async def test_a_500_answer_to_a_claim_is_retried_and_the_runner_goes_on() -> None:
    store = FlakyClaimStore(2, StoreHTTPError(500, "a passing fault in the claim path"))
    rollout = await store.enqueue_rollout({"reward": 1.0})
    runner = _runner(max_rollouts=1)
    with runner.run_context(agent=ScriptedAgent(), store=store):
        await asyncio.wait_for(runner.iter(), timeout=20)
    (finished,) = await store.wait_for_rollouts(rollout_ids=[rollout.rollout_id], timeout=5)
    assert finished.status == "succeeded" and store.claims == 3


async def test_a_client_error_answer_to_a_claim_ends_the_runner_with_that_error() -> None:
    store = FlakyClaimStore(1, StoreHTTPError(404, "no such route"))
    runner = _runner()
    with runner.run_context(agent=ScriptedAgent(), store=store), pytest.raises(StoreHTTPError, match="HTTP 404"):
        await asyncio.wait_for(runner.iter(), timeout=20)


class ResourcesOutageStore(InMemoryLightningStore):
    """A real in-memory store whose first `outage` resource reads fail as if the server were restarting."""

    def __init__(self, outage: int) -> None:
        super().__init__()
        self.outage = outage
        self.reads = 0

    async def get_resources_by_id(self, resources_id: str) -> Optional[ResourcesUpdate]:
        self.reads += 1
        if self.reads <= self.outage:
            raise StoreConnectionError("the store server is restarting")
        return await super().get_resources_by_id(resources_id)


async def test_a_store_outage_during_the_resources_fetch_is_ridden_out() -> None:
    store = ResourcesOutageStore(outage=2)
    seen: list[str] = []

    @agl.rollout
    def agent(task: Any, prompt_template: agl.PromptTemplate) -> float:
        seen.append(prompt_template.template)
        return 1.0

    update = await store.add_resources({"p": agl.PromptTemplate(template="v1", engine="f-string")})
    rollout = await store.enqueue_rollout({}, resources_id=update.resources_id)
    runner = _runner(max_rollouts=1)
    with runner.run_context(agent=agent, store=store):
        await asyncio.wait_for(runner.iter(), timeout=20)
    (finished,) = await store.wait_for_rollouts(rollout_ids=[rollout.rollout_id], timeout=5)
    assert finished.status == "succeeded" and seen == ["v1"] and store.reads == 3


async def test_a_resources_fetch_is_retried_no_longer_than_the_store_retry_timeout() -> None:
    store = ResourcesOutageStore(outage=10**9)
    update = await store.add_resources({"p": agl.PromptTemplate(template="v1", engine="f-string")})
    rollout = await store.enqueue_rollout({}, resources_id=update.resources_id)
    runner = _runner(max_rollouts=1, store_retry_timeout=0.3)
    with runner.run_context(agent=ScriptedAgent(), store=store):
        await asyncio.wait_for(runner.iter(), timeout=20)
    (finished,) = await store.wait_for_rollouts(rollout_ids=[rollout.rollout_id], timeout=5)
    assert finished.status == "failed"
    attempt = await store.get_latest_attempt(rollout.rollout_id)
    assert attempt is not None and (attempt.metadata or {})["error_type"] == "StoreConnectionError"
