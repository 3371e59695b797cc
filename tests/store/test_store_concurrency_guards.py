"""Concurrency guards of the core stores: a transaction that suspends cannot freeze its event loop, and an
operation that meets a running health scan waits for its result instead of reading a stale status."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from agentlightning.store import InMemoryLightningStore
from agentlightning.store.core import CoreLightningStore
from agentlightning.store.sqlite.store import SqliteLightningStore
from agentlightning.types import RolloutConfig


def _open(kind: str, tmp_path: Any) -> CoreLightningStore:
    if kind == "memory":
        return InMemoryLightningStore()
    return SqliteLightningStore(os.path.join(str(tmp_path), "store.db"))


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_transaction_that_suspends_raises_instead_of_freezing_the_loop(kind: str, tmp_path: Any) -> None:
    store = _open(kind, tmp_path)
    outcome: list[BaseException] = []

    async def scenario() -> None:
        storage: Any = store._storage
        transaction = storage.transaction if kind == "memory" else storage.sql_transaction
        entered = asyncio.Event()
        leave = asyncio.Event()

        async def suspending() -> None:
            async with transaction():
                entered.set()
                await leave.wait()  # a bug: awaiting inside a transaction

        holder = asyncio.create_task(suspending())
        await entered.wait()
        try:
            await store.get_latest_resources()
        except RuntimeError as exc:
            outcome.append(exc)
        leave.set()
        await holder
        await store.close()

    runner = threading.Thread(target=lambda: asyncio.run(scenario()), daemon=True)
    runner.start()
    runner.join(30)
    assert not runner.is_alive(), "the event loop froze on the transaction lock"
    assert len(outcome) == 1 and "suspended inside its transaction" in str(outcome[0])


async def test_an_operation_that_meets_a_running_health_scan_reads_its_result() -> None:
    store = InMemoryLightningStore()
    started = await store.start_rollout("task", config=RolloutConfig(timeout_seconds=0.01))
    while time.time() <= started.start_time + 0.02:  # let the attempt break its timeout (no store call meanwhile)
        await asyncio.sleep(0.01)

    storage: Any = store._storage
    original = storage.transaction
    scanning = threading.Event()
    gate = threading.Event()
    scanner: list[threading.Thread] = []

    @asynccontextmanager
    async def paused_transaction(*, write: bool = True) -> AsyncIterator[Any]:
        if write and threading.current_thread() in scanner:
            scanning.set()
            gate.wait(30)  # the scan holds the scan guard but has not committed yet
        async with original(write=write) as tx:
            yield tx

    storage.transaction = paused_transaction
    scanner_thread = threading.Thread(target=lambda: asyncio.run(store.query_rollouts()), daemon=True)
    scanner.append(scanner_thread)
    scanner_thread.start()
    assert await asyncio.to_thread(scanning.wait, 30)

    reader = asyncio.create_task(store.get_rollout_by_id(started.rollout_id))
    for _ in range(20):
        await asyncio.sleep(0)
    gate.set()
    rollout = await asyncio.wait_for(reader, 30)
    await asyncio.to_thread(scanner_thread.join, 30)
    assert rollout is not None and rollout.status == "failed"  # the timeout the running scan applied
