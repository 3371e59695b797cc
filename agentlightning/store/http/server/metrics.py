"""Prometheus metrics of a store server (`GET /v1/agl/metrics`; needs the `prometheus_client` package).

- `agl_http_request_duration_seconds{operation,method,status}`: latency histogram per operation (its `_count`
  is the request count).
- `agl_store_queue_depth`: rollouts waiting in the queue (queuing or requeuing).
- `agl_store_rollouts{status}`: rollouts per status.
- `agl_store_active_attempts{status}`: status of the latest attempt of every rollout that is preparing, running
  or requeuing (bounded by the number of runners, so cheap to compute).
- `agl_store_attempts`, `agl_store_spans`, `agl_store_resources`, `agl_store_workers`: totals from
  `statistics()`.

Store figures are read from the store when scraped, at most once per `refresh_seconds`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agentlightning.store.base import LightningStore

__all__ = ["StoreMetrics", "prometheus_available"]

ROLLOUT_STATUSES = ("queuing", "preparing", "running", "failed", "succeeded", "cancelled", "requeuing")
ATTEMPT_STATUSES = ("preparing", "running", "failed", "succeeded", "unresponsive", "timeout")
_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def prometheus_available() -> bool:
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return False
    return True


class StoreMetrics:
    """A private Prometheus registry for one server (several servers may live in one process)."""

    def __init__(self, store: LightningStore, *, refresh_seconds: float = 1.0) -> None:
        from prometheus_client import CollectorRegistry, Gauge, Histogram

        self.store = store
        self.refresh_seconds = refresh_seconds
        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = Histogram(
            "agl_http_request_duration_seconds",
            "Time from receiving a request to starting its response",
            ("operation", "method", "status"),
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.queue_depth = Gauge("agl_store_queue_depth", "Rollouts waiting in the queue", registry=self.registry)
        self.rollouts = Gauge("agl_store_rollouts", "Rollouts per status", ("status",), registry=self.registry)
        self.active_attempts = Gauge(
            "agl_store_active_attempts",
            "Latest attempts of preparing, running and requeuing rollouts, per attempt status",
            ("status",),
            registry=self.registry,
        )
        self.totals = {
            key: Gauge(f"agl_store_{key}", f"Total {key} in the store", registry=self.registry)
            for key in ("attempts", "spans", "resources", "workers")
        }
        self._refreshed_at = float("-inf")
        self._refresh_lock = asyncio.Lock()

    def observe(self, operation: str, method: str, status: int, seconds: float) -> None:
        method = method if method in _METHODS else "OTHER"
        self.latency.labels(operation, method, str(status)).observe(seconds)

    async def refresh(self) -> None:
        """Re-read the store figures unless they are fresh enough."""
        async with self._refresh_lock:
            if time.monotonic() - self._refreshed_at < self.refresh_seconds:
                return
            store = self.store
            for status in ROLLOUT_STATUSES:
                page: Any = await store.query_rollouts(status_in=[status], limit=0)
                self.rollouts.labels(status).set(getattr(page, "total", len(page)))
            queuing = await store.query_rollouts(status_in=["queuing", "requeuing"], limit=0)
            self.queue_depth.set(getattr(queuing, "total", len(queuing)))
            counts = dict.fromkeys(ATTEMPT_STATUSES, 0)
            for rollout in await store.query_rollouts(status_in=["preparing", "running", "requeuing"]):
                attempt = getattr(rollout, "attempt", None)
                if attempt is not None and attempt.status in counts:
                    counts[attempt.status] += 1
            for status, count in counts.items():
                self.active_attempts.labels(status).set(count)
            stats = await store.statistics()
            for key, gauge in self.totals.items():
                value = stats.get(f"total_{key}")
                if isinstance(value, (int, float)):
                    gauge.set(value)
            self._refreshed_at = time.monotonic()

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST
