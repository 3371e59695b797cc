"""The sync worker thread that runs agent calls survives a stop request that lands between calls."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from agentlightning.runner.invoke import _AbandonedCall, _raise_in_thread, _SyncWorker


@pytest.fixture
def thread_errors(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    errors: list[Any] = []
    monkeypatch.setattr(threading, "excepthook", errors.append)
    return errors


def test_a_stop_request_landing_after_the_call_finished_ends_the_closed_worker_quietly(
    thread_errors: list[Any],
) -> None:
    worker = _SyncWorker("test-worker")
    assert worker.submit(lambda: 42).result(timeout=5) == 42
    # The call is over and the thread waits for the next one: this is where a late stop request lands.
    assert _raise_in_thread(worker.thread, _AbandonedCall)
    worker.close()
    worker.thread.join(timeout=5)
    assert not worker.thread.is_alive()
    assert thread_errors == []


def test_an_abandoned_call_unwinds_and_the_worker_ends_once_closed(thread_errors: list[Any]) -> None:
    started = threading.Event()

    def spin() -> None:
        started.set()
        while True:
            time.sleep(0.01)

    worker = _SyncWorker("test-worker")
    future = worker.submit(spin)
    assert started.wait(timeout=5)
    worker.close()
    assert _raise_in_thread(worker.thread, _AbandonedCall)
    worker.thread.join(timeout=5)
    assert not worker.thread.is_alive()
    assert not future.done()  # abandoned: the caller gave up on it and cancelled its own side
    assert thread_errors == []
