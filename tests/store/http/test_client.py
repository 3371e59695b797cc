"""The client behaves like a direct store: types, errors, omitted vs null fields, awkward ids, long waits."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import pickle
import threading
import time

import pytest

from agentlightning.store import InMemoryLightningStore, RolloutNotFoundError
from agentlightning.store.base import UNSET
from agentlightning.store.client_server import LightningStoreClient, LightningStoreServer, store_from_url
from agentlightning.store.http.server.app import ServerSettings
from agentlightning.store.http.server.handlers import ServerLimits
from agentlightning.store.url import store_from_url as open_store
from agentlightning.types import LLM, PaginatedResult, Rollout

from .conftest import call, enqueue_in_child, start_server_async

LLM_RESOURCE = LLM(endpoint="http://127.0.0.1:1/v1", model="m")


@pytest.fixture
async def client(server: LightningStoreServer):  # type: ignore[no-untyped-def]
    instance = LightningStoreClient(server.endpoint)
    yield instance
    await instance.close()


async def test_http_urls_open_a_client(server: LightningStoreServer) -> None:
    store = open_store(server.endpoint)
    assert isinstance(store, LightningStoreClient)
    assert store.server_address_root == server.endpoint
    assert isinstance(store_from_url("https://example.invalid:4747"), LightningStoreClient)
    await store.close()


async def test_server_address_is_the_api_base_and_server_address_root_the_bare_root(
    server: LightningStoreServer,
) -> None:
    import aiohttp

    for given in (server.endpoint, server.endpoint + "/", server.endpoint + "/v1/agl", server.endpoint + "/v1/agl/"):
        store = LightningStoreClient(given)
        assert store.server_address == f"{server.endpoint}/v1/agl"
        assert store.server_address_root == server.endpoint
        assert store.otlp_traces_endpoint() == f"{server.endpoint}/v1/traces"
        await store.enqueue_rollout("x")  # the client's own calls still reach the API
        await store.close()
    # 0.3 code builds REST URLs from server_address
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{store.server_address}/health") as response:
            assert response.status == 200
        async with session.get(f"{store.server_address}/rollouts") as response:
            assert response.status == 200
            assert (await response.json())["total"] == 4


async def test_capabilities_and_otlp_endpoint(client: LightningStoreClient, server: LightningStoreServer) -> None:
    assert client.capabilities == {"thread_safe": True, "async_safe": True, "zero_copy": False, "otlp_traces": True}
    assert client.otlp_traces_endpoint() == f"{server.endpoint}/v1/traces"


async def test_a_typed_error_keeps_its_type_message_and_ids(client: LightningStoreClient) -> None:
    with pytest.raises(RolloutNotFoundError, match=r"^Rollout ro-x not found$") as caught:
        await client.start_attempt("ro-x")
    assert caught.value.rollout_id == "ro-x"
    assert isinstance(caught.value, ValueError)


async def test_query_results_are_paginated_with_metadata(client: LightningStoreClient) -> None:
    for i in range(5):
        await client.enqueue_rollout(i)
    page = await client.query_rollouts(limit=2, offset=1, sort_by="start_time")
    assert isinstance(page, PaginatedResult)
    assert (len(page), page.limit, page.offset, page.total) == (2, 2, 1, 5)


async def test_a_rollout_without_attempts_comes_back_plain(client: LightningStoreClient) -> None:
    queued = await client.enqueue_rollout("task")
    stored = await client.get_rollout_by_id(queued.rollout_id)
    assert type(stored) is Rollout and not hasattr(stored, "attempt")


async def test_omitted_fields_are_unchanged_and_none_clears(client: LightningStoreClient) -> None:
    queued = await client.enqueue_rollout("task", mode="train", metadata={"a": 1})
    kept = await client.update_rollout(queued.rollout_id, status="running", mode=UNSET)
    assert kept.mode == "train" and kept.metadata == {"a": 1}
    cleared = await client.update_rollout(queued.rollout_id, mode=None, metadata=None)
    assert cleared.mode is None and cleared.metadata is None


async def test_ids_that_look_like_routes_still_work(client: LightningStoreClient) -> None:
    for resources_id in ("search", "latest", "a/b", "..", "x y?#%"):
        update = await client.update_resources(resources_id, {"llm": LLM_RESOURCE})
        assert update.resources_id == resources_id
        fetched = await client.get_resources_by_id(resources_id)
        assert fetched is not None and fetched.resources_id == resources_id
    worker = await client.update_worker("search", {"gpu": 1})
    assert worker.worker_id == "search" and worker.heartbeat_stats == {"gpu": 1}


async def test_get_search_routes_take_query_parameters(
    server: LightningStoreServer, client: LightningStoreClient
) -> None:
    first = await client.enqueue_rollout("a")
    await client.enqueue_rollout("b")
    await client.dequeue_rollout()
    answer = call(server, "GET", "/v1/agl/rollouts?status_in=queuing&status_in=requeuing&limit=5")
    assert answer.status == 200
    assert [item["input"] for item in answer.json["items"]] == ["b"]
    assert answer.json["limit"] == 5
    attempts = call(server, "GET", f"/v1/agl/rollouts/{first.rollout_id}/attempts?sort_order=desc").json
    assert attempts["total"] == 1


async def test_wait_longer_than_the_server_cap_keeps_polling() -> None:
    settings = ServerSettings(limits=ServerLimits(max_wait_seconds=0.2))
    server = await start_server_async(InMemoryLightningStore(), settings=settings)
    client = LightningStoreClient(server.endpoint, wait_slice_seconds=0.2)
    try:
        started = await client.start_rollout("task")

        async def finish() -> None:
            await asyncio.sleep(0.7)
            await client.update_attempt(started.rollout_id, "latest", status="succeeded")

        finisher = asyncio.create_task(finish())
        done = await client.wait_for_rollouts(rollout_ids=[started.rollout_id], timeout=None)
        await finisher
        assert [r.status for r in done] == ["succeeded"]
    finally:
        await client.close()
        await server.stop()


async def test_a_long_wait_for_an_unknown_rollout_returns(client: LightningStoreClient) -> None:
    finished = await client.start_rollout("x")
    await client.update_attempt(finished.rollout_id, "latest", status="failed")
    done = await asyncio.wait_for(
        client.wait_for_rollouts(rollout_ids=["ro-unknown", finished.rollout_id], timeout=None), 10
    )
    assert [r.rollout_id for r in done] == [finished.rollout_id]


async def test_cancelling_a_wait_releases_the_server_side_wait(
    server: LightningStoreServer, client: LightningStoreClient
) -> None:
    started = await client.start_rollout("task")
    waiter = asyncio.create_task(client.wait_for_rollouts(rollout_ids=[started.rollout_id], timeout=60))
    await asyncio.sleep(0.2)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    # The server noticed the disconnect: no wait task stays behind in the server's loop.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if not _server_waits(server):
            break
        await asyncio.sleep(0.05)
    assert not _server_waits(server)


def _server_waits(server: LightningStoreServer) -> bool:
    import gc

    return any(
        getattr(getattr(obj, "get_coro", lambda: None)(), "__qualname__", "").endswith("wait_for_rollouts")
        and not obj.done()
        for obj in gc.get_objects()
        if isinstance(obj, asyncio.Task)
    )


async def test_threads_with_their_own_loops_share_one_client(client: LightningStoreClient) -> None:
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        async def run() -> None:
            for j in range(5):
                await client.enqueue_rollout((i, j))

        try:
            asyncio.run(run())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    await asyncio.to_thread(lambda: ([t.start() for t in threads], [t.join() for t in threads]))
    assert errors == []
    assert (await client.query_rollouts(limit=0)).total == 40  # type: ignore[attr-defined]


@pytest.mark.parametrize("method", ["fork", "spawn"])
async def test_a_client_used_before_fork_works_in_the_child(client: LightningStoreClient, method: str) -> None:
    await client.enqueue_rollout("from parent")  # the parent's session now holds a pooled connection
    context = multiprocessing.get_context(method)
    queue = context.Queue()
    process = context.Process(target=enqueue_in_child, args=(client, queue))
    process.start()
    result = await asyncio.to_thread(queue.get, True, 60)
    await asyncio.to_thread(process.join, 30)
    assert process.exitcode == 0
    assert result.startswith("ro-"), result
    await client.enqueue_rollout("parent again")  # the parent's pooled session still works
    assert (await client.query_rollouts(limit=0)).total == 3  # type: ignore[attr-defined]


async def test_a_client_pickles_without_its_sessions(client: LightningStoreClient) -> None:
    await client.enqueue_rollout("x")
    copy = pickle.loads(pickle.dumps(client))
    assert copy.server_address == client.server_address
    assert (await copy.query_rollouts(limit=0)).total == 1  # type: ignore[attr-defined]
    await copy.close()


async def test_the_api_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGL_STORE_API_KEY", "from-env")
    server = await start_server_async()
    try:
        assert server.settings.api_key == "from-env"
        client = LightningStoreClient(server.endpoint)
        assert (await client.enqueue_rollout("ok")).rollout_id.startswith("ro-")
        await client.close()
    finally:
        await server.stop()
    assert os.environ["AGL_STORE_API_KEY"] == "from-env"


async def test_batches_and_otel_spans_take_one_request_each(
    server: LightningStoreServer, client: LightningStoreClient
) -> None:
    from ..helpers import make_readable_span, make_span

    started = await client.start_rollout("task")
    rollout_id, attempt_id = started.rollout_id, started.attempt.attempt_id
    await client.add_many_spans([make_span(rollout_id, attempt_id, i) for i in range(1, 51)])
    await client.get_many_span_sequence_ids([(rollout_id, attempt_id)] * 10)
    await client.enqueue_many_rollouts([{"input": i} for i in range(20)])  # type: ignore[misc]
    await client.add_otel_span(rollout_id, attempt_id, make_readable_span())
    text = call(server, "GET", "/v1/agl/metrics").body.decode()
    counts = {
        line.split('operation="', 1)[1].split('"', 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("agl_http_request_duration_seconds_count{")
    }
    assert counts["add_many_spans"] == 1
    assert counts["get_many_span_sequence_ids"] == 1
    assert counts["enqueue_many_rollouts"] == 1
    assert counts["add_span"] == 1
    assert "get_next_span_sequence_id" not in counts
