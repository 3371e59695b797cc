"""The process's I/O loop: one loop on its own thread, a blocking portal into it, detached from trace contexts."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from agentlightning.utils.io_loop import IOLoop, io_loop
from agentlightning.utils.untraced import CURRENT_SCOPE, DETACHED


async def _thread_name() -> str:
    return threading.current_thread().name


async def _sleep_until_cancelled(cancelled: threading.Event) -> None:
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        cancelled.set()
        raise


def test_the_process_has_one_io_loop() -> None:
    assert io_loop() is io_loop()
    assert io_loop().thread.daemon


def test_run_blocks_until_the_coroutine_finished_on_the_io_loop() -> None:
    assert io_loop().run(_thread_name()) == io_loop().thread.name


def test_run_raises_what_the_coroutine_raised() -> None:
    async def fail() -> None:
        raise ValueError("broken")

    with pytest.raises(ValueError, match="broken"):
        io_loop().run(fail())


def test_run_cancels_a_coroutine_that_outlives_its_timeout() -> None:
    cancelled = threading.Event()
    with pytest.raises(TimeoutError):
        io_loop().run(_sleep_until_cancelled(cancelled), timeout=0.05)
    assert cancelled.wait(5)


def test_run_on_the_io_loop_itself_raises_instead_of_deadlocking() -> None:
    async def nested() -> None:
        io_loop().run(_thread_name())

    with pytest.raises(RuntimeError, match="I/O loop itself"):
        io_loop().run(nested(), timeout=5)


async def test_run_async_awaits_without_blocking_the_callers_loop() -> None:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    ticker = asyncio.create_task(tick())
    try:
        await io_loop().run_async(asyncio.sleep(0.1))
    finally:
        ticker.cancel()
    assert ticks >= 3


async def test_cancelling_the_caller_cancels_the_coroutine_on_the_io_loop() -> None:
    cancelled = threading.Event()
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(io_loop().run_async(_sleep_until_cancelled(cancelled)), 0.05)
    assert await asyncio.to_thread(cancelled.wait, 5)


def test_what_runs_there_is_detached_from_the_callers_trace_context() -> None:
    async def scope() -> object:
        return CURRENT_SCOPE.get()

    token = CURRENT_SCOPE.set("a rollout's scope")
    try:
        assert io_loop().run(scope()) is DETACHED
    finally:
        CURRENT_SCOPE.reset(token)


def test_a_forked_child_starts_its_own_io_loop() -> None:
    parent = io_loop()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's thread does not exist here
        try:
            child = io_loop()
            ok = child is not parent and child.run(_thread_name(), timeout=5) == child.thread.name
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    assert answer == b"1"


def test_an_io_loop_of_ones_own_is_another_thread() -> None:
    own = IOLoop(name="agl-io-test")
    assert own.thread is not io_loop().thread
    assert own.run(_thread_name()) == "agl-io-test"
    own.loop.call_soon_threadsafe(own.loop.stop)


def test_a_timeout_error_of_the_coroutine_itself_is_raised_as_it_is() -> None:
    async def times_out() -> None:
        raise TimeoutError("are runners connected?")

    with pytest.raises(TimeoutError, match="are runners connected"):
        io_loop().run(times_out())
