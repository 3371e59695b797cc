"""Store internals that keep threads of one process from queueing behind each other: the transaction lock goes only
to a thread that runs, and ids are made without giving up the GIL."""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from agentlightning.store.core import records
from agentlightning.store.core.concurrency import TransactionLock


@pytest.fixture
def long_switch_interval() -> Iterator[None]:
    """Python code keeps the GIL until it makes a blocking call (no forced switch during the test)."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(30.0)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def _spin(seconds: float) -> None:
    """Run Python without releasing the GIL."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass


def test_a_waiting_thread_does_not_take_the_lock_while_it_cannot_run(long_switch_interval: None) -> None:
    lock = TransactionLock("test")
    lock.acquire()
    waiter_has_it = threading.Event()

    def waiter() -> None:
        lock.acquire()
        waiter_has_it.set()
        lock.release()

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    time.sleep(0.2)  # the waiter parks on the lock
    lock.release()
    _spin(0.1)  # the OS wakes the waiter meanwhile, but it cannot run Python: this thread keeps the GIL
    lock.acquire()  # a plain lock already belongs to the parked waiter: this would wait for it to run first
    went_first = not waiter_has_it.is_set()
    lock.release()
    thread.join(10)
    assert went_first, "the lock went to a thread that was still waiting for the GIL"
    assert waiter_has_it.is_set()


def test_every_waiting_thread_gets_the_lock_in_the_end() -> None:
    lock = TransactionLock("test")
    counter = [0]

    def work() -> None:
        for _ in range(2000):
            with lock:
                value = counter[0]
                if value % 97 == 0:
                    time.sleep(0)  # give up the GIL inside the critical section now and then
                counter[0] = value + 1

    threads = [threading.Thread(target=work, daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    assert counter[0] == 8000


def test_ids_are_made_without_a_system_call(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_urandom(size: int) -> bytes:
        raise AssertionError("os.urandom releases the GIL inside store transactions")

    monkeypatch.setattr(os, "urandom", no_urandom)
    assert records.generate_attempt_id().startswith("at-")
    assert records.generate_rollout_id().startswith("ro-")


def test_ids_have_the_documented_shape() -> None:
    rollout_id, attempt_id, resources_id = (
        records.generate_rollout_id(),
        records.generate_attempt_id(),
        records.generate_resources_id(),
    )
    assert len(rollout_id) == 3 + 12 and int(rollout_id[3:], 16) >= 0
    assert len(attempt_id) == 3 + 8 and int(attempt_id[3:], 16) >= 0
    assert len(resources_id) == 3 + 12 and resources_id.startswith("rs-")


def test_ids_do_not_repeat_when_user_code_seeds_random() -> None:
    random.seed(1234)
    first = records.generate_rollout_id()
    random.seed(1234)
    assert records.generate_rollout_id() != first


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_makes_other_ids_than_its_parent() -> None:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_end)
        os.write(write_end, records.generate_rollout_id().encode())
        os._exit(0)
    os.close(write_end)
    parent_id = records.generate_rollout_id()
    child_id = os.read(read_end, 64).decode()
    os.close(read_end)
    os.waitpid(pid, 0)
    assert child_id.startswith("ro-") and child_id != parent_id
