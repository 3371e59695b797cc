"""Rollout operations of `CoreLightningStore`: create, enqueue, claim, query, update and wait."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Sequence
from typing import Any, Literal, Optional, Union, cast

from agentlightning.store.base import (
    FINISHED_STATUSES,
    UNSET,
    Unset,
)
from agentlightning.store.core import clock
from agentlightning.store.core.grouping import Outcome
from agentlightning.store.core.lifecycle import ROLLOUT_STATUSES
from agentlightning.store.core.query import (
    ROLLOUT_FIELDS,
    build_query,
)
from agentlightning.store.core.records import (
    attempted,
    generate_rollout_id,
    next_attempt,
    owned_copy,
    page_of,
    with_attempt,
)
from agentlightning.store.core.shared import GroupedWrites
from agentlightning.store.core.storage import Changes, StorageTransaction
from agentlightning.store.core.validation import (
    ROLLOUT_MODES,
    check_config,
    check_enqueue_request,
    check_finite,
    check_id,
    check_id_list,
    check_limit,
    check_metadata,
    check_mode,
    check_optional_id,
    check_rollout_status,
    check_status_list,
    check_timeout,
)
from agentlightning.store.errors import (
    InvalidArgumentTypeError,
    RolloutNotFoundError,
)
from agentlightning.types import (
    AttemptedRollout,
    EnqueueRolloutRequest,
    Rollout,
    RolloutConfig,
    RolloutMode,
    TaskInput,
)

#: A validated enqueue request: input, mode, resources_id, config, metadata.
_CheckedRequest = tuple[TaskInput, Optional[str], Optional[str], RolloutConfig, dict[str, Any]]


class RolloutOperations(GroupedWrites):
    """start/enqueue/dequeue rollouts, start attempts, query and update rollouts, wait for them."""

    async def start_rollout(
        self,
        input: TaskInput,
        mode: Optional[Literal["train", "val", "test"]] = None,
        resources_id: Optional[str] = None,
        config: Optional[RolloutConfig] = None,
        metadata: Optional[dict[str, Any]] = None,
        worker_id: Optional[str] = None,
    ) -> AttemptedRollout:
        mode = check_mode(mode)
        check_finite(input, "input")
        resources_id = check_optional_id(resources_id, "resources_id") if resources_id else None
        checked_config = check_config(config)
        checked_metadata = check_metadata(metadata) or {}
        worker_id = check_optional_id(worker_id, "worker_id")
        await self._scan_health()
        now = clock.now()
        changes = Changes(now)
        async with self._storage.transaction() as tx:
            rollout = Rollout(
                rollout_id=generate_rollout_id(),
                input=input,
                start_time=now,
                mode=mode,
                resources_id=await self._latest_resources_id(tx, resources_id),
                status="preparing",
                config=checked_config,
                metadata=checked_metadata,
            )
            attempt = next_attempt(rollout.rollout_id, None, now, worker_id)
            changes.new_rollouts.append(rollout)
            changes.new_attempts.append(attempt)
            changes.sync_worker(attempt)
            await changes.flush(tx)
        return attempted(rollout, attempt)

    async def enqueue_rollout(
        self,
        input: TaskInput,
        mode: Optional[Literal["train", "val", "test"]] = None,
        resources_id: Optional[str] = None,
        config: Optional[RolloutConfig] = None,
        metadata: Optional[dict[str, Any]] = None,
    ) -> Rollout:
        request = EnqueueRolloutRequest.model_construct(
            input=input, mode=mode, resources_id=resources_id, config=config, metadata=metadata
        )
        return (await self._enqueue([request]))[0]

    async def enqueue_many_rollouts(self, rollouts: Sequence[EnqueueRolloutRequest]) -> Sequence[Rollout]:
        if isinstance(rollouts, (str, bytes)) or not isinstance(rollouts, Sequence):
            raise InvalidArgumentTypeError(f"rollouts must be a list of EnqueueRolloutRequest, got {rollouts!r}")
        return await self._enqueue([check_enqueue_request(request) for request in rollouts])

    async def _enqueue(self, requests: Sequence[EnqueueRolloutRequest]) -> list[Rollout]:
        checked = [
            (
                check_finite(request.input, "input" if len(requests) == 1 else f"rollouts[{index}].input"),
                check_mode(request.mode),
                check_optional_id(request.resources_id, "resources_id") if request.resources_id else None,
                check_config(request.config),
                check_metadata(request.metadata) or {},
            )
            for index, request in enumerate(requests)
        ]
        await self._scan_health()
        if not checked:
            return []
        return cast(list[Rollout], await self._write("enqueue", checked))

    async def _enqueue_in(
        self, tx: StorageTransaction, changes: Changes, groups: list[list[_CheckedRequest]]
    ) -> list[Outcome[list[Rollout]]]:
        """Enqueue the rollouts of each call; each gets copies of its own."""
        latest_id = await self._latest_resources_id(tx, None)
        outcomes: list[Outcome[list[Rollout]]] = []
        created: list[Rollout] = []
        for checked in groups:
            rollouts = [
                Rollout(
                    rollout_id=generate_rollout_id(),
                    input=input,
                    start_time=changes.now,
                    mode=cast(Optional[RolloutMode], mode),
                    resources_id=resources_id or latest_id,
                    status="queuing",
                    config=config,
                    metadata=metadata,
                )
                for input, mode, resources_id, config, metadata in checked
            ]
            created.extend(rollouts)
            outcomes.append([owned_copy(rollout) for rollout in rollouts])
        await tx.insert_rollouts(created, enqueue=True)
        return outcomes

    async def dequeue_rollout(self, worker_id: Optional[str] = None) -> Optional[AttemptedRollout]:
        claimed = await self.dequeue_many_rollouts(limit=1, worker_id=worker_id)
        return claimed[0] if claimed else None

    async def dequeue_many_rollouts(
        self, *, limit: int = 1, worker_id: Optional[str] = None
    ) -> Sequence[AttemptedRollout]:
        limit = check_limit(limit)
        worker_id = check_optional_id(worker_id, "worker_id")
        await self._scan_health()
        if limit <= 0:
            return []
        return cast(list[AttemptedRollout], await self._write("claim", (limit, worker_id)))

    async def _claim_in(
        self, tx: StorageTransaction, changes: Changes, requests: list[tuple[int, Optional[str]]]
    ) -> list[Outcome[list[AttemptedRollout]]]:
        """Claim queued rollouts for each (limit, worker_id) request in turn: the first requests are served first,
        as if they had run one after the other."""
        results: list[list[AttemptedRollout]] = [[] for _ in requests]
        claimed = await tx.claim_queued(sum(limit for limit, _ in requests))
        latest = await tx.get_latest_attempts([rollout.rollout_id for rollout in claimed]) if claimed else {}
        queue = iter(claimed)
        for result, (limit, worker_id) in zip(results, requests, strict=True):
            for stored in itertools.islice(queue, limit):
                rollout = changes.rollout(stored)
                previous = latest.get(rollout.rollout_id)
                attempt = next_attempt(rollout.rollout_id, previous, changes.now, worker_id)
                rollout.status = "preparing"
                changes.new_attempts.append(attempt)
                changes.sync_worker(attempt)
                result.append(attempted(rollout, attempt))
            if worker_id is not None:
                changes.dequeued_by.add(worker_id)
                if not result:
                    changes.touch_worker(worker_id)
        return list(results)

    async def requeue_unacknowledged_claim(self, rollout_id: str, attempt_id: str) -> bool:
        """Put a claimed rollout back in the queue when nobody acknowledged the claim, atomically.

        The claim is unacknowledged while the attempt is the rollout's latest, still "preparing", without a
        heartbeat, and the rollout is still "preparing". Then the attempt becomes "unresponsive" (without counting
        against `max_attempts`: the rollout is requeued whatever its retry rules say, since it never ran) and its
        worker is released. Returns False (and changes nothing) once the claim was acknowledged.
        """
        rollout_id = check_id(rollout_id, "rollout_id")
        attempt_id = check_id(attempt_id, "attempt_id")
        # Almost every claim was acknowledged: a read (without row locks) settles those.
        async with self._storage.transaction(write=False) as tx:
            current = (await tx.get_rollouts([rollout_id])).get(rollout_id)
        if current is None or current.status != "preparing":
            return False
        now = time.time()
        changes = Changes(now)
        async with self._storage.transaction() as tx:
            stored = (await tx.get_rollouts([rollout_id])).get(rollout_id)
            latest = (await tx.get_latest_attempts([rollout_id])).get(rollout_id)
            if (
                stored is None
                or latest is None
                or latest.attempt_id != attempt_id
                or latest.status != "preparing"
                or latest.last_heartbeat_time
                or stored.status != "preparing"
            ):
                return False
            attempt = changes.attempt(latest)
            attempt.status = "unresponsive"
            rollout = changes.rollout(stored)
            changes.set_rollout_status(rollout, "requeuing")
            changes.sync_worker(attempt)
            await changes.flush(tx)
        return True

    async def start_attempt(self, rollout_id: str, worker_id: Optional[str] = None) -> AttemptedRollout:
        rollout_id = check_id(rollout_id, "rollout_id")
        worker_id = check_optional_id(worker_id, "worker_id")
        await self._scan_health()
        now = clock.now()
        changes = Changes(now)
        async with self._storage.transaction() as tx:
            stored = (await tx.get_rollouts([rollout_id])).get(rollout_id)
            if stored is None:
                raise RolloutNotFoundError(rollout_id)
            previous = (await tx.get_latest_attempts([rollout_id])).get(rollout_id)
            attempt = next_attempt(rollout_id, previous, now, worker_id)
            rollout = changes.rollout(stored)
            changes.set_rollout_status(rollout, "preparing")
            changes.new_attempts.append(attempt)
            changes.sync_worker(attempt)
            await changes.flush(tx)
        return attempted(rollout, attempt)

    async def query_rollouts(
        self,
        *,
        status_in: Optional[Sequence[str]] = None,
        rollout_id_in: Optional[Sequence[str]] = None,
        rollout_id_contains: Optional[str] = None,
        filter_logic: Literal["and", "or"] = "and",
        sort_by: Optional[str] = None,
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
        status: Optional[Sequence[str]] = None,
        rollout_ids: Optional[Sequence[str]] = None,
        mode_in: Optional[Sequence[str]] = None,
    ) -> Sequence[Rollout]:
        statuses = check_status_list(status_in if status_in is not None else status, ROLLOUT_STATUSES, "status_in")
        ids = check_id_list(rollout_id_in if rollout_id_in is not None else rollout_ids, "rollout_id_in")
        modes = check_status_list(mode_in, ROLLOUT_MODES, "mode_in", ("mode", "modes"))
        query = build_query(
            "rollouts",
            ROLLOUT_FIELDS,
            within={"status": statuses, "rollout_id": ids, "mode": modes},
            contains={"rollout_id": rollout_id_contains},
            filter_logic=filter_logic,
            sort_by=sort_by,
            sort_order=sort_order,
            limit=limit,
            offset=offset,
        )
        await self._scan_health()
        async with self._storage.transaction(write=False) as tx:
            rollouts, total = await tx.query_rollouts(query)
            latest = await tx.get_latest_attempts([rollout.rollout_id for rollout in rollouts]) if rollouts else {}
        items = [with_attempt(rollout, latest.get(rollout.rollout_id)) for rollout in rollouts]
        return page_of(items, total, query)

    async def get_rollout_by_id(self, rollout_id: str) -> Optional[Rollout]:
        rollout_id = check_id(rollout_id, "rollout_id")
        await self._scan_health()
        async with self._storage.transaction(write=False) as tx:
            rollout = (await tx.get_rollouts([rollout_id])).get(rollout_id)
            if rollout is None:
                return None
            latest = (await tx.get_latest_attempts([rollout_id])).get(rollout_id)
        return with_attempt(rollout, latest)

    async def update_rollout(
        self,
        rollout_id: str,
        input: Union[TaskInput, Unset] = UNSET,
        mode: Union[Optional[Literal["train", "val", "test"]], Unset] = UNSET,
        resources_id: Union[Optional[str], Unset] = UNSET,
        status: Union[str, Unset] = UNSET,
        config: Union[RolloutConfig, Unset] = UNSET,
        metadata: Union[Optional[dict[str, Any]], Unset] = UNSET,
    ) -> Rollout:
        rollout_id = check_id(rollout_id, "rollout_id")
        if not isinstance(mode, Unset):
            check_mode(mode)
        if not isinstance(resources_id, Unset) and resources_id is not None:
            check_id(resources_id, "resources_id")
        if not isinstance(status, Unset):
            check_rollout_status(status)
        new_config = None if isinstance(config, Unset) else check_config(config)
        new_metadata = None if isinstance(metadata, Unset) else check_metadata(metadata)
        await self._scan_health()
        changes = Changes(clock.now())
        async with self._storage.transaction() as tx:
            stored = (await tx.get_rollouts([rollout_id])).get(rollout_id)
            if stored is None:
                raise RolloutNotFoundError(rollout_id)
            rollout = changes.rollout(stored)
            if not isinstance(input, Unset):
                rollout.input = input
            if not isinstance(mode, Unset):
                rollout.mode = mode
            if not isinstance(resources_id, Unset):
                rollout.resources_id = resources_id
            if new_config is not None:
                rollout.config = new_config
            if not isinstance(metadata, Unset):
                rollout.metadata = new_metadata
            if not isinstance(status, Unset):
                changes.set_rollout_status(rollout, status)  # type: ignore[arg-type]
            await changes.flush(tx)
        self._notifier.notify(changes.finished)
        return owned_copy(rollout)

    async def wait_for_rollouts(self, *, rollout_ids: list[str], timeout: Optional[float] = None) -> list[Rollout]:
        ids = check_id_list(rollout_ids, "rollout_ids") or []
        timeout = check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = set(dict.fromkeys(ids))
        finished: dict[str, Rollout] = {}
        if not pending:
            return []
        await self._scan_health()
        # One registration for the whole wait: each wake-up re-reads only the rollouts reported finished (by this
        # process, or by others through the storage's announcements): O(finished), not O(pending). Backends shared
        # by several processes that do not announce changes (at the moment) are polled, and then every pending
        # rollout is re-read (others may have finished some without telling this process).
        waiter = self._notifier.register(pending)
        storage = self._storage
        try:
            to_read: Iterable[str] = list(pending)
            first_pass = True
            while True:
                if to_read:
                    async with self._storage.transaction(write=False) as tx:
                        found = await tx.get_rollouts(list(to_read))
                    if first_pass:
                        pending = {rollout_id for rollout_id in pending if rollout_id in found}
                        first_pass = False
                    for rollout_id, rollout in found.items():
                        if rollout.status in FINISHED_STATUSES and rollout_id in pending:
                            finished[rollout_id] = owned_copy(rollout)
                            pending.discard(rollout_id)
                if not pending:
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                waiter.event.clear()
                polled = (
                    storage.shared_across_processes and not storage.announces_changes
                ) or not storage.tracks_health_deadlines
                if self._notifier.should_wait(waiter, len(pending)):
                    await self._notifier.wait(waiter, self._wake_after(remaining))
                await self._scan_health()
                notified = self._notifier.take_notified(waiter)
                to_read = list(pending) if polled or notified is None else [r for r in notified if r in pending]
        finally:
            self._notifier.unregister(waiter, ids)
        return [finished[rollout_id] for rollout_id in ids if rollout_id in finished]
