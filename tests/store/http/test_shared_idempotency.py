"""Idempotency records of durable stores live in the database: a retry that reaches another server process sharing
the store replays the first answer instead of applying the write again (real servers on one SQLite file or one
PostgreSQL schema)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from agentlightning.store import LightningStore
from agentlightning.store.client_server import LightningStoreServer
from agentlightning.store.http.server.shared_idempotency import SharedIdempotencyRecords
from agentlightning.store.sqlite.store import SqliteLightningStore

from ..postgres_support import drop_schema, fresh_schema_name, require_postgres
from .conftest import call, start_server_async

Opener = Callable[[], Awaitable[LightningStore]]
ENQUEUE = "/v1/agl/queues/rollouts/enqueue"
DEQUEUE = "/v1/agl/queues/rollouts/dequeue"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def two_servers(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[list[LightningStoreServer]]:
    stores: list[LightningStore] = []
    schema = None
    if request.param == "sqlite":
        path = os.path.join(str(tmp_path), "shared.db")
        stores = [SqliteLightningStore(path), SqliteLightningStore(path)]
    else:
        from agentlightning.store.postgres.store import PostgresLightningStore

        dsn = require_postgres()
        schema = fresh_schema_name()
        stores = [PostgresLightningStore(dsn, schema=schema), PostgresLightningStore(dsn, schema=schema)]
    servers = [await start_server_async(store) for store in stores]
    try:
        yield servers
    finally:
        for server in servers:
            await server.stop()
        for store in stores:
            await store.close()
        if schema is not None:
            await asyncio.to_thread(drop_schema, schema)


def _post(server: LightningStoreServer, path: str, body: object, key: str) -> Any:
    return call(server, "POST", path, body, headers={"Idempotency-Key": key})


async def test_a_retry_reaching_another_server_process_replays_the_first_answer(
    two_servers: list[LightningStoreServer],
) -> None:
    first, second = two_servers
    body = {"rollouts": [{"input": "once"}]}
    answers = await asyncio.to_thread(
        lambda: [_post(server, "/v1/agl/queues/rollouts/enqueue", body, "key-1") for server in (first, second)]
    )
    assert [answer.status for answer in answers] == [201, 201]
    assert answers[0].body == answers[1].body
    assert answers[1].headers.get("idempotent-replayed") == "true"
    total = await asyncio.to_thread(lambda: call(second, "GET", "/v1/agl/rollouts").json["total"])
    assert total == 1


async def test_a_claim_retried_on_another_server_process_returns_the_same_claim(
    two_servers: list[LightningStoreServer],
) -> None:
    first = two_servers[0]
    await asyncio.to_thread(
        lambda: _post(first, "/v1/agl/queues/rollouts/enqueue", {"rollouts": [{"input": 1}, {"input": 2}]}, "e")
    )
    claims = await asyncio.to_thread(
        lambda: [_post(server, "/v1/agl/queues/rollouts/dequeue", {"limit": 1}, "claim-1") for server in two_servers]
    )
    assert claims[0].json == claims[1].json and len(claims[0].json) == 1
    queued = await asyncio.to_thread(lambda: call(first, "GET", "/v1/agl/rollouts?status_in=queuing").json["total"])
    assert queued == 1


async def test_a_key_reused_for_another_request_on_another_process_is_a_conflict(
    two_servers: list[LightningStoreServer],
) -> None:
    first, second = two_servers
    await asyncio.to_thread(lambda: _post(first, "/v1/agl/queues/rollouts/enqueue", {"rollouts": [{"input": 1}]}, "k"))
    answer = await asyncio.to_thread(
        lambda: _post(second, "/v1/agl/queues/rollouts/enqueue", {"rollouts": [{"input": 2}]}, "k")
    )
    assert answer.status == 422 and answer.json["error_type"] == "IdempotencyKeyConflict"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_records_expire_after_their_ttl_and_a_dead_request_is_taken_over(tmp_path: Any) -> None:
    from agentlightning.store.http.server.idempotency import CachedResponse

    store = SqliteLightningStore(os.path.join(str(tmp_path), "records.db"))
    await store.get_latest_resources()  # opens the database
    clock = Clock()
    records = SharedIdempotencyRecords(
        store._storage, ttl_seconds=10, in_flight_seconds=5, expire_every_seconds=0, clock=clock
    )
    fingerprint = ("op", "/path", "digest")
    assert await records.begin("done", fingerprint) is None
    await records.complete("done", CachedResponse(201, b"{}"))
    assert await records.begin("done", fingerprint) == CachedResponse(201, b"{}")
    assert await records.begin("dead", fingerprint) is None  # its process dies before answering
    clock.now += 6
    assert await records.begin("dead", fingerprint) is None  # taken over after in_flight_seconds
    await records.complete("dead", CachedResponse(200, b"[]"))
    clock.now += 11
    assert await records.begin("other", fingerprint) is None
    assert await records.count() == 1  # only "other": the old answers expired
    await store.close()


async def test_a_keyed_write_records_its_key_in_the_transaction_of_its_operation(
    two_servers: list[LightningStoreServer],
) -> None:
    first, second = two_servers
    await asyncio.to_thread(lambda: _post(first, ENQUEUE, {"rollouts": [{"input": 1}, {"input": 2}]}, "enqueue"))
    records = first.app.state.idempotency
    records._answers.linger_seconds = 30  # the answer stays unwritten: only the operation's commit wrote the record
    answer = await asyncio.to_thread(lambda: _post(first, DEQUEUE, {"limit": 1}, "key-rider"))
    assert answer.status == 200 and len(answer.json) == 1
    async with records._storage.sql_transaction(write=False) as tx:
        rows = await tx.db.fetchall("SELECT status FROM idempotency WHERE key = ?", ("key-rider",))
    assert rows == [(None,)]  # in flight: a retry now waits for the answer instead of claiming again
    retry = asyncio.create_task(asyncio.to_thread(lambda: _post(second, DEQUEUE, {"limit": 1}, "key-rider")))
    await asyncio.sleep(0.3)
    assert not retry.done()
    await records.flush()
    replayed = await retry
    assert replayed.status == 200 and replayed.body == answer.body
    assert replayed.headers.get("idempotent-replayed") == "true"
    queued = await asyncio.to_thread(lambda: call(second, "GET", "/v1/agl/rollouts?status_in=queuing").json["total"])
    assert queued == 1


async def test_keyed_enqueues_record_their_answers_in_the_transaction_of_their_write(
    two_servers: list[LightningStoreServer],
) -> None:
    first, second = two_servers
    records = first.app.state.idempotency
    records._answers.linger_seconds = 30  # an answer written behind the response would stay unwritten

    def enqueue(server: LightningStoreServer, index: int) -> Any:
        return _post(server, ENQUEUE, {"rollouts": [{"input": index}, {"input": -index}]}, f"key-{index}")

    # Concurrent calls share grouped transactions: each records its own answer.
    answers = await asyncio.gather(*(asyncio.to_thread(enqueue, first, index) for index in range(8)))
    assert [answer.status for answer in answers] == [201] * 8
    async with records._storage.sql_transaction(write=False) as tx:
        rows = await tx.db.fetchall("SELECT key, status, body FROM idempotency")
    assert {key: (status, bytes(body)) for key, status, body in rows} == {
        f"key-{index}": (201, answer.body) for index, answer in enumerate(answers)
    }
    retries = await asyncio.gather(*(asyncio.to_thread(enqueue, second, index) for index in range(8)))
    assert [retry.body for retry in retries] == [answer.body for answer in answers]
    assert all(retry.headers.get("idempotent-replayed") == "true" for retry in retries)
    total = await asyncio.to_thread(lambda: call(second, "GET", "/v1/agl/rollouts").json["total"])
    assert total == 16


async def test_a_keyed_write_whose_operation_fails_records_only_its_answer(
    two_servers: list[LightningStoreServer],
) -> None:
    first, second = two_servers
    body = {"status": "failed"}
    path = "/v1/agl/rollouts/ro-unknown/attempts/latest"
    answers = []
    for server in (first, second):
        answers.append(
            await asyncio.to_thread(
                lambda server=server: call(server, "POST", path, body, headers={"Idempotency-Key": "k-fail"})
            )
        )
        await first.app.state.idempotency.flush()
    assert [answer.status for answer in answers] == [404, 404]
    assert answers[1].headers.get("idempotent-replayed") == "true"


async def test_a_record_whose_removal_failed_while_the_database_was_down_is_removed_by_the_next_call_that_works(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentlightning.store import StoreUnavailableError

    store = SqliteLightningStore(os.path.join(str(tmp_path), "shared.db"))
    try:
        storage = store._storage
        records = SharedIdempotencyRecords(storage)
        fingerprint = ("enqueue_many_rollouts", "/v1/agl/queues/rollouts/enqueue", "digest")
        assert await records.begin("key-1", fingerprint) is None  # in flight: the request runs, then fails

        async def database_down(*args: Any, **kwargs: Any) -> Any:
            raise StoreUnavailableError("The store is unavailable")

        with monkeypatch.context() as patch:
            patch.setattr(storage, "run_statement", database_down)
            await records.forget("key-1")  # never raises: the removal waits for the database

        # The retry runs at once (the record is removed first), instead of waiting for a record nobody answers.
        assert await asyncio.wait_for(records.begin("key-1", fingerprint), 2.0) is None
    finally:
        await store.close()


async def test_a_keyed_enqueue_records_its_key_and_answer_with_its_own_write_when_a_health_scan_runs_first(
    tmp_path: Any,
) -> None:
    from agentlightning.store.core.grouping import riding
    from agentlightning.store.http.server.idempotency import CachedResponse
    from agentlightning.types import EnqueueRolloutRequest

    store = SqliteLightningStore(os.path.join(str(tmp_path), "scan.db"))
    try:
        storage = store._storage
        await store.get_latest_resources()  # opens the database
        storage.health_scan_due = lambda now: True  # type: ignore[method-assign]
        store._scan_debounce_seconds = 0.0
        outcomes: list[Any] = []

        def answer(outcome: Any) -> CachedResponse:
            outcomes.append(outcome)
            return CachedResponse(201, b"answer")

        records = SharedIdempotencyRecords(storage)
        rider = await records.rider("key-1", ("op", "/path", "digest"), answer)
        with riding(rider):
            enqueued = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=1)])
        assert outcomes == [enqueued]  # the scan's transaction did not take the rider: the enqueue's did
        assert SharedIdempotencyRecords.settled_answer(rider) == CachedResponse(201, b"answer")
        async with records._storage.sql_transaction(write=False) as tx:
            rows = await tx.db.fetchall("SELECT key, status, body FROM idempotency")
        assert [(key, status, bytes(body)) for key, status, body in rows] == [("key-1", 201, b"answer")]
    finally:
        await store.close()
