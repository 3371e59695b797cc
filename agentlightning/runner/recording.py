"""What a finished rollout leaves in the store: the spans its result asks for (reward span, returned spans) and the
attempt's final status with the reward, the duration and any failure reason in its metadata.

Every write goes through a `StoreCall` (the runner's `retry_store_call` bound to its worker and stop event), so an
outage is ridden out. Over HTTP the common case (a numeric result) costs one request for the reward span.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from agentlightning.emitter.reward import emit_reward
from agentlightning.types import AttemptedRollout, AttemptStatus, Span, SpanCoreFields

from .errors import is_retryable_store_error
from .resources import StoreCall
from .results import AttemptOutcome, NormalizedResult, ResultNotStored, RunnerInterrupted, attempt_metadata
from .spans import readable_span_from_fields
from .store_calls import INTERRUPTED_WRITE_TIMEOUT

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["StoreCall", "UnwrittenStatus", "finish_attempt", "is_remote", "store_result"]

logger = logging.getLogger(__name__)


def is_remote(store: Any) -> bool:
    """True when the store says each call is a request to another process; in-process stores prefer batch calls."""
    return bool(getattr(store, "is_remote", False))


async def store_result(
    store: LightningStore, claimed: AttemptedRollout, normalized: NormalizedResult, call: StoreCall
) -> list[Span]:
    """Store what the result asks for (reward span, returned spans); the stored spans.

    Raises:
        ResultNotStored: the store refused a write, or stayed unreachable until `call` gave up.
    """
    try:
        return await _store_result(store, claimed, normalized, call)
    except Exception as exc:
        raise ResultNotStored(exc) from exc


async def _store_result(
    store: LightningStore, claimed: AttemptedRollout, normalized: NormalizedResult, call: StoreCall
) -> list[Span]:
    rollout_id, attempt_id = claimed.rollout_id, claimed.attempt.attempt_id
    if normalized.empty_list:
        logger.warning("Rollout %s: the agent returned an empty list; nothing to store", rollout_id)
    fields: list[SpanCoreFields] = list(normalized.core_fields)
    if normalized.reward is not None:
        reward_fields = emit_reward(normalized.reward, propagate=False)
        if reward_fields is not None:
            fields.append(reward_fields)
    # Returned spans without ids belong to this attempt.
    spans = [
        span
        if span.rollout_id and span.attempt_id
        else span.model_copy(
            update={"rollout_id": span.rollout_id or rollout_id, "attempt_id": span.attempt_id or attempt_id}
        )
        for span in normalized.spans
    ]
    if len(fields) == 1 and not spans and is_remote(store):
        # The common case (a numeric result) over HTTP: one request, the server allocates the sequence id.
        readable = readable_span_from_fields(fields[0])
        stored_one = await call(lambda: store.add_otel_span(rollout_id, attempt_id, readable), "store the reward span")
        return [stored_one] if stored_one is not None else []
    if fields:
        ids = await call(
            lambda: store.get_many_span_sequence_ids([(rollout_id, attempt_id)] * len(fields)),
            "allocate span sequence ids",
        )
        spans += [
            Span.from_core_fields(item, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=seq)
            for item, seq in zip(fields, ids, strict=True)
        ]
    stored: list[Span] = []
    if spans:
        missing = [span for span in spans if span.sequence_id <= 0]
        if missing:
            ids = await call(
                lambda: store.get_many_span_sequence_ids([(s.rollout_id, s.attempt_id) for s in missing]),
                "allocate span sequence ids",
            )
            for span, seq in zip(missing, ids, strict=True):
                span.sequence_id = seq
        await call(lambda: store.add_many_spans(spans), "store the result spans")
        stored += spans
    for readable in normalized.otel_spans:
        span = await call(
            lambda readable=readable: store.add_otel_span(rollout_id, attempt_id, readable), "store a returned span"
        )
        if span is not None:
            stored.append(span)
    return stored


@dataclass(frozen=True)
class UnwrittenStatus:
    """An attempt's final status that the store did not accept yet (an outage, a server error): the runner keeps it
    and writes it before it claims another rollout."""

    rollout_id: str
    attempt_id: str
    status: AttemptStatus
    metadata: dict[str, Any]

    async def write(self, store: LightningStore) -> None:
        await store.update_attempt(self.rollout_id, self.attempt_id, status=self.status, metadata=self.metadata)


async def finish_attempt(
    store: LightningStore,
    claimed: AttemptedRollout,
    outcome: AttemptOutcome,
    reward: Optional[float],
    duration: float,
    call: StoreCall,
) -> Optional[UnwrittenStatus]:
    """Record the attempt's status and metadata; an interrupted runner tries for a few seconds only.

    Returns the status when the store stayed unreachable or kept answering with a server error: the runner keeps it
    and writes it later (`write_unwritten`). Other failures are logged, never raised (the runner goes on)."""
    metadata = attempt_metadata(claimed.attempt.metadata, outcome, final_reward=reward, duration_seconds=duration)
    unwritten = UnwrittenStatus(claimed.rollout_id, claimed.attempt.attempt_id, outcome.status, metadata)
    interrupted = outcome.error_type == RunnerInterrupted.__name__
    try:
        await call(
            lambda: unwritten.write(store),
            f"record attempt status {outcome.status!r}",
            limit=INTERRUPTED_WRITE_TIMEOUT if interrupted else None,
        )
    except Exception as exc:
        if is_retryable_store_error(exc) and not interrupted:
            logger.warning(
                "Could not record status %r for rollout %s attempt %s yet (%r); the runner keeps it and writes it "
                "before it claims another rollout",
                outcome.status,
                claimed.rollout_id,
                claimed.attempt.attempt_id,
                exc,
            )
            return unwritten
        logger.error(
            "Could not record status %r for rollout %s attempt %s (%r); the attempt gets no more heartbeats, so the "
            "store's health rules (unresponsive_seconds) decide what becomes of it",
            outcome.status,
            claimed.rollout_id,
            claimed.attempt.attempt_id,
            exc,
        )
    return None


async def write_unwritten(store: LightningStore, unwritten: UnwrittenStatus, call: StoreCall, *, last: bool) -> bool:
    """Try once more to write a kept status (`call` retries it as for any attempt's store call); True once written or
    refused for good (a 4xx: nothing a later try could change). `last` (the runner is stopping): log what is lost."""
    try:
        await call(lambda: unwritten.write(store), f"record the kept status {unwritten.status!r}")
    except Exception as exc:
        if is_retryable_store_error(exc) and not last:
            return False
        logger.error(
            "Could not record status %r for rollout %s attempt %s (%r); the store's health rules "
            "(unresponsive_seconds) decide what becomes of it",
            unwritten.status,
            unwritten.rollout_id,
            unwritten.attempt_id,
            exc,
        )
        return True
    logger.info("Recorded the kept status %r of rollout %s", unwritten.status, unwritten.rollout_id)
    return True
