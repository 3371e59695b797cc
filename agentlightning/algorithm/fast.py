"""Fast algorithms for quick developer loops: the `FastAlgorithm` marker and `Baseline`.

`Trainer.dev` accepts only FastAlgorithms. `Baseline` runs every task once through the real queue and runners and
logs what happened (statuses, attempts, spans, the adapter's output, rewards), which makes it the smoke test of an
agent before anything is trained. What the adapter has to say about the trajectories (empty, no token ids) is
logged once per cause and counted in the summary, not repeated for every rollout; a rollout that failed before
recording any span is not adapted (its failure is the cause, and the summary counts it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import TYPE_CHECKING, Any, Literal, Optional

from agentlightning.adapter.diagnostics import quiet_diagnoses
from agentlightning.types import Attempt, Dataset, RolloutConfig, RolloutMode, Span

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
        rollout_config: the `RolloutConfig` of every rollout (timeout, retries); None: the store's default.
    """

    def __init__(
        self,
        *,
        n_epochs: int = 1,
        train_split: float = 0.5,
        polling_interval: float = 5.0,
        max_queue_length: int = 4,
        span_verbosity: SpanVerbosity = "keys",
        rollout_config: Optional[RolloutConfig] = None,
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
        if rollout_config is not None and not isinstance(rollout_config, RolloutConfig):
            raise TypeError(f"rollout_config must be a RolloutConfig, got {type(rollout_config).__name__}")
        self.n_epochs = n_epochs
        self.train_split = train_split
        self.polling_interval = polling_interval
        self.max_queue_length = max_queue_length
        self.span_verbosity: SpanVerbosity = span_verbosity
        self.rollout_config = rollout_config
        self.summary: Optional[BaselineSummary] = None
        self._adapter_notes: Counter[str] = Counter()

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
        self._adapter_notes = Counter()
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
        self.summary = summarize(
            reports, wall_seconds=time.monotonic() - started, adapter_notes=dict(self._adapter_notes)
        )
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
        return await store.enqueue_rollout(
            input=sample, mode=mode, resources_id=resources_id, config=self.rollout_config
        )

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
        latest = attempts[-1] if attempts else None
        latest_spans = [span for span in spans if latest is not None and span.attempt_id == latest.attempt_id]
        if self._adapter_ref is not None:
            self._adapt(rollout, latest, latest_spans)
        return RolloutReport.from_rollout(rollout, attempts, latest_spans)

    def _adapt(self, rollout: Rollout, attempt: Optional[Attempt], spans: list[Span]) -> None:
        """Log the adapter's output for the rollout; what it diagnoses is logged once per cause and counted."""
        rollout_id = rollout.rollout_id
        if not spans and rollout.status != "succeeded":
            error = (attempt.metadata or {}).get("error") if attempt is not None else None
            logger.info(
                "[Rollout %s] Not adapted: it %s before recording any span%s",
                rollout_id,
                rollout.status,
                f" ({error})" if error else "",
            )
            return
        adapter = self.get_adapter()
        try:
            with quiet_diagnoses():
                adapted = adapter.adapt(spans)
        except Exception as exc:
            logger.error("[Rollout %s] The adapter failed on its spans: %r", rollout_id, exc)
            return
        logger.info("[Rollout %s] Adapted data: %s", rollout_id, adapted)
        diagnosis = getattr(adapter, "last_diagnosis", None)
        if diagnosis is None:
            return
        adapter_name = type(adapter).__name__
        if diagnosis.reason is not None:
            cause = diagnosis.reason.split(":", 1)[0]
            self._note(
                f"empty trajectory: {cause}", rollout_id, f"{adapter_name}: empty trajectory: {diagnosis.reason}"
            )
        elif diagnosis.triplets_without_token_ids:
            self._note(
                "triplets without token ids",
                rollout_id,
                f"{adapter_name}: {diagnosis.triplets_without_token_ids} of {diagnosis.triplets} triplets have no "
                "prompt or response token ids (the server did not return them, e.g. vLLM without return_token_ids); "
                "they cannot be used for RL training",
            )

    def _note(self, cause: str, rollout_id: str, message: str) -> None:
        self._adapter_notes[cause] += 1
        if self._adapter_notes[cause] == 1:
            logger.warning(
                "[Rollout %s] %s (further rollouts with this cause are counted in the summary, not logged)",
                rollout_id,
                message,
            )
