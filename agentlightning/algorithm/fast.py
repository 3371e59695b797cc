"""Fast algorithms for quick developer loops: the `FastAlgorithm` marker and `Baseline`.

`Trainer.dev` accepts only FastAlgorithms. `Baseline` runs every task once through the real queue and runners and
logs what happened (statuses, attempts, spans, the adapter's output, rewards), which makes it the smoke test of an
agent before anything is trained.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Literal, Optional

from agentlightning.types import Attempt, Dataset, RolloutMode, Span

from .base import Algorithm
from .baseline_report import BaselineSummary, RolloutReport, span_to_string, summarize
from .utils import with_store

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore
    from agentlightning.types import Rollout

__all__ = ["Baseline", "BaselineSummary", "FastAlgorithm"]

logger = logging.getLogger(__name__)

SpanVerbosity = Literal["keys", "key_values", "none"]
_FINISHED = ("succeeded", "failed", "cancelled")


class FastAlgorithm(Algorithm):
    """An algorithm that finishes quickly and needs no training hardware; `Trainer.dev` accepts only these."""


class Baseline(FastAlgorithm):
    """Run every task once (or `n_epochs` times) with the initial resources and log the outcome.

    Tasks go through the store's queue in dataset order (train first, then validation), at most
    `max_queue_length` waiting at a time; each rollout is followed until it finishes and then logged: its attempts,
    its spans (per `span_verbosity`) and, when an adapter is set, the adapter's output. At the end a summary of
    statuses, rewards and span counts per mode is logged and kept in `summary`.

    Args:
        n_epochs: how many times to run the whole dataset.
        train_split: kept for compatibility with 0.2 (must be in (0, 1)); Baseline does not split datasets.
        polling_interval: seconds between queue-length checks and status checks of a running rollout.
        max_queue_length: the most rollouts allowed to wait in the queue before the next one is enqueued.
        span_verbosity: "keys" (attribute names), "key_values" (whole attributes) or "none" (no span lines).
    """

    def __init__(
        self,
        *,
        n_epochs: int = 1,
        train_split: float = 0.5,
        polling_interval: float = 5.0,
        max_queue_length: int = 4,
        span_verbosity: SpanVerbosity = "keys",
    ) -> None:
        if not 0.0 < train_split < 1.0:
            raise ValueError(f"train_split must be between 0 and 1 (exclusive), got {train_split}")
        if train_split != 0.5:
            logger.warning("Baseline ignores train_split=%s: it runs both datasets as given", train_split)
        if n_epochs < 1:
            raise ValueError(f"n_epochs must be at least 1, got {n_epochs}")
        if polling_interval <= 0:
            raise ValueError(f"polling_interval must be positive, got {polling_interval}")
        if max_queue_length < 1:
            raise ValueError(f"max_queue_length must be at least 1, got {max_queue_length}")
        if span_verbosity not in ("keys", "key_values", "none"):
            raise ValueError(f"span_verbosity must be 'keys', 'key_values' or 'none', got {span_verbosity!r}")
        self.n_epochs = n_epochs
        self.train_split = train_split
        self.polling_interval = polling_interval
        self.max_queue_length = max_queue_length
        self.span_verbosity: SpanVerbosity = span_verbosity
        self.summary: Optional[BaselineSummary] = None

    async def run(
        self,
        train_dataset: Optional[Dataset[Any]] = None,
        val_dataset: Optional[Dataset[Any]] = None,
    ) -> None:
        """Run every task of both datasets `n_epochs` times and log each rollout and a final summary."""
        samples: list[tuple[Any, RolloutMode]] = []
        splits: tuple[tuple[Optional[Dataset[Any]], RolloutMode], ...] = (
            (train_dataset, "train"),
            (val_dataset, "val"),
        )
        for dataset, mode in splits:
            if dataset is None:
                continue
            try:
                samples.extend((dataset[index], mode) for index in range(len(dataset)))
            except Exception as exc:
                raise ValueError(
                    f"The {mode} dataset must be indexable with a length (a list of tasks); reading it failed: {exc!r}"
                ) from exc
        if not samples:
            logger.error("Baseline has nothing to run: both the train and the validation dataset are empty or None")
            self.summary = summarize([])
            return
        resources_id = await self._publish_initial_resources()
        reports: list[RolloutReport] = []
        started = time.monotonic()
        for epoch in range(self.n_epochs):
            tasks: list[asyncio.Task[None]] = []
            for index, (sample, mode) in enumerate(samples):
                await self._wait_for_queue_room()
                rollout = await self._enqueue(sample, mode, resources_id)
                logger.info(
                    "[Epoch %d | Sample %d] Enqueued rollout %s (%s)", epoch + 1, index, rollout.rollout_id, mode
                )
                tasks.append(asyncio.create_task(self._harvest(rollout.rollout_id, reports)))
            try:
                await asyncio.gather(*tasks)
            finally:
                for task in tasks:
                    task.cancel()
        self.summary = summarize(reports, wall_seconds=time.monotonic() - started)
        for line in self.summary.lines():
            logger.info("[Baseline] %s", line)

    @with_store
    async def _publish_initial_resources(self, store: LightningStore) -> Optional[str]:
        resources = self.get_initial_resources()
        if not resources:
            logger.warning("Baseline has no initial resources: runners will use the latest resources in the store")
            return None
        update = await store.update_resources("default", resources)
        return update.resources_id

    @with_store
    async def _wait_for_queue_room(self, store: LightningStore) -> None:
        # Never skip a sample: wait until the queue has room again.
        while True:
            waiting = await store.query_rollouts(status_in=["queuing", "requeuing"], limit=self.max_queue_length + 1)
            if len(waiting) <= self.max_queue_length:
                return
            await asyncio.sleep(self.polling_interval)

    @with_store
    async def _enqueue(
        self, store: LightningStore, sample: Any, mode: RolloutMode, resources_id: Optional[str]
    ) -> Rollout:
        return await store.enqueue_rollout(input=sample, mode=mode, resources_id=resources_id)

    @with_store
    async def _harvest(self, store: LightningStore, rollout_id: str, reports: list[RolloutReport]) -> None:
        last_status: Optional[str] = None
        while True:
            finished = await store.wait_for_rollouts(rollout_ids=[rollout_id], timeout=self.polling_interval)
            rollout = finished[0] if finished else await store.get_rollout_by_id(rollout_id)
            if rollout is None:
                logger.error("[Rollout %s] Disappeared from the store; it is not counted", rollout_id)
                return
            if rollout.status != last_status:
                logger.info("[Rollout %s] Status is now %s", rollout_id, rollout.status)
                last_status = rollout.status
            if rollout.status in _FINISHED:
                reports.append(await self._handle_rollout_finish(rollout))
                return

    @with_store
    async def _handle_rollout_finish(self, store: LightningStore, rollout: Rollout) -> RolloutReport:
        """Log the finished rollout's attempts, spans and adapted data; return what the summary needs."""
        rollout_id = rollout.rollout_id
        duration = (rollout.end_time or time.time()) - rollout.start_time
        logger.info("[Rollout %s] Finished with status %s in %.2f seconds.", rollout_id, rollout.status, duration)
        attempts = await store.query_attempts(rollout_id)
        try:
            spans: list[Span] = list(await store.query_spans(rollout_id))
        except Exception as exc:  # e.g. SpansEvictedError: still log the attempts and count the rollout
            logger.error("[Rollout %s] Could not read its spans: %r", rollout_id, exc)
            spans = []
        by_attempt = {attempt.attempt_id: attempt for attempt in attempts}
        for attempt in attempts:
            logger.info(
                "[Rollout %s | Attempt %d] ID: %s. Status: %s. Worker: %s",
                rollout_id,
                attempt.sequence_id,
                attempt.attempt_id,
                attempt.status,
                attempt.worker_id,
            )
        if self.span_verbosity != "none":
            for span in spans:
                attempt: Optional[Attempt] = by_attempt.get(span.attempt_id)
                logger.info(span_to_string(rollout_id, attempt, span, self.span_verbosity))
        latest_id = attempts[-1].attempt_id if attempts else None
        latest_spans = [span for span in spans if span.attempt_id == latest_id]
        if self._adapter_ref is not None:
            try:
                adapted = self.get_adapter().adapt(latest_spans)
                logger.info("[Rollout %s] Adapted data: %s", rollout_id, adapted)
            except Exception as exc:
                logger.error("[Rollout %s] The adapter failed on its spans: %r", rollout_id, exc)
        return RolloutReport.from_rollout(rollout, attempts, latest_spans)
