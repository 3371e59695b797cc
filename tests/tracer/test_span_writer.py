"""SpanWriter: batches, store-allocated sequence ids, retries during outages, spilling to disk, and isolation of
spans the store rejects."""

from __future__ import annotations

import asyncio
import atexit
import gc
import logging
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from agentlightning.store import InMemoryLightningStore
from agentlightning.store.http.errors import StoreHTTPError, StoreUnauthorizedError
from agentlightning.tracer.convert import span_from_readable
from agentlightning.tracer.writer import SpanWriter
from agentlightning.types import Span

from .conftest import FlakyStore


def make_span(rollout_id: str, attempt_id: str, name: str) -> Span:
    return Span.from_attributes(attributes={"name": name}, rollout_id=rollout_id, attempt_id=attempt_id, name=name)


async def new_attempt(store: InMemoryLightningStore) -> tuple[str, str]:
    rollout = await store.start_rollout(input=None)
    return rollout.rollout_id, rollout.attempt.attempt_id


@pytest.fixture
def writer() -> Iterator[SpanWriter]:
    instance = SpanWriter(
        span_from_readable, max_batch_size=50, flush_interval=0.05, retry_initial_delay=0.05, retry_max_delay=0.2
    )
    try:
        yield instance
    finally:
        instance.close(timeout=5.0)


async def test_spans_are_written_in_batches_with_increasing_sequence_ids(writer: SpanWriter, store: FlakyStore) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    for index in range(120):
        writer.submit(store, rollout_id, attempt_id, make_span(rollout_id, attempt_id, f"s{index}"), group="g")
    assert await writer.flush_async("g", timeout=10)
    stored = await store.query_spans(rollout_id)
    assert [span.name for span in stored] == [f"s{index}" for index in range(120)]
    assert [span.sequence_id for span in stored] == list(range(1, 121))
    assert store.add_many_calls <= 5 and store.add_many_calls == store.sequence_calls


async def test_two_writers_on_one_rollout_never_share_a_sequence_id(store: FlakyStore) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    writers = [SpanWriter(span_from_readable, max_batch_size=7, flush_interval=0.01) for _ in range(2)]
    try:

        def produce(writer: SpanWriter, tag: str) -> None:
            for index in range(60):
                writer.submit(store, rollout_id, attempt_id, make_span(rollout_id, attempt_id, f"{tag}{index}"))

        threads = [threading.Thread(target=produce, args=(w, tag)) for w, tag in zip(writers, "ab", strict=True)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert all(await asyncio.gather(*(w.flush_async(timeout=10) for w in writers)))
    finally:
        for w in writers:
            w.close()
    stored = await store.query_spans(rollout_id)
    assert len(stored) == 120
    assert len({span.sequence_id for span in stored}) == 120
    for tag in "ab":
        own = [span for span in stored if span.name.startswith(tag)]
        assert [span.name for span in sorted(own, key=lambda s: s.sequence_id)] == [f"{tag}{i}" for i in range(60)]


async def test_an_outage_is_retried_with_backoff_and_logged_once(
    writer: SpanWriter, store: FlakyStore, caplog: pytest.LogCaptureFixture
) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    store.down = True
    with caplog.at_level(logging.WARNING):
        for index in range(10):
            writer.submit(store, rollout_id, attempt_id, make_span(rollout_id, attempt_id, f"s{index}"))
        assert not await writer.flush_async(timeout=0.5)
        store.down = False
        assert await writer.flush_async(timeout=10)
    assert [span.name for span in await store.query_spans(rollout_id)] == [f"s{index}" for index in range(10)]
    assert caplog.text.count("Store unavailable") == 1
    assert "Store available again" in caplog.text
    stats = writer.stats()
    assert stats.retries >= 1 and stats.outages == 1 and stats.written == 10 and stats.pending == 0


async def test_a_full_buffer_spills_to_disk_and_nothing_is_lost(store: FlakyStore) -> None:
    writer = SpanWriter(span_from_readable, max_buffered_spans=5, max_batch_size=3, retry_initial_delay=0.05)
    try:
        rollout_id, attempt_id = await new_attempt(store)
        store.down = True
        started = time.monotonic()
        for index in range(40):
            writer.submit(
                store, rollout_id, attempt_id, make_span(rollout_id, attempt_id, f"s{index}"), urgent=index == 39
            )
        assert time.monotonic() - started < 30  # hang guard: submitting never waits for the store
        assert writer.stats().spilled >= 30
        store.down = False
        assert await writer.flush_async(timeout=20)
    finally:
        writer.close()
    stored = await store.query_spans(rollout_id)
    assert [span.name for span in stored] == [f"s{index}" for index in range(40)]
    assert writer.stats().dropped == 0


async def test_spans_of_an_unknown_attempt_are_rejected_without_blocking_the_others(
    writer: SpanWriter, store: FlakyStore, caplog: pytest.LogCaptureFixture
) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    with caplog.at_level(logging.ERROR):
        writer.submit(store, rollout_id, attempt_id, make_span(rollout_id, attempt_id, "good-1"))
        writer.submit(store, "ro-missing", "at-missing", make_span("ro-missing", "at-missing", "orphan"))
        writer.submit(store, rollout_id, "at-wrong", make_span(rollout_id, "at-wrong", "wrong-attempt"))
        writer.submit(store, rollout_id, attempt_id, make_span(rollout_id, attempt_id, "good-2"))
        assert await writer.flush_async(timeout=10)
    assert [span.name for span in await store.query_spans(rollout_id)] == ["good-1", "good-2"]
    assert writer.stats().rejected == 2
    assert "ro-missing" in caplog.text and "at-wrong" in caplog.text


async def test_a_span_the_store_already_has_counts_as_a_duplicate(writer: SpanWriter, store: FlakyStore) -> None:
    rollout_id, attempt_id = await new_attempt(store)
    span = make_span(rollout_id, attempt_id, "once")
    writer.submit(store, rollout_id, attempt_id, span)
    writer.submit(store, rollout_id, attempt_id, span)
    assert await writer.flush_async(timeout=10)
    assert len(await store.query_spans(rollout_id)) == 1
    assert writer.stats().duplicates == 1


async def test_an_urgent_span_is_written_without_waiting_for_the_batch_interval(store: FlakyStore) -> None:
    writer = SpanWriter(span_from_readable, flush_interval=120.0)
    try:
        rollout_id, attempt_id = await new_attempt(store)
        writer.submit(store, rollout_id, attempt_id, make_span(rollout_id, attempt_id, "reward"), urgent=True)
        deadline = time.monotonic() + 20  # hang guard; an ordinary span would wait 120 s
        while not await store.query_spans(rollout_id):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
    finally:
        writer.close()


async def test_close_flushes_what_is_queued(store: FlakyStore) -> None:
    writer = SpanWriter(span_from_readable, flush_interval=120.0)
    rollout_id, attempt_id = await new_attempt(store)
    writer.submit(store, rollout_id, attempt_id, make_span(rollout_id, attempt_id, "last"))
    assert await asyncio.to_thread(writer.close, 10.0)
    assert [span.name for span in await store.query_spans(rollout_id)] == ["last"]


def test_invalid_writer_settings_are_rejected() -> None:
    with pytest.raises(ValueError):
        SpanWriter(span_from_readable, max_batch_size=0)
    with pytest.raises(ValueError):
        SpanWriter(span_from_readable, retry_initial_delay=2.0, retry_max_delay=1.0)


# ------------------------------------------------------------------------------------ failures by kind (13.5)
class PoisonStore(InMemoryLightningStore):
    """Answers a batch containing a span named "poison" with a server error, like a 500 from a store server."""

    def __init__(self) -> None:
        super().__init__()
        self.poison_calls = 0

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        if any(span.name == "poison" for span in spans):
            self.poison_calls += 1
            raise StoreHTTPError(500, "Internal server error")
        return await super().add_many_spans(spans)


class RefusingStore(InMemoryLightningStore):
    """A store server that refuses the writer's credentials (401)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    async def get_many_span_sequence_ids(self, rollout_attempt_ids: Sequence[tuple[str, str]]) -> Sequence[int]:
        self.calls += 1
        raise StoreUnauthorizedError(401, "A valid API key is required", "Unauthorized")

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        self.calls += 1
        raise StoreUnauthorizedError(401, "A valid API key is required", "Unauthorized")


async def test_a_span_that_breaks_the_server_does_not_hold_back_the_others() -> None:
    store = PoisonStore()
    writer = SpanWriter(span_from_readable, max_batch_size=64, retry_initial_delay=0.01, retry_max_delay=0.02)
    try:
        rollout_id, attempt_id = await new_attempt(store)
        names = [f"s{index}" for index in range(20)]
        names.insert(7, "poison")
        for name in names:
            writer.submit(store, rollout_id, attempt_id, make_span(rollout_id, attempt_id, name))
        assert await writer.flush_async(timeout=30)
        stats = writer.stats()
    finally:
        writer.close()
    stored = sorted(await store.query_spans(rollout_id), key=lambda span: span.sequence_id)
    assert [span.name for span in stored] == [name for name in names if name != "poison"]
    assert (stats.written, stats.failed, stats.pending) == (20, 1, 0)


async def test_a_server_error_is_retried_a_bounded_number_of_times(caplog: pytest.LogCaptureFixture) -> None:
    store = PoisonStore()
    writer = SpanWriter(span_from_readable, retry_initial_delay=0.01, retry_max_delay=0.02, max_retries=3)
    try:
        rollout_id, attempt_id = await new_attempt(store)
        with caplog.at_level(logging.ERROR):
            writer.submit(store, rollout_id, attempt_id, make_span(rollout_id, attempt_id, "poison"))
            assert await writer.flush_async(timeout=30)
    finally:
        writer.close()
    assert store.poison_calls == 4  # the first try and 3 retries
    assert writer.stats().failed == 1
    assert "Giving up on span 'poison'" in caplog.text


async def test_an_authentication_error_fails_loudly_at_once_and_is_not_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = RefusingStore()
    writer = SpanWriter(span_from_readable, retry_initial_delay=0.01, retry_max_delay=0.02)
    try:
        with caplog.at_level(logging.ERROR):
            for index in range(5):
                writer.submit(store, "ro-1", "at-1", make_span("ro-1", "at-1", f"s{index}"))
            assert await writer.flush_async(timeout=30)
            for index in range(5):  # later spans for that store are dropped without another request
                writer.submit(store, "ro-1", "at-1", make_span("ro-1", "at-1", f"late{index}"))
            assert await writer.flush_async(timeout=30)
        stats = writer.stats()
    finally:
        writer.close()
    assert store.calls == 1
    assert (stats.auth_failures, stats.dropped, stats.retries, stats.pending) == (1, 10, 1, 0)
    assert caplog.text.count("refused the span writer's credentials") == 1
    assert "AGL_STORE_API_KEY" in caplog.text


async def test_a_store_that_is_down_does_not_hold_back_another_store() -> None:
    down, up = FlakyStore(), InMemoryLightningStore()
    writer = SpanWriter(span_from_readable, flush_interval=0.01, retry_initial_delay=5.0, retry_max_delay=5.0)
    try:
        down_ids, up_ids = await new_attempt(down), await new_attempt(up)
        down.down = True
        writer.submit(down, *down_ids, make_span(*down_ids, "waits"))
        assert not await writer.flush_async(timeout=0.5)  # the first failure puts `down` in a 5 s backoff
        for index in range(3):
            writer.submit(up, *up_ids, make_span(*up_ids, f"up{index}"), group="up")
        assert await writer.flush_async("up", timeout=3.0)  # well within the other store's backoff
        down.down = False
        assert await writer.flush_async(timeout=30)
    finally:
        writer.close()
    assert [span.name for span in await up.query_spans(up_ids[0])] == ["up0", "up1", "up2"]
    assert [span.name for span in await down.query_spans(down_ids[0])] == ["waits"]


async def test_the_spill_file_lives_in_the_configured_directory_and_is_capped(
    store: FlakyStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cap = 20_000
    writer = SpanWriter(
        span_from_readable, max_buffered_spans=5, max_batch_size=5, retry_initial_delay=0.05, retry_max_delay=0.1,
        spill_dir=str(tmp_path), max_spill_bytes=cap,
    )  # fmt: skip
    try:
        rollout_id, attempt_id = await new_attempt(store)
        store.down = True
        with caplog.at_level(logging.ERROR):
            for index in range(200):
                writer.submit(store, rollout_id, attempt_id, make_span(rollout_id, attempt_id, f"s{index}"))
        stats = writer.stats()
        assert list(tmp_path.iterdir()) and 0 < stats.spill_bytes <= cap
        assert stats.dropped > 0 and stats.spilled + stats.dropped + stats.queued == 200
        assert "spill file reached its cap" in caplog.text
        store.down = False
        assert await writer.flush_async(timeout=30)
    finally:
        writer.close()
    stored = await store.query_spans(rollout_id)
    assert len(stored) == 200 - stats.dropped
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------------ leaks (13.6)
async def test_the_writer_forgets_each_store_once_its_spans_are_written(writer: SpanWriter) -> None:
    stores = [InMemoryLightningStore() for _ in range(30)]
    for store in stores:
        rollout_id, attempt_id = await new_attempt(store)
        writer.submit(store, rollout_id, attempt_id, make_span(rollout_id, attempt_id, "s"))
    assert await writer.flush_async(timeout=30)
    assert writer.stats().stores == 0
    references = weakref.ref(stores[0])
    del stores, store
    # The writer thread may still be unwinding the call that wrote the last batch when the flush returns.
    deadline = time.monotonic() + 10
    while references() is not None and time.monotonic() < deadline:
        gc.collect()
        await asyncio.sleep(0.01)
    assert references() is None


def test_closed_writers_leave_no_exit_handler_behind() -> None:
    before = atexit._ncallbacks()  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
    for _ in range(20):
        SpanWriter(span_from_readable).close(timeout=5.0)
    assert atexit._ncallbacks() == before  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
