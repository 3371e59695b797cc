"""Span retention for the durable stores: keep a long training run from filling the disk.

A policy removes the spans of FINISHED rollouts only (succeeded, failed, cancelled), the rollouts that finished
longest ago first. Rollouts, attempts and the spans of running rollouts are never removed. `query_spans` on a rollout
whose spans were removed raises SpansEvictedError, as after memory eviction.

The policy is applied after a write transaction commits, at most every `check_interval_seconds` or after
`check_every_spans` new spans, whichever comes first, so the hot path pays nothing in between.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Optional

from agentlightning.store.base import FINISHED_STATUSES
from agentlightning.store.errors import InvalidArgumentError
from agentlightning.store.sql.transaction import SqlTransaction

__all__ = ["RetentionPolicy", "RetentionSchedule", "apply_retention", "span_totals"]

logger = logging.getLogger(__name__)


def _check_positive(name: str, value: Optional[float], *, integer: bool = False) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        kind = "an integer" if integer else "a number"
        raise InvalidArgumentError(f"Retention {name} must be {kind}, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidArgumentError(f"Retention {name} must be positive, got {value!r}")


@dataclass(frozen=True)
class RetentionPolicy:
    """Limits on stored spans. None disables a limit; a policy with no limit does nothing.

    Args:
        max_age_seconds: remove the spans of rollouts that finished more than this long ago.
        max_spans: when more spans are stored, remove finished rollouts' spans until at most
            `low_water_ratio * max_spans` remain.
        max_bytes: the same for the bytes of the stored span JSON.
        low_water_ratio: how far below a size limit removal goes, so that it does not run on every insert.
        check_interval_seconds: apply the policy at most this often...
        check_every_spans: ...or after this many new spans, whichever comes first.
        batch_rollouts: at most this many rollouts are cleared per application (the next one continues).
    """

    max_age_seconds: Optional[float] = None
    max_spans: Optional[int] = None
    max_bytes: Optional[int] = None
    low_water_ratio: float = 0.8
    check_interval_seconds: float = 60.0
    check_every_spans: int = 10_000
    batch_rollouts: int = 1000

    def __post_init__(self) -> None:
        _check_positive("max_age_seconds", self.max_age_seconds)
        _check_positive("max_spans", self.max_spans, integer=True)
        _check_positive("max_bytes", self.max_bytes, integer=True)
        _check_positive("check_interval_seconds", self.check_interval_seconds)
        _check_positive("check_every_spans", self.check_every_spans, integer=True)
        _check_positive("batch_rollouts", self.batch_rollouts, integer=True)
        if not 0 <= self.low_water_ratio <= 1:
            raise InvalidArgumentError(f"Retention low_water_ratio must be between 0 and 1, got {self.low_water_ratio}")

    @property
    def enabled(self) -> bool:
        return self.max_age_seconds is not None or self.max_spans is not None or self.max_bytes is not None


class RetentionSchedule:
    """Decides when a store applies its policy (not thread-safe on purpose: a missed count only delays a run)."""

    def __init__(self, policy: Optional[RetentionPolicy]) -> None:
        self.policy = policy
        self.last_run = time.monotonic()
        self.spans_since = 0
        self.running = False

    def record(self, spans_inserted: int) -> bool:
        """Count new spans; True when the policy is due now."""
        policy = self.policy
        if policy is None or not policy.enabled or self.running:
            return False
        self.spans_since += spans_inserted
        return (
            self.spans_since >= policy.check_every_spans
            or time.monotonic() - self.last_run >= policy.check_interval_seconds
        )

    def started(self) -> None:
        self.running = True
        self.last_run = time.monotonic()
        self.spans_since = 0

    def finished(self) -> None:
        self.running = False


async def apply_retention(tx: SqlTransaction, policy: RetentionPolicy, now: float) -> list[str]:
    """Remove spans as the policy says, inside `tx`. Returns the rollouts whose spans were removed."""
    victims: dict[str, tuple[int, int]] = {}
    if policy.max_age_seconds is not None:
        for rollout_id, count, size in await finished_span_holders(
            tx, ended_before=now - policy.max_age_seconds, limit=policy.batch_rollouts
        ):
            victims[rollout_id] = (count, size)
    if policy.max_spans is not None or policy.max_bytes is not None:
        count, size = await span_totals(tx)
        count -= sum(c for c, _ in victims.values())
        size -= sum(s for _, s in victims.values())
        if _over(count, policy.max_spans, 1.0) or _over(size, policy.max_bytes, 1.0):
            for rollout_id, spans, nbytes in await finished_span_holders(
                tx, ended_before=None, limit=policy.batch_rollouts
            ):
                if not (
                    _over(count, policy.max_spans, policy.low_water_ratio)
                    or _over(size, policy.max_bytes, policy.low_water_ratio)
                ):
                    break
                if rollout_id in victims:
                    continue
                victims[rollout_id] = (spans, nbytes)
                count -= spans
                size -= nbytes
            if _over(count, policy.max_spans, 1.0) or _over(size, policy.max_bytes, 1.0):
                logger.warning(
                    "Span retention: %d spans (%d bytes) remain above the limits; only finished rollouts' spans "
                    "are removed, the rest belong to rollouts still running or beyond this batch",
                    count,
                    size,
                )
    if victims:
        await evict_spans(tx, list(victims))
    return list(victims)


def _over(value: int, limit: Optional[int], ratio: float) -> bool:
    return limit is not None and value > limit * ratio


async def finished_span_holders(
    tx: SqlTransaction, *, ended_before: Optional[float], limit: int
) -> list[tuple[str, int, int]]:
    """(rollout_id, span_count, span_bytes) of finished rollouts that still have spans, oldest end first.
    PostgreSQL locks the rows it returns and passes over rows other transactions hold."""
    dialect = tx.dialect
    statuses, status_params = dialect.in_list("r.status", list(FINISHED_STATUSES))
    age_sql, age_params = ("", [])
    if ended_before is not None:
        age_sql, age_params = " AND COALESCE(r.end_time, r.start_time) < ?", [ended_before]
    skip = " FOR UPDATE OF c, r SKIP LOCKED" if dialect.lock_rows_skip_locked else ""
    rows = await tx.db.fetchall(
        "SELECT c.rollout_id, c.span_count, c.span_bytes FROM span_counters c "
        "JOIN rollouts r ON r.rollout_id = c.rollout_id "
        f"WHERE c.evicted = 0 AND c.span_count > 0 AND {statuses}{age_sql} "
        f"ORDER BY COALESCE(r.end_time, r.start_time), r.seq LIMIT ?{skip}",
        [*status_params, *age_params, limit],
    )
    return [(row[0], int(row[1]), int(row[2])) for row in rows]


async def span_totals(tx: SqlTransaction) -> tuple[int, int]:
    """The number of stored spans and the bytes of their JSON."""
    rows = await tx.db.fetchall("SELECT COALESCE(SUM(span_count), 0), COALESCE(SUM(span_bytes), 0) FROM span_counters")
    return int(rows[0][0]), int(rows[0][1])


async def evict_spans(tx: SqlTransaction, rollout_ids: list[str]) -> None:
    """Delete the spans of these rollouts and remember that they were removed."""
    for start in range(0, len(rollout_ids), 500):
        clause, params = tx.dialect.in_list("rollout_id", rollout_ids[start : start + 500])
        await tx.db.execute(f"DELETE FROM spans WHERE {clause}", params)
        await tx.db.execute(
            f"UPDATE span_counters SET evicted = 1, span_count = 0, span_bytes = 0 WHERE {clause}", params
        )
