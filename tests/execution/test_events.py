"""Stop flags shared by threads and processes."""

from __future__ import annotations

import multiprocessing
import sys

from agentlightning.execution import MultiprocessingEvent, ThreadingEvent


def _set(event: MultiprocessingEvent) -> None:
    event.set()


def _report_and_clear(event: MultiprocessingEvent) -> None:
    """Exit 0 when the event arrived set (3 otherwise), after clearing it for the parent to see."""
    arrived_set = event.is_set()
    event.clear()
    sys.exit(0 if arrived_set else 3)


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


def test_a_multiprocessing_event_pickled_for_a_spawned_child_is_the_same_flag() -> None:
    ctx = multiprocessing.get_context("spawn")
    event = MultiprocessingEvent(ctx=ctx)
    event.set()
    process = ctx.Process(target=_report_and_clear, args=(event,))  # spawn pickles the event for the child
    process.start()
    process.join(30)
    assert process.exitcode == 0  # the child's copy was already set
    assert not event.is_set()  # and the child's clear() reached the parent
