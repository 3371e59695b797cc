"""The span writer's error policy for one store, without a writer thread: waits, splits, give-ups and drops."""

from __future__ import annotations

from agentlightning.tracer.batch import PendingSpan, SpanWriterStats
from agentlightning.tracer.store_state import Finished, RetryGroup, StoreState, WriteFailure, handle_failure
from agentlightning.utils.retry import RetryPolicy

BACKOFF = RetryPolicy(max_retries=2, initial_delay=0.25, max_delay=1.0, jitter=0.0)


def spans(count: int) -> list[PendingSpan]:
    return [PendingSpan(1, "ro-1", "at-1", None, False) for _ in range(count)]


def fail(state: StoreState, items: list[PendingSpan], exc: BaseException, *, closing: bool = False) -> Finished:
    """`items` failed with `exc` at time 100."""
    return handle_failure(state, items, WriteFailure(exc, 100.0, closing, len(items)), SpanWriterStats(), BACKOFF)


def test_an_outage_holds_the_spans_and_backs_off_by_the_policy() -> None:
    state = StoreState(store=None)
    items = spans(3)
    waits: list[float] = []
    for _ in range(4):
        finished = fail(state, items, ConnectionRefusedError("down"))
        assert not finished.dropped and not finished.failed
        waits.append(state.next_try - 100.0)
        state.held.clear()
    assert waits == [0.25, 0.5, 1.0, 1.0]


def test_an_outage_at_shutdown_drops_the_spans_after_three_failures() -> None:
    state = StoreState(store=None)
    items = spans(2)
    for _ in range(2):
        assert not fail(state, items, ConnectionRefusedError("down"), closing=True).dropped
        state.held.clear()
    assert fail(state, items, ConnectionRefusedError("down"), closing=True).dropped == items


def test_a_server_error_on_a_batch_splits_it_in_halves_retried_after_the_first_wait() -> None:
    state = StoreState(store=None)
    items = spans(5)
    fail(state, items, RuntimeError("boom"))
    assert state.retry == [RetryGroup(items[:2], 100.25), RetryGroup(items[2:], 100.25)]


def test_a_single_span_is_given_up_after_max_retries_server_errors() -> None:
    state = StoreState(store=None)
    [item] = spans(1)
    due: list[float] = []
    for _ in range(BACKOFF.max_retries):
        assert not fail(state, [item], RuntimeError("boom")).failed
        due.append(state.retry.pop().not_before)
    assert due == [100.25, 100.5]
    assert fail(state, [item], RuntimeError("boom")).failed == [item]


def test_refused_credentials_drop_the_spans_and_everything_waiting() -> None:
    state = StoreState(store=None)
    waiting = spans(2)
    state.held.extend(waiting[:1])
    state.retry.append(RetryGroup(waiting[1:], 0.0))
    items = spans(1)
    finished = fail(state, items, PermissionError("no key"))
    assert finished.dropped == items + waiting
    assert state.auth_error is not None and not state.waiting
