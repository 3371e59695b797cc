"""PostgreSQL wake-ups across store objects (separate pools and connections, as in separate processes) through
LISTEN/NOTIFY, and the polling fallback while the notification connection is down.

The waiting stores poll every 10 minutes at most, so within the tests' timeouts only a notification (or the re-read
that follows a reconnection) can wake them.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentlightning.types import RolloutConfig

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")

NEVER = 600.0
"""A fallback interval far longer than any test's timeout."""

WAIT = 30.0
"""How long a test waits for a wake-up before failing."""


@pytest.fixture
async def stores(dsn: str, schema: str) -> AsyncIterator[Any]:
    """`make(**options)` opens a store on the shared schema; all are closed at the end."""
    from agentlightning.store.postgres.store import PostgresLightningStore

    opened: list[PostgresLightningStore] = []

    async def make(**options: Any) -> PostgresLightningStore:
        store = PostgresLightningStore(dsn, schema=schema, pool_size=2, **options)
        await store.open()
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.close()


async def _listening(store: Any) -> None:
    assert await asyncio.to_thread(store._postgres.listener.wait_live, WAIT), "the store never started listening"


def _terminate(dsn: str, pid: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


async def test_a_rollout_finished_through_another_store_wakes_a_waiter(stores: Any) -> None:
    waiter_store = await stores(poll_interval_seconds=NEVER, health_refresh_seconds=NEVER)
    writer = await stores()
    await _listening(waiter_store)
    rollout = await writer.start_rollout({"task": 1})
    waiting = asyncio.create_task(waiter_store.wait_for_rollouts(rollout_ids=[rollout.rollout_id], timeout=WAIT))
    await asyncio.sleep(0)  # let the waiter read the rollout (unfinished) and sleep
    await writer.update_attempt(rollout.rollout_id, rollout.attempt.attempt_id, status="succeeded")
    finished = await asyncio.wait_for(waiting, WAIT + 5)
    assert [(item.rollout_id, item.status) for item in finished] == [(rollout.rollout_id, "succeeded")]


async def test_a_rollout_finished_in_another_process_wakes_a_waiter(dsn: str, schema: str, stores: Any) -> None:
    waiter_store = await stores(poll_interval_seconds=NEVER, health_refresh_seconds=NEVER)
    await _listening(waiter_store)
    rollout = await waiter_store.start_rollout({"task": 1})
    waiting = asyncio.create_task(waiter_store.wait_for_rollouts(rollout_ids=[rollout.rollout_id], timeout=120))
    script = (
        "import asyncio, sys\n"
        "from agentlightning.store.postgres.store import PostgresLightningStore\n"
        "async def main():\n"
        "    store = PostgresLightningStore(sys.argv[1], schema=sys.argv[2], pool_size=1, listen=False)\n"
        "    await store.update_attempt(sys.argv[3], sys.argv[4], status='failed')\n"
        "    await store.close()\n"
        "asyncio.run(main())\n"
    )
    args = [sys.executable, "-c", script, dsn, schema, rollout.rollout_id, rollout.attempt.attempt_id]
    done = await asyncio.to_thread(subprocess.run, args, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    finished = await asyncio.wait_for(waiting, WAIT)
    assert [(item.rollout_id, item.status) for item in finished] == [(rollout.rollout_id, "failed")]


async def test_a_timeout_started_by_another_store_is_enforced_without_polling(stores: Any) -> None:
    waiter_store = await stores(poll_interval_seconds=NEVER, health_refresh_seconds=NEVER)
    runner = await stores()
    await _listening(waiter_store)
    queued = await runner.enqueue_rollout({"task": 1}, config=RolloutConfig(timeout_seconds=0.3, max_attempts=1))
    # The waiter's first health scan finds no deadline: only the notification of the claim can tell it when to scan.
    waiting = asyncio.create_task(waiter_store.wait_for_rollouts(rollout_ids=[queued.rollout_id], timeout=WAIT))
    await asyncio.sleep(0)
    claimed = await runner.dequeue_rollout(worker_id="w")
    assert claimed is not None and claimed.rollout_id == queued.rollout_id
    finished = await asyncio.wait_for(waiting, WAIT + 5)
    assert [(item.rollout_id, item.status) for item in finished] == [(queued.rollout_id, "failed")]


async def test_waiters_poll_while_the_notification_connection_is_down(
    dsn: str, stores: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    waiter_store = await stores(poll_interval_seconds=0.05, health_refresh_seconds=NEVER)
    writer = await stores()
    await _listening(waiter_store)
    storage = waiter_store._postgres

    async def refuse() -> Any:
        raise psycopg.OperationalError("refused by the test")

    monkeypatch.setattr(storage.listener, "_connect", refuse)
    caplog.set_level(logging.WARNING, logger="agentlightning.store.postgres.listen")
    await asyncio.to_thread(_terminate, dsn, storage.listener.backend_pid)
    while waiter_store.listening:
        await asyncio.sleep(0.01)
    rollout = await writer.start_rollout({"task": 1})
    waiting = asyncio.create_task(waiter_store.wait_for_rollouts(rollout_ids=[rollout.rollout_id], timeout=WAIT))
    await asyncio.sleep(0)
    await writer.update_attempt(rollout.rollout_id, rollout.attempt.attempt_id, status="succeeded")
    finished = await asyncio.wait_for(waiting, WAIT + 5)
    assert [item.status for item in finished] == ["succeeded"]
    assert not waiter_store.listening
    assert "notification connection lost" in caplog.text


async def test_the_listener_reconnects_after_its_connection_is_killed(
    dsn: str, stores: Any, caplog: pytest.LogCaptureFixture
) -> None:
    waiter_store = await stores(poll_interval_seconds=NEVER, health_refresh_seconds=NEVER)
    writer = await stores()
    await _listening(waiter_store)
    listener = waiter_store._postgres.listener
    caplog.set_level(logging.WARNING, logger="agentlightning.store.postgres.listen")
    first_pid = listener.backend_pid
    await asyncio.to_thread(_terminate, dsn, first_pid)
    while listener.connections < 2:
        await asyncio.sleep(0.01)
    await _listening(waiter_store)
    assert listener.backend_pid != first_pid
    assert "notification connection lost" in caplog.text and "restored" in caplog.text
    # Notifications wake waiters again (the poll interval is far beyond the timeout).
    rollout = await writer.start_rollout({"task": 1})
    waiting = asyncio.create_task(waiter_store.wait_for_rollouts(rollout_ids=[rollout.rollout_id], timeout=WAIT))
    await asyncio.sleep(0)
    await writer.update_attempt(rollout.rollout_id, rollout.attempt.attempt_id, status="succeeded")
    finished = await asyncio.wait_for(waiting, WAIT + 5)
    assert [item.status for item in finished] == ["succeeded"]


async def test_a_rolled_back_change_sends_no_notification(dsn: str, schema: str, stores: Any) -> None:
    from agentlightning.store.postgres.listen import finished_payload

    store = await stores()
    storage = store._postgres
    with psycopg.connect(dsn, autocommit=True) as listen:
        listen.execute(f'LISTEN "{schema}"')  # type: ignore[arg-type]
        with pytest.raises(RuntimeError):
            async with storage.sql_transaction() as tx:
                await tx.db.execute("SELECT pg_notify(?, ?)", (schema, finished_payload("test", ["r-1"])))
                raise RuntimeError("abort")
        async with storage.sql_transaction() as tx:
            await tx.db.execute("SELECT pg_notify(?, ?)", (schema, finished_payload("test", ["r-2"])))
        received = [notice.payload for notice in listen.notifies(timeout=2.0, stop_after=1)]
    assert received == [finished_payload("test", ["r-2"])]


def test_long_lists_of_finished_rollouts_become_a_reread_everything_notification() -> None:
    from agentlightning.store.postgres.listen import MAX_PAYLOAD_BYTES, finished_payload

    payload = finished_payload("t", [f"ro-{index:06d}" for index in range(2000)])
    assert len(payload.encode()) <= MAX_PAYLOAD_BYTES
    assert '"finished": null' in payload


def test_the_listen_url_option_turns_notifications_off() -> None:
    from agentlightning.store import InvalidArgumentError, store_from_url
    from agentlightning.store.postgres.store import PostgresLightningStore

    store = store_from_url("postgresql://127.0.0.1/test?listen=false&poll_interval_seconds=0.1")
    assert isinstance(store, PostgresLightningStore)
    assert store._options["listen"] is False and store._options["poll_interval_seconds"] == 0.1
    with pytest.raises(InvalidArgumentError, match="listen"):
        store_from_url("postgresql://127.0.0.1/test?listen=maybe")
