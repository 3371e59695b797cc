"""The supervisor's rules, with a launcher whose workers end when the test says so."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import pytest

from agentlightning.execution.supervisor import Supervisor, WorkerExit
from agentlightning.store import InMemoryLightningStore


@dataclass
class FakeWorker:
    worker_id: int
    serial: int
    ended: Optional[WorkerExit] = None


class FakeLauncher:
    kind = "fake worker"

    def __init__(self) -> None:
        self.launched: list[FakeWorker] = []

    def launch(self, worker_id: int) -> FakeWorker:
        worker = FakeWorker(worker_id, len(self.launched))
        self.launched.append(worker)
        return worker

    def wait(self, handles: Sequence[FakeWorker], timeout: float) -> None:
        pass

    def exit_of(self, handle: FakeWorker) -> Optional[WorkerExit]:
        return handle.ended

    def name(self, handle: FakeWorker) -> str:
        return f"worker-{handle.worker_id}"

    def location(self, handle: FakeWorker) -> Optional[tuple[str, int]]:
        return ("host", 1000 + handle.serial)

    def not_started_hint(self) -> str:
        return "Check the fake."


DIED = WorkerExit("signal SIGKILL")


def _supervisor(n: int = 2, max_restarts: int = 3) -> tuple[Supervisor[FakeWorker], FakeLauncher]:
    launcher = FakeLauncher()
    supervisor = Supervisor(launcher, range(n), max_restarts=max_restarts)
    supervisor.start()
    return supervisor, launcher


def test_a_worker_that_dies_is_replaced_until_its_restarts_are_used_up() -> None:
    supervisor, launcher = _supervisor(n=2, max_restarts=2)
    for _ in range(2):
        supervisor.slots[0].handle.ended = DIED
        assert supervisor.check() is None
    assert [w.worker_id for w in launcher.launched] == [0, 1, 0, 0]
    supervisor.slots[0].handle.ended = DIED
    assert supervisor.check() is None  # not replaced again, but worker 1 still runs
    assert len(launcher.launched) == 4 and len(supervisor.deaths) == 3


def test_the_run_stops_when_every_worker_died_for_good() -> None:
    supervisor, _ = _supervisor(n=1, max_restarts=0)
    supervisor.slots[0].handle.ended = DIED
    message = supervisor.check()
    assert message is not None and message.startswith("every fake worker died")
    assert supervisor.fatal == message and supervisor.check() is None  # reported once


def test_a_worker_that_fails_before_it_started_stops_the_run_with_the_hint() -> None:
    supervisor, launcher = _supervisor(n=1)
    supervisor.slots[0].handle.ended = WorkerExit("exit code 2", started=False, fatal=True)
    message = supervisor.check()
    assert message == "worker-0 exited with exit code 2 before it started. Check the fake."
    assert len(launcher.launched) == 1  # not replaced: it would fail the same way


def test_a_worker_that_finished_by_itself_is_not_replaced() -> None:
    supervisor, launcher = _supervisor(n=1)
    supervisor.slots[0].handle.ended = WorkerExit("exit code 0", ok=True)
    assert supervisor.check() is None and len(launcher.launched) == 1 and supervisor.deaths == []


def test_nothing_is_replaced_once_closing_began() -> None:
    supervisor, launcher = _supervisor(n=2)
    supervisor.close()
    supervisor.slots[0].handle.ended = DIED
    assert supervisor.check() is None
    assert len(launcher.launched) == 2 and supervisor.deaths == []


def test_a_failed_release_says_the_health_rules_take_over(caplog: pytest.LogCaptureFixture) -> None:
    class Unreachable(InMemoryLightningStore):
        async def query_workers(self, *args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("store down")

    launcher = FakeLauncher()
    supervisor = Supervisor(launcher, [0], reaper_store=Unreachable(), max_restarts=1)
    supervisor.start()
    supervisor.slots[0].handle.ended = DIED
    with caplog.at_level(logging.WARNING):
        supervisor.check()
    assert (
        "Could not mark the attempts of fake worker worker-0 (pid 1000) died with signal SIGKILL unresponsive "
        "(ConnectionError('store down')); the store's health rules will release them" in caplog.text
    )
