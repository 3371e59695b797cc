"""The frequent writes of `CoreLightningStore` (enqueue, claim, span ingest, attempt update), run through one path.

Each write is a body that works inside a given transaction and `Changes` (`_enqueue_in`, `_claim_in`, `_spans_in`,
`_updates_in`, in `core/rollouts.py` and `core/attempts.py`). `_write` runs one call; where the storage groups
concurrent writes (`Storage.groups_concurrent_writes`), the calls that arrive while a transaction is in flight wait
and then share the next one, whatever their kinds (`GroupedCall`): each kind's calls run in arrival order, the kinds
in the order of `WRITE_KINDS`, which is one valid order of calls that were concurrent. Each call's outcome goes to
its riders (`core/riders.py`) before the commit, so what they record of it commits with the write.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, Optional

from agentlightning.store.core import clock
from agentlightning.store.core.changes import Changes
from agentlightning.store.core.grouping import GroupedCall, Outcome, unwrap
from agentlightning.store.core.records import span_floors
from agentlightning.store.core.riders import Rider, pending_riders
from agentlightning.store.core.shared import CoreStoreBase
from agentlightning.store.core.storage import StorageTransaction

#: One call of `_run_writes`: its kind, its payload and the riders of its caller.
_Item = tuple[str, Any, tuple[Rider, ...]]

#: The kinds of grouped writes, in the order a shared transaction runs them (enqueues last: their one read, of the
#: latest resources id, then rides on an earlier round trip).
WRITE_KINDS = ("claim", "spans", "update", "enqueue")


def _rollouts_read(kind: str, payload: Any) -> list[str]:
    """The rollouts (with their latest attempts) the body of `kind` reads for `payload`."""
    if kind == "spans":
        return [span.rollout_id for span in payload]
    if kind == "update":
        return [payload.rollout_id]
    return []


class GroupedWrites(CoreStoreBase):
    """`_write(kind, payload)` and the transaction that runs the writes of one group."""

    def _make_groups(self) -> None:
        super()._make_groups()
        self._writes: Optional[GroupedCall[_Item, Any]] = (
            GroupedCall(self._run_writes) if self._storage.groups_concurrent_writes else None
        )

    async def _write(self, kind: str, payload: Any) -> Any:
        """Run one write (`payload`: what the kind's body takes per call) and return its result."""
        item: _Item = (kind, payload, tuple(pending_riders()))
        if self._writes is not None:
            return await self._writes(item)
        return unwrap((await self._run_writes([item]))[0])

    async def _run_writes(self, items: list[_Item]) -> list[Outcome[Any]]:
        """The writes of a group in one transaction: one outcome per item, in order."""
        by_kind: dict[str, list[int]] = {}
        for index, (kind, _, _) in enumerate(items):
            by_kind.setdefault(kind, []).append(index)
        outcomes: list[Outcome[Any]] = [None] * len(items)
        changes = Changes(clock.now())
        async with self._storage.transaction() as tx:
            reads = [rollout_id for kind, payload, _ in items for rollout_id in _rollouts_read(kind, payload)]
            # Everything the group can ask for before it sees an answer goes with its first round trip: its rollouts
            # and their latest attempts (locked), its span inserts, then its workers (locked last), the latest
            # resources id.
            if reads:
                await tx.prefetch_rollouts_and_latest(reads)
            spans = [span for index in by_kind.get("spans", ()) for span in items[index][1]]
            if spans:
                await tx.queue_span_insert(spans, span_floors(spans))
            if reads or "claim" in by_kind:
                await tx.prefetch_workers_of(reads, self._named_workers(items, by_kind))
            if "enqueue" in by_kind and len(by_kind) > 1:
                await tx.prefetch_latest_resources_id()
            for kind in WRITE_KINDS:
                indexes = by_kind.get(kind)
                if not indexes:
                    continue
                body = self._body(kind)
                results = await body(tx, changes, [items[index][1] for index in indexes])
                for index, result in zip(indexes, results, strict=True):
                    outcomes[index] = result
            for (_, _, riders), outcome in zip(items, outcomes, strict=True):
                for rider in riders:
                    rider.record_outcome(outcome)
            await changes.flush(tx)
        self._notifier.notify(changes.finished)
        return outcomes

    @staticmethod
    def _named_workers(items: list[_Item], by_kind: dict[str, list[int]]) -> list[str]:
        """The workers the group's calls name: claimers, and workers given to attempt updates."""
        workers = {items[index][1][1] for index in by_kind.get("claim", ())}
        workers.update(items[index][1].worker_id for index in by_kind.get("update", ()))
        return sorted(worker for worker in workers if isinstance(worker, str))

    def _body(self, kind: str) -> Any:
        bodies = {
            "enqueue": self._enqueue_in,
            "claim": self._claim_in,
            "spans": self._spans_in,
            "update": self._updates_in,
        }
        return bodies[kind]

    # The bodies: each returns one outcome per payload, or raises when the whole transaction must not commit.
    @abstractmethod
    async def _enqueue_in(self, tx: StorageTransaction, changes: Changes, groups: Any) -> Sequence[Outcome[Any]]: ...

    @abstractmethod
    async def _claim_in(self, tx: StorageTransaction, changes: Changes, requests: Any) -> Sequence[Outcome[Any]]: ...

    @abstractmethod
    async def _spans_in(self, tx: StorageTransaction, changes: Changes, groups: Any) -> Sequence[Outcome[Any]]: ...

    @abstractmethod
    async def _updates_in(self, tx: StorageTransaction, changes: Changes, updates: Any) -> Sequence[Outcome[Any]]: ...
