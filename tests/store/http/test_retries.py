"""Retries cannot duplicate: writes whose response was lost are applied once; 4xx is never retried."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentlightning.store import InvalidArgumentError, RolloutNotFoundError
from agentlightning.store.client_server import (
    LightningStoreClient,
    LightningStoreServer,
    RetryPolicy,
    StoreConnectionError,
    StoreHTTPError,
)
from agentlightning.types import LLM

from ..helpers import make_readable_span, make_span
from .proxy import DroppingProxy

FAST = RetryPolicy(max_retries=4, initial_delay=0.01, max_delay=0.05)


@pytest.fixture
async def lossy(server: LightningStoreServer) -> AsyncIterator[tuple[DroppingProxy, LightningStoreClient]]:
    with DroppingProxy(server.port) as proxy:
        client = LightningStoreClient(proxy.url, retry_policy=FAST)
        try:
            yield proxy, client
        finally:
            await client.close()


async def test_a_lost_enqueue_response_enqueues_once(lossy: tuple[DroppingProxy, LightningStoreClient]) -> None:
    proxy, client = lossy
    proxy.drop(1)
    rollout = await client.enqueue_rollout("task")
    assert proxy.dropped == 1
    assert [r.rollout_id for r in await client.query_rollouts()] == [rollout.rollout_id]


async def test_a_lost_dequeue_response_returns_the_claimed_rollout(
    lossy: tuple[DroppingProxy, LightningStoreClient],
) -> None:
    proxy, client = lossy
    queued = [await client.enqueue_rollout(i) for i in range(2)]
    proxy.drop(2)
    claimed = await client.dequeue_rollout(worker_id="w1")
    assert proxy.dropped == 2
    assert claimed is not None and claimed.rollout_id == queued[0].rollout_id
    assert len(await client.query_attempts(queued[0].rollout_id)) == 1
    second = await client.dequeue_rollout()
    assert second is not None and second.rollout_id == queued[1].rollout_id


async def test_a_lost_start_rollout_response_creates_one_rollout(
    lossy: tuple[DroppingProxy, LightningStoreClient],
) -> None:
    proxy, client = lossy
    proxy.drop(1)
    started = await client.start_rollout("task")
    assert [r.rollout_id for r in await client.query_rollouts()] == [started.rollout_id]


async def test_lost_span_responses_store_each_span_once(lossy: tuple[DroppingProxy, LightningStoreClient]) -> None:
    proxy, client = lossy
    started = await client.start_rollout("task")
    attempt_id = started.attempt.attempt_id
    proxy.drop(1)
    first = await client.add_otel_span(started.rollout_id, attempt_id, make_readable_span())
    proxy.drop(1)
    second = await client.add_span(make_span(started.rollout_id, attempt_id, 7))
    proxy.drop(1)
    batch = await client.add_many_spans([make_span(started.rollout_id, attempt_id, 8)])
    assert first is not None and first.sequence_id == 1
    assert second is not None and len(batch) == 1
    assert [s.sequence_id for s in await client.query_spans(started.rollout_id)] == [1, 7, 8]


async def test_a_lost_update_response_is_applied_once(lossy: tuple[DroppingProxy, LightningStoreClient]) -> None:
    proxy, client = lossy
    llm = LLM(endpoint="http://127.0.0.1:1/v1", model="m")
    proxy.drop(1)
    update = await client.update_resources("shared", {"llm": llm})
    assert update.version == 1
    started = await client.start_rollout("task")
    proxy.drop(1)
    attempt = await client.update_attempt(started.rollout_id, "latest", status="succeeded")
    assert attempt.status == "succeeded"
    proxy.drop(1)
    new_attempt = await client.start_attempt(started.rollout_id)
    assert new_attempt.attempt.sequence_id == 2
    assert len(await client.query_attempts(started.rollout_id)) == 2


async def test_an_error_answer_that_was_lost_is_replayed(lossy: tuple[DroppingProxy, LightningStoreClient]) -> None:
    proxy, client = lossy
    proxy.drop(1)
    with pytest.raises(RolloutNotFoundError, match="ro-missing"):
        await client.update_rollout("ro-missing", status="failed")


async def test_client_errors_are_not_retried(server: LightningStoreServer) -> None:
    calls = _count_requests(server)
    client = LightningStoreClient(server.endpoint, retry_policy=FAST)
    with pytest.raises(InvalidArgumentError):
        await client.query_rollouts(sort_by="input")
    assert calls["n"] == 1
    await client.close()


async def test_503_is_retried_until_it_succeeds(server: LightningStoreServer) -> None:
    calls = _count_requests(server, fail_first=2, status=503)
    client = LightningStoreClient(server.endpoint, retry_policy=FAST)
    assert (await client.enqueue_rollout("x")).rollout_id.startswith("ro-")
    assert calls["n"] == 3
    await client.close()


async def test_500_is_not_retried(server: LightningStoreServer) -> None:
    calls = _count_requests(server, fail_first=1, status=500)
    client = LightningStoreClient(server.endpoint, retry_policy=FAST)
    with pytest.raises(StoreHTTPError) as caught:
        await client.enqueue_rollout("x")
    assert caught.value.status == 500 and calls["n"] == 1
    await client.close()


async def test_an_unreachable_server_raises_after_the_retries() -> None:
    client = LightningStoreClient("http://127.0.0.1:9", retry_policy=RetryPolicy(max_retries=2, initial_delay=0.01))
    started = time.monotonic()
    with pytest.raises(StoreConnectionError, match="Cannot reach"):
        await client.enqueue_rollout("x")
    assert time.monotonic() - started < 5
    assert isinstance(StoreConnectionError("x"), ConnectionError)
    await client.close()


async def test_dequeue_from_a_server_never_reached_raises_store_connection_error() -> None:
    client = LightningStoreClient("http://127.0.0.1:9", retry_delays=())
    with pytest.raises(StoreConnectionError, match="Cannot reach"):
        await client.dequeue_rollout()
    with pytest.raises(StoreConnectionError):
        await client.dequeue_many_rollouts(limit=3)
    await client.close()


async def test_dequeue_during_an_outage_of_a_server_reached_before_is_an_empty_queue(
    lossy: tuple[DroppingProxy, LightningStoreClient],
) -> None:
    proxy, client = lossy
    await client.statistics()
    proxy.drop(100)
    assert await client.dequeue_rollout() is None


async def test_a_claim_whose_answer_is_lost_after_every_retry_is_replayed_by_the_next_dequeue(
    lossy: tuple[DroppingProxy, LightningStoreClient],
) -> None:
    proxy, client = lossy
    queued = [await client.enqueue_rollout(i) for i in range(2)]
    # Every try of the claim commits and every answer is lost (the client may also resend once on a fresh connection
    # when a kept-alive one fails before any answer byte, so drop more than the retries).
    proxy.drop(1000)
    assert await client.dequeue_rollout(worker_id="w1") is None
    assert proxy.dropped >= FAST.max_retries + 1
    proxy.drop(0)
    replayed = await client.dequeue_rollout(worker_id="w1")
    assert replayed is not None and replayed.rollout_id == queued[0].rollout_id
    assert [a.attempt_id for a in await client.query_attempts(queued[0].rollout_id)] == [replayed.attempt.attempt_id]
    second = await client.dequeue_rollout(worker_id="w1")
    assert second is not None and second.rollout_id == queued[1].rollout_id
    assert await client.dequeue_rollout(worker_id="w1") is None


async def test_explicit_retry_delays_are_followed_exactly(server: LightningStoreServer) -> None:
    calls = _count_requests(server, fail_first=2, status=502)
    client = LightningStoreClient(server.endpoint, retry_delays=(0.05, 0.1))
    await client.enqueue_rollout("x")
    gaps = [b - a for a, b in zip(calls["times"], calls["times"][1:], strict=False)]
    assert calls["n"] == 3
    assert 0.05 <= gaps[0] < 0.5 and 0.1 <= gaps[1] < 0.6
    await client.close()


async def test_empty_retry_delays_make_one_try(server: LightningStoreServer) -> None:
    calls = _count_requests(server, fail_first=1, status=503)
    client = LightningStoreClient(server.endpoint, retry_delays=())
    with pytest.raises(StoreHTTPError):
        await client.enqueue_rollout("x")
    assert calls["n"] == 1
    await client.close()


async def test_a_failing_health_probe_stops_the_retries(server: LightningStoreServer) -> None:
    calls = _count_requests(server, fail_first=10, status=503, fail_health=True)
    client = LightningStoreClient(server.endpoint, retry_delays=(0.01, 0.01, 0.01), health_retry_delays=(0.01,))
    with pytest.raises(StoreHTTPError):
        await client.enqueue_rollout("x")
    assert calls["n"] == 1 and calls["health"] == 2
    await client.close()


async def test_a_key_reused_for_another_request_is_rejected(server: LightningStoreServer) -> None:
    from .conftest import call

    headers = {"Idempotency-Key": "k-1"}
    first = call(server, "POST", "/v1/agl/queues/rollouts/enqueue", {"rollouts": [{"input": 1}]}, headers=headers)
    again = call(server, "POST", "/v1/agl/queues/rollouts/enqueue", {"rollouts": [{"input": 1}]}, headers=headers)
    other = call(server, "POST", "/v1/agl/queues/rollouts/enqueue", {"rollouts": [{"input": 2}]}, headers=headers)
    assert first.status == again.status == 201 and first.body == again.body
    assert again.headers.get("idempotent-replayed") == "true"
    assert other.status == 422 and other.json["error_type"] == "IdempotencyKeyConflict"


async def test_a_retry_during_the_first_request_waits_for_its_result(server: LightningStoreServer) -> None:
    from .conftest import call

    started = await server.start_rollout("task")
    headers = {"Idempotency-Key": "concurrent"}
    path = "/v1/agl/spans/next/batch"
    payload = {"rollout_attempt_ids": [[started.rollout_id, started.attempt.attempt_id]] * 50}
    answers = await asyncio.gather(
        *(asyncio.to_thread(call, server, "POST", path, payload, headers=headers) for _ in range(6))
    )
    assert len({answer.body for answer in answers}) == 1
    assert answers[0].json["sequence_ids"] == list(range(1, 51))


def _count_requests(
    server: LightningStoreServer, *, fail_first: int = 0, status: int = 503, fail_health: bool = False
) -> dict[str, Any]:
    """Wrap the server's app: count store requests and answer `status` to the first `fail_first` of them."""
    state: dict[str, Any] = {"n": 0, "health": 0, "times": []}
    inner = server.app.middleware_stack or server.app.build_middleware_stack()

    async def counting(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/health"):
            state["health"] += 1
            if fail_health:
                await _answer(send, 503)
                return
        elif scope["type"] == "http":
            state["n"] += 1
            state["times"].append(time.monotonic())
            if state["n"] <= fail_first:
                await _answer(send, status)
                return
        await inner(scope, receive, send)

    server.app.middleware_stack = counting  # type: ignore[assignment]
    return state


async def _answer(send: Any, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"detail": "injected", "error_type": "Injected"}'})


def test_a_half_imported_aiohttp_in_another_thread_does_not_break_error_classification(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import ModuleType

    from agentlightning.store.http.client.transport import _connection_errors  # pyright: ignore[reportPrivateUsage]

    monkeypatch.setitem(sys.modules, "aiohttp", ModuleType("aiohttp"))  # what another thread's import exposes
    assert _connection_errors() == (OSError, asyncio.TimeoutError)
