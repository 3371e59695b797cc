"""The span writer's overflow: spans waiting for room in memory, kept on disk in arrival order, with a size cap.

The file is a chain of JSON-lines segments in one directory. New records go to the newest segment; records are read
back from the oldest, and a segment is deleted as soon as it has been read to the end. So the disk used is what is
still waiting (plus at most one segment), even when the store never catches up completely, and `max_bytes` bounds it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import IO, Any, Optional

from agentlightning.types import Span

from .batch import PendingSpan

__all__ = ["SpillFile", "SpillFull", "SpilledSpans", "default_spill_dir"]

SPILL_DIR_ENV = "AGL_SPAN_SPILL_DIR"


def default_spill_dir() -> str:
    """`AGL_SPAN_SPILL_DIR` when set, else the system's temporary directory."""
    return os.environ.get(SPILL_DIR_ENV) or tempfile.gettempdir()


class SpillFull(Exception):
    """The spill file reached its size cap."""


@dataclass
class _Segment:
    path: str
    writer: Optional[IO[str]]
    reader: IO[str]
    size: int = 0
    unread: int = 0


class SpillFile:
    """Append-only JSON-lines segments in `directory`, read back in order; at most `max_bytes` on disk.

    Args:
        directory: where the segments live (created if missing); default `default_spill_dir()`.
        max_bytes: cap on the bytes of the live segments; `append` raises `SpillFull` beyond it.
        segment_bytes: a new segment starts once the newest one holds this many bytes.
    """

    def __init__(
        self,
        directory: Optional[str] = None,
        *,
        max_bytes: int = 256 * 1024 * 1024,
        segment_bytes: int = 8 * 1024 * 1024,
    ) -> None:
        if max_bytes < 1 or segment_bytes < 1:
            raise ValueError("max_bytes and segment_bytes must be positive")
        self.directory = directory
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self._segments: deque[_Segment] = deque()
        self.count = 0
        """Records waiting to be read back."""
        self.bytes = 0
        """Bytes on disk in the live segments."""

    @property
    def paths(self) -> list[str]:
        """The files currently on disk (oldest first)."""
        return [segment.path for segment in self._segments]

    def append(self, record: dict[str, Any]) -> None:
        """Write one record; raises `SpillFull` when it would pass the cap, `OSError`/`TypeError` on failure."""
        line = json.dumps(record) + "\n"
        size = len(line.encode("utf-8"))
        if self.bytes + size > self.max_bytes:
            raise SpillFull(f"the span spill file reached its cap of {self.max_bytes} bytes")
        segment = self._segments[-1] if self._segments else None
        if segment is None or segment.writer is None or segment.size >= self.segment_bytes:
            if segment is not None and segment.writer is not None:
                segment.writer.close()
                segment.writer = None
            segment = self._open_segment()
        assert segment.writer is not None
        segment.writer.write(line)
        segment.writer.flush()
        segment.size += size
        segment.unread += 1
        self.bytes += size
        self.count += 1

    def _open_segment(self) -> _Segment:
        directory = self.directory or default_spill_dir()
        os.makedirs(directory, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix="agl-spans-", suffix=".jsonl", dir=directory)
        os.close(fd)
        writer = open(path, "a", encoding="utf-8")  # noqa: SIM115
        reader = open(path, encoding="utf-8")  # noqa: SIM115
        segment = _Segment(path, writer, reader)
        self._segments.append(segment)
        return segment

    def pop(self) -> dict[str, Any]:
        """The oldest record (the caller checks `count` first)."""
        segment = self._segments[0]
        line = segment.reader.readline()
        segment.unread -= 1
        self.count -= 1
        if segment.unread == 0:  # read to the end: nothing more is appended to an older segment either
            self._drop(self._segments.popleft())
        return json.loads(line)

    def _drop(self, segment: _Segment) -> None:
        for handle in (segment.writer, segment.reader):
            if handle is not None:
                handle.close()
        self.bytes -= segment.size
        try:
            os.unlink(segment.path)
        except OSError:
            pass

    def close(self) -> None:
        """Delete every segment (what was not read back is lost)."""
        while self._segments:
            self._drop(self._segments.popleft())
        self.count = 0
        self.bytes = 0


class SpilledSpans:
    """Pending spans parked in a `SpillFile`: each span and its ids go to disk, its flush group and callback (which
    cannot be serialised) stay in memory, in the same order."""

    def __init__(self, file: SpillFile) -> None:
        self.file = file
        self._meta: deque[tuple[Hashable, Optional[Callable[[Span], None]]]] = deque()

    @property
    def count(self) -> int:
        return self.file.count

    def put(self, item: PendingSpan, span: Span) -> None:
        """Park `item` (whose converted span is `span`); raises `SpillFull` or the disk's error when it cannot."""
        self.file.append(
            {
                "store_key": item.store_key,
                "rollout_id": item.rollout_id,
                "attempt_id": item.attempt_id,
                "urgent": item.urgent,
                "needs_sequence": item.needs_sequence,
                "span": span.model_dump(mode="json"),
            }
        )
        self._meta.append((item.group, item.on_written))

    def take(self) -> PendingSpan:
        """The oldest parked span (the caller checks `count` first)."""
        record = self.file.pop()
        group, on_written = self._meta.popleft()
        return PendingSpan(
            store_key=record["store_key"],
            rollout_id=record["rollout_id"],
            attempt_id=record["attempt_id"],
            group=group,
            urgent=record["urgent"],
            span=Span.model_validate(record["span"]),
            needs_sequence=record["needs_sequence"],
            on_written=on_written,
        )
