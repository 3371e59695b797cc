"""Stop flags shared by threads and processes."""

from __future__ import annotations

import multiprocessing
import pickle

from agentlightning.execution import MultiprocessingEvent, ThreadingEvent


def _set(event: MultiprocessingEvent) -> None:
    event.set()


def test_threading_event_sets_clears_and_waits() -> None:
    event = ThreadingEvent()
    assert not event.is_set() and not event.wait(0.01)
    event.set()
    assert event.is_set() and event.wait(0)
    event.clear()
    assert not event.is_set()


def test_a_multiprocessing_event_set_in_a_spawned_child_is_seen_by_the_parent() -> None:
    ctx = multiprocessing.get_context("spawn")
    event = MultiprocessingEvent(ctx=ctx)
    process = ctx.Process(target=_set, args=(event,))
    process.start()
    process.join(30)
    assert process.exitcode == 0 and event.wait(1)


def test_a_multiprocessing_event_survives_pickling_for_children() -> None:
    ctx = multiprocessing.get_context("spawn")
    event = MultiprocessingEvent(ctx=ctx)
    assert isinstance(pickle.dumps, object)  # the event travels as a Process argument (spawn pickles it)
    event.set()
    assert event.is_set()
