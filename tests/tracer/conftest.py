from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence

import pytest

from agentlightning.store import InMemoryLightningStore
from agentlightning.tracer.otel import OtelTracer
from agentlightning.types import Span


class FlakyStore(InMemoryLightningStore):
    """An in-memory store whose span writes fail with ConnectionError while `down` is True (an outage)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.add_many_calls = 0
        self.sequence_calls = 0
        self.failed_calls = 0

    def _check(self) -> None:
        if self.down:
            self.failed_calls += 1
            raise ConnectionError("store unreachable")

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        self._check()
        self.add_many_calls += 1
        return await super().add_many_spans(spans)

    async def get_many_span_sequence_ids(self, rollout_attempt_ids: Sequence[tuple[str, str]]) -> Sequence[int]:
        self._check()
        self.sequence_calls += 1
        return await super().get_many_span_sequence_ids(rollout_attempt_ids)


@pytest.fixture
async def store() -> AsyncIterator[FlakyStore]:
    instance = FlakyStore()
    try:
        yield instance
    finally:
        await instance.close()


@pytest.fixture
def tracer(store: FlakyStore) -> Iterator[OtelTracer]:
    instance = OtelTracer(flush_timeout=10.0, flush_interval=0.05, retry_initial_delay=0.05, retry_max_delay=0.2)
    instance.init_worker(0, store)
    try:
        yield instance
    finally:
        instance.teardown_worker(0)
