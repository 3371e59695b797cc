"""The runner's cache of resource snapshots, so a rollout does not cost a store round trip for its resources.

Entries are keyed by resources id (None for "the latest"). An entry serves a rollout only when it was fetched after
the rollout was enqueued (`resources_cache_is_fresh`), so updating a snapshot in place before enqueueing new
rollouts is always seen. Both times are read on the store's clock. A fetch goes through the runner's store calls
(`StoreCall`), so an outage while the algorithm publishes new resources is ridden out like any other store call.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Optional, Protocol, TypeVar

from agentlightning.types import AttemptedRollout, NamedResources

from .timing import resources_cache_is_fresh

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agentlightning.store.base import LightningStore

__all__ = ["ResourcesCache", "ResourcesNotFoundError", "StoreCall"]

R = TypeVar("R")


class StoreCall(Protocol):
    """Runs one store operation, riding out an outage (see `store_calls.retry_store_call`)."""

    def __call__(
        self, operation: Callable[[], Awaitable[R]], what: str, *, limit: Optional[float] = None
    ) -> Awaitable[R]: ...


class ResourcesNotFoundError(LookupError):
    """The rollout names a resources id the store does not know."""

    def __init__(self, rollout_id: str, resources_id: str) -> None:
        super().__init__(f"the resources {resources_id!r} of rollout {rollout_id} are not in the store")
        self.rollout_id = rollout_id
        self.resources_id = resources_id


class ResourcesCache:
    """Resource snapshots by id, each with the store time after which it was fetched."""

    def __init__(self, max_entries: int = 16) -> None:
        self._entries: OrderedDict[Optional[str], tuple[NamedResources, float]] = OrderedDict()
        self._max_entries = max_entries

    def clear(self) -> None:
        self._entries.clear()

    async def get(self, store: LightningStore, rollout: AttemptedRollout, call: StoreCall) -> NamedResources:
        """The resources `rollout` runs with ({} when the store has none and the rollout names none), fetched through
        `call` when the cache cannot serve them.

        Raises:
            ResourcesNotFoundError: the rollout's resources id is unknown to the store.
            Exception: the store's error, once `call` gave up on it.
        """
        key = rollout.resources_id or None
        entry = self._entries.get(key)
        if entry is not None and resources_cache_is_fresh(entry[1], rollout.start_time):
            self._entries.move_to_end(key)
            return entry[0]
        if key is not None:
            update = await call(lambda: store.get_resources_by_id(key), f"fetch the resources {key!r}")
        else:
            update = await call(store.get_latest_resources, "fetch the latest resources")
        if update is None and key is not None:
            raise ResourcesNotFoundError(rollout.rollout_id, key)
        resources: NamedResources = update.resources if update is not None else {}
        self._entries[key] = (resources, rollout.attempt.start_time)  # "no resources yet" is cached the same way
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
        return resources
