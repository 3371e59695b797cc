"""Pieces of the span writer: the queued-span record, its counters, the spill file, and the batch storer that
talks to a store (sequence ids, batched adds, isolation of rejected data)."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from agentlightning.types import Span

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from agentlightning.store.base import LightningStore

__all__ = ["BatchStorer", "PendingSpan", "SpanWriterStats", "SpillFile", "is_rejection", "span_name"]

logger = logging.getLogger("agentlightning.tracer.writer")

SpanConverter = Callable[["ReadableSpan", str, str, int], Span]
"""Turns a finished OpenTelemetry span into a stored Span (rollout id, attempt id, sequence id)."""


@dataclass
class PendingSpan:
    store_key: int
    rollout_id: str
    attempt_id: str
    group: Hashable
    urgent: bool
    readable: Optional[ReadableSpan] = None
    span: Optional[Span] = None
    needs_sequence: bool = True
    on_written: Optional[Callable[[Span], None]] = None
    done: bool = False


@dataclass
class SpanWriterStats:
    """Counters of a SpanWriter since it started."""

    submitted: int = 0
    written: int = 0
    duplicates: int = 0
    rejected: int = 0
    dropped: int = 0
    spilled: int = 0
    retries: int = 0
    pending: int = 0
    batches: int = 0
    outages: int = 0
    pending_by_group: dict[str, int] = field(default_factory=dict)


def is_rejection(exc: BaseException) -> bool:
    """True when the store refused the data itself (retrying cannot help); False for outages."""
    from pydantic import ValidationError

    from agentlightning.store.errors import StoreClosedError

    if isinstance(exc, StoreClosedError):
        return False
    return isinstance(exc, (ValueError, TypeError, ValidationError))


class SpillFile:
    """An append-only JSON-lines file of spans waiting for room in the memory queue, read back in order."""

    def __init__(self) -> None:
        self._path: Optional[str] = None
        self._writer: Any = None
        self._reader: Any = None
        self.count = 0

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record) + "\n"
        if self._path is None:
            fd, path = tempfile.mkstemp(prefix="agl-spans-", suffix=".jsonl")
            os.close(fd)
            self._path = path
            self._writer = open(path, "a", encoding="utf-8")  # noqa: SIM115
            self._reader = open(path, encoding="utf-8")  # noqa: SIM115
        self._writer.write(line)
        self._writer.flush()
        self.count += 1

    def pop(self) -> dict[str, Any]:
        line = self._reader.readline()
        self.count -= 1
        record = json.loads(line)
        if self.count == 0:
            self.close()
        return record

    def close(self) -> None:
        for handle in (self._writer, self._reader):
            if handle is not None:
                handle.close()
        if self._path is not None:
            try:
                os.unlink(self._path)
            except OSError:
                pass
        self._path = self._writer = self._reader = None
        self.count = 0


def span_name(item: PendingSpan) -> str:
    if item.span is not None:
        return item.span.name
    if item.readable is not None:
        return item.readable.name
    return "?"


class BatchStorer:
    """Stores batches of pending spans; reports each span's outcome through `finish`."""

    def __init__(
        self, converter: SpanConverter, *, finish: Callable[..., None], on_success: Callable[[], None]
    ) -> None:
        self._converter = converter
        self._finish = finish
        self._on_success = on_success

    async def write(self, batch: list[PendingSpan], stores: dict[int, LightningStore]) -> None:
        """Write the unfinished items of `batch` (one sequence-id call and one add call per store).

        Raises on outages (the caller retries); data the store rejects is isolated and reported through `finish`.
        """
        by_store: dict[int, list[PendingSpan]] = {}
        for item in batch:
            if not item.done:
                by_store.setdefault(item.store_key, []).append(item)
        for store_key, items in by_store.items():
            store = stores[store_key]
            try:
                await self._store_items(store, items)
            except Exception as exc:
                if not is_rejection(exc):
                    raise
                await self._isolate(store, items, exc)

    async def _store_items(self, store: LightningStore, items: Sequence[PendingSpan]) -> None:
        missing = [item for item in items if item.needs_sequence]
        if missing:
            ids = await store.get_many_span_sequence_ids([(item.rollout_id, item.attempt_id) for item in missing])
            for item, sequence_id in zip(missing, ids, strict=True):
                if item.span is None:
                    assert item.readable is not None
                    item.span = self._converter(item.readable, item.rollout_id, item.attempt_id, int(sequence_id))
                    item.readable = None
                else:
                    item.span = item.span.model_copy(update={"sequence_id": int(sequence_id)})
                item.needs_sequence = False
        spans = [item.span for item in items if item.span is not None]
        added = await store.add_many_spans(spans)
        self._on_success()
        added_ids = Counter((span.rollout_id, span.attempt_id, span.span_id) for span in added)
        for item in items:
            assert item.span is not None
            key = (item.span.rollout_id, item.span.attempt_id, item.span.span_id)
            duplicate = added_ids[key] <= 0
            added_ids[key] -= 1
            self._finish(item, item.span, duplicate=duplicate)

    async def _isolate(self, store: LightningStore, items: list[PendingSpan], first_error: BaseException) -> None:
        """The store rejected a batch: retry per attempt, then per span, and reject only what fails alone."""
        groups: dict[tuple[str, str], list[PendingSpan]] = {}
        for item in items:
            groups.setdefault((item.rollout_id, item.attempt_id), []).append(item)
        for (rollout_id, attempt_id), group_items in groups.items():
            try:
                await self._store_items(store, group_items)
                continue
            except Exception as exc:
                if not is_rejection(exc):
                    raise
                group_error: BaseException = exc
            from agentlightning.store.errors import AttemptNotFoundError, RolloutNotFoundError

            if isinstance(group_error, (RolloutNotFoundError, AttemptNotFoundError)):
                logger.error(
                    "Store rejected %d spans of rollout %s attempt %s: %s. They cannot be stored and were dropped.",
                    len(group_items),
                    rollout_id,
                    attempt_id,
                    group_error,
                )
                for item in group_items:
                    self._finish(item, None, rejected=True)
                continue
            for item in group_items:
                try:
                    await self._store_items(store, [item])
                except Exception as exc:
                    if not is_rejection(exc):
                        raise
                    logger.error("Store rejected span %r of rollout %s: %s", span_name(item), rollout_id, exc)
                    self._finish(item, None, rejected=True)
        del first_error
