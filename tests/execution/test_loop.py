"""`run_interruptibly`: a Ctrl-C stops the coroutine even when Python drops the first KeyboardInterrupt."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentlightning.execution.loop import run_interruptibly


def test_a_ctrl_c_swallowed_where_it_landed_is_raised_again_and_the_coroutine_cancelled() -> None:
    cleaned_up: list[bool] = []

    async def swallows_the_first_interrupt() -> None:
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass  # what a weakref callback or __del__ does with it: printed as "Exception ignored" and lost
        try:
            await asyncio.sleep(30)
        finally:
            cleaned_up.append(True)

    with pytest.raises(KeyboardInterrupt):
        run_interruptibly(swallows_the_first_interrupt())
    assert cleaned_up == [True]


def test_a_swallowed_ctrl_c_is_raised_even_when_the_coroutine_then_finishes() -> None:
    async def swallows_and_returns() -> int:
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass
        return 1

    with pytest.raises(KeyboardInterrupt):
        run_interruptibly(swallows_and_returns())


def test_the_default_sigint_handler_is_back_afterwards() -> None:
    async def nothing() -> int:
        return 7

    assert run_interruptibly(nothing()) == 7
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_handler_the_user_installed_is_left_alone() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:

        async def interrupted_by_the_user_handler() -> str:
            signal.raise_signal(signal.SIGINT)
            await asyncio.sleep(0)
            return "done"

        assert run_interruptibly(interrupted_by_the_user_handler()) == "done"
        assert seen == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)


_FINALIZER_SCRIPT = """
import asyncio, signal
from agentlightning.execution.loop import run_interruptibly

class DiesDuringCtrlC:
    def __del__(self):
        signal.raise_signal(signal.SIGINT)  # lands here; Python would print "Exception ignored" and drop it

async def drops_an_object():
    DiesDuringCtrlC()
    await asyncio.sleep(30)

try:
    run_interruptibly(drops_an_object())
except KeyboardInterrupt:
    print("INTERRUPTED")
"""


def test_a_ctrl_c_swallowed_in_a_finalizer_prints_no_traceback() -> None:
    # A subprocess: pytest replaces sys.unraisablehook with its own during tests.
    done = subprocess.run(
        [sys.executable, "-c", _FINALIZER_SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2])),
    )
    assert done.stdout.strip() == "INTERRUPTED", done.stderr
    assert "Traceback" not in done.stderr, done.stderr


@pytest.fixture
def ctrl_c_after_the_store_lock_is_taken(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The first time the store's transaction lock is taken, a Ctrl-C arrives right after: inside the store's code,
    with the lock held. Returns a list that holds True once it fired."""
    from agentlightning.store.core.concurrency import TransactionLock

    original = TransactionLock.acquire
    fired: list[bool] = []

    def acquire_then_ctrl_c(self: TransactionLock) -> None:
        original(self)
        if not fired:
            fired.append(True)
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(TransactionLock, "acquire", acquire_then_ctrl_c)
    return fired


@pytest.mark.timeout(60)
def test_a_ctrl_c_landing_in_the_stores_lock_code_is_raised_after_it_and_leaves_the_store_usable(
    ctrl_c_after_the_store_lock_is_taken: list[bool],
) -> None:
    from agentlightning.store.memory import InMemoryLightningStore

    store = InMemoryLightningStore()

    async def works_on_the_store() -> None:
        await store.enqueue_rollout(input={"task": 1})
        await asyncio.sleep(30)

    with pytest.raises(KeyboardInterrupt):
        run_interruptibly(works_on_the_store())
    assert ctrl_c_after_the_store_lock_is_taken == [True]

    async def still_usable() -> int:
        await store.enqueue_rollout(input={"task": 2})
        return len(await store.query_rollouts())

    assert asyncio.run(asyncio.wait_for(still_usable(), 10)) == 2  # the lock was released, the first enqueue kept


@pytest.mark.timeout(60)
def test_a_ctrl_c_held_back_in_store_code_reaches_sync_code_that_never_yields_to_the_loop(
    ctrl_c_after_the_store_lock_is_taken: list[bool],
) -> None:
    from agentlightning.store.memory import InMemoryLightningStore

    store = InMemoryLightningStore()

    async def then_blocks() -> None:
        await store.enqueue_rollout(input={"task": 1})
        while True:  # a sync algorithm's work: the loop never runs again
            time.sleep(0.01)

    with pytest.raises(KeyboardInterrupt):
        run_interruptibly(then_blocks())
    assert ctrl_c_after_the_store_lock_is_taken == [True]
