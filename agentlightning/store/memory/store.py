"""`InMemoryLightningStore`: the fastest store, for one process (shared by its threads and event loops).

Spans are accounted in bytes; when their total exceeds the eviction threshold, the spans of whole rollouts are
dropped (finished rollouts first, then the oldest) until the total is at most the safe threshold. `query_spans` on an
evicted rollout raises SpansEvictedError.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any, Optional, Union

from pydantic import BaseModel

from agentlightning.store.core import CoreLightningStore
from agentlightning.store.core.records import generate_attempt_id, generate_resources_id, generate_rollout_id
from agentlightning.store.errors import InvalidArgumentError
from agentlightning.store.memory.storage import InMemoryStorage, SpanMemoryBudget
from agentlightning.types import Span

__all__ = ["InMemoryLightningStore", "estimate_model_size", "estimate_span_size"]

logger = logging.getLogger(__name__)

_FALLBACK_MEMORY_BYTES = 8 * 1024**3

# Kept under their historical names for code that imports them.
_generate_rollout_id = generate_rollout_id
_generate_attempt_id = generate_attempt_id
_generate_resources_id = generate_resources_id


def estimate_model_size(obj: Any) -> int:
    """Approximate the memory held by `obj`: `sys.getsizeof` of the object plus, recursively, of the values of
    pydantic fields, mapping values (keys are not counted) and list/tuple/set members."""
    total = 0
    stack = [obj]
    getsizeof = sys.getsizeof
    while stack:
        item = stack.pop()
        total += getsizeof(item)
        kind = type(item)
        if kind is str or kind is int or kind is float or kind is bool or item is None:
            continue
        if isinstance(item, BaseModel):
            stack.extend(item.__dict__.values())
        elif isinstance(item, Mapping):
            stack.extend(item.values())  # type: ignore[arg-type]
        elif isinstance(item, (list, tuple, set)):
            stack.extend(item)  # type: ignore[arg-type]
    return total


class _SpanShell:
    """Bytes of a span that do not depend on its content (the models around the ids), measured once."""

    bytes_without_parent: Optional[int] = None
    parent_bytes: int = 0


def _variable_span_bytes(span: Span) -> int:
    fields = span.__dict__
    size = sys.getsizeof(fields["name"]) + sys.getsizeof(fields["rollout_id"]) + sys.getsizeof(fields["attempt_id"])
    size += estimate_model_size(fields["attributes"])
    if fields["events"]:
        size += estimate_model_size(fields["events"]) - sys.getsizeof(fields["events"])
    if fields["links"]:
        size += estimate_model_size(fields["links"]) - sys.getsizeof(fields["links"])
    resource_attributes = fields["resource"].__dict__["attributes"]
    if resource_attributes:
        size += estimate_model_size(resource_attributes) - sys.getsizeof(resource_attributes)
    status = fields["status"].__dict__
    if status.get("description"):
        size += sys.getsizeof(status["description"]) - sys.getsizeof(None)
    return size


def estimate_span_size(span: Span) -> int:
    """A fast approximation of `estimate_model_size(span)`, the store's default span size estimator.

    The fixed part of a span (ids, context, status and resource models) is measured once; only the parts that vary
    (name, attributes, events, links, resource attributes) are walked for each span.
    """
    if _SpanShell.bytes_without_parent is None:
        reference = Span.from_attributes(attributes={}, rollout_id="ro-000000000000", attempt_id="at-00000000")
        _SpanShell.bytes_without_parent = estimate_model_size(reference) - _variable_span_bytes(reference)
        with_parent = Span.from_attributes(
            attributes={}, rollout_id="ro-000000000000", attempt_id="at-00000000", parent_id="0" * 16
        )
        _SpanShell.parent_bytes = estimate_model_size(with_parent) - estimate_model_size(reference)
    size = _SpanShell.bytes_without_parent + _variable_span_bytes(span)
    if span.__dict__["parent"] is not None:
        size += _SpanShell.parent_bytes
    return size


def _detect_total_memory_bytes() -> int:
    """Physical memory of this machine (8 GiB when psutil is unavailable)."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a declared dependency
        logger.error("psutil is not installed; assuming %d bytes of memory", _FALLBACK_MEMORY_BYTES)
        return _FALLBACK_MEMORY_BYTES
    return int(psutil.virtual_memory().total)


def _resolve_memory_threshold(
    value: Union[float, int, None], *, default_ratio: float, capacity_bytes: int, name: str, minimum: int
) -> int:
    """A float is a ratio of capacity, an int is bytes, None is the default ratio."""
    if value is None:
        resolved = int(capacity_bytes * default_ratio)
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a float ratio or an int number of bytes, got {value!r}")
    elif isinstance(value, float):
        if minimum == 0:
            if not 0 <= value <= 1:
                raise ValueError(f"{name} ratio must be between 0 and 1 inclusive, got {value}")
        elif not 0 < value <= 1:
            raise ValueError(f"{name} ratio must be greater than 0 and at most 1, got {value}")
        resolved = int(capacity_bytes * value)
    else:
        if value < 0:
            raise ValueError(f"{name} must be non-negative, got {value}")
        resolved = value
    if resolved < minimum:
        raise ValueError(f"{name} must be at least {minimum} bytes, got {resolved}")
    return resolved


class InMemoryLightningStore(CoreLightningStore):
    """A LightningStore kept in this process's memory. Safe to share between threads and event loops.

    Args:
        thread_safe: accepted for compatibility; this store is always thread-safe.
        eviction_memory_threshold: span bytes (int) or fraction of physical memory (float) above which spans are
            evicted. Defaults to 70% of memory.
        safe_memory_threshold: eviction stops once span bytes are at most this. Defaults to 80% of the eviction
            threshold; must be smaller than it.
        span_size_estimator: bytes of one span; defaults to `estimate_span_size`, a fast approximation of
            `estimate_model_size`.
        scan_debounce_seconds: minimum interval between health scans (0 checks whenever a deadline may have passed).
    """

    def __init__(
        self,
        *,
        thread_safe: bool = True,
        eviction_memory_threshold: Union[float, int, None] = None,
        safe_memory_threshold: Union[float, int, None] = None,
        span_size_estimator: Optional[Callable[[Span], int]] = None,
        tracker: Any = None,
        scan_debounce_seconds: float = 0.0,
    ) -> None:
        capacity = _detect_total_memory_bytes()
        if capacity <= 0:
            raise ValueError(f"Detected memory capacity must be positive, got {capacity}")
        eviction = _resolve_memory_threshold(
            eviction_memory_threshold,
            default_ratio=0.7,
            capacity_bytes=capacity,
            name="eviction_memory_threshold",
            minimum=1,
        )
        if safe_memory_threshold is None:
            safe = max(int(eviction * 0.8), 0)
        else:
            safe = _resolve_memory_threshold(
                safe_memory_threshold,
                default_ratio=eviction / capacity,
                capacity_bytes=capacity,
                name="safe_memory_threshold",
                minimum=0,
            )
        if not 0 <= safe < eviction:
            raise ValueError("safe_memory_threshold must be smaller than eviction_memory_threshold")
        self._memory_capacity_bytes = capacity
        self._eviction_threshold_bytes = eviction
        self._safe_threshold_bytes = safe
        self._tracker = tracker
        budget = SpanMemoryBudget(span_size_estimator or estimate_span_size, eviction, safe)
        super().__init__(InMemoryStorage(budget), scan_debounce_seconds=scan_debounce_seconds)

    async def statistics(self):  # type: ignore[override]
        stats = await super().statistics()
        stats["memory_capacity_bytes"] = self._memory_capacity_bytes
        return stats


def store_from_url(url: str) -> InMemoryLightningStore:
    """`memory://` opens a new, empty in-memory store."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme != "memory" or parts.netloc or parts.path not in ("", "/"):
        raise InvalidArgumentError(f"Invalid in-memory store URL {url!r}: use memory://")
    return InMemoryLightningStore()
