"""`wait_for_rollouts` on a store shared by threads: the waiter wakes when everything it waits for is finished, not
once per finished rollout (each wake-up of a loop on another thread is a self-pipe write and a GIL hand-off)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from agentlightning.store import InMemoryLightningStore
from agentlightning.store.core.concurrency import CompletionNotifier
from agentlightning.types import EnqueueRolloutRequest


def _finish_one_by_one(store: InMemoryLightningStore, rollout_ids: list[str]) -> threading.Thread:
    async def finish() -> None:
        for rollout_id in rollout_ids:
            await store.update_rollout(rollout_id, status="succeeded")
            await asyncio.sleep(0.005)  # the waiter's thread gets the GIL between two completions

    thread = threading.Thread(target=lambda: asyncio.run(finish()), daemon=True)
    return thread


def _count_wakeups(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    wakeups = [0]
    take = CompletionNotifier.take_notified

    def counting(self: CompletionNotifier, waiter: Any) -> Any:
        wakeups[0] += 1
        return take(self, waiter)

    monkeypatch.setattr(CompletionNotifier, "take_notified", counting)
    return wakeups


def test_a_waiter_for_many_rollouts_wakes_once_they_all_finished(monkeypatch: pytest.MonkeyPatch) -> None:
    store = InMemoryLightningStore()
    wakeups = _count_wakeups(monkeypatch)

    async def scenario() -> list[Any]:
        rollouts = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input={"i": i}) for i in range(40)])
        ids = [rollout.rollout_id for rollout in rollouts]
        finisher = _finish_one_by_one(store, ids)
        finisher.start()
        done = await store.wait_for_rollouts(rollout_ids=ids, timeout=30)
        finisher.join(10)
        return done

    done = asyncio.run(scenario())
    assert len(done) == 40 and all(rollout.status == "succeeded" for rollout in done)
    assert wakeups[0] <= 5, f"woken {wakeups[0]} times for 40 completions"


def test_a_waiter_that_times_out_returns_the_rollouts_finished_meanwhile() -> None:
    store = InMemoryLightningStore()

    async def scenario() -> tuple[list[Any], float]:
        rollouts = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input={"i": i}) for i in range(10)])
        ids = [rollout.rollout_id for rollout in rollouts]
        finisher = _finish_one_by_one(store, ids[:6])  # four never finish
        finisher.start()
        started = time.monotonic()
        done = await store.wait_for_rollouts(rollout_ids=ids, timeout=1.0)
        finisher.join(10)
        return done, time.monotonic() - started

    done, waited = asyncio.run(scenario())
    assert len(done) == 6
    assert 0.9 <= waited < 5.0
