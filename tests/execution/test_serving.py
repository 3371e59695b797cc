"""Handing the store out: any store can be served, a remote store says so, an unreachable one fails in one line."""

from __future__ import annotations

import pytest

import agentlightning as agl
from agentlightning.execution.serving import check_reachable, serve_store
from agentlightning.runner.errors import StoreUnreachableError
from agentlightning.runner.recording import is_remote
from agentlightning.store import LightningStoreThreaded
from agentlightning.store.http.client.client import LightningStoreClient

from .test_client_server import UsersOwnStore


def test_a_store_says_whether_each_call_is_a_request() -> None:
    client = LightningStoreClient("http://127.0.0.1:9")
    assert is_remote(client) and is_remote(LightningStoreThreaded(client))
    assert not is_remote(agl.InMemoryLightningStore()) and not is_remote(LightningStoreThreaded(UsersOwnStore()))


async def test_a_server_in_its_own_process_answers_for_the_store_it_wraps() -> None:
    server = agl.LightningStoreServer(agl.InMemoryLightningStore(), host="127.0.0.1", port=0)
    assert not server.is_remote


async def test_a_store_not_marked_async_safe_is_served_one_call_at_a_time() -> None:
    store = UsersOwnStore()
    server = serve_store(store, host="127.0.0.1", port=0)
    await server.start()
    try:
        client = LightningStoreClient(server.endpoint)
        rollout = await client.enqueue_rollout({"task": 1})
        assert (await store.get_rollout_by_id(rollout.rollout_id)) is not None
        await client.close()
    finally:
        await server.stop()
    assert isinstance(server.store, LightningStoreThreaded)


async def test_an_unreachable_store_server_is_one_line_naming_it() -> None:
    client = LightningStoreClient("http://127.0.0.1:9")
    with pytest.raises(StoreUnreachableError) as info:
        await check_reachable(client)
    assert str(info.value).startswith("Cannot reach the store at http://127.0.0.1:9: ")
    assert "\n" not in str(info.value)
    await client.close()


async def test_in_process_stores_are_not_probed() -> None:
    class Untouchable(agl.InMemoryLightningStore):
        async def get_latest_resources(self) -> None:
            raise AssertionError("probed")

    await check_reachable(Untouchable())
