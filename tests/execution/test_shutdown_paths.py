"""How a run ends, for each way it can end, in the shm and cs strategies (the 0.2/0.3 semantics of
shared/spec/runtime.md §8, and the deviations listed in docs/compatibility.md)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import psutil
import pytest

from agentlightning.execution import ClientServerExecutionStrategy, ExecutionStrategy, SharedMemoryExecutionStrategy
from agentlightning.store import InMemoryLightningStore

from .helpers import (
    SlowAlgorithmLeavingAMark,
    idle_runner,
    interrupting_algorithm,
    raising_algorithm,
    returning_runner,
    short_algorithm,
    stubborn_runner,
    timing_out_runner,
)

pytestmark = pytest.mark.slow


def _children() -> list[psutil.Process]:
    return [
        child
        for child in psutil.Process().children(recursive=True)
        if "resource_tracker" not in " ".join(child.cmdline())
    ]


def _strategy(kind: str, **options: Any) -> ExecutionStrategy:
    if kind == "shm":
        return SharedMemoryExecutionStrategy(n_runners=2, graceful_delay=0.5)
    return ClientServerExecutionStrategy(n_runners=1, graceful_timeout=2.0, terminate_timeout=1.0, **options)


@pytest.mark.parametrize("kind", ["shm", "cs"])
def test_an_algorithm_that_raises_ends_the_run_with_its_exception(kind: str) -> None:
    with pytest.raises(ValueError, match="algorithm bug"):
        _strategy(kind).execute(raising_algorithm, idle_runner, InMemoryLightningStore())
    assert _children() == []


@pytest.mark.parametrize("kind", ["shm", "cs"])
def test_a_keyboard_interrupt_raised_by_the_algorithm_stops_the_run_without_raising(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    strategy = _strategy(kind)
    strategy.execute(interrupting_algorithm, idle_runner, InMemoryLightningStore())
    assert strategy.interrupted
    assert "never retrieved" not in caplog.text  # no second report of the interrupt by asyncio
    assert _children() == []


def test_a_runner_raising_timeout_error_in_this_process_raises_it() -> None:
    with pytest.raises(TimeoutError, match="the runner timed out"):
        SharedMemoryExecutionStrategy(n_runners=1, graceful_delay=0.5).execute(
            short_algorithm, timing_out_runner, InMemoryLightningStore()
        )
    strategy = ClientServerExecutionStrategy(role="runner", managed_store=False)
    with pytest.raises(TimeoutError, match="the runner timed out"):
        strategy.execute(short_algorithm, timing_out_runner, InMemoryLightningStore())


def test_a_runner_process_raising_timeout_error_is_named_when_it_cannot_be_replaced() -> None:
    strategy = ClientServerExecutionStrategy(n_runners=1, max_runner_restarts=0)

    async def forever(store: Any, event: Any) -> None:
        while True:
            await asyncio.sleep(0.05)

    with pytest.raises(RuntimeError, match=r"every runner process died; the last one: runner process runner-0"):
        strategy.execute(forever, timing_out_runner, InMemoryLightningStore())
    assert _children() == []


def test_runner_processes_that_ignore_the_stop_flag_are_terminated_and_named(caplog: pytest.LogCaptureFixture) -> None:
    strategy = ClientServerExecutionStrategy(n_runners=1, graceful_timeout=0.5, terminate_timeout=1.0)

    async def until_the_runner_is_up(store: Any, event: Any) -> None:
        await asyncio.sleep(3.0)  # the runner has installed its SIG_IGN by then

    strategy.execute(until_the_runner_is_up, stubborn_runner, InMemoryLightningStore())
    assert "were stopped by signal: runner-0 (signal SIGTERM)" in caplog.text
    assert _children() == []


def test_an_error_raised_while_a_runner_is_torn_down_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def ignores_the_first_cancellation(store: Any, worker_id: int, event: Any) -> None:
        try:
            while True:
                await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            try:
                await asyncio.sleep(30)  # past the second grace period: the strategy abandons it
            finally:
                raise RuntimeError("teardown exploded")

    strategy = SharedMemoryExecutionStrategy(n_runners=1, main_thread="algorithm", graceful_delay=0.2)
    with caplog.at_level(logging.ERROR):
        strategy.execute(short_algorithm, ignores_the_first_cancellation, InMemoryLightningStore())
    assert "raised while it was torn down: RuntimeError('teardown exploded')" in caplog.text


def test_with_the_runner_in_the_main_process_the_run_ends_when_the_algorithm_does() -> None:
    strategy = ClientServerExecutionStrategy(n_runners=1, main_process="runner", graceful_timeout=2.0)
    strategy.execute(short_algorithm, idle_runner, InMemoryLightningStore())  # the runner waits for the stop flag
    assert _children() == []


def test_with_the_runner_in_the_main_process_a_finished_runner_waits_for_the_algorithm(tmp_path: Path) -> None:
    mark = tmp_path / "algorithm-finished"
    strategy = ClientServerExecutionStrategy(n_runners=1, main_process="runner", graceful_timeout=2.0)
    strategy.execute(SlowAlgorithmLeavingAMark(str(mark), 1.0), returning_runner, InMemoryLightningStore())
    assert mark.read_text() == "done"
    assert _children() == []
