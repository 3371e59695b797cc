"""A write whose outcome is unknown (every try lost its answer) is not applied twice when the caller sends it again:
the client reuses its Idempotency-Key, across a restart of the store server too, and the error says so."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentlightning.store.client_server import LightningStoreClient, LightningStoreServer, StoreConnectionError
from agentlightning.store.http.client.retry import RetryPolicy
from agentlightning.store.http.client.unanswered import UnansweredWrites

from ..._store_server import StoreServerProcess
from .proxy import DroppingProxy

FAST = RetryPolicy(max_retries=3, initial_delay=0.01, max_delay=0.05)


@pytest.fixture
async def lossy(server: LightningStoreServer) -> AsyncIterator[tuple[DroppingProxy, LightningStoreClient]]:
    with DroppingProxy(server.port) as proxy:
        client = LightningStoreClient(proxy.url, retry_policy=FAST)
        try:
            yield proxy, client
        finally:
            await client.close()


async def test_an_enqueue_without_any_answer_says_its_outcome_is_unknown_and_how_to_check(
    lossy: tuple[DroppingProxy, LightningStoreClient],
) -> None:
    proxy, client = lossy
    proxy.drop(1000)
    with pytest.raises(StoreConnectionError) as caught:
        await client.enqueue_rollout("task")
    message = str(caught.value)
    assert "Outcome unknown" in message
    assert "Sending the same request again through this client is answered with the first result" in message
    assert "query_rollouts" in message


async def test_an_enqueue_sent_again_after_an_unknown_outcome_returns_the_first_rollout(
    lossy: tuple[DroppingProxy, LightningStoreClient],
) -> None:
    proxy, client = lossy
    proxy.drop(1000)  # every try commits and loses its answer
    with pytest.raises(StoreConnectionError):
        await client.enqueue_rollout({"question": 1}, metadata={"marker": "a"})
    proxy.drop(0)
    again = await client.enqueue_rollout({"question": 1}, metadata={"marker": "a"})
    stored = await client.query_rollouts()
    assert [rollout.rollout_id for rollout in stored] == [again.rollout_id]


async def test_a_different_enqueue_after_an_unknown_outcome_is_a_new_rollout(
    lossy: tuple[DroppingProxy, LightningStoreClient],
) -> None:
    proxy, client = lossy
    proxy.drop(1000)
    with pytest.raises(StoreConnectionError):
        await client.enqueue_rollout("first")
    proxy.drop(0)
    second = await client.enqueue_rollout("second")
    third = await client.enqueue_rollout("first")  # takes the remembered key: the first try's rollout
    fourth = await client.enqueue_rollout("first")  # the key was handed out once: a new rollout
    ids = {rollout.rollout_id for rollout in await client.query_rollouts()}
    assert ids == {second.rollout_id, third.rollout_id, fourth.rollout_id}
    assert len(ids) == 3


@pytest.mark.slow
async def test_an_enqueue_sent_again_after_the_store_server_restarted_returns_the_first_rollout(
    tmp_path: Path,
) -> None:
    with StoreServerProcess(tmp_path / "run.db") as server, DroppingProxy(server.port) as proxy:
        client = LightningStoreClient(proxy.url, retry_policy=FAST)
        try:
            proxy.drop(1000)
            with pytest.raises(StoreConnectionError):
                await client.enqueue_rollout("task", metadata={"marker": "restart"})
            server.stop()
            server.start()
            proxy.drop(0)
            again = await client.enqueue_rollout("task", metadata={"marker": "restart"})
            stored = await client.query_rollouts()
            assert [rollout.rollout_id for rollout in stored] == [again.rollout_id]
        finally:
            await client.close()


def test_a_remembered_key_is_handed_out_once() -> None:
    writes = UnansweredWrites()
    writes.put("digest", "key-1")
    assert writes.take("digest") == "key-1"
    assert writes.take("digest") is None


def test_remembered_keys_expire_and_are_bounded() -> None:
    now = [0.0]
    writes = UnansweredWrites(ttl_seconds=10.0, max_entries=2, clock=lambda: now[0])
    writes.put("a", "key-a")
    now[0] = 5.0
    writes.put("b", "key-b")
    writes.put("c", "key-c")  # over the bound: the oldest ("a") goes
    assert len(writes) == 2 and writes.take("a") is None
    now[0] = 14.0  # "b" and "c" are 9 s old
    assert writes.take("b") == "key-b"
    now[0] = 16.0  # "c" is 11 s old
    assert writes.take("c") is None
