"""Secure by default (loopback, API key, constant-time check) and the server lifecycle (start, stop, delegation)."""

from __future__ import annotations

import asyncio
import multiprocessing
import pickle
import socket

import pytest

from agentlightning.store import InMemoryLightningStore, LightningStoreCapabilities
from agentlightning.store.client_server import (
    LightningStoreClient,
    LightningStoreServer,
    StoreUnauthorizedError,
)
from agentlightning.store.threading import LightningStoreThreaded

from .conftest import call, enqueue_in_child, start_server, start_server_async, stop_server


def test_the_default_bind_is_loopback_on_4747() -> None:
    server = LightningStoreServer(InMemoryLightningStore())
    assert (server.host, server.port) == ("127.0.0.1", 4747)
    assert server.endpoint == "http://127.0.0.1:4747"


def test_a_public_bind_without_a_key_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGL_STORE_API_KEY", raising=False)
    with pytest.raises(ValueError, match="without an API key"):
        LightningStoreServer(InMemoryLightningStore(), host="0.0.0.0", port=0)
    insecure = LightningStoreServer(InMemoryLightningStore(), host="0.0.0.0", port=0, insecure=True)
    assert insecure.endpoint.startswith("http://127.0.0.1:")
    keyed = LightningStoreServer(InMemoryLightningStore(), host="0.0.0.0", port=0, api_key="k")
    assert keyed.settings.api_key == "k"


def test_every_route_but_health_needs_the_key() -> None:
    server = start_server(api_key="s3cret")
    try:
        assert call(server, "GET", "/v1/agl/health").status == 200
        missing = call(server, "GET", "/v1/agl/statistics")
        assert missing.status == 401 and missing.json["detail"].startswith("Missing API key")
        assert missing.headers["www-authenticate"].startswith("Bearer")
        wrong = call(server, "GET", "/v1/agl/statistics", headers={"Authorization": "Bearer nope"})
        assert wrong.status == 401 and wrong.json["detail"].startswith("Invalid API key")
        for path in ("/v1/agl/metrics", "/v1/traces", "/v1/agl/openapi.json", "/v1/agl/nothing"):
            assert call(server, "GET" if "traces" not in path else "POST", path).status == 401, path
        ok = call(server, "GET", "/v1/agl/statistics", headers={"Authorization": "Bearer s3cret"})
        assert ok.status == 200
    finally:
        stop_server(server)


async def test_a_client_with_a_wrong_key_gets_a_typed_error() -> None:
    server = await start_server_async(api_key="s3cret")
    try:
        with pytest.raises(StoreUnauthorizedError):
            await LightningStoreClient(server.endpoint, api_key="wrong").enqueue_rollout("x")
        good = LightningStoreClient(server.endpoint, api_key="s3cret")
        assert (await good.enqueue_rollout("x")).rollout_id.startswith("ro-")
        await good.close()
    finally:
        await server.stop()


async def test_start_on_a_taken_port_gives_a_friendly_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = LightningStoreServer(InMemoryLightningStore(), port=port)
        with pytest.raises(RuntimeError, match="Another process may already be using this port"):
            await server.start()
        with pytest.raises(RuntimeError, match="Another process may already be using this port"):
            await server.run_forever()


async def test_port_zero_picks_a_free_port_and_stop_frees_it() -> None:
    server = await start_server_async()
    port = server.port
    assert port != 0
    assert call(server, "GET", "/v1/agl/health").json == {"status": "ok"}
    await server.stop()
    again = LightningStoreServer(InMemoryLightningStore(), port=port)
    await again.start()
    await again.stop()


async def test_run_forever_serves_until_stopped() -> None:
    server = LightningStoreServer(InMemoryLightningStore(), port=0)
    task = asyncio.create_task(server.run_forever())
    for _ in range(200):
        await asyncio.sleep(0.02)
        if server._uvicorn is not None and server._uvicorn.started:
            break
    client = LightningStoreClient(server.endpoint)
    assert (await client.enqueue_rollout("x")).rollout_id.startswith("ro-")
    await client.close()
    await server.stop()
    await asyncio.wait_for(task, 10)


async def test_the_server_object_is_a_store_in_its_own_process() -> None:
    server = await start_server_async()
    try:
        rollout = await server.enqueue_rollout("local")
        assert (await server.get_rollout_by_id(rollout.rollout_id)) is not None
        assert server.capabilities == LightningStoreCapabilities(
            thread_safe=True, async_safe=True, zero_copy=True, otlp_traces=True
        )
        assert server.otlp_traces_endpoint() == f"{server.endpoint}/v1/traces"
    finally:
        await server.stop()


def test_a_store_that_is_not_thread_safe_is_wrapped() -> None:
    class SingleThreaded(InMemoryLightningStore):
        @property
        def capabilities(self) -> LightningStoreCapabilities:
            return LightningStoreCapabilities(thread_safe=False, async_safe=True, zero_copy=False, otlp_traces=False)

    server = LightningStoreServer(SingleThreaded(), port=0)
    assert isinstance(server.store, LightningStoreThreaded)


def test_several_workers_need_a_shared_store() -> None:
    with pytest.raises(ValueError, match="does not support zero-copy"):
        LightningStoreServer(InMemoryLightningStore(), port=0, n_workers=2)
    with pytest.raises(ValueError, match="not both"):
        LightningStoreServer(InMemoryLightningStore(), port=0, launcher_args={"port": 1})


@pytest.mark.parametrize("method", ["fork", "spawn"])
async def test_a_server_object_in_a_child_process_writes_through_http(method: str) -> None:
    server = await start_server_async(api_key="child-key")
    try:
        context = multiprocessing.get_context(method)
        queue = context.Queue()
        process = context.Process(target=enqueue_in_child, args=(server, queue))
        process.start()
        result = await asyncio.to_thread(queue.get, True, 60)
        await asyncio.to_thread(process.join, 30)
        assert result.startswith("ro-"), result
        assert [r.rollout_id for r in await server.query_rollouts()] == [result]
    finally:
        await server.stop()


def test_a_pickled_server_delegates_even_in_the_same_process() -> None:
    server = LightningStoreServer(InMemoryLightningStore(), port=0)
    copy = pickle.loads(pickle.dumps(server))
    assert copy.store is None
    assert isinstance(copy._backend(), LightningStoreClient)


def test_an_overlong_idempotency_key_is_rejected(server: LightningStoreServer) -> None:
    answer = call(server, "POST", "/v1/agl/queues/rollouts/dequeue", {}, headers={"Idempotency-Key": "k" * 300})
    assert answer.status == 400 and "Idempotency-Key" in answer.json["detail"]


def test_cors_allows_only_configured_origins() -> None:
    server = start_server(cors_allow_origins=["http://dashboard.local"])
    try:
        preflight = {"Origin": "http://dashboard.local", "Access-Control-Request-Method": "POST"}
        allowed = call(server, "OPTIONS", "/v1/agl/rollouts/search", headers=preflight)
        assert allowed.headers.get("access-control-allow-origin") == "http://dashboard.local"
        other = call(server, "GET", "/v1/agl/statistics", headers={"Origin": "http://evil.local"})
        assert "access-control-allow-origin" not in other.headers
    finally:
        stop_server(server)


async def test_stop_answers_long_polls_at_once_and_the_server_can_start_again() -> None:
    import time

    from agentlightning.store.client_server import StoreConnectionError

    server = await start_server_async()
    client = LightningStoreClient(server.endpoint, retry_delays=())
    started = await client.start_rollout("task")
    waiter = asyncio.create_task(client.wait_for_rollouts(rollout_ids=[started.rollout_id]))
    await asyncio.sleep(0.3)
    began = time.monotonic()
    await server.stop()
    assert time.monotonic() - began < 3
    with pytest.raises(StoreConnectionError):
        await asyncio.wait_for(waiter, 10)
    await server.start()  # same port, same store; long polls wait again
    try:
        began = time.monotonic()
        assert await client.wait_for_rollouts(rollout_ids=[started.rollout_id], timeout=0.5) == []
        assert time.monotonic() - began >= 0.45  # the stop signal was re-armed
        await client.update_attempt(started.rollout_id, "latest", status="succeeded")
        done = await client.wait_for_rollouts(rollout_ids=[started.rollout_id], timeout=5)
        assert [r.status for r in done] == ["succeeded"]
    finally:
        await client.close()
        await server.stop()
