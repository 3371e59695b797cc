"""Scoring prompts through real rollouts, with a (prompt, task) cache.

Every evaluation of a phase (all parents on their gradient batches, or all candidates on the validation batch) is
enqueued in one `enqueue_many_rollouts` call, so all runners work in parallel, and awaited together. A (prompt text,
task) pair is rolled out once per round at most: later requests of the round reuse its rollout. With `resample`
(the default), a validation request of a later round rolls the pair out again and the pair's score is the mean over
all its samples, so an agent that samples cannot keep a lucky first score; without it, a pair is rolled out once per
run. Each rollout carries the run's identity in its metadata (`metadata["apo"]`), which is how a resumed run finds
the rollouts of its earlier life. Rollouts still unfinished when `rollout_batch_timeout` runs out are cancelled and
left out of the score.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from agentlightning.emitter.reward import find_final_reward
from agentlightning.types import EnqueueRolloutRequest, NamedResources, Rollout, RolloutMode

from ..errors import CAPTURE_HINT, NoLLMCallsError
from .candidates import content_key
from .types import APOStats, RolloutResultForAPO, VersionedPromptTemplate

if TYPE_CHECKING:
    from agentlightning.adapter.base import Adapter
    from agentlightning.store.base import LightningStore

__all__ = ["EvaluationRequest", "EvaluationResult", "PromptEvaluator", "read_rollout_results"]

logger = logging.getLogger(__name__)

_READ_CONCURRENCY = 8
_PROGRESS_SECONDS = 10.0


def prompt_key(prompt: VersionedPromptTemplate) -> str:
    return content_key([prompt.prompt_template.engine, prompt.prompt_template.template])


@dataclass(frozen=True)
class EvaluationRequest:
    """Score `prompt` on `tasks` (in `mode`); `round` and `phase` label the rollouts' metadata."""

    prompt: VersionedPromptTemplate
    tasks: Sequence[Any]
    mode: RolloutMode
    round: int
    phase: str


@dataclass
class EvaluationResult:
    """Results of the finished rollouts (in task order), their mean reward and each task's reward."""

    results: list[RolloutResultForAPO]
    score: Optional[float]
    per_task: dict[str, float] = field(default_factory=dict)


@dataclass
class _Entry:
    rollout_id: str
    round: int = 0  # the round whose request enqueued it
    finished: Optional[Rollout] = None  # the rollout as it finished
    result: Optional[RolloutResultForAPO] = None


async def read_rollout_results(
    store: LightningStore, adapter: Adapter[Any, Any], rollouts: Sequence[Rollout]
) -> list[RolloutResultForAPO]:
    """Status, final reward, spans and adapted messages of each rollout's latest attempt, in order."""
    semaphore = asyncio.Semaphore(_READ_CONCURRENCY)

    async def read(rollout: Rollout) -> RolloutResultForAPO:
        async with semaphore:
            try:
                spans = list(await store.query_spans(rollout.rollout_id, "latest"))
            except Exception as exc:  # evicted or unreadable spans: the rollout still counts, without a reward
                logger.warning("APO could not read the spans of rollout %s: %r", rollout.rollout_id, exc)
                spans = []
        try:
            messages: list[Any] = [_jsonable(conversation) for conversation in adapter.adapt(spans)]
        except Exception as exc:
            logger.warning(
                "The adapter failed on the spans of rollout %s (%r); no messages shown", rollout.rollout_id, exc
            )
            messages = []
        return RolloutResultForAPO(
            status=rollout.status,
            final_reward=find_final_reward(spans),
            spans=[span.model_dump(mode="json") for span in spans],
            messages=messages,
            rollout_id=rollout.rollout_id,
            input=rollout.input,
        )

    return list(await asyncio.gather(*(read(rollout) for rollout in rollouts)))


def _require_llm_calls(results: Sequence[RolloutResultForAPO], requests: Sequence[EvaluationRequest]) -> None:
    """Critiques and scores of conversations that were never captured mean nothing: stop when a phase's rollouts
    succeeded but none of them shows an LLM call."""
    succeeded = sum(1 for result in results if result["status"] == "succeeded")
    if succeeded and not any(result["messages"] for result in results):
        phases = ", ".join(sorted({f"round {request.round} {request.phase}" for request in requests}))
        raise NoLLMCallsError(
            f"APO {phases}: none of the {len(results)} finished rollouts ({succeeded} succeeded) recorded an LLM call, "
            "so the critiques would read empty conversations. " + CAPTURE_HINT
        )


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


class PromptEvaluator:
    """Publishes prompts as resources, enqueues the rollouts not in the cache, waits and scores."""

    def __init__(
        self,
        store: LightningStore,
        adapter: Adapter[Any, Any],
        *,
        run_id: str,
        session: str,
        resources_for: Callable[[VersionedPromptTemplate], NamedResources],
        timeout: float,
        stats: APOStats,
        resample: bool = True,
    ) -> None:
        self.store = store
        self.adapter = adapter
        self.run_id = run_id
        self.session = session
        self.resources_for = resources_for
        self.timeout = timeout
        self.stats = stats
        self.resample = resample
        self._cache: dict[tuple[str, str], list[_Entry]] = {}  # (prompt key, task key) -> its samples, oldest first
        self._published: set[str] = set()

    def resources_id(self, prompt: VersionedPromptTemplate) -> str:
        return f"{self.run_id}-{prompt.version}"

    def restore(self, rollouts: Sequence[Rollout]) -> int:
        """Reuse rollouts of an earlier life of this run (found by their metadata). Returns how many were taken."""
        taken = 0
        for rollout in rollouts:
            meta = (rollout.metadata or {}).get("apo")
            if not isinstance(meta, dict) or meta.get("session") != self.session or rollout.status == "cancelled":
                continue
            key = (str(meta.get("prompt_key")), str(meta.get("task_key")))
            finished = rollout if rollout.status in ("succeeded", "failed") else None
            found_round = meta.get("round")
            round_num = found_round if isinstance(found_round, int) else 0
            self._cache.setdefault(key, []).append(_Entry(rollout.rollout_id, round_num, finished=finished))
            self._published.add(rollout.resources_id or "")
            taken += 1
        return taken

    async def publish(self, prompt: VersionedPromptTemplate) -> str:
        resources_id = self.resources_id(prompt)
        if resources_id not in self._published:
            await self.store.update_resources(resources_id, self.resources_for(prompt))
            self._published.add(resources_id)
        return resources_id

    async def evaluate(self, requests: Sequence[EvaluationRequest]) -> list[EvaluationResult]:
        """Score every request; all their missing rollouts are enqueued at once and awaited together."""
        to_enqueue: list[EnqueueRolloutRequest] = []
        keys_to_enqueue: list[tuple[str, str]] = []
        rounds_enqueued: list[int] = []
        needed: list[tuple[str, str]] = []
        for request in requests:
            pkey = prompt_key(request.prompt)
            for task in request.tasks:
                key = (pkey, content_key(task))
                needed.append(key)
                if key in keys_to_enqueue or not self._needs_sample(key, request):
                    self.stats.rollouts_reused += 1
                    continue
                resources_id = await self.publish(request.prompt)
                keys_to_enqueue.append(key)
                rounds_enqueued.append(request.round)
                to_enqueue.append(
                    EnqueueRolloutRequest(
                        input=task,
                        mode=request.mode,
                        resources_id=resources_id,
                        metadata={
                            "apo": {
                                "run_id": self.run_id,
                                "session": self.session,
                                "version": request.prompt.version,
                                "prompt_key": key[0],
                                "task_key": key[1],
                                "round": request.round,
                                "phase": request.phase,
                            }
                        },
                    )
                )
        if to_enqueue:
            rollouts = await self.store.enqueue_many_rollouts(to_enqueue)
            for key, rollout, request_round in zip(keys_to_enqueue, rollouts, rounds_enqueued, strict=True):
                self._cache.setdefault(key, []).append(_Entry(rollout.rollout_id, request_round))
            self.stats.rollouts_enqueued += len(rollouts)
        entries = [entry for key in dict.fromkeys(needed) for entry in self._cache.get(key, [])]
        await self._wait(entries, requests)
        outcomes = [await self._score(request) for request in requests]
        _require_llm_calls([result for outcome in outcomes for result in outcome.results], requests)
        return outcomes

    def _needs_sample(self, key: tuple[str, str], request: EvaluationRequest) -> bool:
        """A pair never rolled out needs a sample; with `resample`, so does a validation pair last sampled in an
        earlier round (training runs only feed critiques, which any earlier run serves as well)."""
        samples = self._cache.get(key)
        if not samples:
            return True
        return self.resample and request.mode == "val" and all(entry.round < request.round for entry in samples)

    async def _wait(self, entries: Sequence[_Entry], requests: Sequence[EvaluationRequest]) -> None:
        pending = {entry.rollout_id: entry for entry in entries if not entry.finished}
        if not pending:
            return
        label = ", ".join(sorted({f"round {request.round} {request.phase}" for request in requests}))
        total = len(pending)
        deadline = time.monotonic() + self.timeout
        last_report = time.monotonic()
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            finished = await self.store.wait_for_rollouts(
                rollout_ids=list(pending), timeout=min(remaining, _PROGRESS_SECONDS)
            )
            for rollout in finished:
                entry = pending.pop(rollout.rollout_id, None)
                if entry is not None:
                    entry.finished = rollout
            if pending and time.monotonic() - last_report >= _PROGRESS_SECONDS:
                logger.info("APO %s: %d of %d rollouts finished", label, total - len(pending), total)
                last_report = time.monotonic()
        if pending:
            logger.warning(
                "APO %s: %d of %d rollouts did not finish within rollout_batch_timeout=%.0f s; they are cancelled "
                "and left out of the scores",
                label,
                len(pending),
                total,
                self.timeout,
            )
            self.stats.rollouts_unfinished += len(pending)
            for rollout_id in pending:
                try:
                    await self.store.update_rollout(rollout_id, status="cancelled")
                except Exception as exc:
                    logger.warning("Could not cancel rollout %s: %r", rollout_id, exc)
            kept = {key: [e for e in samples if e.rollout_id not in pending] for key, samples in self._cache.items()}
            self._cache = {key: samples for key, samples in kept.items() if samples}

    async def _score(self, request: EvaluationRequest) -> EvaluationResult:
        """Each task's score is the mean reward of the pair's finished samples (a missing reward counts 0); the
        results shown (to the critic) are each task's latest finished sample."""
        pkey = prompt_key(request.prompt)
        keyed = [(content_key(task), self._cache.get((pkey, content_key(task)), [])) for task in request.tasks]
        unread = list(
            {
                id(entry): entry for _, samples in keyed for entry in samples if entry.finished and entry.result is None
            }.values()
        )
        if unread:
            results = await read_rollout_results(
                self.store, self.adapter, [entry.finished for entry in unread if entry.finished]
            )
            for entry, result in zip(unread, results, strict=True):
                entry.result = result
                if result["final_reward"] is None:
                    self.stats.rollouts_without_reward += 1
                if result["status"] != "succeeded":
                    self.stats.rollouts_failed += 1
        results: list[RolloutResultForAPO] = []
        per_task: dict[str, float] = {}
        for tkey, samples in keyed:
            scored = [entry.result for entry in samples if entry.result is not None]
            if not scored:
                continue
            results.append(scored[-1])
            per_task[tkey] = statistics.fmean(result["final_reward"] or 0.0 for result in scored)
        score = statistics.fmean(per_task[key] for key, _ in keyed if key in per_task) if per_task else None
        missing = sum(1 for result in results if result["final_reward"] is None)
        if missing:
            logger.warning(
                "APO prompt %s: %d of %d rollouts have no reward (counted as 0); does the agent emit a reward or "
                "return a float?",
                request.prompt.version,
                missing,
                len(results),
            )
        return EvaluationResult(results=results, score=score, per_task=per_task)
